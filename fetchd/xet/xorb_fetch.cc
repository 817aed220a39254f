#include "fetchd/xet/xorb_fetch.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <exception>
#include <iterator>
#include <string>
#include <thread>

#include "fetchd/request/fetch_error.h"
#include "fetchd/xet/byteranges.h"
#include "fetchd/xet/xet_retry.h"
#include "fetchd/xet/xorb_decode.h"

namespace fetchd::xet {

using transfer::HttpClient;
using transfer::HttpRequest;
using transfer::TransferFailure;

void XorbFetcher::run(std::vector<FetchUnit> units) {
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<FetchUnit> queue(std::make_move_iterator(units.begin()), std::make_move_iterator(units.end()));
  int active = 0;
  std::uint64_t memory = 0;
  std::exception_ptr failure;
  const int workers = std::max(1, std::min<int>(request_.max_parallel, static_cast<int>(queue.size())));
  limit_ = std::min(limit_, workers);

  const auto worker = [&] {
    HttpClient http(cancel_);
    std::vector<std::byte> buffer;  // reused from unit to unit: its pages are touched once
    for (;;) {
      FetchUnit unit;
      std::uint64_t cost = 0;
      {
        std::unique_lock lock(mutex);
        changed.wait(lock, [&] {
          if (failure || queue.empty()) return true;
          cost = queue.front().wire_bytes();  // terms decode straight into the file: the bytes received are all
          return active < limit_ && (active == 0 || memory + cost <= request_.memory_budget);
        });
        if (failure || queue.empty()) return;
        unit = std::move(queue.front());
        queue.pop_front();
        ++active;
        memory += cost;
      }
      bool pushed_back = false;
      try {
        execute(http, buffer, unit, pushed_back);
      } catch (...) {
        std::lock_guard lock(mutex);
        if (!failure) failure = std::current_exception();
      }
      {
        std::lock_guard lock(mutex);
        --active;
        memory -= cost;
        limit_ = pushed_back ? std::max(1, limit_ / 2) : std::min(request_.max_parallel, limit_ + 1);
      }
      changed.notify_all();
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < workers; ++i) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);
}

void XorbFetcher::execute(HttpClient& http, std::vector<std::byte>& buffer, FetchUnit unit, bool& pushed_back) {
  std::deque<FetchUnit> pending;
  pending.push_back(std::move(unit));
  while (!pending.empty()) {
    FetchUnit next = std::move(pending.front());
    pending.pop_front();
    if (fetch_unit(http, buffer, next, pushed_back)) {
      refused_in_a_row_ = 0;
      continue;
    }
    // The signed URL expired (or no longer grants these ranges): ask for a fresh reconstruction of just
    // this part of the file, and fetch it from the new URLs, before anything else. Refusals count across
    // every fetch thread until one fetch succeeds; URLs that expire together refuse every thread at once, so
    // each thread may be refused as many times as the policy has attempts. A store that refuses even fresh
    // URLs ends the download.
    const int bound = policy_.max_attempts * std::max(1, request_.max_parallel);
    if (const int refused = ++refused_in_a_row_; refused >= bound) {
      throw FetchError(ErrorKind::Network, "the Xet store refused " + std::to_string(refused) +
                                               " signed URLs (403) in a row, fresh ones included, for '" +
                                               request_.name + "'; what was written is kept for the next run");
    }
    const auto span_start = next.span_start();
    const auto span_end = next.span_end();
    const auto recon = reconstructions_.fetch(http, span_start, span_end - 1);
    if (!recon) throw FetchError(ErrorKind::Integrity, "the Xet store no longer describes '" + request_.name + "'");
    auto fresh = plan_units(*recon, span_start, span_start, span_end, done_snapshot(), request_.name);
    pending.insert(pending.begin(), std::make_move_iterator(fresh.begin()), std::make_move_iterator(fresh.end()));
  }
}

bool XorbFetcher::fetch_unit(HttpClient& http, std::vector<std::byte>& buffer, const FetchUnit& unit,
                             bool& pushed_back) {
  for (int attempt = 1;; ++attempt) {
    if (cancel_ != nullptr && cancel_->cancelled()) throw FetchError(ErrorKind::Network, "cancelled");
    HttpRequest req;
    req.url = unit.url;  // signed: no Authorization
    req.headers = {"Range: " + range_header_value(unit.byte_ranges())};
    req.connect_timeout = request_.connect_timeout;
    req.stall_timeout = request_.stall_timeout;
    const std::uint64_t limit = unit.wire_bytes() + 65536 + 512 * unit.ranges.size();
    transfer::BodySink sink;
    sink.on_headers = [&](const transfer::HttpResponse& response) {
      buffer.clear();
      if (response.status == 206) buffer.reserve(static_cast<std::size_t>(limit));
      return true;
    };
    sink.on_data = [&](std::span<const std::byte> bytes) {
      if (buffer.size() + bytes.size() > limit) return false;  // more than was asked for
      buffer.insert(buffer.end(), bytes.begin(), bytes.end());
      return true;
    };
    auto result = http.perform(req, &sink);
    add_transferred(result.body_bytes);
    const long status = result.response.status;
    if (result.failure == TransferFailure::None && status == 206) {
      if (result.body_bytes != buffer.size()) {
        throw FetchError(ErrorKind::Integrity,
                         "the Xet store sent more bytes for xorb " + unit.xorb + " than the ranges asked for");
      }
      write_unit_answer(unit, result.response.headers, buffer, file_, request_.name);
      record(unit);
      return true;
    }
    if (result.failure == TransferFailure::None && status == 403) return false;
    if (result.failure == TransferFailure::Cancelled) throw FetchError(ErrorKind::Network, "cancelled");
    if (status == 429 || status >= 500) pushed_back = true;
    auto delay = transfer::retry_delay(result, attempt, policy_);
    // A store that has not pinned the data yet answers 404 for a while.
    if (!delay && result.failure == TransferFailure::None && status == 404 && attempt < policy_.max_attempts) {
      delay = policy_.initial_backoff * attempt;
    }
    if (!delay) {
      throw FetchError(ErrorKind::Network,
                       "giving up on xorb " + unit.xorb + " of '" + request_.name + "' after " +
                           std::to_string(attempt) + " attempt(s): " + transfer::describe_failure(result) +
                           (status == 404 ? " (the store may not have pinned this data yet; try again later)" : "") +
                           "; what was written is kept for the next run");
    }
    wait_or_cancel(cancel_, *delay, "waiting to retry the Xet store");
  }
}

void XorbFetcher::record(const FetchUnit& unit) {
  std::lock_guard lock(done_mutex_);
  for (const auto& w : unit.writes) done_.add(w.clip_start, w.clip_end);
  state_.save(done_);
  if (progress_) progress_(done_.total(), request_.file.size);
}

DoneRanges XorbFetcher::done_snapshot() {
  std::lock_guard lock(done_mutex_);
  return done_;
}

void XorbFetcher::add_transferred(std::uint64_t bytes) {
  std::lock_guard lock(done_mutex_);
  transferred_ += bytes;
}

}  // namespace fetchd::xet
