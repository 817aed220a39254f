#include "engine/cpu/matmul.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>

#include "engine/cpu/huge_pages.h"
#include "engine/cpu/kernels.h"
#include "engine/cpu/simd_levels.h"

namespace engine::cpu {

namespace {

static_assert(kernels::kTypeCount == quant::kWeightTypeCount, "the kernel tables have an entry per weight type");

// Rows per range when one token is computed: a few hundred KiB of weights, so that a range streams long
// enough to amortise claiming it, and a matrix still splits into several ranges per thread.
constexpr std::size_t kGemvRangeBytes = 256u << 10;
// With several tokens a range is decoded once per token block and reused, so it can be smaller.
constexpr std::size_t kGemmRangeBytes = 64u << 10;

std::size_t checked_row_bytes(const WeightMatrix& w) {
  const auto bytes = quant::row_bytes(w.type, w.cols);
  if (!bytes) {
    throw std::invalid_argument("weight matrix of " + std::string(quant::weight_type_name(w.type)) + " with " +
                                std::to_string(w.cols) + " columns: not a whole number of blocks");
  }
  if (w.data == nullptr && w.rows != 0 && w.cols != 0) throw std::invalid_argument("weight matrix without data");
  if (!w.scales.empty()) {
    if (w.type != quant::WeightType::F8_E4M3)
      throw std::invalid_argument("weight matrix scales on a " + std::string(quant::weight_type_name(w.type)) +
                                  " matrix: only FP8 (F8_E4M3) matrices are block-scaled");
    if (const auto mismatch = quant::block_scales_mismatch(w.scales, w.rows, w.cols))
      throw std::invalid_argument("weight matrix scales: " + *mismatch);
  }
  return *bytes;
}

std::size_t range_rows(std::size_t row_bytes, std::size_t target_bytes, std::size_t tile) {
  const std::size_t rows = target_bytes / std::max<std::size_t>(row_bytes, 1);
  return std::max(tile, rows / tile * tile);
}

// Whether the table multiplies this weight type against int8 activations.
bool takes_int8(const kernels::Table& table, quant::WeightType type) {
  return table.int8_matmul[static_cast<std::size_t>(type)] != nullptr;
}

// `tokens` rows of x quantized by the table's quantizer, once per call (shared by every row range, and by
// every matrix of a group): quantized_token_bytes(cols) per token, then the table's regrouping of them where it
// has one.
// Bytes on cache-line boundaries: every quantized token starts on one (the table's token size is a multiple of
// 64), and so does the regrouping after them.
struct AlignedDelete {
  void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t{64}); }
};
using AlignedBytes = std::unique_ptr<std::byte[], AlignedDelete>;

AlignedBytes quantize_input(const kernels::Table& table, ThreadPool& pool, const float* x, std::size_t tokens,
                            std::size_t cols) {
  const std::size_t stride = table.quantized_token_bytes(cols);
  const std::size_t packed_bytes =
      table.packed_activation_bytes != nullptr ? table.packed_activation_bytes(tokens, cols) : 0;
  AlignedBytes quantized(
      static_cast<std::byte*>(::operator new[](tokens* stride + packed_bytes, std::align_val_t{64})));
  std::byte* data = quantized.get();
  // Ranges of at least 16 Ki values: quantizing one decode token is not worth waking the pool.
  pool.parallel_for(tokens, std::max<std::size_t>(1, (16u << 10) / cols), [&](std::size_t begin, std::size_t end) {
    for (std::size_t t = begin; t < end; ++t) table.quantize_activations(x + t * cols, cols, data + t * stride);
  });
  if (packed_bytes != 0) {
    const std::size_t groups = (tokens + 15) / 16;
    pool.parallel_for(groups, std::max<std::size_t>(1, (1u << 10) / cols), [&](std::size_t first, std::size_t last) {
      table.pack_activations(data, cols, tokens, first, last, data + tokens * stride);
    });
  }
  return quantized;
}

// Whether matmul streams w's weights once for `tokens` tokens (gemv, gemv_batch or the int8 product of few
// tokens) rather than running a GEMM.
bool is_streamed(const kernels::Table& table, const WeightMatrix& w, std::size_t tokens) {
  return tokens > 0 && w.cols != 0 &&
         (tokens == 1 || tokens <= table.batch_max_tokens[static_cast<std::size_t>(w.type)]);
}

