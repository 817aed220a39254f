#include "fetchd/xet/xet_download.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>
#include <vector>

#include "engine/format/json.h"
#include "fetchd/client/fetch_error.h"
#include "fetchd/proof/content_hash.h"
#include "fetchd/transfer/partial_file.h"
#include "fetchd/xet/chunker.h"
#include "fetchd/xet/reconstruction.h"
#include "fetchd/xet/xet_hash.h"
#include "fetchd/xet/xorb_chunk.h"

namespace fetchd::xet {

namespace {

namespace fs = std::filesystem;
using transfer::HttpClient;
using transfer::HttpRequest;
using transfer::HttpResult;
using transfer::TransferFailure;

std::optional<std::uint64_t> parse_u64(std::string_view text) {
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

void wait_or_cancel(const transfer::CancelToken* cancel, std::chrono::milliseconds delay, const std::string& what) {
  if (!transfer::wait_unless_cancelled(cancel, delay)) {
    throw FetchError(ErrorKind::Network, "cancelled while " + what);
  }
}

// File ranges [start, end) already written and recorded, kept merged and sorted.
class DoneRanges {
 public:
  void add(std::uint64_t start, std::uint64_t end) {
    if (start >= end) return;
    ranges_[start] = std::max(ranges_[start], end);
    // Merge with neighbours.
    auto it = ranges_.find(start);
    if (it != ranges_.begin()) {
      auto prev = std::prev(it);
      if (prev->second >= it->first) {
        prev->second = std::max(prev->second, it->second);
        ranges_.erase(it);
        it = prev;
      }
    }
    for (auto next = std::next(it); next != ranges_.end() && next->first <= it->second; next = ranges_.erase(next)) {
      it->second = std::max(it->second, next->second);
    }
  }
  bool covers(std::uint64_t start, std::uint64_t end) const {
    if (start >= end) return true;
    auto it = ranges_.upper_bound(start);
    if (it == ranges_.begin()) return false;
    --it;
    return it->first <= start && it->second >= end;
  }
  std::uint64_t total() const {
    std::uint64_t n = 0;
    for (const auto& [s, e] : ranges_) n += e - s;
    return n;
  }
  const std::map<std::uint64_t, std::uint64_t>& ranges() const { return ranges_; }

 private:
  std::map<std::uint64_t, std::uint64_t> ranges_;
};

// What an interrupted download has written and recorded, beside the partial file. Written after every
// fetch unit (temporary + rename), so it never claims bytes that are not on disk.
class ResumeState {
 public:
  ResumeState(fs::path path, std::string file_hash, std::uint64_t size)
      : path_(std::move(path)), file_hash_(std::move(file_hash)), size_(size) {}

  // The recorded ranges, when the state belongs to this very file; empty otherwise.
  DoneRanges load() const {
    DoneRanges done;
    std::ifstream in(path_);
    std::string magic, hash;
    std::uint64_t size = 0;
    if (!(in >> magic >> hash >> size) || magic != "xet-resume-1" || hash != file_hash_ || size != size_) return done;
    std::uint64_t start = 0, end = 0;
    while (in >> start >> end) {
      if (start < end && end <= size_) done.add(start, end);
    }
    return done;
  }

  void save(const DoneRanges& done) const {
    std::ostringstream text;
    text << "xet-resume-1 " << file_hash_ << ' ' << size_ << '\n';
    for (const auto& [s, e] : done.ranges()) text << s << ' ' << e << '\n';
    const fs::path temp = path_.string() + ".tmp";
    {
      std::ofstream out(temp, std::ios::trunc);
      out << text.str();
      if (!out.flush()) return;  // best effort: without it a later run simply fetches more
    }
    std::error_code ec;
    fs::rename(temp, path_, ec);
  }

  void remove() const {
    std::error_code ec;
    fs::remove(path_, ec);
  }

 private:
  fs::path path_;
  std::string file_hash_;
  std::uint64_t size_;
};

// One term's bytes that land in the file: the term starts at `term_start`, and [clip_start, clip_end) of the
// file is written from it.
struct TermWrite {
  ChunkRange chunks;
  std::uint64_t unpacked_length = 0;
  std::uint64_t term_start = 0;
  std::uint64_t clip_start = 0;
  std::uint64_t clip_end = 0;
};

// One request to the store: the ranges of one signed URL, and the terms they serve.
struct FetchUnit {
  std::string xorb;
  std::string url;
  std::vector<FetchRange> ranges;
  std::vector<TermWrite> writes;

  std::uint64_t wire_bytes() const {
    std::uint64_t n = 0;
    for (const auto& r : ranges) n += r.bytes.length();
    return n;
  }
  std::uint64_t span_start() const {
    std::uint64_t s = UINT64_MAX;
    for (const auto& w : writes) s = std::min(s, w.clip_start);
    return s;
  }
  std::uint64_t span_end() const {
    std::uint64_t e = 0;
    for (const auto& w : writes) e = std::max(e, w.clip_end);
    return e;
  }
};

// Groups the terms of `recon` that land in [want_start, want_end) and are not yet done into fetch units.
std::vector<FetchUnit> plan_units(const Reconstruction& recon, std::uint64_t recon_start, std::uint64_t want_start,
                                  std::uint64_t want_end, const DoneRanges& done, const std::string& name) {
  std::map<std::string, FetchUnit> by_url;
  // The first term's decoded bytes begin offset_into_first_range before the requested start.
  if (recon.offset_into_first_range > recon_start ||
      (!recon.terms.empty() && recon.offset_into_first_range >= recon.terms.front().unpacked_length)) {
    throw FetchError(ErrorKind::Integrity,
                     "the reconstruction of '" + name + "' for bytes from " + std::to_string(recon_start) + " starts " +
                         std::to_string(recon.offset_into_first_range) + " bytes into its first term, which cannot be");
  }
  std::uint64_t cursor = recon_start - recon.offset_into_first_range;
  for (const auto& term : recon.terms) {
    const std::uint64_t term_start = cursor;
    cursor += term.unpacked_length;
    const std::uint64_t clip_start = std::max(term_start, want_start);
    const std::uint64_t clip_end = std::min(cursor, want_end);
    if (clip_start >= clip_end || done.covers(clip_start, clip_end)) continue;
    const FetchRange* range = nullptr;
    const FetchSource* source = recon.source_for(term, &range);
    auto& unit = by_url[source->url];
    unit.xorb = term.xorb;
    unit.url = source->url;
    if (std::none_of(unit.ranges.begin(), unit.ranges.end(),
                     [&](const FetchRange& r) { return r.bytes == range->bytes; })) {
      unit.ranges.push_back(*range);
    }
    unit.writes.push_back({term.chunks, term.unpacked_length, term_start, clip_start, clip_end});
  }
  std::vector<FetchUnit> units;
  for (auto& [url, unit] : by_url) {
    std::sort(unit.ranges.begin(), unit.ranges.end(),
              [](const auto& a, const auto& b) { return a.bytes.start < b.bytes.start; });
    units.push_back(std::move(unit));
  }
  return units;
}

class XetDownload {
 public:
  XetDownload(XetTokenCache& tokens, const XetDownloadRequest& request, const transfer::RetryPolicy& policy,
              const transfer::CancelToken* cancel, const transfer::DownloadProgress& progress)
      : tokens_(tokens),
        request_(request),
        policy_(policy),
        cancel_(cancel),
        progress_(progress),
        state_(fs::path(request.partial.string() + ".xet-state"), request.file.file_hash, request.file.size) {}

  XetDownloadResult run() {
    // The token first: a hub that refuses it (the caller then falls back to the plain path) must find the
    // partial file as it was.
    tokens_.get(request_.file.token_url);
    const std::uint64_t size = request_.file.size;
    done_ = state_.load();
    result_.resumed_bytes = done_.total();
    if (result_.resumed_bytes == 0) {
      std::error_code ec;
      fs::remove(request_.partial, ec);  // bytes without a record prove nothing: start clean
    }
    const auto started = std::chrono::steady_clock::now();
    transfer::PartialFile file(request_.partial);
    file.resize(size);
    file_ = &file;
    HttpClient http(cancel_);
    for (std::uint64_t block = 0; block < size; block += request_.block_size) {
      const std::uint64_t block_end = std::min(size, block + request_.block_size);
      if (done_.covers(block, block_end)) continue;
      const auto recon = fetch_reconstruction(http, block, block_end - 1);
      if (!recon) break;  // 416: the store has nothing past here
      run_units(plan_units(*recon, block, block, block_end, done_, request_.name));
    }
    file.sync();
    if (!done_.covers(0, size)) {
      throw FetchError(ErrorKind::Integrity, "the Xet store's reconstruction of '" + request_.name + "' covers " +
                                                 std::to_string(done_.total()) + " of its " + std::to_string(size) +
                                                 " bytes; the partial file is kept for the next run");
    }
    const auto fetched = std::chrono::steady_clock::now();
    result_.fetch_seconds = std::chrono::duration<double>(fetched - started).count();
    prove();
    result_.prove_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - fetched).count();
    state_.remove();
    result_.size = size;
    return result_;
  }

 private:
  // GET {cas}/v2/reconstructions/{hash} for file bytes [first, last], falling back to V1 on 404/501.
  // nullopt on 416 (nothing at or past `first`).
  std::optional<Reconstruction> fetch_reconstruction(HttpClient& http, std::uint64_t first, std::uint64_t last) {
    bool refreshed = false;
    for (int attempt = 1;; ++attempt) {
      const XetToken token = tokens_.get(request_.file.token_url, false);
      HttpRequest req;
      req.url = token.cas_url + "/v" + std::to_string(version_) + "/reconstructions/" + request_.file.file_hash;
      req.headers = {"Authorization: Bearer " + token.access_token,
                     "Range: bytes=" + std::to_string(first) + "-" + std::to_string(last)};
      req.connect_timeout = request_.connect_timeout;
      req.stall_timeout = request_.stall_timeout;
      auto result = http.perform(req);
      const long status = result.response.status;
      if (result.failure == TransferFailure::None) {
        if (status == 200 || status == 206) {
          result_.reconstruction_version = version_;
          return parse_reconstruction(result.response.body);
        }
        if (status == 416) return std::nullopt;
        if ((status == 404 || status == 501) && version_ == 2) {
          version_ = 1;  // a store without V2
          --attempt;
          continue;
        }
        if (status == 401 && !refreshed) {  // the read token expired early
          tokens_.get(request_.file.token_url, true);
          refreshed = true;
          continue;
        }
      }
      if (result.failure == TransferFailure::Cancelled) throw FetchError(ErrorKind::Network, "cancelled");
      auto delay = transfer::retry_delay(result, attempt, policy_);
      if (!delay && status == 404 && attempt < policy_.max_attempts) delay = policy_.initial_backoff * attempt;
      if (!delay) {
        throw FetchError(status == 404 ? ErrorKind::NotFound : ErrorKind::Network,
                         "the Xet store could not describe '" + request_.name + "' (" + request_.file.file_hash +
                             "): " + transfer::describe_failure(result) +
                             (status == 404 ? " — its data may not be pinned yet on this hub; try again later" : ""));
      }
      wait_or_cancel(cancel_, *delay, "waiting for the Xet store");
    }
  }

  // Runs fetch units on up to max_parallel threads, within the memory budget. Concurrency adapts: it halves
  // when the store pushes back (429, 5xx) and grows back by one with every success.
  void run_units(std::vector<FetchUnit> units) {
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

  void execute(HttpClient& http, std::vector<std::byte>& buffer, FetchUnit unit, bool& pushed_back) {
    for (int attempt = 1;; ++attempt) {
      if (cancel_ != nullptr && cancel_->cancelled()) throw FetchError(ErrorKind::Network, "cancelled");
      HttpRequest req;
      req.url = unit.url;  // signed: no Authorization
      req.headers = {"Range: " + range_header_value(ranges_of(unit))};
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
        apply(unit, result.response.headers, buffer);
        return;
      }
      if (result.failure == TransferFailure::None && status == 403) {
        // The signed URL expired (or no longer grants these ranges): ask for a fresh reconstruction of just
        // this part of the file, and fetch it from the new URLs.
        if (attempt >= policy_.max_attempts) {
          throw FetchError(ErrorKind::Network, "the Xet store kept refusing signed URLs (403) for '" + request_.name +
                                                   "' after " + std::to_string(attempt) + " fresh reconstructions");
        }
        const auto span_start = unit.span_start();
        const auto span_end = unit.span_end();
        const auto recon = fetch_reconstruction(http, span_start, span_end - 1);
        if (!recon) throw FetchError(ErrorKind::Integrity, "the Xet store no longer describes '" + request_.name + "'");
        auto fresh = plan_units(*recon, span_start, span_start, span_end, done_snapshot(), request_.name);
        for (auto& u : fresh) execute(http, buffer, std::move(u), pushed_back);
        return;
      }
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

  static std::vector<ByteRange> ranges_of(const FetchUnit& unit) {
    std::vector<ByteRange> out;
    for (const auto& r : unit.ranges) out.push_back(r.bytes);
    return out;
  }

  // Decodes the unit's chunks and writes every term it serves at its file offset.
  void apply(const FetchUnit& unit, const transfer::HttpHeaders& headers, std::span<const std::byte> body) {
    const auto requested = ranges_of(unit);
    std::vector<RangePart> parts;
    const auto content_type = headers.get("Content-Type").value_or("");
    if (content_type.find("multipart/byteranges") != std::string::npos) {
      parts = parse_byteranges(content_type, body, requested);
    } else {
      const auto cr = parse_content_range(headers.get("Content-Range").value_or(""));
      if (!cr || requested.size() != 1 || !(cr->range == requested.front()) || cr->range.length() != body.size()) {
        throw FetchError(ErrorKind::Integrity, "the Xet store answered bytes " +
                                                   headers.get("Content-Range").value_or("?") + " of xorb " +
                                                   unit.xorb + " when asked for " + range_header_value(requested));
      }
      parts.push_back({cr->range, body});
    }

    for (const auto& range : unit.ranges) {
      const RangePart* part = nullptr;
      for (const auto& p : parts) {
        if (p.range.start <= range.bytes.start && range.bytes.end <= p.range.end) part = &p;
      }
      if (part == nullptr) {
        throw FetchError(ErrorKind::Integrity, "the Xet store's answer for xorb " + unit.xorb + " lacks bytes " +
                                                   std::to_string(range.bytes.start) + "-" +
                                                   std::to_string(range.bytes.end));
      }
      const auto bytes = part->bytes.subspan(range.bytes.start - part->range.start, range.bytes.length());
      // Where each chunk's record starts, from the headers alone; then every term decodes its own chunks
      // straight into the file, so no decoded copy of the range is ever held.
      std::vector<std::uint64_t> record_offsets{0};
      for (std::uint32_t i = range.chunks.start; i < range.chunks.end; ++i) {
        const auto at = record_offsets.back();
        if (at >= bytes.size()) break;
        const auto header = read_chunk_header(bytes.subspan(at), {i, range.bytes.start + at});
        record_offsets.push_back(at + header.record_size());
      }
      if (record_offsets.size() - 1 != range.chunks.end - range.chunks.start || record_offsets.back() != bytes.size()) {
        throw FetchError(ErrorKind::Integrity, "bytes " + std::to_string(range.bytes.start) + "-" +
                                                   std::to_string(range.bytes.end) + " of xorb " + unit.xorb +
                                                   " do not hold exactly the " +
                                                   std::to_string(range.chunks.end - range.chunks.start) +
                                                   " chunk records the reconstruction promised");
      }
      for (const auto& w : unit.writes) {
        if (!range.chunks.contains(w.chunks)) continue;
        const auto from = record_offsets[w.chunks.start - range.chunks.start];
        const auto to = record_offsets[w.chunks.end - range.chunks.start];
        ChunkReader reader(bytes.subspan(from, to - from), w.chunks.start);
        std::uint64_t position = w.term_start;  // file offset of the next decoded byte
        while (auto chunk = reader.next()) {
          const std::uint64_t chunk_end = position + chunk->bytes.size();
          const std::uint64_t write_from = std::max(position, w.clip_start);
          const std::uint64_t write_to = std::min(chunk_end, w.clip_end);
          if (write_from < write_to && chunk_end <= w.term_start + w.unpacked_length) {
            file_->write_at(write_from, chunk->bytes.subspan(write_from - position, write_to - write_from));
          }
          position = chunk_end;
        }
        if (position - w.term_start != w.unpacked_length) {
          throw FetchError(ErrorKind::Integrity, "chunks [" + std::to_string(w.chunks.start) + ", " +
                                                     std::to_string(w.chunks.end) + ") of xorb " + unit.xorb +
                                                     " decode to " + std::to_string(position - w.term_start) +
                                                     " bytes, but the reconstruction of '" + request_.name + "' says " +
                                                     std::to_string(w.unpacked_length));
        }
      }
    }
    record(unit);
  }

  void record(const FetchUnit& unit) {
    std::lock_guard lock(done_mutex_);
    for (const auto& w : unit.writes) done_.add(w.clip_start, w.clip_end);
    state_.save(done_);
    if (progress_) progress_(done_.total(), request_.file.size);
  }

  DoneRanges done_snapshot() {
    std::lock_guard lock(done_mutex_);
    return done_;
  }

  void add_transferred(std::uint64_t bytes) {
    std::lock_guard lock(done_mutex_);
    result_.transferred += bytes;
  }

  // Proof: chunk the finished file again, rebuild its Xet hash, and compare; SHA-256 in the same pass.
  void prove() {
    ContentHasher xet;
    proof::Sha256 sha;
    proof::hash_file_prefix(request_.partial, request_.file.size, [&](std::span<const std::byte> bytes) {
      xet.update(bytes);
      sha.update(bytes);
    });
    const std::string got = to_hex(xet.finish());
    result_.sha256 = sha.hex_digest();
    const auto discard = [&] {
      std::error_code ec;
      fs::remove(request_.partial, ec);
      state_.remove();
    };
    if (got != request_.file.file_hash) {
      discard();
      throw FetchError(ErrorKind::Integrity, "'" + request_.name + "' rebuilt from the Xet store hashes to " + got +
                                                 " but the hub names it " + request_.file.file_hash +
                                                 " (X-Xet-Hash). The download was deleted; run again, and if this "
                                                 "repeats, the store holds corrupt data for this file.");
    }
    if (request_.expected_sha256 && *request_.expected_sha256 != result_.sha256) {
      discard();
      throw FetchError(ErrorKind::Integrity, "'" + request_.name + "' has the right Xet hash but SHA-256 " +
                                                 result_.sha256 + " where the listing says " +
                                                 *request_.expected_sha256 + "; the download was deleted");
    }
  }

  XetTokenCache& tokens_;
  const XetDownloadRequest& request_;
  const transfer::RetryPolicy& policy_;
  const transfer::CancelToken* cancel_;
  const transfer::DownloadProgress& progress_;
  ResumeState state_;
  DoneRanges done_;
  std::mutex done_mutex_;
  transfer::PartialFile* file_ = nullptr;
  XetDownloadResult result_;
  int version_ = 2;
  int limit_ = 4;
};

}  // namespace

std::optional<XetFileInfo> xet_info_from_headers(const transfer::HttpHeaders& headers, std::string_view endpoint,
                                                 std::optional<std::uint64_t> listed_size) {
  const auto hash = headers.get("X-Xet-Hash");
  if (!hash || !parse_hex(*hash)) return std::nullopt;
  XetFileInfo info;
  info.file_hash = *hash;
  std::transform(info.file_hash.begin(), info.file_hash.end(), info.file_hash.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (auto auth = transfer::find_link(headers, "xet-auth")) {
    info.token_url = transfer::resolve_url(std::string(endpoint) + "/", *auth);
  } else if (auto route = headers.get("X-Xet-Refresh-Route")) {
    info.token_url = transfer::resolve_url(std::string(endpoint) + "/", *route);
  } else {
    return std::nullopt;
  }
  const auto linked = headers.get("X-Linked-Size");
  const auto size = linked ? parse_u64(*linked) : listed_size;
  if (!size) return std::nullopt;
  info.size = *size;
  return info;
}

XetTokenCache::XetTokenCache(std::string hub_authorization, transfer::RetryPolicy policy,
                             const transfer::CancelToken* cancel, std::chrono::milliseconds timeout)
    : hub_authorization_(std::move(hub_authorization)), policy_(policy), cancel_(cancel), timeout_(timeout) {}

XetToken XetTokenCache::get(const std::string& token_url, bool refresh) {
  std::lock_guard lock(mutex_);
  const auto now = std::chrono::system_clock::now();
  if (!refresh && token_ && token_url_ == token_url && token_->expires - std::chrono::seconds(60) > now) return *token_;

  HttpClient http(cancel_);
  for (int attempt = 1;; ++attempt) {
    HttpRequest req;
    req.url = token_url;
    req.connect_timeout = timeout_;
    req.stall_timeout = timeout_;
    if (!hub_authorization_.empty()) req.headers.push_back(hub_authorization_);
    const auto result = http.perform(req);
    const long status = result.response.status;
    if (result.failure == TransferFailure::None && status == 200) {
      XetToken token;
      std::size_t consumed = 0;
      std::string error;
      const auto doc = engine::format::parse_json_prefix(result.response.body, consumed, error);
      const auto text = [&](const char* key, const char* header) -> std::string {
        if (error.empty() && doc.IsObject()) {
          const auto it = doc.FindMember(key);
          if (it != doc.MemberEnd() && it->value.IsString()) return it->value.GetString();
        }
        return result.response.headers.get(header).value_or("");
      };
      token.access_token = text("accessToken", "X-Xet-Access-Token");
      token.cas_url = text("casUrl", "X-Xet-Cas-Url");
      while (token.cas_url.ends_with('/')) token.cas_url.pop_back();
      std::int64_t exp = 0;
      if (error.empty() && doc.IsObject() && doc.HasMember("exp") && doc["exp"].IsInt64()) {
        exp = doc["exp"].GetInt64();
      } else if (auto header = result.response.headers.get("X-Xet-Token-Expiration")) {
        exp = static_cast<std::int64_t>(parse_u64(*header).value_or(0));
      }
      if (token.access_token.empty() || token.cas_url.empty()) {
        throw FetchError(ErrorKind::Network,
                         "the hub's Xet read token answer from " + token_url + " has no accessToken or casUrl");
      }
      token.expires = std::chrono::system_clock::time_point(std::chrono::seconds(exp));
      token_ = token;
      token_url_ = token_url;
      return token;
    }
    if (result.failure == TransferFailure::None && (status == 401 || status == 403)) {
      throw FetchError(ErrorKind::Auth, "the hub refused a Xet read token (HTTP " + std::to_string(status) + ")");
    }
    const auto delay = transfer::retry_delay(result, attempt, policy_);
    if (!delay) {
      throw FetchError(ErrorKind::Network,
                       "cannot get a Xet read token from " + token_url + ": " + transfer::describe_failure(result));
    }
    wait_or_cancel(cancel_, *delay, "waiting for a Xet read token");
  }
}

XetDownloadResult download_xet_file(XetTokenCache& tokens, const XetDownloadRequest& request,
                                    const transfer::RetryPolicy& policy, const transfer::CancelToken* cancel,
                                    const transfer::DownloadProgress& progress) {
  return XetDownload(tokens, request, policy, cancel, progress).run();
}

}  // namespace fetchd::xet
