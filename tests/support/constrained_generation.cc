#include "tests/support/constrained_generation.h"

#include <algorithm>
#include <stdexcept>

namespace testing_support {
namespace {

// One sequence in flight.
struct Running {
  std::size_t request = 0;
  engine::runtime::SequenceCache cache;
  engine::sampling::SequenceSampler sampler;
  std::int32_t last = 0;  // the token the next step feeds (once the prompt is in)

  Running(std::size_t index, const ConstrainedRequest& r)
      : request(index), sampler(r.params, r.prompt, std::make_unique<engine::grammar::GrammarMatcher>(r.grammar)) {}
};

bool is_stop(const engine::grammar::TokenVocabulary& vocabulary, std::int32_t token) {
  return std::find(vocabulary.stop_ids.begin(), vocabulary.stop_ids.end(), token) != vocabulary.stop_ids.end();
}

}  // namespace

std::vector<ConstrainedOutput> generate_constrained(engine::runtime::Engine& engine,
                                                    const engine::grammar::TokenVocabulary& vocabulary,
                                                    std::span<const ConstrainedRequest> requests,
                                                    const GenerationLimits& limits) {
  std::vector<ConstrainedOutput> outputs(requests.size());
  std::vector<std::unique_ptr<Running>> running;
  std::size_t next = 0;
  std::vector<engine::runtime::StepInput> inputs;
  std::vector<engine::sampling::SequenceSampler*> samplers;
  std::vector<engine::sampling::SampledToken> sampled;
  while (next < requests.size() || !running.empty()) {
    // Admit new sequences up to the batch size: their prompts are prefilled in the same step as the others'
    // decodes, as the scheduler mixes them.
    inputs.clear();
    samplers.clear();
    while (running.size() < limits.max_batch && next < requests.size()) {
      if (requests[next].prompt.empty()) throw std::invalid_argument("generate_constrained: an empty prompt");
      running.push_back(std::make_unique<Running>(next, requests[next]));
      ++next;
    }
    for (const auto& seq : running) {
      const bool prefill = seq->cache.cached == 0;
      const std::span<const std::int32_t> tokens =
          prefill ? std::span<const std::int32_t>(requests[seq->request].prompt) : std::span(&seq->last, 1);
      if (!engine.reserve(seq->cache, seq->cache.cached + tokens.size())) {
        throw std::runtime_error("generate_constrained: the KV cache of " +
                                 std::to_string(engine.kv_cache().num_blocks()) + " blocks cannot hold " +
                                 std::to_string(running.size()) +
                                 " sequences; raise EngineOptions::kv_cache_bytes or lower max_batch");
      }
      inputs.push_back({&seq->cache, tokens});
      samplers.push_back(&seq->sampler);
    }
    engine.step_and_sample(inputs, samplers, sampled);
    for (std::size_t i = 0; i < running.size(); ++i) {
      Running& seq = *running[i];
      ConstrainedOutput& out = outputs[seq.request];
      const std::int32_t token = sampled[i].token;
      out.tokens.push_back(token);
      const bool stop = is_stop(vocabulary, token);
      if (!stop) out.bytes += vocabulary.token_bytes[static_cast<std::size_t>(token)];
      seq.last = token;
      if (seq.sampler.constraint_terminated()) {
        out.terminated = true;
        out.ended_by_stop = stop;
      }
    }
    // Finished sequences give their blocks back and leave the batch.
    std::erase_if(running, [&](const std::unique_ptr<Running>& seq) {
      const ConstrainedOutput& out = outputs[seq->request];
      const bool done = out.terminated || out.tokens.size() >= limits.max_tokens;
      if (done) engine.release(seq->cache);
      return done;
    });
  }
  return outputs;
}

}  // namespace testing_support
