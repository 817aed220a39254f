#include "serverd/api/api_error.h"

#include "serverd/api/json_io.h"

namespace serverd::api {

void throw_bad_request(std::string message, std::optional<std::string> param) {
  throw ApiException(ApiError{400, std::move(message), std::move(param), std::nullopt});
}

std::string error_type(int status) {
  switch (status) {
    case 400: return "BadRequestError";
    case 401: return "AuthenticationError";
    case 404: return "NotFoundError";
    case 405: return "MethodNotAllowedError";
    case 413: return "RequestEntityTooLargeError";
    case 431: return "RequestHeaderFieldsTooLargeError";
    case 501: return "NotImplementedError";
    case 503: return "ServiceUnavailableError";
    default: return status >= 500 ? "InternalServerError" : "BadRequestError";
  }
}

std::string error_body(const ApiError& error) {
  JsonWriter w;
  w.begin_object();
  w.key("error").begin_object();
  w.key("message").value(error.message);
  w.key("type").value(error_type(error.status));
  w.key("param");
  if (error.param) {
    w.value(*error.param);
  } else {
    w.null();
  }
  w.key("code").value(static_cast<std::int64_t>(error.status));
  w.end_object();
  w.end_object();
  return w.take();
}

http::Response error_response(const ApiError& error) {
  http::Response response;
  response.status = error.status;
  response.headers.push_back({"Content-Type", "application/json"});
  if (error.retry_after_seconds)
    response.headers.push_back({"Retry-After", std::to_string(*error.retry_after_seconds)});
  response.body = error_body(error);
  return response;
}

}  // namespace serverd::api