// Whether w's scales vary along its rows (blocks narrower than a row), so that its products scale the activations.
bool scales_activations(const WeightMatrix& w) {
  return !w.scales.empty() && w.scales.block_cols < w.cols;
}

// Rows per range: a few hundred KiB of weights while they are streamed once (one token, a few), less when
// each range's decoded tiles are reused by many tokens; whole row blocks where the activations are scaled per
// block, so that a range scales them once per block.
std::size_t rows_per_range(const kernels::Table& table, const WeightMatrix& w, std::size_t row_bytes,
                           std::size_t tokens) {
  const std::size_t rows =
      range_rows(row_bytes, is_streamed(table, w, tokens) ? kGemvRangeBytes : kGemmRangeBytes, table.row_tile);
  const std::size_t block = w.scales.block_rows;
  return scales_activations(w) && rows > block ? rows / block * block : rows;
}

// The int8 product of w at this table and the bytes it reads: w's repacking where this level made it (its
// row ranges start on whole tiles, as range_rows gives them), else the stored rows.
struct Int8Product {
  kernels::Int8MatmulFn fn;
  const std::byte* data;
};
Int8Product int8_product(const kernels::Table& table, const WeightMatrix& w, std::size_t row_bytes) {
  const auto type = static_cast<std::size_t>(w.type);
  if (w.repacked != nullptr && w.repacked->level() == table.name && table.int8_matmul_repacked[type] != nullptr) {
    const std::size_t tiles = (w.rows + table.row_tile - 1) / table.row_tile;
    if (w.repacked->size_bytes() != tiles * table.row_tile * row_bytes) {
      throw std::invalid_argument("a repacking of " + std::to_string(w.repacked->size_bytes()) +
                                  " bytes does not belong to a matrix of " + std::to_string(w.rows) + " rows of " +
                                  std::to_string(row_bytes) + " bytes: repack_weights makes one per matrix");
    }
    return {table.int8_matmul_repacked[type], w.repacked->data()};
  }
  return {table.int8_matmul[type], w.data};
}

void run_int8_matmul(const kernels::Table& table, ThreadPool& pool, const WeightMatrix& w, std::size_t row_bytes,
                     const std::byte* quantized, std::size_t tokens, float* out, const float* bias) {
  const Int8Product product = int8_product(table, w, row_bytes);
  pool.parallel_for(w.rows, rows_per_range(table, w, row_bytes, tokens), [&](std::size_t begin, std::size_t end) {
    product.fn(kernels::Rows{product.data + begin * row_bytes, row_bytes, w.cols, end - begin}, quantized, tokens,
               out + begin, w.rows, bias != nullptr ? bias + begin : nullptr);
  });
}

// Rows [begin, end) of w (a type with f32 activations, scales left aside) against `tokens` tokens of x: gemv for
// one, gemv_batch for a few, gemm for more. out and bias as matmul's, whole (each row lands at its index).
void stored_product(const kernels::Table& table, const WeightMatrix& w, std::size_t row_bytes, const float* x,
                    std::size_t tokens, std::size_t begin, std::size_t end, float* out, const float* bias) {
  const auto type = static_cast<std::size_t>(w.type);
  const kernels::Rows rows{w.data + begin * row_bytes, row_bytes, w.cols, end - begin};
  const float* row_bias = bias != nullptr ? bias + begin : nullptr;
  if (tokens == 1) {
    table.gemv[type](rows, x, out + begin, row_bias);
  } else if (tokens <= table.batch_max_tokens[type]) {
    // A few tokens (batched decode): stream the weights once, as for one token, and multiply each decoded
    // group into every token's accumulators.
    table.gemv_batch[type](rows, x, tokens, out + begin, w.rows, row_bias);
  } else {
    const auto scratch = std::make_unique_for_overwrite<float[]>(table.gemm_scratch_floats(w.cols));
    table.gemm[type](rows, x, tokens, out + begin, w.rows, row_bias, scratch.get());
  }
}

