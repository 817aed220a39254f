#pragma once

// Small vocabularies and mask helpers shared by the grammar engine's tests.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/grammar/structured_output.h"
#include "engine/sampling/token_constraint.h"

namespace grammar_test {

// Ids in order of `tokens`; `special` and `stops` name ids; `padding` empty ids follow.
inline std::shared_ptr<const engine::grammar::TokenVocabulary> vocabulary(std::vector<std::string> tokens,
                                                                          std::vector<std::int32_t> special = {},
                                                                          std::vector<std::int32_t> stops = {},
                                                                          std::size_t padding = 0) {
  auto v = std::make_shared<engine::grammar::TokenVocabulary>();
  v->token_bytes = std::move(tokens);
  v->token_bytes.resize(v->token_bytes.size() + padding);
  v->special.assign(v->token_bytes.size(), false);
  for (const std::int32_t id : special) v->special[static_cast<std::size_t>(id)] = true;
  v->stop_ids = std::move(stops);
  return v;
}

inline engine::grammar::StructuredOutputSpec gbnf(std::string text) {
  engine::grammar::StructuredOutputSpec spec;
  spec.kind = engine::grammar::StructuredOutputSpec::Kind::Grammar;
  spec.text = std::move(text);
  return spec;
}

inline std::vector<std::uint32_t> mask_of(engine::grammar::GrammarMatcher& matcher, std::size_t vocab_size) {
  std::vector<std::uint32_t> mask(engine::sampling::bitmask_words(vocab_size), 0xDEADBEEF);
  matcher.fill_bitmask(mask);
  return mask;
}

inline bool allows(const std::vector<std::uint32_t>& mask, std::int32_t id) {
  return (mask[static_cast<std::size_t>(id) / 32] >> (id % 32)) & 1;
}

// The ids the matcher allows next, ascending.
inline std::vector<std::int32_t> allowed(engine::grammar::GrammarMatcher& matcher, std::size_t vocab_size) {
  const auto mask = mask_of(matcher, vocab_size);
  std::vector<std::int32_t> ids;
  for (std::size_t id = 0; id < vocab_size; ++id) {
    if (allows(mask, static_cast<std::int32_t>(id))) ids.push_back(static_cast<std::int32_t>(id));
  }
  return ids;
}

}  // namespace grammar_test
