#pragma once

// Generates constrained outputs the way serverd does: every sequence has its own SequenceSampler holding a
// GrammarMatcher, and many sequences step together through Engine::step_and_sample (prefills of newly
// admitted sequences mixed with the others' decodes), each until its matcher terminates or max_tokens.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/grammar/structured_output.h"
#include "engine/runtime/engine.h"
#include "engine/sampling/sampler.h"

namespace testing_support {

struct ConstrainedRequest {
  std::shared_ptr<const engine::grammar::CompiledGrammar> grammar;  // shared by requests asking the same
  engine::sampling::SamplingParams params;
  std::vector<std::int32_t> prompt;  // not empty
};

struct ConstrainedOutput {
  std::vector<std::int32_t> tokens;  // every generated token, the stop token included when one ended it
  std::string bytes;                 // the generated tokens' bytes (the vocabulary's), stop tokens left out
  bool terminated = false;           // the matcher terminated; false: max_tokens came first
  bool ended_by_stop = false;        // terminated by accepting a stop id (else: the grammar could only end)
};

struct GenerationLimits {
  std::size_t max_batch = 64;    // sequences stepped together
  std::size_t max_tokens = 512;  // generated tokens per sequence
};

// Runs every request to its end and returns the outputs in request order. Throws std::runtime_error when
// the KV cache cannot hold the batch (raise the engine's kv_cache_bytes or lower max_batch); the sampler's
// SamplingError propagates (a constraint that allows no token is the grammar engine's bug).
std::vector<ConstrainedOutput> generate_constrained(engine::runtime::Engine& engine,
                                                    const engine::grammar::TokenVocabulary& vocabulary,
                                                    std::span<const ConstrainedRequest> requests,
                                                    const GenerationLimits& limits);

}  // namespace testing_support
