#pragma once

// A constraint that waits for the reasoning to end: every token is allowed until the generated tokens end
// with the reasoning's closing tag (e.g. Qwen3's "</think>"), then the inner constraint (the structured
// output) takes over, as vLLM's structured outputs do with a reasoning parser.

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/sampling/token_constraint.h"

namespace serverd::api {

class ReasoningGatedConstraint final : public engine::sampling::TokenConstraint {
 public:
  // `reasoning_end` must not be empty.
  ReasoningGatedConstraint(std::unique_ptr<engine::sampling::TokenConstraint> inner,
                           std::vector<std::int32_t> reasoning_end);

  void fill_bitmask(std::span<std::uint32_t> bitmask) override;
  bool accept(std::int32_t token) override;
  bool is_terminated() const override;

  bool reasoning_ended() const { return matched_ == reasoning_end_.size(); }

 private:
  std::unique_ptr<engine::sampling::TokenConstraint> inner_;
  std::vector<std::int32_t> reasoning_end_;
  std::size_t matched_ = 0;  // of reasoning_end_, the tokens the output ends with so far
};

}  // namespace serverd::api
