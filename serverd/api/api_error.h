#pragma once

// Errors in OpenAI's shape, as vLLM's server sends them:
//   {"error": {"message": "...", "type": "BadRequestError", "param": "n", "code": 400}}

#include <optional>
#include <stdexcept>
#include <string>

#include "serverd/http/http_server.h"

namespace serverd::api {

struct ApiError {
  int status = 400;
  std::string message;
  std::optional<std::string> param;
  std::optional<int> retry_after_seconds;  // 503: sent as Retry-After
};

// Thrown while handling a request; the handler turns it into the error response.
class ApiException : public std::runtime_error {
 public:
  explicit ApiException(ApiError error) : std::runtime_error(error.message), error_(std::move(error)) {}
  const ApiError& error() const { return error_; }

 private:
  ApiError error_;
};

// A 400 naming the offending field, if any.
[[noreturn]] void throw_bad_request(std::string message, std::optional<std::string> param = std::nullopt);

// The "type" vLLM gives a status: BadRequestError, NotFoundError, ...
std::string error_type(int status);

// {"error": {...}} as text.
std::string error_body(const ApiError& error);

// The whole response: JSON body, Content-Type, Retry-After when set.
http::Response error_response(const ApiError& error);

}  // namespace serverd::api
