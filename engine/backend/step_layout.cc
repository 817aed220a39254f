#include <algorithm>
#include <stdexcept>
#include <string>

#include "engine/backend/backend.h"

namespace engine::backend {

std::size_t KvCacheShape::layers_per_block() const {
  std::size_t most = groups.empty() ? num_layers : 0;
  for (const auto& g : groups) most = std::max(most, g.layers.size());
  return most;
}

KvCacheShape::LayerPlace KvCacheShape::place(std::size_t layer) const {
  if (groups.empty()) return {0, layer};
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const auto& layers = groups[g].layers;
    if (const auto it = std::find(layers.begin(), layers.end(), layer); it != layers.end()) {
      return {g, static_cast<std::size_t>(it - layers.begin())};
    }
  }
  throw std::invalid_argument("layer " + std::to_string(layer) + " is in none of the KV cache's " +
                              std::to_string(groups.size()) + " groups");
}

bool KvCacheShape::has_null_block() const {
  return std::any_of(groups.begin(), groups.end(), [](const KvCacheGroup& g) { return g.sliding_window != 0; });
}

void check_step_layout(const StepLayout& layout, const KvCacheShape& shape, std::string_view backend) {
  const std::string who = std::string(backend) + " backend: ";
  std::size_t tokens = 0;
  for (std::size_t s = 0; s < layout.sequences.size(); ++s) {
    const auto& seq = layout.sequences[s];
    const std::size_t end = seq.start_position + seq.num_tokens;
    if (seq.block_tables.size() != shape.num_groups()) {
      throw std::invalid_argument(who + "sequence " + std::to_string(s) + " has " +
                                  std::to_string(seq.block_tables.size()) + " block tables for the cache's " +
                                  std::to_string(shape.num_groups()) + " groups");
    }
    for (std::size_t g = 0; g < seq.block_tables.size(); ++g) {
      const auto table = seq.block_tables[g];
      if (table.size() * shape.block_size < end) {
        throw std::invalid_argument(who + "sequence " + std::to_string(s) + " reaches position " + std::to_string(end) +
                                    " but its block table covers " + std::to_string(table.size() * shape.block_size));
      }
      for (const auto block : table) {
        if (block < 0 || static_cast<std::size_t>(block) >= shape.num_blocks) {
          throw std::invalid_argument(who + "block " + std::to_string(block) + " is outside the cache's " +
                                      std::to_string(shape.num_blocks) + " blocks");
        }
      }
      if (!shape.has_null_block()) continue;
      // The positions the step's queries read: from the first one's window (all of them without a window).
      const std::size_t window = shape.groups[g].sliding_window;
      const std::size_t first = window == 0 || seq.start_position < window ? 0 : seq.start_position + 1 - window;
      for (std::size_t b = first / shape.block_size; b * shape.block_size < end; ++b) {
        if (table[b] == kNullBlock) {
          throw std::invalid_argument(who + "sequence " + std::to_string(s) + " reads positions " +
                                      std::to_string(first) + " to " + std::to_string(end - 1) + " of group " +
                                      std::to_string(g) + " but block " + std::to_string(b) +
                                      " of its table is the null block");
        }
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

namespace {

// Every layer in one group, and in one that keeps what it reads: a full-attention layer in a full group, a
// sliding one in a full group or one whose window is at least its own.
void check_groups(const AttentionPlan& plan, const KvCacheShape& shape) {
  if (shape.groups.empty()) return;
  std::vector<int> seen(shape.num_layers, 0);
  for (std::size_t g = 0; g < shape.groups.size(); ++g) {
    for (const auto layer : shape.groups[g].layers) {
      if (layer >= shape.num_layers || seen[layer]++ != 0) {
        throw std::invalid_argument("KV cache group " + std::to_string(g) + " names layer " + std::to_string(layer) +
                                    (layer >= shape.num_layers ? " of a model of " + std::to_string(shape.num_layers)
                                                               : std::string(", which another group holds")));
      }
      const std::size_t keeps = shape.groups[g].sliding_window, reads = plan.layers[layer].sliding_window;
      if (keeps != 0 && (reads == 0 || reads > keeps)) {
        throw std::invalid_argument(
            "layer " + std::to_string(layer) + " reads " +
            (reads == 0 ? std::string("every position") : std::to_string(reads) + " positions") +
            " but KV cache group " + std::to_string(g) + " keeps " + std::to_string(keeps));
      }
    }
  }
  if (const auto it = std::find(seen.begin(), seen.end(), 0); it != seen.end()) {
    throw std::invalid_argument("layer " + std::to_string(it - seen.begin()) + " is in none of the KV cache's " +
                                std::to_string(shape.groups.size()) + " groups");
  }
}

}  // namespace

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
  check_groups(plan, shape);
  for (std::size_t i = 0; i < plan.layers.size(); ++i) {
    if (const auto rope = plan.layers[i].rope; rope && *rope >= plan.ropes.size()) {
      throw std::invalid_argument("layer " + std::to_string(i) + " uses rotary embedding " + std::to_string(*rope) +
                                  " of the plan's " + std::to_string(plan.ropes.size()));
    }
  }
}

}  // namespace engine::backend
