#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <span>
#include <vector>

namespace engine::runtime {

// The free list and reference counts of the KV cache's blocks. A block shared by several sequences (a
// common prompt prefix) returns to the free list when the last of them releases it. Blocks released plainly
// are reused first (warm in the processor's caches); blocks released with release_last() (the prefix
// cache's) are reused only after every other free block, oldest first, so free blocks double as the
// cache's least-recently-used order. Not thread-safe: the scheduler's step loop owns it.
class BlockPool {
 public:
  explicit BlockPool(std::size_t num_blocks);

  std::size_t num_blocks() const { return ref_counts_.size(); }
  std::size_t num_free() const { return free_.size(); }

  // Appends `count` free blocks (reference count 1) to `table`; all or nothing. False when too few are free.
  bool allocate(std::size_t count, std::vector<std::int32_t>& table);
  // One more holder of an allocated block (a sequence reusing a cached prefix).
  void retain(std::int32_t block);
  // Takes a free block back out of the free list for one holder (a cached block nobody held).
  void revive(std::int32_t block);
  // Drops one holder of each block; blocks nobody holds are free again, reused first.
  void release(std::span<const std::int32_t> blocks);
  // Drops one holder of `block`; when nobody holds it, it is free again but reused after every other.
  void release_last(std::int32_t block);
  std::uint32_t ref_count(std::int32_t block) const;

 private:
  void check(std::int32_t block) const;
  // Drops one holder; true when the block has none left.
  bool drop(std::int32_t block);

  std::vector<std::uint32_t> ref_counts_;
  std::list<std::int32_t> free_;                              // front: handed out next
  std::vector<std::list<std::int32_t>::iterator> free_slot_;  // where each free block sits in free_
};

}  // namespace engine::runtime
