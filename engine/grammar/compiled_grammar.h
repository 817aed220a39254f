#pragma once

// A compiled grammar: the byte automaton, its walker and the token mask cache against one vocabulary.
// Immutable once built and shared by every matcher (sequence) that asks for the same output.

#include <chrono>
#include <memory>
#include <stop_token>
#include <thread>

#include "engine/grammar/automaton_walker.h"
#include "engine/grammar/byte_automaton.h"
#include "engine/grammar/sorted_vocabulary.h"
#include "engine/grammar/structured_output.h"
#include "engine/grammar/token_mask_cache.h"

namespace engine::grammar {

class CompiledGrammar {
 public:
  // Precomputes the mask cache; throws GrammarError when `budget.time` runs out first.
  CompiledGrammar(ByteAutomaton automaton, std::shared_ptr<const SortedVocabulary> vocabulary,
                  TokenMaskCache::Clock::time_point deadline, const CompileBudget& budget)
      : automaton_(std::move(automaton)),
        walker_(automaton_),
        vocabulary_(std::move(vocabulary)),
        masks_(walker_, *vocabulary_, deadline, budget),
        completer_(masks_.has_deferred()
                       ? std::jthread([this](std::stop_token stop) { masks_.complete_deferred(stop); })
                       : std::jthread()) {}
  CompiledGrammar(const CompiledGrammar&) = delete;
  CompiledGrammar& operator=(const CompiledGrammar&) = delete;

  const ByteAutomaton& automaton() const { return automaton_; }
  const AutomatonWalker& walker() const { return walker_; }
  const SortedVocabulary& vocabulary() const { return *vocabulary_; }
  const TokenMaskCache& masks() const { return masks_; }

 private:
  ByteAutomaton automaton_;
  AutomatonWalker walker_;  // refers to automaton_
  std::shared_ptr<const SortedVocabulary> vocabulary_;
  TokenMaskCache masks_;
  // Computes the deferred copies' masks in the background; stopped and joined first when the grammar goes.
  std::jthread completer_;
};

}  // namespace engine::grammar
