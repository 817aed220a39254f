#pragma once

// Sampling on the GPU, one block per logit row: logit bias and penalties, a constraint's token mask (the
// forbidden tokens to -inf), greedy argmax, or temperature,
// min-p, top-k and top-p over the whole vocabulary followed by a draw; and the raw distribution's
// log-probabilities. The same choices as engine/sampling's SequenceSampler, made where the logits are.

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/sampling/sampling_step.h"

namespace engine::cuda {

inline constexpr int kMaxTopLogprobs = 20;

// One row's sampling: the sequence's parameters as SequenceSampler::device_step() made them (logprobs at
// most kMaxTopLogprobs), where its token adjustments lie in the adjustments array, and where its bitmask
// of allowed tokens lies in the masks array (mask_begin -1: every token allowed).
struct SamplingRow {
  sampling::StepParams params;
  int adjustments_begin = 0;
  int adjustments_count = 0;
  int mask_begin = -1;  // in 32-bit words; the mask holds (vocab + 31) / 32 of them
};
using Adjustment = sampling::TokenAdjustment;

struct SampleResult {
  std::int32_t token = 0;
  float logprob = 0.0f;
  std::int32_t top_tokens[kMaxTopLogprobs];
  float top_logprobs[kMaxTopLogprobs];
};

// logits: rows × vocab (read only); scratch: rows × vocab floats for the adjusted logits; masks: the rows'
// bitmasks (may be null when no row has one).
void sample_rows(const float* logits, float* scratch, int vocab, const SamplingRow* rows, int num_rows,
                 const Adjustment* adjustments, const std::uint32_t* masks, SampleResult* results, cudaStream_t stream);

}  // namespace engine::cuda
