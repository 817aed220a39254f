#include <stdexcept>
#include <string>

#include "engine/backend/backend.h"

namespace engine::backend {

void check_step_layout(const StepLayout& layout, const KvCacheShape& shape, std::string_view backend) {
  const std::string who = std::string(backend) + " backend: ";
  std::size_t tokens = 0;
  for (std::size_t s = 0; s < layout.sequences.size(); ++s) {
    const auto& seq = layout.sequences[s];
    const std::size_t end = seq.start_position + seq.num_tokens;
    if (seq.block_table.size() * shape.block_size < end) {
      throw std::invalid_argument(who + "sequence " + std::to_string(s) + " reaches position " + std::to_string(end) +
                                  " but its block table covers " +
                                  std::to_string(seq.block_table.size() * shape.block_size));
    }
    for (const auto block : seq.block_table) {
      if (block < 0 || static_cast<std::size_t>(block) >= shape.num_blocks) {
        throw std::invalid_argument(who + "block " + std::to_string(block) + " is outside the cache's " +
                                    std::to_string(shape.num_blocks) + " blocks");
      }
    }
    tokens += seq.num_tokens;
  }
  if (tokens != layout.tokens.size()) {
    throw std::invalid_argument(who + "the step lists " + std::to_string(layout.tokens.size()) +
                                " tokens but its sequences add up to " + std::to_string(tokens));
  }
  for (const auto row : layout.logit_rows) {
    if (row >= tokens) {
      throw std::invalid_argument(who + "logit row " + std::to_string(row) + " is past the step's " +
                                  std::to_string(tokens) + " tokens");
    }
  }
}

void check_attention_plan(const AttentionPlan& plan, const KvCacheShape& shape) {
  if (plan.layers.size() != shape.num_layers) {
    throw std::invalid_argument("an attention plan of " + std::to_string(plan.layers.size()) +
                                " layers for a cache of " + std::to_string(shape.num_layers));
  }
  for (std::size_t r = 0; r < plan.ropes.size(); ++r) {
    const std::size_t frequencies = plan.ropes[r].inv_freq.size();
    if (frequencies == 0 || frequencies > shape.head_dim / 2) {
      throw std::invalid_argument("rotary embedding " + std::to_string(r) + " has " + std::to_string(frequencies) +
                                  " frequencies; heads of " + std::to_string(shape.head_dim) + " take 1 to " +
                                  std::to_string(shape.head_dim / 2));
    }
    if (!(plan.ropes[r].attention_factor > 0)) {
      throw std::invalid_argument("rotary embedding " + std::to_string(r) + " has an attention factor of " +
                                  std::to_string(plan.ropes[r].attention_factor) + "; it must be positive");
    }
  }
  for (std::size_t i = 0; i < plan.layers.size(); ++i) {
    if (const auto rope = plan.layers[i].rope; rope && *rope >= plan.ropes.size()) {
      throw std::invalid_argument("layer " + std::to_string(i) + " uses rotary embedding " + std::to_string(*rope) +
                                  " of the plan's " + std::to_string(plan.ropes.size()));
    }
  }
}

}  // namespace engine::backend
