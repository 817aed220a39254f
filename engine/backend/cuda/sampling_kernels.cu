#include <cfloat>
#include <cmath>
#include <cstdint>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/sampling_kernels.h"

namespace engine::cuda {

namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;

// A value and its token: the better is the larger value, then the lower token (an argmax keeping the
// first of ties). NaN is never better than anything.
struct Best {
  float value;
  int token;
};

__device__ __forceinline__ bool better(const Best& a, const Best& b) {
  if (a.token < 0 || isnan(a.value)) return false;
  return b.token < 0 || a.value > b.value || (a.value == b.value && a.token < b.token);
}

__device__ Best block_best(Best mine) {
  __shared__ Best warp_best[kWarps];
  __shared__ Best result;
  for (int offset = 16; offset > 0; offset /= 2) {
    const Best other{__shfl_xor_sync(0xffffffffu, mine.value, offset),
                     __shfl_xor_sync(0xffffffffu, mine.token, offset)};
    if (better(other, mine)) mine = other;
  }
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_best[warp] = mine;
  __syncthreads();
  if (warp == 0) {
    mine = warp_best[lane];
    for (int offset = 16; offset > 0; offset /= 2) {
      const Best other{__shfl_xor_sync(0xffffffffu, mine.value, offset),
                       __shfl_xor_sync(0xffffffffu, mine.token, offset)};
      if (better(other, mine)) mine = other;
    }
    if (lane == 0) result = mine;
  }
  __syncthreads();
  const Best r = result;
  __syncthreads();
  return r;
}

template <typename T>
__device__ T block_total(T v) {
  __shared__ T warp_total[kWarps];
  __shared__ T result;
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_total[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = warp_total[lane];
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
    if (lane == 0) result = v;
  }
  __syncthreads();
  const T r = result;
  __syncthreads();
  return r;
}

// The best (value, token) of a row of the block's: 16-byte loads where the row allows them, so that each
// thread keeps more bytes in flight (one block reads a whole vocabulary). The order of the scan does not
// matter: better() breaks ties by token.
__device__ Best row_best(const float* v, int vocab) {
  Best mine{-INFINITY, -1};
  int scalar_from = 0;
  if (reinterpret_cast<std::uintptr_t>(v) % 16 == 0) {
    const int quads = vocab / 4;
    for (int q = threadIdx.x; q < quads; q += kThreads) {
      const float4 x = reinterpret_cast<const float4*>(v)[q];
      const int i = 4 * q;
      if (better({x.x, i}, mine)) mine = {x.x, i};
      if (better({x.y, i + 1}, mine)) mine = {x.y, i + 1};
      if (better({x.z, i + 2}, mine)) mine = {x.z, i + 2};
      if (better({x.w, i + 3}, mine)) mine = {x.w, i + 3};
    }
    scalar_from = 4 * quads;
  }
  for (int i = scalar_from + static_cast<int>(threadIdx.x); i < vocab; i += kThreads) {
    if (better({v[i], i}, mine)) mine = {v[i], i};
  }
  return block_best(mine);
}

// Float order as unsigned order (larger float, larger key), so a threshold is found bit by bit.
__device__ __forceinline__ std::uint32_t order_key(float v) {
  const std::uint32_t bits = __float_as_uint(v);
  return (bits & 0x80000000u) ? ~bits : bits | 0x80000000u;
}

// A uniform in (0, 1) from the step's key and the token: every token has its own independent draw, so the
// result depends on the sequence's stream only, not on the batch.
__device__ __forceinline__ double uniform(unsigned long long key, int token) {
  unsigned long long z = key + 0x9E3779B97F4A7C15ull * (static_cast<unsigned long long>(token) + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (static_cast<double>(z >> 11) + 0.5) * 0x1.0p-53;
}

__global__ void __launch_bounds__(kThreads)
    sample_kernel(const float* logits, float* scratch, int vocab, const SamplingRow* rows,
                  const Adjustment* adjustments, const std::uint32_t* masks, SampleResult* results) {
  const SamplingRow row = rows[blockIdx.x];
  const sampling::StepParams& p = row.params;
  const float* raw = logits + static_cast<std::size_t>(blockIdx.x) * vocab;
  SampleResult& out = results[blockIdx.x];

  // Bias and penalties, in SequenceSampler's order, then the constraint's mask, on a copy (the raw logits
  // give the log-probabilities); a row without any reads its logits as they are.
  const float* v = raw;
  if (row.adjustments_count > 0 || row.mask_begin >= 0) {
    float* adjusted = scratch + static_cast<std::size_t>(blockIdx.x) * vocab;
    for (int i = threadIdx.x; i < vocab; i += kThreads) adjusted[i] = raw[i];
    __syncthreads();
    for (int a = threadIdx.x; a < row.adjustments_count; a += kThreads) {
      const Adjustment adj = adjustments[row.adjustments_begin + a];
      if (adj.token < 0 || adj.token >= vocab) continue;
      float x = adjusted[adj.token] + adj.bias;
      if (adj.repeat) x = x > 0.0f ? x / p.repetition_penalty : x * p.repetition_penalty;
      if (adj.output_count > 0) x -= p.frequency_penalty * static_cast<float>(adj.output_count) + p.presence_penalty;
      adjusted[adj.token] = x;
    }
    __syncthreads();
    if (row.mask_begin >= 0) {
      const std::uint32_t* mask = masks + row.mask_begin;
      for (int i = threadIdx.x; i < vocab; i += kThreads) {
        if (((mask[i / 32] >> (i % 32)) & 1u) == 0) adjusted[i] = -INFINITY;
      }
      __syncthreads();
    }
    v = adjusted;
  }

  if (p.logprobs >= 0) {
    const float max_raw = row_best(raw, vocab).value;
    double sum = 0;
    for (int i = threadIdx.x; i < vocab; i += kThreads) sum += expf(raw[i] - max_raw);
    const double log_normaliser = static_cast<double>(max_raw) + log(block_total(sum));
    if (threadIdx.x == 0) out.logprob = static_cast<float>(log_normaliser);  // finished below
    // The N best raw logits, each pass the best strictly after the last in (value desc, token asc) order.
    Best last{INFINITY, -1};
    for (int n = 0; n < min(p.logprobs, kMaxTopLogprobs); ++n) {
      Best mine{-INFINITY, -1};
      for (int i = threadIdx.x; i < vocab; i += kThreads) {
        const float x = raw[i];
        const bool after = x < last.value || (x == last.value && i > last.token);
        if (after && better({x, i}, mine)) mine = {x, i};
      }
      last = block_best(mine);
      if (threadIdx.x == 0) {
        out.top_tokens[n] = last.token;
        out.top_logprobs[n] = static_cast<float>(static_cast<double>(last.value) - log_normaliser);
      }
    }
  }

  const Best best = row_best(v, vocab);
  int chosen = best.token < 0 ? 0 : best.token;

  if (p.temperature > 0.0f && isfinite(best.value)) {
    const float max_logit = best.value;
    const float inverse_temperature = 1.0f / p.temperature;
    const float log_min_p = logf(p.min_p);
    // top-k: the k-th largest logit, found bit by bit over the order keys (ties at the boundary stay).
    std::uint32_t lowest_key = 0;
    if (p.top_k > 0 && p.top_k < vocab) {
      for (int bit = 31; bit >= 0; --bit) {
        const std::uint32_t candidate = lowest_key | (1u << bit);
        int count = 0;
        for (int i = threadIdx.x; i < vocab; i += kThreads) count += order_key(v[i]) >= candidate;
        if (block_total(count) >= p.top_k) lowest_key = candidate;
      }
    }
    const auto kept = [&](float x) {
      return x > -INFINITY && order_key(x) >= lowest_key && (x - max_logit) * inverse_temperature >= log_min_p;
    };
    // top-p: the highest threshold whose kept mass still reaches top_p of what min-p and top-k leave.
    if (p.top_p < 1.0f) {
      double total = 0;
      for (int i = threadIdx.x; i < vocab; i += kThreads) {
        if (kept(v[i])) total += exp(static_cast<double>((v[i] - max_logit) * inverse_temperature));
      }
      const double target = static_cast<double>(p.top_p) * block_total(total);
      // Every key up to lowest_key keeps the whole mass, so the search from 0 lands at or above it.
      std::uint32_t top_p_key = 0;
      for (int bit = 31; bit >= 0; --bit) {
        const std::uint32_t candidate = top_p_key | (1u << bit);
        double mass = 0;
        for (int i = threadIdx.x; i < vocab; i += kThreads) {
          if (kept(v[i]) && order_key(v[i]) >= candidate) {
            mass += exp(static_cast<double>((v[i] - max_logit) * inverse_temperature));
          }
        }
        if (block_total(mass) >= target) top_p_key = candidate;
      }
      lowest_key = top_p_key;
    }
    // The draw: the largest scaled logit plus Gumbel noise among the kept tokens is a sample of their
    // renormalised distribution.
    Best draw{-INFINITY, -1};
    for (int i = threadIdx.x; i < vocab; i += kThreads) {
      if (!kept(v[i])) continue;
      const double gumbel = -log(-log(uniform(p.draw_key, i)));
      const float score = static_cast<float>(static_cast<double>((v[i] - max_logit) * inverse_temperature) + gumbel);
      if (better({score, i}, draw)) draw = {score, i};
    }
    draw = block_best(draw);
    if (draw.token >= 0) chosen = draw.token;
  }

  if (threadIdx.x == 0) {
    out.token = chosen;
    out.logprob = p.logprobs >= 0 ? static_cast<float>(static_cast<double>(raw[chosen]) - out.logprob) : 0.0f;
  }
}

}  // namespace

void sample_rows(const float* logits, float* scratch, int vocab, const SamplingRow* rows, int num_rows,
                 const Adjustment* adjustments, const std::uint32_t* masks, SampleResult* results,
                 cudaStream_t stream) {
  if (num_rows == 0) return;
  sample_kernel<<<num_rows, kThreads, 0, stream>>>(logits, scratch, vocab, rows, adjustments, masks, results);
  CUDA_CHECK_LAUNCH();
}

}  // namespace engine::cuda
