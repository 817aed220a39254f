#include "engine/grammar/sorted_vocabulary.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "engine/grammar/utf8_states.h"

namespace engine::grammar {

SortedVocabulary::SortedVocabulary(const TokenVocabulary& vocabulary) : vocab_size_(vocabulary.token_bytes.size()) {
  if (vocabulary.special.size() != vocab_size_) {
    throw GrammarError("token vocabulary: " + std::to_string(vocab_size_) + " token byte strings but " +
                       std::to_string(vocabulary.special.size()) + " special flags; they must be one per id");
  }
  for (const std::int32_t id : vocabulary.stop_ids) {
    if (id < 0 || static_cast<std::size_t>(id) >= vocab_size_) {
      throw GrammarError("token vocabulary: stop id " + std::to_string(id) + " is outside the vocabulary of " +
                         std::to_string(vocab_size_) + " ids");
    }
  }
  stop_ids_ = vocabulary.stop_ids;
  std::sort(stop_ids_.begin(), stop_ids_.end());
  stop_ids_.erase(std::unique(stop_ids_.begin(), stop_ids_.end()), stop_ids_.end());

  std::vector<std::int32_t> order;
  for (std::size_t id = 0; id < vocab_size_; ++id) {
    const auto token = static_cast<std::int32_t>(id);
    if (vocabulary.special[id] || vocabulary.token_bytes[id].empty() || is_stop(token)) continue;
    if (vocabulary.token_bytes[id].size() > UINT16_MAX) {
      throw GrammarError("token vocabulary: token " + std::to_string(id) + " has " +
                         std::to_string(vocabulary.token_bytes[id].size()) + " bytes, over the limit of " +
                         std::to_string(UINT16_MAX));
    }
    order.push_back(token);
  }
  const auto& text = vocabulary.token_bytes;
  // std::string compares bytes as unsigned char, which is the trie's order.
  std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
    return text[static_cast<std::size_t>(a)] < text[static_cast<std::size_t>(b)];
  });
  ids_ = order;
  offsets_.reserve(ids_.size() + 1);
  offsets_.push_back(0);
  producible_.assign(bitmask_words(), 0);
  sorted_of_id_.assign(vocab_size_, UINT32_MAX);
  for (std::size_t k = 0; k < ids_.size(); ++k) {
    const auto id = static_cast<std::size_t>(ids_[k]);
    bytes_ += text[id];
    offsets_.push_back(static_cast<std::uint32_t>(bytes_.size()));
    producible_[id / 32] |= std::uint32_t{1} << (id % 32);
    sorted_of_id_[id] = static_cast<std::uint32_t>(k);
  }

  // The trie: one node per distinct prefix, built from consecutive tokens' common prefixes.
  std::vector<std::uint32_t> path;  // trie node at each depth of the previous token
  std::string_view previous;
  for (std::uint32_t k = 0; k < ids_.size(); ++k) {
    const std::string_view current = bytes(k);
    std::size_t common = 0;
    while (common < previous.size() && common < current.size() && previous[common] == current[common]) ++common;
    for (std::size_t d = path.size(); d > common; --d)
      trie_[path[d - 1]].subtree_end = static_cast<std::uint32_t>(trie_.size());
    path.resize(common);
    for (std::size_t d = common; d < current.size(); ++d) {
      TrieNode node;
      node.byte = static_cast<std::uint8_t>(current[d]);
      node.depth = static_cast<std::uint16_t>(d + 1);
      node.token_begin = k;
      path.push_back(static_cast<std::uint32_t>(trie_.size()));
      trie_.push_back(node);
    }
    ++trie_[path.back()].token_count;
    previous = current;
  }
  for (const std::uint32_t node : path) trie_[node].subtree_end = static_cast<std::uint32_t>(trie_.size());
  TrieNode sentinel;
  sentinel.token_begin = static_cast<std::uint32_t>(ids_.size());
  sentinel.subtree_end = static_cast<std::uint32_t>(trie_.size() + 1);
  trie_.push_back(sentinel);

  // Preorder: a node's subtree follows it, so a backwards pass folds children into parents.
  subtree_max_depth_.assign(trie_.size(), 0);
  classes_below_.assign(trie_.size(), 0);
  utf8_states_below_.assign(trie_.size(), 0xFF);  // (a leaf's: nothing below, valid from anywhere)
  for (std::size_t i = 0; i + 1 < trie_.size(); ++i) subtree_max_depth_[i] = trie_[i].depth;
  for (std::size_t i = trie_.size() - 1; i-- > 0;) {
    for (std::uint32_t child = static_cast<std::uint32_t>(i) + 1; child < trie_[i].subtree_end;
         child = trie_[child].subtree_end) {
      subtree_max_depth_[i] = std::max(subtree_max_depth_[i], subtree_max_depth_[child]);
      classes_below_[i] |= static_cast<std::uint8_t>(byte_class_bit(trie_[child].byte) | classes_below_[child]);
      std::uint8_t valid = 0;
      for (std::uint8_t state = 0; state < kUtf8States; ++state) {
        const std::uint8_t next = utf8_next(state, trie_[child].byte);
        if (next != kUtf8Invalid && ((utf8_states_below_[child] >> next) & 1) != 0) valid |= 1u << state;
      }
      utf8_states_below_[i] &= valid;
    }
  }
  longest_first_.resize(ids_.size());
  std::iota(longest_first_.begin(), longest_first_.end(), 0u);
  std::stable_sort(longest_first_.begin(), longest_first_.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return bytes(a).size() > bytes(b).size(); });
  max_token_length_ = ids_.empty() ? 0 : bytes(longest_first_.front()).size();
}

bool SortedVocabulary::is_stop(std::int32_t id) const {
  return std::binary_search(stop_ids_.begin(), stop_ids_.end(), id);
}

std::string_view SortedVocabulary::id_bytes(std::int32_t id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= vocab_size_) return {};
  const std::uint32_t k = sorted_of_id_[static_cast<std::size_t>(id)];
  return k == UINT32_MAX ? std::string_view() : bytes(k);
}

std::size_t SortedVocabulary::longer_than(std::size_t length) const {
  const auto end = std::partition_point(longest_first_.begin(), longest_first_.end(),
                                        [&](std::uint32_t k) { return bytes(k).size() > length; });
  return static_cast<std::size_t>(end - longest_first_.begin());
}

}  // namespace engine::grammar
