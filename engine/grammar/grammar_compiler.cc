// GrammarCompiler: specs to compiled grammars against one vocabulary, cached by spec (least recently used
// first out), with concurrent requests for one spec sharing a single compilation.

#include <chrono>
#include <future>
#include <list>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "engine/grammar/compiled_grammar.h"
#include "engine/grammar/gbnf_parser.h"
#include "engine/grammar/rule_inliner.h"
#include "engine/grammar/spec_to_gbnf.h"
#include "engine/grammar/structured_output.h"

namespace engine::grammar {
namespace {

constexpr std::size_t kCachedGrammars = 64;

void append_field(std::string& key, std::string_view field) {
  key += std::to_string(field.size());
  key += ':';
  key += field;
}

std::string cache_key(const StructuredOutputSpec& spec) {
  std::string key(kind_name(spec.kind));
  append_field(key, spec.text);
  key += '[';
  for (const auto& choice : spec.choices) append_field(key, choice);
  key += ']';
  if (spec.whitespace_pattern) append_field(key, *spec.whitespace_pattern);
  return key;
}

}  // namespace

struct GrammarCompiler::State {
  std::shared_ptr<const TokenVocabulary> vocabulary;
  std::shared_ptr<const SortedVocabulary> sorted;
  CompileBudget budget;

  using Future = std::shared_future<std::shared_ptr<const CompiledGrammar>>;
  struct Entry {
    Future future;
    std::list<std::string>::iterator recency;
    std::uint64_t ticket = 0;  // which compilation filled it
  };
  std::uint64_t tickets = 0;
  std::mutex mutex;
  std::list<std::string> recency;  // most recently used first
  std::unordered_map<std::string, Entry> cache;

  std::shared_ptr<const CompiledGrammar> compile_uncached(const StructuredOutputSpec& spec) const {
    const auto deadline = TokenMaskCache::Clock::now() + budget.time;
    GrammarAst ast = parse_gbnf(spec_to_gbnf(spec));
    inline_small_rules(ast);
    ByteAutomaton automaton = build_automaton(ast, budget.max_states);
    return std::make_shared<const CompiledGrammar>(std::move(automaton), sorted, deadline, budget);
  }
};

GrammarCompiler::GrammarCompiler(std::shared_ptr<const TokenVocabulary> vocabulary, CompileBudget budget)
    : state_(std::make_unique<State>()) {
  if (!vocabulary) throw std::invalid_argument("GrammarCompiler: no token vocabulary given");
  state_->vocabulary = std::move(vocabulary);
  state_->sorted = std::make_shared<const SortedVocabulary>(*state_->vocabulary);
  state_->budget = budget;
}

GrammarCompiler::~GrammarCompiler() = default;

std::shared_ptr<const CompiledGrammar> GrammarCompiler::compile(const StructuredOutputSpec& spec) {
  State& s = *state_;
  const std::string key = cache_key(spec);
  std::promise<std::shared_ptr<const CompiledGrammar>> promise;
  State::Future future;
  std::uint64_t ticket = 0;
  {
    std::lock_guard lock(s.mutex);
    if (const auto it = s.cache.find(key); it != s.cache.end()) {
      s.recency.splice(s.recency.begin(), s.recency, it->second.recency);
      future = it->second.future;
    } else {
      future = promise.get_future().share();
      ticket = ++s.tickets;
      s.recency.push_front(key);
      s.cache.emplace(key, State::Entry{future, s.recency.begin(), ticket});
      while (s.cache.size() > kCachedGrammars) {
        s.cache.erase(s.recency.back());  // whoever waits on an evicted entry holds its own future
        s.recency.pop_back();
      }
    }
  }
  if (ticket != 0) {
    try {
      promise.set_value(s.compile_uncached(spec));
    } catch (...) {
      promise.set_exception(std::current_exception());
      // Failures are not cached: a budget that ran out on a busy machine may suffice next time.
      std::lock_guard lock(s.mutex);
      if (const auto it = s.cache.find(key); it != s.cache.end() && it->second.ticket == ticket) {
        s.recency.erase(it->second.recency);
        s.cache.erase(it);
      }
    }
  }
  return future.get();
}

}  // namespace engine::grammar
