#include "engine/tokenizer/added_vocabulary.h"

#include <algorithm>

#include "engine/tokenizer/normalizer.h"
#include "engine/tokenizer/unicode.h"

namespace engine::tokenizer {

AddedVocabulary::Trie::Trie() : nodes_(1) {}

std::int32_t AddedVocabulary::Trie::child(std::int32_t node, unsigned char byte) const {
  const auto& children = nodes_[static_cast<std::size_t>(node)].children;
  const auto it = std::lower_bound(children.begin(), children.end(), byte,
                                   [](const auto& edge, unsigned char b) { return edge.first < b; });
  return it != children.end() && it->first == byte ? it->second : -1;
}

void AddedVocabulary::Trie::insert(std::string_view key, std::int32_t value) {
  std::int32_t node = 0;
  for (const char c : key) {
    const auto byte = static_cast<unsigned char>(c);
    std::int32_t next = child(node, byte);
    if (next < 0) {
      next = static_cast<std::int32_t>(nodes_.size());
      auto& children = nodes_[static_cast<std::size_t>(node)].children;
      children.insert(std::lower_bound(children.begin(), children.end(), byte,
                                       [](const auto& edge, unsigned char b) { return edge.first < b; }),
                      {byte, next});
      nodes_.emplace_back();
    }
    node = next;
  }
  // The first token with a given content keeps it.
  if (nodes_[static_cast<std::size_t>(node)].value < 0) nodes_[static_cast<std::size_t>(node)].value = value;
  if (!key.empty()) first_byte_[static_cast<unsigned char>(key.front())] = true;
}

bool AddedVocabulary::Trie::find(std::string_view text, std::size_t from, std::size_t& start, std::size_t& end,
                                 std::int32_t& value) const {
  for (std::size_t pos = from; pos < text.size(); ++pos) {
    if (!first_byte_[static_cast<unsigned char>(text[pos])]) continue;
    std::int32_t node = 0;
    std::int32_t best = -1;
    std::size_t best_end = 0;
    for (std::size_t i = pos; i < text.size(); ++i) {
      node = child(node, static_cast<unsigned char>(text[i]));
      if (node < 0) break;
      if (const auto v = nodes_[static_cast<std::size_t>(node)].value; v >= 0) {
        best = v;
        best_end = i + 1;
      }
    }
    if (best >= 0) {
      start = pos;
      end = best_end;
      value = best;
      return true;
    }
  }
  return false;
}

AddedVocabulary::AddedVocabulary(std::vector<AddedToken> tokens, const Normalizer* normalizer)
    : tokens_(std::move(tokens)),
      word_char_(Regex::from_oniguruma(R"([\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}])")) {
  // The reference builds its matchers from the special tokens first, then the others, each by id; that
  // order decides only between tokens with the same content.
  std::vector<std::size_t> order(tokens_.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (tokens_[a].special != tokens_[b].special) return tokens_[a].special;
    return tokens_[a].id < tokens_[b].id;
  });
  for (const std::size_t i : order) {
    const auto& token = tokens_[i];
    if (token.content.empty()) continue;
    if (!token.normalized) {
      raw_.insert(token.content, static_cast<std::int32_t>(i));
      continue;
    }
    std::string key = token.content;
    if (normalizer != nullptr) normalizer->normalize(key);
    if (!key.empty()) normalized_.insert(key, static_cast<std::int32_t>(i));
  }
}

bool AddedVocabulary::word_char_before(std::string_view text, std::size_t pos) const {
  std::size_t start = pos - 1;
  while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
  return word_char_.matches_at(text, start);
}

bool AddedVocabulary::word_char_at(std::string_view text, std::size_t pos) const {
  return word_char_.matches_at(text, pos);
}

void AddedVocabulary::split(std::string_view text, bool normalized_pass,
                            const std::function<void(std::string_view)>& on_text,
                            const std::function<void(std::int32_t)>& on_token) const {
  const Trie& trie = normalized_pass ? normalized_ : raw_;
  if (trie.empty()) {
    if (!text.empty()) on_text(text);
    return;
  }
  std::size_t emitted = 0;  // text before this is handed out
  std::size_t search = 0;
  std::size_t match_start, match_end;
  std::int32_t index;
  while (trie.find(text, search, match_start, match_end, index)) {
    // The scan goes on after the match itself, even when the token is refused or strips whitespace.
    search = match_end;
    const AddedToken& token = tokens_[static_cast<std::size_t>(index)];
    if (token.single_word) {
      const bool space_before = match_start == 0 || !word_char_before(text, match_start);
      const bool space_after = match_end == text.size() || !word_char_at(text, match_end);
      if (!space_before || !space_after) continue;
    }
    std::size_t start = match_start, stop = match_end;
    if (token.lstrip) {
      while (start > 0) {
        std::size_t previous = start - 1;
        while (previous > 0 && (static_cast<unsigned char>(text[previous]) & 0xC0) == 0x80) --previous;
        std::size_t pos = previous;
        if (!unicode::is_white_space(unicode::next_char(text, pos))) break;
        start = previous;
      }
      start = std::max(start, emitted);  // whitespace an earlier token already took stays with it
    }
    if (token.rstrip) {
      while (stop < text.size()) {
        std::size_t pos = stop;
        if (!unicode::is_white_space(unicode::next_char(text, pos))) break;
        stop = pos;
      }
    }
    if (emitted < start) on_text(text.substr(emitted, start - emitted));
    on_token(token.id);
    emitted = stop;
  }
  if (emitted < text.size()) on_text(text.substr(emitted));
}

}  // namespace engine::tokenizer
