#include "tests/support/step_file_bytes.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace testing_support {

namespace {

struct Mapping {
  std::uintptr_t begin = 0, end = 0;
  std::string path;
};

bool is_model_file(const std::string& path) {
  return path.ends_with(".gguf") || path.ends_with(".safetensors");
}

// The process's mappings of model files, from /proc/self/maps ("begin-end perms offset dev inode path").
std::vector<Mapping> model_mappings() {
  std::ifstream maps("/proc/self/maps");
  std::vector<Mapping> out;
  std::string line;
  while (std::getline(maps, line)) {
    std::istringstream fields(line);
    std::string range, perms, offset, device, inode, path;
    fields >> range >> perms >> offset >> device >> inode;
    std::getline(fields >> std::ws, path);
    if (!is_model_file(path)) continue;
    const auto dash = range.find('-');
    out.push_back(
        {std::stoull(range.substr(0, dash), nullptr, 16), std::stoull(range.substr(dash + 1), nullptr, 16), path});
  }
  return out;
}

void advise(const Mapping& m, int advice, const char* name) {
  if (::madvise(reinterpret_cast<void*>(m.begin), m.end - m.begin, advice) != 0) {
    throw std::runtime_error(std::string("madvise(") + name + ") on " + m.path + ": " + std::strerror(errno));
  }
}

// Bytes of the mapping whose pages are in the page cache.
std::uint64_t cached_bytes(const Mapping& m) {
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in_core((m.end - m.begin + page - 1) / page);
  if (::mincore(reinterpret_cast<void*>(m.begin), m.end - m.begin, in_core.data()) != 0) {
    throw std::runtime_error("mincore on " + m.path + ": " + std::strerror(errno));
  }
  std::uint64_t bytes = 0;
  for (const unsigned char c : in_core) bytes += (c & 1u) * page;
  return bytes;
}

// Writes the file back and drops it from the page cache (pages no process maps).
void drop_from_page_cache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open " + path + ": " + std::strerror(errno));
  const bool synced = ::fdatasync(fd) == 0;
  const int error = synced ? ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) : errno;
  ::close(fd);
  if (error != 0) throw std::runtime_error("cannot drop " + path + " from the page cache: " + std::strerror(error));
}

}  // namespace

StepFileBytes measure_step_file_bytes(const std::function<void()>& step) {
  const auto mappings = model_mappings();
  if (mappings.empty()) throw std::runtime_error("the process maps no .gguf or .safetensors file");
  StepFileBytes out;
  std::set<std::string> files;
  for (const auto& m : mappings) {
    out.mapped += m.end - m.begin;
    advise(m, MADV_RANDOM, "MADV_RANDOM");
    advise(m, MADV_DONTNEED, "MADV_DONTNEED");
    files.insert(m.path);
  }
  for (const auto& path : files) drop_from_page_cache(path);
  std::uint64_t before = 0;
  for (const auto& m : mappings) before += cached_bytes(m);
  if (before > out.mapped / 100) {
    throw std::runtime_error(std::to_string(before) + " of the " + std::to_string(out.mapped) +
                             " bytes of the model's files stay in the page cache after dropping them (a tmpfs, or "
                             "another process mapping them): a step's reads cannot be counted there");
  }
  step();
  std::uint64_t after = 0;
  for (const auto& m : mappings) after += cached_bytes(m);
  out.read = after - std::min(after, before);
  for (const auto& m : mappings) advise(m, MADV_NORMAL, "MADV_NORMAL");
  return out;
}

}  // namespace testing_support
