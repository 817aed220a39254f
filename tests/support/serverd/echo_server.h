#pragma once

// A serverd::http::Server fixture for the HTTP layer's tests. Its handler answers "METHOD target body" as
// text (so a test sees the target the handler got), parks exchanges on /park for the test to answer or
// stream later, answers /vary with a Vary header of its own, and counts the requests that reached it.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "serverd/http/http_server.h"

namespace serverd_test {

// Exchanges a handler has parked, for tests that answer later or watch for aborts.
class Parked {
 public:
  void add(std::shared_ptr<serverd::http::Exchange> exchange) {
    std::lock_guard lock(mutex_);
    exchanges_.push_back(std::move(exchange));
    changed_.notify_all();
  }
  std::shared_ptr<serverd::http::Exchange> wait(std::size_t index) {
    std::unique_lock lock(mutex_);
    if (!changed_.wait_for(lock, std::chrono::seconds(10), [&] { return exchanges_.size() > index; })) return nullptr;
    return exchanges_[index];
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::shared_ptr<serverd::http::Exchange>> exchanges_;
};

inline serverd::http::Response text(int status, std::string body) {
  serverd::http::Response r;
  r.status = status;
  r.headers.push_back({"Content-Type", "text/plain"});
  r.body = std::move(body);
  return r;
}

class EchoServerTest : public ::testing::Test {
 protected:
  void start(serverd::http::ServerOptions options = {}) {
    server_ = std::make_unique<serverd::http::Server>(
        std::move(options), [this](std::shared_ptr<serverd::http::Exchange> exchange) {
          ++handled_;
          const auto& request = exchange->request();
          if (request.path() == "/park") {
            parked_.add(exchange);
            return;
          }
          auto response = text(200, request.method + " " + request.target + " " + request.body);
          if (request.path() == "/vary") response.headers.push_back({"Vary", "Accept-Encoding"});
          exchange->respond(std::move(response));
        });
    server_->start();
  }
  void TearDown() override {
    if (server_) server_->shutdown(std::chrono::milliseconds(0));
  }

  Parked parked_;
  std::atomic<int> handled_{0};  // requests that reached the handler
  std::unique_ptr<serverd::http::Server> server_;
};

}  // namespace serverd_test
