#pragma once

// The ConstraintCompiler a loaded model serves structured outputs with: the engine's grammar compiler over
// the model's vocabulary (each id's bytes as its tokenizer decodes them, padded to the logits' width, with
// the model's stop ids), shared by every request. Each compiled constraint is one immutable grammar; every
// sequence asking for it gets a fresh matcher of its own.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/grammar/structured_output.h"
#include "engine/tokenizer/tokenizer.h"
#include "serverd/api/structured_outputs.h"

namespace serverd::api {

class GrammarConstraints final : public ConstraintCompiler {
 public:
  // Throws engine::grammar::GrammarError when the tokenizer cannot describe its tokens as bytes (no
  // decoder), has more ids than `logits_width`, or a stop id is outside it.
  GrammarConstraints(const engine::tokenizer::Tokenizer& tokenizer, std::size_t logits_width,
                     std::vector<std::int32_t> stop_ids);

  ConstraintFactory compile(const engine::grammar::StructuredOutputSpec& spec) override;

 private:
  engine::grammar::GrammarCompiler compiler_;
};

}  // namespace serverd::api
