#pragma once

// A constraint's bitmask (token_constraint.h) applied to one row of logits: the tokens it forbids get -inf,
// so that greedy, top-k/top-p/min-p and the draw see only the allowed ones.

#include <cstddef>
#include <cstdint>
#include <span>

namespace engine::sampling {

// Sets logits[t] to -inf for every t whose bit is clear. `bitmask` holds at least bitmask_words(logits.size())
// words (bits past the logits are not read). Returns how many tokens the mask allows among the logits.
std::size_t apply_token_mask(std::span<float> logits, std::span<const std::uint32_t> bitmask);

// Whether the mask allows `token` (false outside it).
inline bool mask_allows(std::span<const std::uint32_t> bitmask, std::int32_t token) {
  const auto t = static_cast<std::size_t>(token);
  return token >= 0 && t / 32 < bitmask.size() && ((bitmask[t / 32] >> (t % 32)) & 1u) != 0;
}

}  // namespace engine::sampling
