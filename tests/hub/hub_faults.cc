#include "tests/hub/hub_faults.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace testing_support {

void HubFaults::set_ignore_range(bool on) {
  std::lock_guard lock(mutex_);
  settings_.ignore_range = on;
}

void HubFaults::set_truncate_at(std::optional<std::uint64_t> body_bytes) {
  std::lock_guard lock(mutex_);
  settings_.truncate_at = body_bytes;
}

void HubFaults::set_stall_at(std::optional<std::uint64_t> body_bytes) {
  std::lock_guard lock(mutex_);
  settings_.stall_at = body_bytes;
}

void HubFaults::set_redirect_api(bool on) {
  std::lock_guard lock(mutex_);
  settings_.redirect_api = on;
}

void HubFaults::set_relative_lfs_redirect(bool on) {
  std::lock_guard lock(mutex_);
  settings_.relative_lfs_redirect = on;
}

void HubFaults::set_corrupt_lfs(bool on) {
  std::lock_guard lock(mutex_);
  settings_.corrupt_lfs = on;
}

void HubFaults::set_tree_page_size(std::size_t entries) {
  // A page of zero entries would make a client follow `next` links forever.
  if (entries == 0) throw std::invalid_argument("tree page size must be at least 1");
  std::lock_guard lock(mutex_);
  settings_.tree_page_size = entries;
}

void HubFaults::set_xet_headers(XetHeaders style) {
  std::lock_guard lock(mutex_);
  settings_.xet_headers = style;
}

void HubFaults::set_xet_token_in_headers(bool on) {
  std::lock_guard lock(mutex_);
  settings_.xet_token_in_headers = on;
}

void HubFaults::set_xet_token_refused(bool on) {
  std::lock_guard lock(mutex_);
  settings_.xet_token_refused = on;
}

void HubFaults::set_xet_token_lifetime(std::chrono::seconds lifetime) {
  std::lock_guard lock(mutex_);
  settings_.xet_token_lifetime = lifetime;
}

void HubFaults::set_xet_urls_expired(bool on) {
  std::lock_guard lock(mutex_);
  settings_.xet_urls_expired = on;
}

void HubFaults::set_xet_urls_expire_after(std::optional<std::uint32_t> gateway_requests) {
  std::lock_guard lock(mutex_);
  settings_.xet_urls_expire_after = gateway_requests;
  xet_urls_served_ = 0;
}

void HubFaults::set_xet_v2_disabled(bool on) {
  std::lock_guard lock(mutex_);
  settings_.xet_v2_disabled = on;
}

void HubFaults::set_xet_multipart_reversed(bool on) {
  std::lock_guard lock(mutex_);
  settings_.xet_multipart_reversed = on;
}

void HubFaults::set_xet_corrupt_chunk(std::optional<XetCorruption> corruption) {
  std::lock_guard lock(mutex_);
  settings_.xet_corrupt_chunk = std::move(corruption);
}

void HubFaults::set_xet_short_term(std::optional<std::size_t> term_index) {
  std::lock_guard lock(mutex_);
  settings_.xet_short_term = term_index;
}

void HubFaults::set_xet_unpinned_for(int count) {
  std::lock_guard lock(mutex_);
  xet_unpinned_left_ = count < 0 ? 0 : count;
}

void HubFaults::fail_next(std::string path_substring, int count, int status,
                          std::map<std::string, std::string> headers) {
  if (count <= 0) return;
  if (status < 100 || status > 999) throw std::invalid_argument("fail_next needs a three-digit HTTP status");
  std::lock_guard lock(mutex_);
  failure_rules_.push_back({std::move(path_substring), 0, count, {status, std::move(headers)}});
}

void HubFaults::fail_after(std::string path_substring, int pass, int count, int status) {
  if (count <= 0) return;
  if (status < 100 || status > 999) throw std::invalid_argument("fail_after needs a three-digit HTTP status");
  std::lock_guard lock(mutex_);
  failure_rules_.push_back({std::move(path_substring), std::max(0, pass), count, {status, {}}});
}

void HubFaults::override_tree(const std::string& repo_id, std::string json_body) {
  std::lock_guard lock(mutex_);
  tree_overrides_[repo_id] = std::move(json_body);
}

void HubFaults::clear_tree_override(const std::string& repo_id) {
  std::lock_guard lock(mutex_);
  tree_overrides_.erase(repo_id);
}

void HubFaults::reset() {
  std::lock_guard lock(mutex_);
  settings_ = Settings{};
  failure_rules_.clear();
  tree_overrides_.clear();
  xet_unpinned_left_ = 0;
  xet_urls_valid_from_ = 0;
  xet_urls_served_ = 0;
}

HubFaults::Settings HubFaults::settings() const {
  std::lock_guard lock(mutex_);
  return settings_;
}

std::optional<HubFaults::InjectedFailure> HubFaults::take_failure(std::string_view target) {
  std::lock_guard lock(mutex_);
  for (auto rule = failure_rules_.begin(); rule != failure_rules_.end(); ++rule) {
    if (target.find(rule->path_substring) == std::string_view::npos) continue;
    if (rule->pass > 0) {
      --rule->pass;
      return std::nullopt;
    }
    InjectedFailure failure = rule->failure;
    if (--rule->remaining == 0) failure_rules_.erase(rule);
    return failure;
  }
  return std::nullopt;
}

std::optional<std::string> HubFaults::tree_override(const std::string& repo_id) const {
  std::lock_guard lock(mutex_);
  const auto found = tree_overrides_.find(repo_id);
  if (found == tree_overrides_.end()) return std::nullopt;
  return found->second;
}

bool HubFaults::take_xet_unpinned() {
  std::lock_guard lock(mutex_);
  if (xet_unpinned_left_ == 0) return false;
  --xet_unpinned_left_;
  return true;
}

bool HubFaults::use_xet_url(std::uint64_t url_serial, std::uint64_t next_serial, std::uint32_t limit) {
  std::lock_guard lock(mutex_);
  if (url_serial < xet_urls_valid_from_) return false;
  if (xet_urls_served_ >= limit) {
    xet_urls_valid_from_ = next_serial;
    xet_urls_served_ = 0;
    return false;
  }
  ++xet_urls_served_;
  return true;
}

}  // namespace testing_support
