#include "fetchd/xet/resume_state.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <sstream>
#include <system_error>

namespace fetchd::xet {

namespace fs = std::filesystem;

void DoneRanges::add(std::uint64_t start, std::uint64_t end) {
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

bool DoneRanges::covers(std::uint64_t start, std::uint64_t end) const {
  if (start >= end) return true;
  auto it = ranges_.upper_bound(start);
  if (it == ranges_.begin()) return false;
  --it;
  return it->first <= start && it->second >= end;
}

std::uint64_t DoneRanges::total() const {
  std::uint64_t n = 0;
  for (const auto& [s, e] : ranges_) n += e - s;
  return n;
}

DoneRanges ResumeState::load() const {
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

void ResumeState::save(const DoneRanges& done) const {
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

void ResumeState::remove() const {
  std::error_code ec;
  fs::remove(path_, ec);
}

}  // namespace fetchd::xet
