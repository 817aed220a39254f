#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace testing_support {

// Which Xet headers a resolve of a Xet file carries: today's hub (Link: rel="xet-auth" and
// rel="xet-reconstruction-info"), older hubs and OpenWeights (X-Xet-Refresh-Route), or a hub that does not
// advertise Xet at all (only the 302 to /xet/files/{hash}).
enum class XetHeaders { link, refresh_route, none };

// One chunk record of a Xet file damaged on its way out of the gateway.
struct XetCorruption {
  std::string file_hash;        // the file's Xet hash, hex form
  std::size_t chunk_index = 0;  // which chunk of the file, counted from its first byte
  // true: the record keeps its length and decodes, to bytes that differ in one place (only a chunk hash
  // check notices); false: the record no longer decodes.
  bool decodable = true;
};

// The misbehaviours a test can switch on in the test hub. Every switch is off by default, is safe to flip
// from any thread, and takes effect for requests that arrive afterwards: a request reads one consistent
// set of switches when it arrives (settings()), so flipping one mid-download does not change that download.
class HubFaults {
 public:
  // What one request sees.
  struct Settings {
    bool ignore_range = false;                 // downloads answer 200 with the whole body despite Range
    std::optional<std::uint64_t> truncate_at;  // send this many body bytes, then close the connection
    std::optional<std::uint64_t> stall_at;     // send this many body bytes, then nothing until disconnect/stop
    bool redirect_api = false;                 // every /api/ request answers 302 to itself
    bool relative_lfs_redirect = false;        // LFS resolves redirect to a relative /lfs/objects/... on the API host
    bool corrupt_lfs = false;                  // LFS downloads flip one byte (same length)
    std::size_t tree_page_size = 1000;         // tree listing entries per page

    // --- Xet ---
    XetHeaders xet_headers = XetHeaders::link;
    bool xet_token_in_headers = false;  // the token route answers in X-Xet-* headers, as older hubs did
    bool xet_token_refused = false;     // the token route answers 401
    std::chrono::seconds xet_token_lifetime{3600};
    bool xet_urls_expired = false;  // every signed gateway URL is issued already expired
    // The gateway serves this many requests, then every URL signed so far has expired (403); URLs signed
    // afterwards (a fresh reconstruction) are good for as many requests again. Models URLs expiring in the
    // middle of a long download.
    std::optional<std::uint32_t> xet_urls_expire_after;
    bool xet_v2_disabled = false;         // /v2/reconstructions answers 501
    bool xet_multipart_reversed = false;  // multipart/byteranges parts in reverse order
    std::optional<XetCorruption> xet_corrupt_chunk;
    // The term at this index of every reconstruction answer claims one byte more than its chunks decode to.
    std::optional<std::size_t> xet_short_term;
  };

  // A response fail_next() injects in place of normal service.
  struct InjectedFailure {
    int status = 500;
    std::map<std::string, std::string> headers;
  };

  void set_ignore_range(bool on);
  void set_truncate_at(std::optional<std::uint64_t> body_bytes);
  void set_stall_at(std::optional<std::uint64_t> body_bytes);
  void set_redirect_api(bool on);
  void set_relative_lfs_redirect(bool on);
  void set_corrupt_lfs(bool on);
  void set_tree_page_size(std::size_t entries);  // at least 1

  // --- Xet (see Settings) ---
  void set_xet_headers(XetHeaders style);
  void set_xet_token_in_headers(bool on);
  void set_xet_token_refused(bool on);
  void set_xet_token_lifetime(std::chrono::seconds lifetime);  // negative: every token is issued expired
  void set_xet_urls_expired(bool on);
  void set_xet_urls_expire_after(std::optional<std::uint32_t> gateway_requests);
  void set_xet_v2_disabled(bool on);
  void set_xet_multipart_reversed(bool on);
  void set_xet_corrupt_chunk(std::optional<XetCorruption> corruption);
  void set_xet_short_term(std::optional<std::size_t> term_index);
  // The next `count` reconstruction requests (V1 or V2, once authorised) answer 404, as OpenWeights does
  // until the file's xorbs are pinned.
  void set_xet_unpinned_for(int count);

  // The next `count` requests (on either host) whose target (path and query) contains `path_substring` get
  // `status` with `headers`, then normal service resumes. Rules queue up; the oldest matching one applies.
  void fail_next(std::string path_substring, int count, int status, std::map<std::string, std::string> headers = {});
  // As fail_next(), once the first `pass` matching requests have been served normally. Concurrent clients make
  // "the first request" a race; "the second to arrive" leaves the first one served whatever the scheduling.
  void fail_after(std::string path_substring, int pass, int count, int status);

  // The tree endpoint of `repo_id` answers `json_body` verbatim (200), for every revision and page.
  void override_tree(const std::string& repo_id, std::string json_body);
  void clear_tree_override(const std::string& repo_id);

  // Every switch off, every queued failure, tree override and URL expiry dropped.
  void reset();

  // --- What the hub reads ---
  Settings settings() const;
  // Consumes one use of the oldest fail_next() rule matching `target`, if any.
  std::optional<InjectedFailure> take_failure(std::string_view target);
  std::optional<std::string> tree_override(const std::string& repo_id) const;
  // Consumes one of the reconstructions set_xet_unpinned_for() refuses; false when none is left.
  bool take_xet_unpinned();
  // Under xet_urls_expire_after: whether the URL with serial number `url_serial` may be served (counting it
  // when so). `next_serial` is the serial the next signed URL will get; once the limit is reached, every
  // URL below it has expired.
  bool use_xet_url(std::uint64_t url_serial, std::uint64_t next_serial, std::uint32_t limit);

 private:
  struct FailureRule {
    std::string path_substring;
    int pass = 0;  // matching requests still to serve normally before the rule applies
    int remaining = 0;
    InjectedFailure failure;
  };

  mutable std::mutex mutex_;
  Settings settings_;
  std::deque<FailureRule> failure_rules_;
  std::map<std::string, std::string> tree_overrides_;
  int xet_unpinned_left_ = 0;
  std::uint64_t xet_urls_valid_from_ = 0;  // serial of the oldest signed URL not yet expired
  std::uint32_t xet_urls_served_ = 0;      // gateway requests served since then
};

}  // namespace testing_support
