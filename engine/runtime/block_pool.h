#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace engine::runtime {

// The free list and reference counts of the KV cache's blocks. A block shared by several sequences (a
// common prompt prefix) returns to the free list when the last of them releases it. Not thread-safe: the
// scheduler's step loop owns it.
class BlockPool {
 public:
  explicit BlockPool(std::size_t num_blocks);

  std::size_t num_blocks() const { return ref_counts_.size(); }
  std::size_t num_free() const { return free_.size(); }

  // Appends `count` fresh blocks (reference count 1) to `table`; all or nothing. False when too few are free.
  bool allocate(std::size_t count, std::vector<std::int32_t>& table);
  // One more holder of an allocated block (a sequence reusing a cached prefix).
  void retain(std::int32_t block);
  // Drops one holder of each block; blocks nobody holds are free again.
  void release(std::span<const std::int32_t> blocks);
  std::uint32_t ref_count(std::int32_t block) const;

 private:
  void check(std::int32_t block) const;

  std::vector<std::uint32_t> ref_counts_;
  std::vector<std::int32_t> free_;  // a stack: recently freed blocks are reused first (warm in cache)
};

}  // namespace engine::runtime
