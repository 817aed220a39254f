#pragma once

// Structured outputs: what a request asks its output to match (vLLM's structured_outputs kinds), compiled
// once per distinct request against the model's vocabulary into a byte-level grammar, and matched token by
// token. Knows nothing of HTTP; serverd turns request fields into a StructuredOutputSpec, the sampler reads
// the matcher through sampling::TokenConstraint.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/sampling/token_constraint.h"

namespace engine::grammar {

// An invalid schema, regex or grammar (what() names the position: "line 3, column 7" for grammars, the
// JSON pointer for schemas, the offset for regexes), an unsupported feature (named, with its path), or one
// over the compile budget (saying which budget).
class GrammarError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

struct StructuredOutputSpec {
  enum class Kind { JsonSchema, JsonObject, Regex, Choice, Grammar };
  Kind kind = Kind::JsonObject;
  std::string text;                               // JsonSchema: the schema's JSON; Regex; Grammar (GBNF)
  std::vector<std::string> choices;               // Choice
  std::optional<std::string> whitespace_pattern;  // JSON kinds: vLLM's guided_whitespace_pattern (a regex)
};

// The vocabulary as the grammar sees it: each token id's bytes as decoded (byte-level BPE tokens may end
// inside a UTF-8 character), which ids are special (never allowed inside a grammar) and which stop the
// sequence (allowed exactly when the grammar can end). Built once per model.
struct TokenVocabulary {
  std::vector<std::string> token_bytes;  // index: token id; size: the logits' width (padding ids empty)
  std::vector<bool> special;             // same size
  std::vector<std::int32_t> stop_ids;
};

struct CompileBudget {
  std::chrono::milliseconds time{5000};  // wall time of one compilation
  std::size_t max_states = 1 << 20;      // automaton size
  // Copies of a counted repetition differ from their group's first copy only on tokens longer than the
  // bytes they agree on. When at most `uncertain_long_tokens` tokens are longer, none is walked at compile
  // time: they are checked against the real stack when a mask is filled (a few microseconds). Otherwise the
  // copy walks them at compile time, unless more than `deferred_live_tokens` of them are live for the first
  // copy: such a copy costs nearly a whole vocabulary walk and is one of the last characters of a
  // length-bounded string, a position a generation reaches late if at all, so it is walked after compiling,
  // by a thread of the compiled grammar's own or by the first mask that needs it, whichever comes first.
  std::size_t uncertain_long_tokens = 512;
  std::size_t deferred_live_tokens = 4096;
};

class CompiledGrammar;  // immutable; shared by every sequence asking for the same thing

// Compiles specs against one vocabulary and caches the results by spec; thread-safe, so compilations run on
// a worker thread while the engine thread keeps stepping.
class GrammarCompiler {
 public:
  explicit GrammarCompiler(std::shared_ptr<const TokenVocabulary> vocabulary, CompileBudget budget = {});
  ~GrammarCompiler();
  GrammarCompiler(const GrammarCompiler&) = delete;
  GrammarCompiler& operator=(const GrammarCompiler&) = delete;

  // Throws GrammarError.
  std::shared_ptr<const CompiledGrammar> compile(const StructuredOutputSpec& spec);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// One sequence's position in a compiled grammar.
class GrammarMatcher final : public sampling::TokenConstraint {
 public:
  explicit GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar);
  ~GrammarMatcher() override;

  void fill_bitmask(std::span<std::uint32_t> bitmask) override;
  bool accept(std::int32_t token) override;
  bool is_terminated() const override;
  // The text accepted so far is a complete match (stop ids are allowed now).
  bool can_terminate() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace engine::grammar
