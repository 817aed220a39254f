#pragma once

// How the KV cache's blocks are shared out among a model's layers (vLLM's hybrid allocator): layers that keep
// the same positions (full attention, or one sliding window) are split into groups of equal size, so that
// every block has room for one group's layers and any group may take any free block. And what a sequence
// costs in blocks under that split, which sizes the cache and max_model_len.

#include <cstddef>
#include <span>
#include <vector>

#include "engine/backend/backend.h"

namespace engine::runtime {

// The groups for a plan: one of every layer when all keep the same positions; else each kind's layers in
// groups of the smallest kind's count (of the largest's when no kind has a quarter more layers than another,
// to waste fewer slots), the last of a kind holding fewer where they do not divide evenly. Full attention
// first, then by window; layers in order within each.
std::vector<backend::KvCacheGroup> kv_cache_groups(const backend::AttentionPlan& plan);

// The most blocks a sequence of `positions` positions holds at once, when a step computes at most
// `step_tokens` of its positions (0: all of them at once): every block in a full group; in a sliding group
// those its window and a step's tokens reach.
std::size_t blocks_for_sequence(std::span<const backend::KvCacheGroup> groups, std::size_t block_size,
                                std::size_t positions, std::size_t step_tokens);

// The longest sequence `blocks` blocks hold (blocks_for_sequence at most `blocks`), up to `limit` positions.
std::size_t positions_in_blocks(std::span<const backend::KvCacheGroup> groups, std::size_t block_size,
                                std::size_t blocks, std::size_t step_tokens, std::size_t limit);

// The groups' windows, for KvCacheManager.
std::vector<std::size_t> group_windows(std::span<const backend::KvCacheGroup> groups);

}  // namespace engine::runtime
