#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

namespace fetchd::xet {

// File ranges [start, end) already written and recorded, kept merged and sorted.
class DoneRanges {
 public:
  void add(std::uint64_t start, std::uint64_t end);
  bool covers(std::uint64_t start, std::uint64_t end) const;
  std::uint64_t total() const;
  const std::map<std::uint64_t, std::uint64_t>& ranges() const { return ranges_; }

 private:
  std::map<std::uint64_t, std::uint64_t> ranges_;
};

// What an interrupted download has written and recorded, beside the partial file. Written after every
// fetch unit (temporary + rename), so it never claims bytes that are not on disk.
class ResumeState {
 public:
  ResumeState(std::filesystem::path path, std::string file_hash, std::uint64_t size)
      : path_(std::move(path)), file_hash_(std::move(file_hash)), size_(size) {}

  // The recorded ranges, when the state belongs to this very file; empty otherwise.
  DoneRanges load() const;
  void save(const DoneRanges& done) const;
  void remove() const;

 private:
  std::filesystem::path path_;
  std::string file_hash_;
  std::uint64_t size_;
};

}  // namespace fetchd::xet