// stored_product with w's scales applied: a row block's column scales on a copy of the activations (the same for
// every row of the block), or a row's one scale on its outputs; then the bias.
void product_rows(const kernels::Table& table, const WeightMatrix& w, std::size_t row_bytes, const float* x,
                  std::size_t tokens, std::size_t begin, std::size_t end, float* out, const float* bias) {
  const quant::BlockScales& scales = w.scales;
  if (scales.empty()) return stored_product(table, w, row_bytes, x, tokens, begin, end, out, bias);
  if (scales_activations(w)) {
    std::vector<float> scaled(tokens * w.cols);
    for (std::size_t first = begin; first < end;) {
      const std::size_t last = std::min(end, (first / scales.block_rows + 1) * scales.block_rows);
      for (std::size_t t = 0; t < tokens; ++t) {
        for (std::size_t c = 0; c < w.cols; ++c)
          scaled[t * w.cols + c] = x[t * w.cols + c] * scales.at(first, c, w.cols);
      }
      stored_product(table, w, row_bytes, scaled.data(), tokens, first, last, out, nullptr);
      first = last;
    }
  } else {
    stored_product(table, w, row_bytes, x, tokens, begin, end, out, nullptr);
    for (std::size_t t = 0; t < tokens; ++t) {
      for (std::size_t n = begin; n < end; ++n) out[t * w.rows + n] *= scales.at(n, 0, w.cols);
    }
  }
  if (bias == nullptr) return;
  for (std::size_t t = 0; t < tokens; ++t) {
    for (std::size_t n = begin; n < end; ++n) out[t * w.rows + n] += bias[n];
  }
}

void run_matmul(const kernels::Table& table, ThreadPool& pool, const WeightMatrix& w, const float* x,
                std::size_t tokens, float* out, const float* bias) {
  const std::size_t row_bytes = checked_row_bytes(w);
  if (tokens == 0 || w.rows == 0) return;
  if (x == nullptr || out == nullptr) throw std::invalid_argument("matmul without input or output");
  if (w.cols == 0) {
    for (std::size_t t = 0; t < tokens; ++t) {
      for (std::size_t n = 0; n < w.rows; ++n) out[t * w.rows + n] = bias != nullptr ? bias[n] : 0.0f;
    }
    return;
  }
  if (takes_int8(table, w.type)) {
    const auto quantized = quantize_input(table, pool, x, tokens, w.cols);
    run_int8_matmul(table, pool, w, row_bytes, quantized.get(), tokens, out, bias);
    return;
  }
  pool.parallel_for(w.rows, rows_per_range(table, w, row_bytes, tokens), [&](std::size_t begin, std::size_t end) {
    product_rows(table, w, row_bytes, x, tokens, begin, end, out, bias);
  });
}

// A product whose weights are streamed once (one token, or a decode batch): w over `tokens` rows of x, or of
// `quantized` (x quantized by the table) where the table takes int8 activations for w's type.
struct StreamedProduct {
  const WeightMatrix* w;
  const float* x;
  const std::byte* quantized;
  std::size_t tokens;
  float* out;
  const float* bias;
};

// Streamed products in a single hand-off to the pool: each matrix cut into the ranges matmul would give its
// rows, one loop over all of them; each (row, token) gets the bits matmul would give it.
void run_streamed(const kernels::Table& table, ThreadPool& pool, std::span<const StreamedProduct> products) {
  struct Piece {
    const StreamedProduct* product;
    std::size_t row_bytes, begin, end;
  };
  std::vector<Piece> pieces;
  for (const auto& p : products) {
    if (p.out == nullptr || p.x == nullptr) throw std::invalid_argument("matmul without input or output");
    const std::size_t row_bytes = checked_row_bytes(*p.w);
    const std::size_t step = rows_per_range(table, *p.w, row_bytes, p.tokens);
    for (std::size_t begin = 0; begin < p.w->rows; begin += step) {
      pieces.push_back({&p, row_bytes, begin, std::min(p.w->rows, begin + step)});
    }
  }
  pool.parallel_for(pieces.size(), 1, [&](std::size_t first, std::size_t last) {
    for (std::size_t i = first; i < last; ++i) {
      const Piece& piece = pieces[i];
      const StreamedProduct& p = *piece.product;
      const WeightMatrix& w = *p.w;
      if (takes_int8(table, w.type)) {
        const Int8Product product = int8_product(table, w, piece.row_bytes);
        product.fn(kernels::Rows{product.data + piece.begin * piece.row_bytes, piece.row_bytes, w.cols,
                                 piece.end - piece.begin},
                   p.quantized, p.tokens, p.out + piece.begin, w.rows,
                   p.bias != nullptr ? p.bias + piece.begin : nullptr);
      } else {
        product_rows(table, w, piece.row_bytes, p.x, p.tokens, piece.begin, piece.end, p.out, p.bias);
      }
    }
  });
}

