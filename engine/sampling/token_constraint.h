#pragma once

// A restriction on which tokens a sequence may sample next: structured outputs (engine/grammar) implement
// it. The sampler asks for the allowed set before each draw, masks the rest out after logit bias and
// penalties and before temperature, and reports the token drawn. Knows nothing of grammars.

#include <cstddef>
#include <cstdint>
#include <span>

namespace engine::sampling {

// Words of a token bitmask over `vocab_size` tokens: bit (t % 32) of word (t / 32) is token t.
constexpr std::size_t bitmask_words(std::size_t vocab_size) {
  return (vocab_size + 31) / 32;
}

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // Writes the tokens allowed next into `bitmask` (bitmask_words(vocab_size) words, every word written).
  virtual void fill_bitmask(std::span<std::uint32_t> bitmask) = 0;
  // Advances past `token`. Returns false, and stays where it was, when the constraint does not allow it.
  virtual bool accept(std::int32_t token) = 0;
  // True once nothing more may follow (the grammar accepted a stop token, or can only stop).
  virtual bool is_terminated() const = 0;
};

}  // namespace engine::sampling
