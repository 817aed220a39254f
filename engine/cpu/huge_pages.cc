#include "engine/cpu/huge_pages.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <new>

namespace engine::cpu {

namespace {
constexpr std::size_t kHugePage = std::size_t{2} << 20;
}  // namespace

void HugePagesFree::operator()(std::byte* p) const {
  std::free(p);
}

HugePagesBuffer allocate_huge_pages(std::size_t bytes) {
  const std::size_t size = std::max<std::size_t>(64, bytes);
  const std::size_t alignment = size >= kHugePage ? kHugePage : 64;
  void* p = nullptr;
  if (::posix_memalign(&p, alignment, size) != 0) throw std::bad_alloc();
  // Only the whole 2 MiB pages inside the buffer: a huge page over its tail would make the bytes past its end
  // resident too (up to 2 MiB a buffer, and the CPU backend holds one per weight matrix).
  if (alignment == kHugePage) ::madvise(p, size / kHugePage * kHugePage, MADV_HUGEPAGE);
  return HugePagesBuffer(static_cast<std::byte*>(p));
}

HugePagesArena::HugePagesArena(std::size_t chunk_bytes) : chunk_bytes_(std::max(chunk_bytes, kHugePage)) {}

std::byte* HugePagesArena::allocate(std::size_t bytes) {
  const std::size_t padded = (std::max<std::size_t>(bytes, 1) + 63) / 64 * 64;
  if (padded > chunk_bytes_ / 2) return chunks_.emplace_back(allocate_huge_pages(padded)).get();
  if (padded > left_) {
    next_ = chunks_.emplace_back(allocate_huge_pages(chunk_bytes_)).get();
    left_ = chunk_bytes_;
  }
  std::byte* p = next_;
  next_ += padded;
  left_ -= padded;
  return p;
}

}  // namespace engine::cpu
