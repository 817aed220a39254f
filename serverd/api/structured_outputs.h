#pragma once

// Structured outputs between a parsed request and its sequences: the model's ConstraintCompiler compiles the
// request's constraint on the request's own thread (a slow schema never stalls the engine thread), a
// GrammarError becomes a 400 naming the field, and every sequence of the request gets its own constraint
// from the one compilation (n > 1 included). With a reasoning parser, the constraint starts once the
// reasoning has ended (vLLM's behaviour).

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "engine/grammar/structured_output.h"
#include "engine/sampling/token_constraint.h"
#include "serverd/api/structured_output_request.h"

namespace serverd::api {

struct ModelInfo;

// Makes one sequence's constraint; each call a fresh one.
using ConstraintFactory = std::function<std::unique_ptr<engine::sampling::TokenConstraint>()>;

// Compiles constraints for one loaded model (its vocabulary); thread-safe.
class ConstraintCompiler {
 public:
  virtual ~ConstraintCompiler() = default;
  // Throws engine::grammar::GrammarError for an invalid, unsupported or over-budget constraint.
  virtual ConstraintFactory compile(const engine::grammar::StructuredOutputSpec& spec) = 0;
};

// The request's constraint compiled for `model`; empty when it asks for none. Throws ApiException (400):
// the compiler's message for a GrammarError, or that the model serves no structured outputs.
ConstraintFactory compile_constraint(const std::optional<StructuredOutputRequest>& request, const ModelInfo& model);

// `inner`'s constraints, each starting once `reasoning_end` (the tokens of the reasoning's closing tag) has
// been generated: until then every token is allowed. Empty `inner` stays empty.
ConstraintFactory after_reasoning(ConstraintFactory inner, std::vector<std::int32_t> reasoning_end);

}  // namespace serverd::api
