#include "serverd/api/grammar_constraints.h"

#include <utility>

#include "engine/grammar/token_vocabulary.h"

namespace serverd::api {

GrammarConstraints::GrammarConstraints(const engine::tokenizer::Tokenizer& tokenizer, std::size_t logits_width,
                                       std::vector<std::int32_t> stop_ids)
    : compiler_(std::make_shared<const engine::grammar::TokenVocabulary>(
          engine::grammar::vocabulary_from_tokenizer(tokenizer, logits_width, std::move(stop_ids)))) {}

ConstraintFactory GrammarConstraints::compile(const engine::grammar::StructuredOutputSpec& spec) {
  // The compiler caches by spec, so a schema sent again is not compiled again.
  std::shared_ptr<const engine::grammar::CompiledGrammar> grammar = compiler_.compile(spec);
  return [grammar = std::move(grammar)]() -> std::unique_ptr<engine::sampling::TokenConstraint> {
    return std::make_unique<engine::grammar::GrammarMatcher>(grammar);
  };
}

}  // namespace serverd::api
