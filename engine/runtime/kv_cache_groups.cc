#include "engine/runtime/kv_cache_groups.h"

#include <algorithm>
#include <map>

namespace engine::runtime {

std::vector<backend::KvCacheGroup> kv_cache_groups(const backend::AttentionPlan& plan) {
  std::map<std::size_t, std::vector<std::size_t>> kinds;  // window (0 first) -> its layers, in order
  for (std::size_t layer = 0; layer < plan.layers.size(); ++layer) {
    kinds[plan.layers[layer].sliding_window].push_back(layer);
  }
  std::size_t fewest = plan.layers.size(), most = 0;
  for (const auto& [window, layers] : kinds) {
    fewest = std::min(fewest, layers.size());
    most = std::max(most, layers.size());
  }
  const std::size_t group_size = 4 * most < 5 * fewest ? most : fewest;
  std::vector<backend::KvCacheGroup> groups;
  for (const auto& [window, layers] : kinds) {
    for (std::size_t first = 0; first < layers.size(); first += group_size) {
      const auto begin = layers.begin() + static_cast<std::ptrdiff_t>(first);
      const auto end = layers.begin() + static_cast<std::ptrdiff_t>(std::min(first + group_size, layers.size()));
      groups.push_back({window, std::vector<std::size_t>(begin, end)});
    }
  }
  return groups;
}

std::size_t blocks_for_sequence(std::span<const backend::KvCacheGroup> groups, std::size_t block_size,
                                std::size_t positions, std::size_t step_tokens) {
  const auto blocks_of = [&](std::size_t n) { return (n + block_size - 1) / block_size; };
  const std::size_t all = blocks_of(positions);
  const std::size_t step = step_tokens == 0 ? positions : step_tokens;
  std::size_t total = 0;
  for (const auto& g : groups) {
    // A step's queries from p on read back to p + 1 - window: window - 1 positions before its tokens, which
    // may start mid-block (one more block).
    total += g.sliding_window == 0 ? all : std::min(all, blocks_of(g.sliding_window - 1 + step) + 1);
  }
  return total;
}

std::size_t positions_in_blocks(std::span<const backend::KvCacheGroup> groups, std::size_t block_size,
                                std::size_t blocks, std::size_t step_tokens, std::size_t limit) {
  // blocks_for_sequence grows with positions: the last count that fits, by bisection.
  std::size_t lo = 0, hi = limit;
  while (lo < hi) {
    const std::size_t mid = lo + (hi - lo + 1) / 2;
    if (blocks_for_sequence(groups, block_size, mid, step_tokens) <= blocks) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

std::vector<std::size_t> group_windows(std::span<const backend::KvCacheGroup> groups) {
  std::vector<std::size_t> windows;
  for (const auto& g : groups) windows.push_back(g.sliding_window);
  return windows;
}

}  // namespace engine::runtime
