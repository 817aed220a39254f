#include "serverd/api/api_server.h"

namespace serverd::api {
namespace {

http::ServerOptions with_api_errors(http::ServerOptions options) {
  options.error_response = &OpenAiService::http_error;
  return options;
}

}  // namespace

ApiServer::ApiServer(ApiServerOptions options)
    : service_(std::move(options.api)),
      http_(with_api_errors(std::move(options.http)),
            [this](std::shared_ptr<http::Exchange> exchange) { service_.handle(exchange); }) {}

ApiServer::~ApiServer() {
  shutdown(std::chrono::milliseconds(0));
}

void ApiServer::shutdown(std::chrono::milliseconds grace) {
  service_.begin_drain();
  http_.shutdown(grace);
}

}  // namespace serverd::api
