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
  const std::size_t rounded = (size + alignment - 1) / alignment * alignment;
  auto* p = static_cast<std::byte*>(std::aligned_alloc(alignment, rounded));
  if (p == nullptr) throw std::bad_alloc();
  if (alignment == kHugePage) ::madvise(p, rounded, MADV_HUGEPAGE);
  return HugePagesBuffer(p);
}

}  // namespace engine::cpu
