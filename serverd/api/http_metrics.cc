#include "serverd/api/http_metrics.h"

#include <charconv>
#include <vector>

namespace serverd::api {
namespace {

// prometheus-fastapi-instrumentator's default buckets (+Inf is implied).
const std::vector<double> kHighResolutionBuckets = {0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1,  1.5, 2,
                                                    2.5,  3,     3.5,  4,     4.5, 5,    7.5, 10,   30, 60};
const std::vector<double> kLowResolutionBuckets = {0.1, 0.5, 1};

// The endpoints vLLM's Instrumentator is told to leave out.
constexpr std::string_view kExcludedHandlers[] = {"/metrics", "/health",  "/health/decode", "/load",
                                                  "/ping",    "/version", "/server_info"};

// "2xx", "4xx", ...: the instrumentator groups status codes.
std::string status_group(int status) {
  return std::to_string(status / 100) + "xx";
}

// The Content-Length header as a number; 0 when absent or not a number, as the instrumentator reads it.
std::size_t content_length(const http::Request& request) {
  const auto value = request.header("content-length");
  std::size_t length = 0;
  if (!value || std::from_chars(value->data(), value->data() + value->size(), length).ec != std::errc{}) return 0;
  return length;
}

}  // namespace

HttpMetrics::HttpMetrics(std::shared_ptr<prometheus::Registry> registry)
    : registry_(std::move(registry)),
      requests_(prometheus::BuildCounter()
                    .Name("http_requests_total")
                    .Help("Total number of requests by method, status and handler.")
                    .Register(*registry_)),
      request_size_(prometheus::BuildSummary()
                        .Name("http_request_size_bytes")
                        .Help("Content length of incoming requests by handler. Only value of header is respected. "
                              "Otherwise ignored. No percentile calculated. ")
                        .Register(*registry_)),
      response_size_(prometheus::BuildSummary()
                         .Name("http_response_size_bytes")
                         .Help("Content length of outgoing responses by handler. Only value of header is respected. "
                               "Otherwise ignored. No percentile calculated. ")
                         .Register(*registry_)),
      duration_highr_(prometheus::BuildHistogram()
                          .Name("http_request_duration_highr_seconds")
                          .Help("Latency with many buckets but no API specific labels. Made for more accurate "
                                "percentile calculations. ")
                          .Register(*registry_)
                          .Add({}, kHighResolutionBuckets)),
      duration_(prometheus::BuildHistogram()
                    .Name("http_request_duration_seconds")
                    .Help("Latency with only few buckets by handler. Made to be only used if aggregation by handler "
                          "is important. ")
                    .Register(*registry_)) {}

bool HttpMetrics::excluded(std::string_view handler) {
  for (const std::string_view e : kExcludedHandlers) {
    if (e == handler) return true;
  }
  return false;
}

void HttpMetrics::record(std::string_view handler, std::string_view method, int status, std::size_t request_bytes,
                         std::size_t response_bytes, double seconds) {
  const std::string h(handler);
  const std::string m(method);
  requests_.Add({{"handler", h}, {"method", m}, {"status", status_group(status)}}).Increment();
  // Summaries without quantiles, as prometheus_client's: a count and a sum.
  request_size_.Add({{"handler", h}}, prometheus::Summary::Quantiles{}).Observe(static_cast<double>(request_bytes));
  response_size_.Add({{"handler", h}}, prometheus::Summary::Quantiles{}).Observe(static_cast<double>(response_bytes));
  duration_highr_.Observe(seconds);
  duration_.Add({{"handler", h}, {"method", m}}, kLowResolutionBuckets).Observe(seconds);
}

MeasuredExchange::MeasuredExchange(std::shared_ptr<http::Exchange> inner, std::shared_ptr<HttpMetrics> metrics,
                                   std::string handler)
    : inner_(std::move(inner)), metrics_(metrics), handler_(std::move(handler)) {}

MeasuredExchange::~MeasuredExchange() {
  // A stream whose client left never finishes; it still counts, as the instrumentator counts it.
  if (const int status = stream_status_.load(); status != 0) record(status, 0);
}

void MeasuredExchange::respond(http::Response response) {
  record(response.status, response.body.size());
  inner_->respond(std::move(response));
}

void MeasuredExchange::start_stream(http::Response head) {
  stream_status_ = head.status;
  inner_->start_stream(std::move(head));
}

void MeasuredExchange::finish() {
  // A chunked response has no Content-Length: the instrumentator sees 0 bytes.
  record(stream_status_.load(), 0);
  inner_->finish();
}

void MeasuredExchange::record(int status, std::size_t response_bytes) {
  if (recorded_.exchange(true)) return;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  metrics_->record(handler_, inner_->request().method, status, content_length(inner_->request()), response_bytes,
                   seconds);
}

}  // namespace serverd::api
