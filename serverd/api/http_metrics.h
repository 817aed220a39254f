#pragma once

// The HTTP series vLLM's server exports through prometheus-fastapi-instrumentator (its default metrics, the
// way vLLM sets it up): http_requests_total{handler,method,status}, http_request_size_bytes{handler} and
// http_response_size_bytes{handler} (summaries of the Content-Length headers), and the request durations
// http_request_duration_highr_seconds (many buckets, no labels) and http_request_duration_seconds{handler,
// method}. Statuses are grouped ("2xx"); a path that is no endpoint is handler "none"; the probes and
// /metrics itself are not recorded. MeasuredExchange records an exchange when its response is complete.

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/summary.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "serverd/http/http_server.h"

namespace serverd::api {

class HttpMetrics {
 public:
  // Adds the families to `registry`, which this object keeps alive.
  explicit HttpMetrics(std::shared_ptr<prometheus::Registry> registry);

  // Whether vLLM leaves requests to this endpoint out (the probes, /version and /metrics).
  static bool excluded(std::string_view handler);

  void record(std::string_view handler, std::string_view method, int status, std::size_t request_bytes,
              std::size_t response_bytes, double seconds);

 private:
  const std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Summary>& request_size_;
  prometheus::Family<prometheus::Summary>& response_size_;
  prometheus::Histogram& duration_highr_;
  prometheus::Family<prometheus::Histogram>& duration_;
};

// Passes everything to `inner` and records the exchange in `metrics` once: at respond(), at finish() of a
// stream, or, for a stream the client left, when the exchange is dropped.
class MeasuredExchange final : public http::Exchange {
 public:
  MeasuredExchange(std::shared_ptr<http::Exchange> inner, std::shared_ptr<HttpMetrics> metrics, std::string handler);
  ~MeasuredExchange() override;

  const http::Request& request() const override { return inner_->request(); }
  void respond(http::Response response) override;
  void start_stream(http::Response head) override;
  void write(std::string data) override { inner_->write(std::move(data)); }
  void finish() override;
  void on_abort(std::function<void()> callback) override { inner_->on_abort(std::move(callback)); }
  void post(std::function<void()> task) override { inner_->post(std::move(task)); }

 private:
  void record(int status, std::size_t response_bytes);

  const std::shared_ptr<http::Exchange> inner_;
  const std::shared_ptr<HttpMetrics> metrics_;  // shared: a session may drop its exchange after the service
  const std::string handler_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::atomic<int> stream_status_{0};  // set by start_stream()
  std::atomic<bool> recorded_{false};
};

}  // namespace serverd::api