void run_matmul_batch(const kernels::Table& table, ThreadPool& pool, std::span<const MatmulJob> jobs) {
  const bool streamed = std::all_of(jobs.begin(), jobs.end(), [&](const MatmulJob& j) {
    return j.w != nullptr && (j.tokens == 0 || j.w->rows == 0 || is_streamed(table, *j.w, j.tokens));
  });
  if (!streamed) {
    for (const auto& j : jobs) run_matmul(table, pool, *j.w, j.x, j.tokens, j.out, j.bias);
    return;
  }
  // Each input quantized once, where its matrix takes int8 activations (a job of one token: on the caller).
  std::vector<AlignedBytes> quantized;
  std::vector<StreamedProduct> products;
  for (const auto& j : jobs) {
    if (j.tokens == 0 || j.w->rows == 0) continue;
    if (j.x == nullptr) throw std::invalid_argument("matmul without input or output");
    const std::byte* q = nullptr;
    if (takes_int8(table, j.w->type))
      q = quantized.emplace_back(quantize_input(table, pool, j.x, j.tokens, j.w->cols)).get();
    products.push_back({j.w, j.x, q, j.tokens, j.out, j.bias});
  }
  run_streamed(table, pool, products);
}

void run_matmul_group(const kernels::Table& table, ThreadPool& pool, std::span<const MatmulTarget> targets,
                      const float* x, std::size_t tokens) {
  bool streamed = tokens > 0 && targets.size() > 1;
  bool int8 = false;
  for (const auto& t : targets) {
    if (t.w == nullptr || t.w->cols != targets.front().w->cols) {
      throw std::invalid_argument("matmul_group: the matrices of a group must share their input width");
    }
    streamed = streamed && is_streamed(table, *t.w, tokens);
    int8 = int8 || (takes_int8(table, t.w->type) && t.w->rows != 0 && t.w->cols != 0);
  }
  // The input quantized once for every matrix that takes int8 activations.
  AlignedBytes quantized;
  if (int8 && tokens > 0) {
    if (x == nullptr) throw std::invalid_argument("matmul without input or output");
    quantized = quantize_input(table, pool, x, tokens, targets.front().w->cols);
  }
  if (!streamed) {
    for (const auto& t : targets) {
      if (quantized != nullptr && takes_int8(table, t.w->type) && t.w->rows != 0 && t.w->cols != 0) {
        if (t.out == nullptr) throw std::invalid_argument("matmul without input or output");
        run_int8_matmul(table, pool, *t.w, checked_row_bytes(*t.w), quantized.get(), tokens, t.out, t.bias);
      } else {
        run_matmul(table, pool, *t.w, x, tokens, t.out, t.bias);
      }
    }
    return;
  }
  if (x == nullptr) throw std::invalid_argument("matmul without input or output");
  std::vector<StreamedProduct> products;
  for (const auto& t : targets) products.push_back({t.w, x, quantized.get(), tokens, t.out, t.bias});
  run_streamed(table, pool, products);
}

std::unique_ptr<RepackedWeights> run_repack(const kernels::Table& table, ThreadPool& pool, const WeightMatrix& w,
                                            HugePagesArena* arena) {
  const std::size_t row_bytes = checked_row_bytes(w);
  const kernels::RepackFn repack = table.repack_weights[static_cast<std::size_t>(w.type)];
  if (repack == nullptr || w.rows == 0 || w.cols == 0) return nullptr;
  const std::size_t tile_bytes = table.row_tile * row_bytes;
  const std::size_t tiles = (w.rows + table.row_tile - 1) / table.row_tile;
  auto repacked = std::make_unique<RepackedWeights>(table.name, tiles * tile_bytes, arena);
  const kernels::Rows rows{w.data, row_bytes, w.cols, w.rows};
  std::byte* out = repacked->data();
  pool.parallel_for(tiles, std::max<std::size_t>(1, (1u << 20) / tile_bytes),
                    [&](std::size_t first, std::size_t last) { repack(rows, first, last, out); });
  return repacked;
}

