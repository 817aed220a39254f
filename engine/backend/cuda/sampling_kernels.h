#pragma once

// Sampling on the GPU, one block per logit row: logit bias and penalties, greedy argmax, or temperature,
// min-p, top-k and top-p over the whole vocabulary followed by a draw; and the raw distribution's
// log-probabilities. The same choices as engine/sampling's SequenceSampler, made where the logits are.

#include <cuda_runtime.h>

#include <cstdint>

namespace engine::cuda {

inline constexpr int kMaxTopLogprobs = 20;

struct SamplingRow {
  float temperature = 1.0f;  // 0: greedy
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  int top_k = 0;
  int logprobs = -1;
  unsigned long long draw_key = 0;
  int adjustments_begin = 0;
  int adjustments_count = 0;
};

struct Adjustment {
  std::int32_t token = 0;
  float bias = 0.0f;
  std::uint32_t output_count = 0;
  std::int32_t repeat = 0;
};

struct SampleResult {
  std::int32_t token = 0;
  float logprob = 0.0f;
  std::int32_t top_tokens[kMaxTopLogprobs];
  float top_logprobs[kMaxTopLogprobs];
};

// logits: rows × vocab (read only); scratch: rows × vocab floats for the adjusted logits.
void sample_rows(const float* logits, float* scratch, int vocab, const SamplingRow* rows, int num_rows,
                 const Adjustment* adjustments, SampleResult* results, cudaStream_t stream);

}  // namespace engine::cuda
