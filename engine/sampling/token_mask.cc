#include "engine/sampling/token_mask.h"

#include <bit>
#include <limits>
#include <stdexcept>
#include <string>

#include "engine/sampling/token_constraint.h"

namespace engine::sampling {

std::size_t apply_token_mask(std::span<float> logits, std::span<const std::uint32_t> bitmask) {
  const std::size_t words = bitmask_words(logits.size());
  if (bitmask.size() < words) {
    throw std::invalid_argument("a token bitmask of " + std::to_string(bitmask.size()) + " words cannot cover " +
                                std::to_string(logits.size()) + " logits (" + std::to_string(words) + " needed)");
  }
  constexpr float kForbidden = -std::numeric_limits<float>::infinity();
  std::size_t allowed = 0;
  for (std::size_t w = 0; w < words; ++w) {
    const std::size_t first = w * 32;
    const std::size_t bits = std::min<std::size_t>(32, logits.size() - first);
    // Bits past the logits count for nothing.
    const std::uint32_t in_range = bits == 32 ? ~0u : (1u << bits) - 1u;
    const std::uint32_t word = bitmask[w] & in_range;
    allowed += static_cast<std::size_t>(std::popcount(word));
    if (word == in_range) continue;  // the common case inside a grammar's open strings: nothing to clear
    for (std::size_t b = 0; b < bits; ++b) {
      if (((word >> b) & 1u) == 0) logits[first + b] = kForbidden;
    }
  }
  return allowed;
}

}  // namespace engine::sampling
