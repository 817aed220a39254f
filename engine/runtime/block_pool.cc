#include "engine/runtime/block_pool.h"

#include <stdexcept>
#include <string>

namespace engine::runtime {

BlockPool::BlockPool(std::size_t num_blocks) : ref_counts_(num_blocks, 0), free_slot_(num_blocks) {
  for (std::size_t i = 0; i < num_blocks; ++i) {
    free_slot_[i] = free_.insert(free_.end(), static_cast<std::int32_t>(i));
  }
}

bool BlockPool::allocate(std::size_t count, std::vector<std::int32_t>& table) {
  if (count > free_.size()) return false;
  for (std::size_t i = 0; i < count; ++i) {
    const auto block = free_.front();
    free_.pop_front();
    ref_counts_[static_cast<std::size_t>(block)] = 1;
    table.push_back(block);
  }
  return true;
}

void BlockPool::retain(std::int32_t block) {
  check(block);
  if (ref_counts_[static_cast<std::size_t>(block)] == 0) {
    throw std::logic_error("BlockPool: retain of free block " + std::to_string(block));
  }
  ++ref_counts_[static_cast<std::size_t>(block)];
}

void BlockPool::revive(std::int32_t block) {
  check(block);
  auto& count = ref_counts_[static_cast<std::size_t>(block)];
  if (count != 0) throw std::logic_error("BlockPool: revive of held block " + std::to_string(block));
  free_.erase(free_slot_[static_cast<std::size_t>(block)]);
  count = 1;
}

bool BlockPool::drop(std::int32_t block) {
  check(block);
  auto& count = ref_counts_[static_cast<std::size_t>(block)];
  if (count == 0) throw std::logic_error("BlockPool: release of free block " + std::to_string(block));
  return --count == 0;
}

void BlockPool::release(std::span<const std::int32_t> blocks) {
  for (const auto block : blocks) {
    if (drop(block)) free_slot_[static_cast<std::size_t>(block)] = free_.insert(free_.begin(), block);
  }
}

void BlockPool::release_last(std::int32_t block) {
  if (drop(block)) free_slot_[static_cast<std::size_t>(block)] = free_.insert(free_.end(), block);
}

std::uint32_t BlockPool::ref_count(std::int32_t block) const {
  check(block);
  return ref_counts_[static_cast<std::size_t>(block)];
}

void BlockPool::check(std::int32_t block) const {
  if (block < 0 || static_cast<std::size_t>(block) >= ref_counts_.size()) {
    throw std::out_of_range("BlockPool: block " + std::to_string(block) + " is outside the pool of " +
                            std::to_string(ref_counts_.size()));
  }
}

}  // namespace engine::runtime
