#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace testing_support {

// A deterministic corpus for tokenizer conformance: hand-picked edge cases, then `generated` strings
// mixed from scripts, emoji, whitespace, numbers, code, punctuation, contractions, special-token text and
// unusual code points. Every string is valid UTF-8 (the references take JavaScript strings). Combining
// marks come from long-assigned blocks: the references normalize with different Unicode versions.
std::vector<std::string> tokenizer_corpus(std::size_t generated = 10000, std::uint64_t seed = 20250101);

// The corpus as a JSON array of strings.
std::string corpus_to_json(const std::vector<std::string>& corpus);

}  // namespace testing_support
