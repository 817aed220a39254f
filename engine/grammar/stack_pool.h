#pragma once

// Persistent matcher stacks. A position in the grammar is a stack of automaton nodes: the node on top,
// below it the nodes to return to when each entered rule ends. Positions share their lower frames, and
// frames are interned (one id per (node, parent)), so equal stacks have equal ids and a set of positions
// is deduplicated by comparing two integers. Ambiguous grammars keep several positions at once.

#include <cstdint>
#include <vector>

namespace engine::grammar {

// One position: `node` on top of the frames ending at `parent` (a frame id, or kRoot / kUnknown).
struct StackElement {
  std::uint32_t node = 0;
  std::uint32_t parent = 0;
  std::uint64_t key() const { return (std::uint64_t{node} << 32) | parent; }
  friend bool operator==(const StackElement& a, const StackElement& b) { return a.key() == b.key(); }
};

class StackPool {
 public:
  static constexpr std::uint32_t kRoot = UINT32_MAX;         // nothing below: the grammar ends with this frame
  static constexpr std::uint32_t kUnknown = UINT32_MAX - 1;  // some context nobody knows yet (mask cache)

  struct Frame {
    std::uint32_t node = 0;  // where to continue when the rule above ends
    std::uint32_t parent = 0;
  };

  StackPool() { clear(); }

  const Frame& frame(std::uint32_t id) const { return frames_[id]; }
  std::size_t size() const { return frames_.size(); }

  std::uint32_t intern(std::uint32_t node, std::uint32_t parent) {
    const std::uint64_t key = (std::uint64_t{node} << 32) | parent;
    std::size_t slot = hash(key);
    while (true) {
      const std::uint32_t id = table_[slot];
      if (id == kEmpty) break;
      if (frames_[id].node == node && frames_[id].parent == parent) return id;
      slot = (slot + 1) & (table_.size() - 1);
    }
    const auto id = static_cast<std::uint32_t>(frames_.size());
    frames_.push_back({node, parent});
    table_[slot] = id;
    if (frames_.size() * 2 > table_.size()) grow();
    return id;
  }

  void clear() {
    frames_.clear();
    table_.assign(kInitialSlots, kEmpty);
  }

 private:
  static constexpr std::uint32_t kEmpty = UINT32_MAX;
  static constexpr std::size_t kInitialSlots = 64;

  std::size_t hash(std::uint64_t key) const {
    return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> 32) & (table_.size() - 1);
  }

  void grow() {
    table_.assign(table_.size() * 2, kEmpty);
    for (std::uint32_t id = 0; id < frames_.size(); ++id) {
      std::size_t slot = hash((std::uint64_t{frames_[id].node} << 32) | frames_[id].parent);
      while (table_[slot] != kEmpty) slot = (slot + 1) & (table_.size() - 1);
      table_[slot] = id;
    }
  }

  std::vector<Frame> frames_;
  std::vector<std::uint32_t> table_;  // open addressing, linear probing; frame ids
};

}  // namespace engine::grammar
