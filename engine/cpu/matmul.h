#pragma once

// Matrix products against weights as stored (float, bfloat16, half or ggml-quantized blocks), dequantized
// inside the kernel. The SIMD level (AVX-512 with BF16/VNNI, AVX2+FMA, portable) is chosen once at run
// time from what the CPU reports.

#include <cstddef>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "engine/cpu/huge_pages.h"
#include "engine/cpu/thread_pool.h"
#include "engine/quant/quant.h"

namespace engine::cpu {

class RepackedWeights;

// A row-major weight matrix: `rows` output features, each a row of `cols` input features stored as
// quant::row_bytes(type, cols) bytes. The data is read in place (usually a mapped file), or, where `repacked`
// is set, its repacking by the level that made it (repack_weights); `data` stays valid either way (embedding
// lookups and the other levels read it).
// Where `scales` is not empty (FP8 checkpoints), each weight is its stored value times its block's scale: the
// products scale the activations by a row block's column scales (blocks narrower than a row) or their outputs by
// the row's scale (per-channel and per-tensor scales), so the kernels read the stored bytes as they are.
struct WeightMatrix {
  quant::WeightType type = quant::WeightType::F32;
  const std::byte* data = nullptr;
  std::size_t rows = 0;
  std::size_t cols = 0;
  const RepackedWeights* repacked = nullptr;
  quant::BlockScales scales{};
};

// A weight matrix's bytes rearranged once, at load, into the layout one SIMD level's kernels read (at
// avx512vnni, Q8_0, Q4_0, Q4_K, Q5_K and Q6_K: each block's 16 rows side by side, as the int8 kernels take
// them), so no product transposes or reduces across rows. The products give the same bits as from the stored
// layout.
class RepackedWeights {
 public:
  // `bytes` from `arena` (which must outlive this), or a buffer of its own where arena is null; in 2 MiB pages
  // where Linux allows either way (huge_pages.h).
  RepackedWeights(std::string_view level, std::size_t bytes, HugePagesArena* arena = nullptr);
  std::string_view level() const { return level_; }
  std::size_t size_bytes() const { return size_; }
  const std::byte* data() const { return data_; }
  std::byte* data() { return data_; }

 private:
  std::string_view level_;
  std::size_t size_;
  HugePagesBuffer own_;  // empty when the bytes are the arena's
  std::byte* data_;
};

// `w` repacked for the active level (repack_weights_at_level: for `level`), or nullptr where that level reads
// w's type as stored. Spread over the pool. The repacking's bytes come from `arena` where one is given.
std::unique_ptr<RepackedWeights> repack_weights(ThreadPool& pool, const WeightMatrix& w,
                                                HugePagesArena* arena = nullptr);
std::unique_ptr<RepackedWeights> repack_weights_at_level(std::string_view level, ThreadPool& pool,
                                                         const WeightMatrix& w);

// out[t * w.rows + n] = dot(x[t * w.cols ...], row n of w) + (bias ? bias[n] : 0), for t < tokens.
// Accumulates in f32 with the weights converted exactly (bf16, f16) or as ggml dequantizes them, against f32
// activations; at avx512vnni quantized weights multiply activations quantized per block of 32 to 16-bit
// integers, kept as two int8 bytes (quantizes_activations).
void matmul(ThreadPool& pool, const WeightMatrix& w, const float* x, std::size_t tokens, float* out,
            const float* bias = nullptr);

// One matrix of a group that multiplies the same input: out = x · wᵀ (+ bias), as matmul writes it.
struct MatmulTarget {
  const WeightMatrix* w = nullptr;
  float* out = nullptr;
  const float* bias = nullptr;
};

// matmul for each target, over one shared x (every w.cols equal): the projections of one input (q, k and v;
// gate and up) in a single hand-off to the pool when the weights are streamed (decode batches), so the
// threads are woken once instead of once per matrix. Each (row, token) gets the bits matmul would give it.
void matmul_group(ThreadPool& pool, std::span<const MatmulTarget> targets, const float* x, std::size_t tokens);

// One product of matmul_batch: out = x · wᵀ (+ bias) for `tokens` rows of its own input x.
struct MatmulJob {
  const WeightMatrix* w = nullptr;
  const float* x = nullptr;
  std::size_t tokens = 0;
  float* out = nullptr;
  const float* bias = nullptr;
};

// matmul for each job, each over an input of its own (a mixture's experts, each over the tokens routed to it):
// where every job streams its weights (one token, a decode batch), all of them in a single hand-off to the pool;
// otherwise one after another. Each (row, token) gets the bits matmul would give it.
void matmul_batch(ThreadPool& pool, std::span<const MatmulJob> jobs);

// Rows [first, first + count) of w as f32 (embedding lookups), count * w.cols values.
void dequantize_rows(const WeightMatrix& w, std::size_t first, std::size_t count, float* out);

// The SIMD level in use: "amx", "avx512vnni", "avx512bf16", "avx512", "avx2int16", "avx2" or "portable": the best
// this CPU runs, unless
// the environment variable ENGINE_SIMD (read once, at the first call) names another level it runs.
std::string_view simd_level();

// Every level this CPU runs, best first, and matmul / dequantize_rows at a given one (tests and benchmarks
// compare levels within one process; std::invalid_argument for a level the CPU does not run). Within a
// level, the result for a (row, token) does not depend on `tokens` or on the other rows computed.
std::vector<std::string_view> supported_simd_levels();
void matmul_at_level(std::string_view level, ThreadPool& pool, const WeightMatrix& w, const float* x,
                     std::size_t tokens, float* out, const float* bias = nullptr);
// Whether `level` multiplies weights of `type` against activations quantized to integers (per block of 32, scale
// max|x| / 32512): the amx, avx512vnni and avx2int16 levels (the same numerics) for Q8_0, Q4_0, Q4_K, Q5_K and Q6_K.
// std::invalid_argument for a level the CPU does not run.
bool quantizes_activations(std::string_view level, quant::WeightType type);
void dequantize_rows_at_level(std::string_view level, const WeightMatrix& w, std::size_t first, std::size_t count,
                              float* out);

// Measured read bandwidth of main memory in GB/s (10^9 bytes), streaming a buffer much larger than the
// caches with every thread of the pool: the bound a memory-bound decode step is compared with.
double measure_memory_bandwidth(ThreadPool& pool);
// The same over a buffer of `bytes` (rounded down to whole 4 MiB pieces, at least one); the default is 1 GiB.
double measure_memory_bandwidth(ThreadPool& pool, std::size_t bytes);

}  // namespace engine::cpu