void run_dequantize_rows(const kernels::Table& table, const WeightMatrix& w, std::size_t first, std::size_t count,
                         float* out) {
  const std::size_t row_bytes = checked_row_bytes(w);
  if (first > w.rows || count > w.rows - first) {
    throw std::out_of_range("rows [" + std::to_string(first) + ", " + std::to_string(first + count) +
                            ") of a matrix with " + std::to_string(w.rows) + " rows");
  }
  if (count == 0 || w.cols == 0) return;
  if (out == nullptr) throw std::invalid_argument("dequantize_rows without output");
  table.dequantize[static_cast<std::size_t>(w.type)](
      kernels::Rows{w.data + first * row_bytes, row_bytes, w.cols, count}, out);
  if (w.scales.empty()) return;
  for (std::size_t r = 0; r < count; ++r) {
    for (std::size_t c = 0; c < w.cols; ++c) out[r * w.cols + c] *= w.scales.at(first + r, c, w.cols);
  }
}

}  // namespace

RepackedWeights::RepackedWeights(std::string_view level, std::size_t bytes, HugePagesArena* arena)
    : level_(level),
      size_(bytes),
      own_(arena != nullptr ? nullptr : allocate_huge_pages(bytes)),
      data_(arena != nullptr ? arena->allocate(bytes) : own_.get()) {}

std::unique_ptr<RepackedWeights> repack_weights(ThreadPool& pool, const WeightMatrix& w, HugePagesArena* arena) {
  return run_repack(active_table(), pool, w, arena);
}

std::unique_ptr<RepackedWeights> repack_weights_at_level(std::string_view level, ThreadPool& pool,
                                                         const WeightMatrix& w) {
  return run_repack(table_or_throw(level), pool, w, nullptr);
}

void matmul(ThreadPool& pool, const WeightMatrix& w, const float* x, std::size_t tokens, float* out,
            const float* bias) {
  run_matmul(active_table(), pool, w, x, tokens, out, bias);
}

void matmul_group(ThreadPool& pool, std::span<const MatmulTarget> targets, const float* x, std::size_t tokens) {
  run_matmul_group(active_table(), pool, targets, x, tokens);
}

void matmul_batch(ThreadPool& pool, std::span<const MatmulJob> jobs) {
  run_matmul_batch(active_table(), pool, jobs);
}

void dequantize_rows(const WeightMatrix& w, std::size_t first, std::size_t count, float* out) {
  run_dequantize_rows(active_table(), w, first, count, out);
}

void matmul_at_level(std::string_view level, ThreadPool& pool, const WeightMatrix& w, const float* x,
                     std::size_t tokens, float* out, const float* bias) {
  run_matmul(table_or_throw(level), pool, w, x, tokens, out, bias);
}

bool quantizes_activations(std::string_view level, quant::WeightType type) {
  return takes_int8(table_or_throw(level), type);
}

void dequantize_rows_at_level(std::string_view level, const WeightMatrix& w, std::size_t first, std::size_t count,
                              float* out) {
  run_dequantize_rows(table_or_throw(level), w, first, count, out);
}

double measure_memory_bandwidth(ThreadPool& pool) {
  return measure_memory_bandwidth(pool, std::size_t{1} << 30);
}

double measure_memory_bandwidth(ThreadPool& pool, std::size_t bytes) {
  constexpr std::size_t kGrain = std::size_t{1} << 20;  // floats: 4 MiB
  const std::size_t floats = std::max<std::size_t>(1, bytes / sizeof(float) / kGrain) * kGrain;
  const std::size_t total_bytes = floats * sizeof(float);
  const auto buffer = std::make_unique_for_overwrite<float[]>(floats);
  float* data = buffer.get();
  // Written by the same threads that later read it, so pages are mapped (and placed) before timing.
  pool.parallel_for(floats, kGrain,
                    [data](std::size_t begin, std::size_t end) { std::fill(data + begin, data + end, 1.0f); });
  const kernels::SumFn sum = active_table().sum;
  std::mutex mutex;
  double total = 0;
  double best_seconds = 0;
  for (int pass = 0; pass < 3; ++pass) {
    const auto start = std::chrono::steady_clock::now();
    pool.parallel_for(floats, kGrain, [&](std::size_t begin, std::size_t end) {
      const float partial = sum(data + begin, end - begin);
      const std::lock_guard lock(mutex);
      total += partial;
    });
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (pass == 0 || seconds < best_seconds) best_seconds = seconds;
  }
  // Every float is 1, so the sums are known; a mismatch means the reads did not happen as written.
  if (total != 3.0 * static_cast<double>(floats)) throw std::logic_error("memory bandwidth probe misread its buffer");
  return static_cast<double>(total_bytes) / best_seconds / 1e9;
}

}  // namespace engine::cpu
