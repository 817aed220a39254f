// A scripted model: weights whose greedy reply to every prompt is one chosen sequence of tokens, so that
// end-to-end tests see the real binaries produce a tool call or a reasoning block (a random model never
// does). Every layer adds nothing to the residual stream (zero output projections), so the logits depend on
// the last token alone; the embedding and lm_head then form a chain: any token outside the script leads to
// the first piece, each piece to the next, the last piece to the end of the turn.

#include <algorithm>
#include <set>
#include <string>

#include "engine/model_writer/model_writer_internal.h"

namespace engine::tools::detail {

namespace {

// The lm_head weight of a chain link. The final RMSNorm turns a one-hot row into sqrt(hidden) (16 for the
// tiny preset) at its column, so the next piece's logit is about 32 and every other logit exactly 0: greedy
// and seeded sampling both follow the chain.
constexpr float kLinkWeight = 2.0f;

}  // namespace

ScriptPlan plan_script(const ModelWriterOptions& options, const TokenizerSpec& tokenizer,
                       const model::ModelConfig& config) {
  ScriptPlan plan;
  if (options.script.empty()) return plan;
  if (options.tokenizer_dir) {
    throw UsageError("a scripted model adds its pieces to the generated tokenizer; it cannot use --tokenizer-dir");
  }
  if (config.tie_word_embeddings) {
    throw UsageError("a scripted model needs its own lm_head; --arch " + std::string(arch_flag(config.architecture)) +
                     " ties it to the embedding (use qwen3 or llama)");
  }
  if (options.script.size() + 1 > config.hidden_size) {
    throw UsageError("a script of " + std::to_string(options.script.size()) + " pieces needs a hidden size above " +
                     std::to_string(options.script.size()) + "; the preset has " + std::to_string(config.hidden_size));
  }
  const auto first = tokenizer.tokens.size() - options.script.size();
  std::set<std::string> seen;
  for (std::size_t k = 0; k < options.script.size(); ++k) {
    const auto& piece = options.script[k];
    if (piece.empty()) throw UsageError("script piece " + std::to_string(k) + " is empty");
    if (!seen.insert(piece).second) {
      throw UsageError("script piece " + std::to_string(k) + " \"" + piece +
                       "\" appears twice; each piece is one token and leads to one next piece");
    }
    const auto existing = std::find(tokenizer.tokens.begin(), tokenizer.tokens.begin() + first, piece);
    if (existing != tokenizer.tokens.begin() + first) {
      throw UsageError("script piece " + std::to_string(k) + " \"" + piece + "\" is already token " +
                       std::to_string(existing - tokenizer.tokens.begin()) + " of the generated tokenizer");
    }
    plan.pieces.push_back(static_cast<std::int32_t>(first + k));
  }
  plan.end_id = tokenizer.eos_id;
  return plan;
}

void fill_script_rows(Init init, const ScriptPlan& plan, std::uint64_t first_row, std::uint64_t rows,
                      std::uint64_t cols, std::span<float> values) {
  std::fill(values.begin(), values.end(), 0.0f);
  if (init == Init::Zero) return;
  const std::uint64_t n = plan.pieces.size();
  const auto piece_index = [&](std::uint64_t token) -> std::uint64_t {
    const auto it = std::find(plan.pieces.begin(), plan.pieces.end(), static_cast<std::int32_t>(token));
    return it == plan.pieces.end() ? n : static_cast<std::uint64_t>(it - plan.pieces.begin());
  };
  for (std::uint64_t r = 0; r < rows; ++r) {
    const std::uint64_t token = first_row + r;
    float* row = values.data() + r * cols;
    if (init == Init::ScriptEmbedding) {
      row[piece_index(token)] = 1.0f;  // column k: piece k; column n: every token outside the script
      continue;
    }
    // Init::ScriptHead: the row of the token that follows each column's token.
    const std::uint64_t k = piece_index(token);
    if (k == 0) {
      row[n] = kLinkWeight;
    } else if (k < n) {
      row[k - 1] = kLinkWeight;
    } else if (static_cast<std::int32_t>(token) == plan.end_id) {
      row[n - 1] = kLinkWeight;
    }
  }
}

}  // namespace engine::tools::detail
