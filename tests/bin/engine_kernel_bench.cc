// engine-kernel-bench: throughput of the CPU matmul kernels on Qwen3-0.6B-sized matrices, per weight type.
// Batch-1 (decode) is reported as GB/s of weights streamed, beside the machine's measured read bandwidth;
// 64 tokens (prefill) as GFLOP/s. With --batches, the time of one matmul at 1..48 tokens (batched decode)
// instead, weights streamed from memory. With --compare A,B, two levels alternating in one run on the
// quantized types (batch-1 GB/s, 8-token decode and 512-token prefill), with the ratio A / B: on a shared
// machine only such ratios hold (LEVEL+repacked: the weights repacked at that level, as the engine loads them,
// e.g. --compare avx512vnni+repacked,avx512vnni). With --prefill, the matmuls of a 512-token prefill of Qwen3-0.6B in
// ms. Usage: engine-kernel-bench [--threads N] [--level L] [--quick] [--batches] [--prefill] [--compare A,B] (the plain
// modes read the weights as stored)

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/cpu/activation.h"
#include "engine/cpu/matmul.h"
#include "engine/cpu/thread_pool.h"
#include "engine/quant/quant.h"

namespace {

using engine::cpu::ThreadPool;
using engine::cpu::WeightMatrix;
using engine::quant::WeightType;

struct Shape {
  const char* name;
  std::size_t rows, cols;
};

// Weights of random values, quantized row by row (quantizing the 151936-row embedding takes a while, so
// rows repeat a small set of quantized rows: the kernels' speed does not depend on the values).
std::vector<std::byte> make_weights(WeightType type, std::size_t rows, std::size_t cols) {
  const std::size_t row_bytes = *engine::quant::row_bytes(type, cols);
  constexpr std::size_t kDistinct = 64;
  std::vector<std::byte> distinct(kDistinct * row_bytes);
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 0.05f);
  std::vector<float> src(cols);
  for (std::size_t r = 0; r < kDistinct; ++r) {
    for (auto& v : src) v = dist(rng);
    engine::quant::quantize_row(type, src, std::span(distinct.data() + r * row_bytes, row_bytes));
  }
  std::vector<std::byte> bytes(rows * row_bytes);
  for (std::size_t r = 0; r < rows; ++r) {
    std::memcpy(bytes.data() + r * row_bytes, distinct.data() + (r % kDistinct) * row_bytes, row_bytes);
  }
  return bytes;
}

// Best time of `repeats` runs of f, in seconds, after one warm-up run.
template <class F>
double best_seconds(int repeats, F&& f) {
  f();
  double best = 1e30;
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

// Copies of `bytes` filling about `target` bytes, so that repeated calls stream the weights from memory
// (as a decode step does) instead of finding them in the last-level cache.
std::vector<std::byte> streamed_copies(const std::vector<std::byte>& bytes, std::size_t target, std::size_t& copies) {
  copies = std::clamp<std::size_t>(target / bytes.size(), 1, 256);
  std::vector<std::byte> streamed(copies * bytes.size());
  for (std::size_t c = 0; c < copies; ++c) std::memcpy(streamed.data() + c * bytes.size(), bytes.data(), bytes.size());
  return streamed;
}

// Milliseconds per matmul at small token counts (batched decode), weights streamed from memory: a
// memory-bound kernel costs about the same at 8 tokens as at 1.
void bench_batches(ThreadPool& pool, const std::string& level, bool quick) {
  const WeightType types[] = {WeightType::F32,    WeightType::F16,    WeightType::BF16, WeightType::Q8_0,
                              WeightType::Q4_0,   WeightType::Q4_1,   WeightType::Q5_0, WeightType::Q5_1,
                              WeightType::Q3_K,   WeightType::Q4_K,   WeightType::Q5_K, WeightType::Q6_K,
                              WeightType::IQ4_NL, WeightType::IQ4_XS, WeightType::Q2_K};
  const Shape shapes[] = {{"3072x1024", 3072, 1024}, {"1024x3072", 1024, 3072}};
  constexpr std::size_t kTokens[] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48};
  std::printf("ms per matmul (weights from memory)\n%-6s %-10s", "type", "matrix");
  for (const std::size_t t : kTokens) std::printf(" %6zu", t);
  std::printf("   (tokens)\n");
  for (const WeightType type : types) {
    for (const Shape& shape : shapes) {
      const auto bytes = make_weights(type, shape.rows, shape.cols);
      std::size_t copies = 0;
      const auto streamed = streamed_copies(bytes, quick ? (64u << 20) : (256u << 20), copies);
      std::mt19937 rng(11);
      std::normal_distribution<float> dist(0.0f, 1.0f);
      std::vector<float> x(kTokens[std::size(kTokens) - 1] * shape.cols);
      for (auto& v : x) v = dist(rng);
      std::vector<float> out(kTokens[std::size(kTokens) - 1] * shape.rows);
      std::printf("%-6s %-10s", std::string(engine::quant::weight_type_name(type)).c_str(), shape.name);
      for (const std::size_t tokens : kTokens) {
        const double s = best_seconds(quick ? 2 : 5, [&] {
          for (std::size_t c = 0; c < copies; ++c) {
            const WeightMatrix copy{type, streamed.data() + c * bytes.size(), shape.rows, shape.cols};
            engine::cpu::matmul_at_level(level, pool, copy, x.data(), tokens, out.data());
          }
        });
        std::printf(" %6.3f", 1e3 * s / static_cast<double>(copies));
      }
      std::printf("\n");
      std::fflush(stdout);
    }
  }
}

// The best of `rounds` alternating timings of a and b (a, b, a, b, ...), so that both see the same load.
template <class A, class B>
std::pair<double, double> alternating_best(int rounds, A&& a, B&& b) {
  const auto seconds = [](auto& f) {
    const auto start = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  a();
  b();
  double best_a = 1e30, best_b = 1e30;
  for (int i = 0; i < rounds; ++i) {
    best_a = std::min(best_a, seconds(a));
    best_b = std::min(best_b, seconds(b));
  }
  return {best_a, best_b};
}

// A level, reading the weights as stored or repacked by it (as the engine's CPU backend does at load).
struct Variant {
  std::string level;
  bool repacked = false;
  std::string name() const { return level + (repacked ? " repacked" : ""); }
};

// The matrices `w` as the variant reads them: their repackings (kept in `keep`), or w unchanged. False where
// the variant repacks and its level does not repack the type.
bool as_read_by(ThreadPool& pool, const Variant& v, std::vector<WeightMatrix>& w,
                std::vector<std::unique_ptr<engine::cpu::RepackedWeights>>& keep) {
  if (!v.repacked) return true;
  for (auto& m : w) {
    auto repacked = engine::cpu::repack_weights_at_level(v.level, pool, m);
    if (repacked == nullptr) return false;
    m.repacked = repacked.get();
    keep.push_back(std::move(repacked));
  }
  return true;
}

// Variant a against variant b on the quantized types: batch-1 GB/s (weights from memory), an 8-token decode
// step in ms (weights from memory) and a 512-token prefill in GFLOP/s, alternating a and b. Types a variant
// cannot read as asked (repacked, at a level that does not repack them) are left out.
void bench_compare(ThreadPool& pool, const Variant& a, const Variant& b, bool quick) {
  const WeightType types[] = {WeightType::Q8_0, WeightType::Q4_0,   WeightType::Q4_1,   WeightType::Q5_0,
                              WeightType::Q5_1, WeightType::Q3_K,   WeightType::Q4_K,   WeightType::Q5_K,
                              WeightType::Q6_K, WeightType::IQ4_NL, WeightType::IQ4_XS, WeightType::Q2_K};
  const Shape shapes[] = {{"3072x1024", 3072, 1024}, {"1024x3072", 1024, 3072}};
  constexpr std::size_t kPrefill = 512, kDecodeBatch = 8;
  const int rounds = quick ? 2 : 5;
  std::printf("%s against %s, alternating (ratio = first / second; for ms, second / first)\n", a.name().c_str(),
              b.name().c_str());
  std::printf("%-6s %-10s %22s %22s %26s\n", "type", "matrix", "batch-1 GB/s", "8 tokens ms", "512-token GFLOP/s");
  for (const WeightType type : types) {
    for (const Shape& shape : shapes) {
      const auto bytes = make_weights(type, shape.rows, shape.cols);
      std::size_t copies = 0;
      const auto streamed = streamed_copies(bytes, quick ? (128u << 20) : (512u << 20), copies);
      std::mt19937 rng(11);
      std::normal_distribution<float> dist(0.0f, 1.0f);
      std::vector<float> x(kPrefill * shape.cols);
      for (auto& v : x) v = dist(rng);
      std::vector<float> out(kPrefill * shape.rows);
      // Per variant: the streamed copies, then the one matrix the prefill reads.
      std::vector<WeightMatrix> matrices[2];
      std::vector<std::unique_ptr<engine::cpu::RepackedWeights>> keep;
      for (auto& m : matrices) {
        for (std::size_t c = 0; c < copies; ++c)
          m.push_back({type, streamed.data() + c * bytes.size(), shape.rows, shape.cols});
        m.push_back({type, bytes.data(), shape.rows, shape.cols});
      }
      if (!as_read_by(pool, a, matrices[0], keep) || !as_read_by(pool, b, matrices[1], keep)) break;
      const auto streamed_run = [&](int side, std::size_t tokens) {
        const std::string& level = side == 0 ? a.level : b.level;
        return [&, side, tokens] {
          for (std::size_t c = 0; c < copies; ++c) {
            engine::cpu::matmul_at_level(level, pool, matrices[side][c], x.data(), tokens, out.data());
          }
        };
      };
      const auto [gemv_a, gemv_b] = alternating_best(rounds, streamed_run(0, 1), streamed_run(1, 1));
      const auto [batch_a, batch_b] =
          alternating_best(rounds, streamed_run(0, kDecodeBatch), streamed_run(1, kDecodeBatch));
      const auto prefill = [&](int side) {
        const std::string& level = side == 0 ? a.level : b.level;
        return [&, side] {
          engine::cpu::matmul_at_level(level, pool, matrices[side].back(), x.data(), kPrefill, out.data());
        };
      };
      const auto [gemm_a, gemm_b] = alternating_best(rounds, prefill(0), prefill(1));
      const double gb = static_cast<double>(streamed.size()) / 1e9;
      const double gflop = 2.0 * static_cast<double>(shape.rows * shape.cols * kPrefill) / 1e9;
      const double per_copy_ms = 1e3 / static_cast<double>(copies);
      std::printf("%-6s %-10s %6.1f %6.1f  %5.2fx   %6.3f %6.3f %5.2fx   %7.1f %7.1f  %5.2fx\n",
                  std::string(engine::quant::weight_type_name(type)).c_str(), shape.name, gb / gemv_a, gb / gemv_b,
                  gemv_b / gemv_a, batch_a * per_copy_ms, batch_b * per_copy_ms, batch_b / batch_a, gflop / gemm_a,
                  gflop / gemm_b, gemm_b / gemm_a);
      std::fflush(stdout);
    }
  }
}

// The matmuls of a 512-token prefill on the Qwen3-0.6B shapes, per weight type: ms for each matrix of one
// layer (q, k, v, o, gate, up, down; the activations as the model has them) and the 28 layers' total, the
// part of engine-bench's prefill the matmul kernels account for.
void bench_prefill(ThreadPool& pool, const std::string& level, bool quick) {
  const WeightType types[] = {WeightType::BF16, WeightType::Q8_0, WeightType::Q4_K};
  const Shape shapes[] = {{"q", 2048, 1024},    {"k", 1024, 1024},  {"v", 1024, 1024},   {"o", 1024, 2048},
                          {"gate", 3072, 1024}, {"up", 3072, 1024}, {"down", 1024, 3072}};
  constexpr std::size_t kPrefill = 512, kLayers = 28;
  std::printf("ms per 512-token matmul, and the %zu layers' total\n%-6s", kLayers, "type");
  for (const Shape& shape : shapes) std::printf(" %7s", shape.name);
  std::printf(" %9s %8s\n", "28 layers", "GFLOP/s");
  for (const WeightType type : types) {
    std::printf("%-6s", std::string(engine::quant::weight_type_name(type)).c_str());
    double layer_s = 0, layer_flop = 0;
    for (const Shape& shape : shapes) {
      const auto bytes = make_weights(type, shape.rows, shape.cols);
      const WeightMatrix w{type, bytes.data(), shape.rows, shape.cols};
      std::mt19937 rng(11);
      std::normal_distribution<float> dist(0.0f, 1.0f);
      std::vector<float> x(kPrefill * shape.cols);
      for (auto& v : x) v = dist(rng);
      std::vector<float> out(kPrefill * shape.rows);
      const double s = best_seconds(
          quick ? 2 : 5, [&] { engine::cpu::matmul_at_level(level, pool, w, x.data(), kPrefill, out.data()); });
      layer_s += s;
      layer_flop += 2.0 * static_cast<double>(shape.rows * shape.cols * kPrefill);
      std::printf(" %7.2f", 1e3 * s);
      std::fflush(stdout);
    }
    std::printf(" %9.0f %8.1f\n", 1e3 * layer_s * kLayers, layer_flop / layer_s / 1e9);
  }
  // The feed-forward activation between gate/up and down, against the scalar std::exp loop it replaced.
  std::vector<float> gate(kPrefill * 3072), up(gate.size()), out(gate.size());
  std::mt19937 rng(12);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  for (std::size_t i = 0; i < gate.size(); ++i) {
    gate[i] = dist(rng);
    up[i] = dist(rng);
  }
  const auto scalar = [&] {
    pool.parallel_for(gate.size(), std::size_t{1} << 14, [&](std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
    });
  };
  const auto kernel = [&] { engine::cpu::silu_mul(pool, gate.data(), up.data(), gate.size(), out.data()); };
  const auto [scalar_s, kernel_s] = alternating_best(quick ? 3 : 9, scalar, kernel);
  std::printf("silu_mul of 512 x 3072 (%s): %.2f ms, scalar std::exp %.2f ms (x%.1f); %zu layers %.0f vs %.0f ms\n",
              std::string(engine::cpu::simd_level()).c_str(), 1e3 * kernel_s, 1e3 * scalar_s, scalar_s / kernel_s,
              kLayers, 1e3 * kernel_s * kLayers, 1e3 * scalar_s * kLayers);
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t threads = 0;
  std::string level;
  bool quick = false;
  bool batches = false;
  bool prefill = false;
  std::string compare;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--threads" && i + 1 < argc) {
      threads = std::strtoul(argv[++i], nullptr, 10);
    } else if (arg == "--level" && i + 1 < argc) {
      level = argv[++i];
    } else if (arg == "--quick") {
      quick = true;
    } else if (arg == "--batches") {
      batches = true;
    } else if (arg == "--prefill") {
      prefill = true;
    } else if (arg == "--compare" && i + 1 < argc) {
      compare = argv[++i];
    } else {
      std::fprintf(
          stderr,
          "usage: engine-kernel-bench [--threads N] [--level amx|avx512vnni|avx512bf16|avx512|avx2int16|avx2|portable] "
          "[--quick] [--batches] [--prefill] [--compare LEVEL_A[+repacked],LEVEL_B[+repacked]]\n");
      return arg == "--help" ? 0 : 2;
    }
  }
  ThreadPool pool(threads);
  if (level.empty()) level = std::string(engine::cpu::simd_level());
  std::printf("SIMD level %s (levels here:", level.c_str());
  for (const auto l : engine::cpu::supported_simd_levels()) std::printf(" %.*s", static_cast<int>(l.size()), l.data());
  std::printf("), %zu threads\n", pool.size());
  if (batches) {
    bench_batches(pool, level, quick);
    return 0;
  }
  if (prefill) {
    bench_prefill(pool, level, quick);
    return 0;
  }
  if (!compare.empty()) {
    const auto comma = compare.find(',');
    const auto levels = engine::cpu::supported_simd_levels();
    // LEVEL, or LEVEL+repacked: the weights repacked by that level.
    const auto variant = [&](std::string text) -> std::optional<Variant> {
      constexpr std::string_view kRepacked = "+repacked";
      const bool repacked = text.ends_with(kRepacked);
      if (repacked) text.resize(text.size() - kRepacked.size());
      if (std::find(levels.begin(), levels.end(), text) == levels.end()) return std::nullopt;
      return Variant{text, repacked};
    };
    const auto a = comma == std::string::npos ? std::nullopt : variant(compare.substr(0, comma));
    const auto b = comma == std::string::npos ? std::nullopt : variant(compare.substr(comma + 1));
    if (!a || !b) {
      std::fprintf(stderr,
                   "--compare %s: give two levels this CPU runs, as A,B (LEVEL+repacked: the weights repacked)\n",
                   compare.c_str());
      return 2;
    }
    const double bandwidth = engine::cpu::measure_memory_bandwidth(pool, quick ? (256u << 20) : (1u << 30));
    std::printf("measured memory read bandwidth: %.1f GB/s\n", bandwidth);
    bench_compare(pool, *a, *b, quick);
    return 0;
  }
  const double bandwidth = engine::cpu::measure_memory_bandwidth(pool, quick ? (256u << 20) : (1u << 30));
  std::printf("measured memory read bandwidth: %.1f GB/s\n\n", bandwidth);

  const Shape shapes[] = {{"3072x1024 (gate/up)", 3072, 1024},
                          {"1024x3072 (down)", 1024, 3072},
                          {"151936x1024 (lm head)", quick ? 16384u : 151936u, 1024}};
  const WeightType types[] = {WeightType::F32,    WeightType::F16,    WeightType::BF16, WeightType::Q8_0,
                              WeightType::Q4_0,   WeightType::Q4_1,   WeightType::Q5_0, WeightType::Q5_1,
                              WeightType::Q3_K,   WeightType::Q4_K,   WeightType::Q5_K, WeightType::Q6_K,
                              WeightType::IQ4_NL, WeightType::IQ4_XS, WeightType::Q2_K};
  constexpr std::size_t kPrefillTokens = 64;

  std::printf("%-6s %-22s %12s %10s %14s\n", "type", "matrix", "batch-1 GB/s", "% of mem", "64-tok GFLOP/s");
  for (const WeightType type : types) {
    for (const Shape& shape : shapes) {
      const auto bytes = make_weights(type, shape.rows, shape.cols);
      const WeightMatrix w{type, bytes.data(), shape.rows, shape.cols};
      // Batch-1 runs over enough copies (about 512 MiB) that the weights stream from memory, as a decode
      // step's do, instead of sitting in the last-level cache between repeats.
      std::size_t copies = 0;
      const auto streamed = streamed_copies(bytes, quick ? (128u << 20) : (512u << 20), copies);
      std::mt19937 rng(11);
      std::normal_distribution<float> dist(0.0f, 1.0f);
      std::vector<float> x(kPrefillTokens * shape.cols);
      for (auto& v : x) v = dist(rng);
      std::vector<float> out(kPrefillTokens * shape.rows);

      const double gemv_s = best_seconds(quick ? 3 : 5, [&] {
        for (std::size_t c = 0; c < copies; ++c) {
          const WeightMatrix copy{type, streamed.data() + c * bytes.size(), shape.rows, shape.cols};
          engine::cpu::matmul_at_level(level, pool, copy, x.data(), 1, out.data());
        }
      });
      const double gbps = static_cast<double>(streamed.size()) / gemv_s / 1e9;
      double gflops = 0;
      if (shape.rows <= 16384) {  // the full lm head at 64 tokens takes long; its GEMV is what matters
        const double gemm_s = best_seconds(
            quick ? 1 : 3, [&] { engine::cpu::matmul_at_level(level, pool, w, x.data(), kPrefillTokens, out.data()); });
        gflops = 2.0 * static_cast<double>(shape.rows * shape.cols * kPrefillTokens) / gemm_s / 1e9;
      }
      std::printf("%-6s %-22s %12.1f %9.0f%% ", std::string(engine::quant::weight_type_name(type)).c_str(), shape.name,
                  gbps, 100.0 * gbps / bandwidth);
      if (gflops > 0) {
        std::printf("%14.1f\n", gflops);
      } else {
        std::printf("%14s\n", "-");
      }
      std::fflush(stdout);
    }
  }
  return 0;
}
