// The CPU attention kernels (engine/cpu/attention.h) at every SIMD level this CPU runs: against a float64
// softmax attention over the same (rounded) keys and values, within a derived bound of the exact one for a
// bf16 or f16 cache, and the same bits for a query alone, in a prefill, in chunks, beside other sequences and
// with any number of threads. The cache starts as NaN bytes, so a kernel that read a position nobody wrote
// would say so.
#include "engine/cpu/attention.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "engine/cpu/matmul.h"
#include "engine/cpu/thread_pool.h"

namespace {

using engine::cpu::AttentionBatch;
using engine::cpu::AttentionSequence;
using engine::cpu::KvCacheLayout;
using engine::quant::WeightType;

struct Shape {
  WeightType type;
  std::size_t head_dim;
  std::size_t block_size;
  std::size_t kv_heads;
  std::size_t group;   // q heads per kv head
  std::size_t length;  // positions of the sequence
};

std::string shape_name(const testing::TestParamInfo<Shape>& info) {
  const Shape& s = info.param;
  return std::string(engine::quant::weight_type_name(s.type)) + "_d" + std::to_string(s.head_dim) + "_bs" +
         std::to_string(s.block_size) + "_kv" + std::to_string(s.kv_heads) + "_g" + std::to_string(s.group) + "_len" +
         std::to_string(s.length);
}

// The value a cache of `type` holds for x.
float stored(WeightType type, float x) {
  if (type == WeightType::BF16) return engine::quant::bf16_to_f32(engine::quant::f32_to_bf16(x));
  if (type == WeightType::F16) return engine::quant::f16_to_f32(engine::quant::f32_to_f16(x));
  return x;
}

// Unit roundoff of the cache's type.
double roundoff(WeightType type) {
  return type == WeightType::BF16 ? std::ldexp(1.0, -8) : type == WeightType::F16 ? std::ldexp(1.0, -11) : 0.0;
}

// A cache of layer 1 (of 2) with room for `blocks` blocks, all NaN bytes until written. Blocks 0 and 1 are
// never handed out.
class Cache {
 public:
  Cache(const Shape& shape, std::size_t blocks)
      : layout_{shape.type, 2, shape.kv_heads, shape.head_dim, shape.block_size},
        bytes_((blocks + 2) * layout_.block_bytes(), std::byte{0xFF}),
        free_(static_cast<std::int32_t>(blocks + 2)) {}

  const KvCacheLayout& layout() const { return layout_; }
  const std::byte* data() const { return bytes_.data(); }
  std::byte* block(std::int32_t id) { return bytes_.data() + static_cast<std::size_t>(id) * layout_.block_bytes(); }
  // `count` blocks in a shuffled order.
  std::vector<std::int32_t> take(std::size_t count, std::mt19937& rng) {
    std::vector<std::int32_t> ids(count);
    std::iota(ids.begin(), ids.end(), next_);
    next_ += static_cast<std::int32_t>(count);
    if (next_ > free_) throw std::logic_error("test cache too small");
    std::shuffle(ids.begin(), ids.end(), rng);
    return ids;
  }

 private:
  KvCacheLayout layout_;
  std::vector<std::byte> bytes_;
  std::int32_t free_;
  std::int32_t next_ = 2;
};

std::size_t q_width(const Shape& shape) {
  return shape.kv_heads * shape.group * shape.head_dim;
}
std::size_t q_heads(const Shape& shape) {
  return shape.kv_heads * shape.group;
}
float scale_of(const Shape& shape) {
  return 1.0f / std::sqrt(static_cast<float>(shape.head_dim));
}

// A sequence of `length` positions written into the cache through a shuffled block table; keys, values and
// queries drawn from N(0, 1).
class Sequence {
 public:
  Sequence(const Shape& shape, Cache& cache, std::uint32_t seed, std::size_t length) : shape_(shape), length_(length) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal;
    const std::size_t kv = shape.kv_heads * shape.head_dim;
    keys_.resize(length * kv);
    values_.resize(length * kv);
    queries_.resize(length * q_width(shape));
    for (auto& x : keys_) x = normal(rng);
    for (auto& x : values_) x = normal(rng);
    for (auto& x : queries_) x = normal(rng);
    table_ = cache.take((length + shape.block_size - 1) / shape.block_size, rng);
    for (std::size_t p = 0; p < length; ++p) {
      engine::cpu::store_kv(cache.layout(), cache.block(table_[p / shape.block_size]), 1, p % shape.block_size,
                            keys_.data() + p * kv, values_.data() + p * kv);
    }
  }

  const std::vector<float>& queries() const { return queries_; }
  AttentionSequence piece(std::size_t first_row, std::size_t start, std::size_t count) const {
    return {first_row, start, count, table_};
  }

  // Float64 attention of every position over keys and values as `type` stores them (F32: exact), and the
  // bound on |that - exact| that rounding to a type of unit roundoff u allows: scores move by at most
  // Δ = u · scale · Σ_i |q_i k_i|, so each probability by a factor within e^±2Δ, and the values by u.
  struct Reference {
    std::vector<double> out;
    std::vector<double> bound;
  };
  // `window`, `softcap` and `sinks` as AttentionBatch's (0, empty: none).
  Reference reference(WeightType type, double u, std::size_t window = 0, double softcap = 0,
                      std::span<const float> sinks = {}) const {
    const std::size_t d = shape_.head_dim, kv = shape_.kv_heads * d, qw = q_width(shape_);
    const double scale = scale_of(shape_);
    Reference r{std::vector<double>(length_ * qw), std::vector<double>(length_ * qw)};
    std::vector<double> s(length_);
    for (std::size_t p = 0; p < length_; ++p) {
      for (std::size_t h = 0; h < q_heads(shape_); ++h) {
        const std::size_t g = h / shape_.group;
        const float* q = queries_.data() + p * qw + h * d;
        double top = -INFINITY, delta = 0, vmax = 0;
        const std::size_t first = window == 0 || p < window ? 0 : p + 1 - window;
        for (std::size_t j = first; j <= p; ++j) {
          double dot = 0, magnitude = 0;
          for (std::size_t i = 0; i < d; ++i) {
            const double k = stored(type, keys_[j * kv + g * d + i]);
            dot += static_cast<double>(q[i]) * k;
            magnitude += std::abs(static_cast<double>(q[i]) * k);
          }
          s[j] = softcap > 0 ? softcap * std::tanh(dot * scale / softcap) : dot * scale;  // tanh' <= 1: same bound
          top = std::max(top, s[j]);
          delta = std::max(delta, u * magnitude * scale);
          for (std::size_t i = 0; i < d; ++i) vmax = std::max(vmax, std::abs(double{values_[j * kv + g * d + i]}));
        }
        // A sink: one more score in the softmax, of a key whose value is 0.
        const double sink = sinks.empty() ? -INFINITY : double{sinks[h]};
        top = std::max(top, sink);
        double sum = sinks.empty() ? 0.0 : std::exp(sink - top);
        for (std::size_t j = first; j <= p; ++j) sum += std::exp(s[j] - top);
        for (std::size_t i = 0; i < d; ++i) {
          double o = 0;
          for (std::size_t j = first; j <= p; ++j) {
            o += std::exp(s[j] - top) / sum * stored(type, values_[j * kv + g * d + i]);
          }
          r.out[p * qw + h * d + i] = o;
          r.bound[p * qw + h * d + i] = ((std::exp(2 * delta) - 1) * (1 + u) + u) * vmax;
        }
      }
    }
    return r;
  }
  double max_value() const {
    double m = 0;
    for (const float v : values_) m = std::max(m, std::abs(double{v}));
    return m;
  }

 private:
  Shape shape_;
  std::size_t length_;
  std::vector<float> keys_, values_, queries_;
  std::vector<std::int32_t> table_;
};

// The output of one attention call over `q` (every row the pieces name), unwritten rows -1.
std::vector<float> run(std::string_view level, engine::cpu::ThreadPool& pool, const Shape& shape, const Cache& cache,
                       const std::vector<float>& q, const std::vector<AttentionSequence>& pieces,
                       std::size_t window = 0, float softcap = 0, std::span<const float> sinks = {}) {
  std::vector<float> out(q.size(), -1.0f);
  engine::cpu::attention_at_level(level, pool,
                                  {&cache.layout(), cache.data(), 1, q.data(), out.data(), q_heads(shape),
                                   scale_of(shape), pieces, window, softcap, sinks});
  return out;
}

// Rows [first, first + count) of `from` copied into `into`.
void copy_rows(const std::vector<float>& from, std::size_t from_row, std::vector<float>& into, std::size_t into_row,
               std::size_t count, std::size_t width) {
  std::copy_n(from.begin() + static_cast<std::ptrdiff_t>(from_row * width), count * width,
              into.begin() + static_cast<std::ptrdiff_t>(into_row * width));
}

std::size_t blocks_for(const Shape& shape, std::size_t length) {
  return (length + shape.block_size - 1) / shape.block_size;
}

class Attention : public testing::TestWithParam<Shape> {};

// f32 arithmetic over d products and a softmax: about 1e-6 of the values' size; 1e-4 leaves room.
constexpr double kArithmetic = 1e-4;

TEST_P(Attention, MatchesFloat64OverTheStoredValuesAndTheDerivedBoundOfTheExactOnes) {
  const Shape shape = GetParam();
  Cache cache(shape, blocks_for(shape, shape.length));
  const Sequence seq(shape, cache, 7, shape.length);
  const auto over_stored = seq.reference(shape.type, 0);
  const auto exact = seq.reference(WeightType::F32, roundoff(shape.type));
  const double arithmetic = kArithmetic * seq.max_value();
  engine::cpu::ThreadPool pool(2);
  for (const auto level : engine::cpu::supported_simd_levels()) {
    SCOPED_TRACE(std::string(level));
    const auto out = run(level, pool, shape, cache, seq.queries(), {seq.piece(0, 0, shape.length)});
    double worst = 0, worst_exact = 0;
    for (std::size_t i = 0; i < out.size(); ++i) {
      ASSERT_TRUE(std::isfinite(out[i])) << "element " << i;
      worst = std::max(worst, std::abs(out[i] - over_stored.out[i]));
      const double error = std::abs(out[i] - exact.out[i]);
      worst_exact = std::max(worst_exact, error);
      ASSERT_LE(error, exact.bound[i] + arithmetic) << "element " << i;
    }
    EXPECT_LE(worst, arithmetic);
    if (shape.type != WeightType::F32) {
      EXPECT_GT(worst_exact, worst) << "the cache did not round";
    }
  }
}

TEST_P(Attention, AQueryGivesTheSameBitsAloneInChunksBesideOthersAndOnAnyThreads) {
  const Shape shape = GetParam();
  const std::size_t n = shape.length, extra = n + 40, width = q_width(shape);
  Cache cache(shape, blocks_for(shape, n) + blocks_for(shape, extra));
  const Sequence seq(shape, cache, 11, n);
  const Sequence other(shape, cache, 12, extra);
  const auto& q = seq.queries();
  engine::cpu::ThreadPool one(1), two(2);
  for (const auto level : engine::cpu::supported_simd_levels()) {
    SCOPED_TRACE(std::string(level));
    const auto whole = run(level, two, shape, cache, q, {seq.piece(0, 0, n)});
    EXPECT_EQ(std::memcmp(whole.data(), run(level, one, shape, cache, q, {seq.piece(0, 0, n)}).data(),
                          whole.size() * sizeof(float)),
              0);
    // Decode steps: one query per call.
    std::vector<float> decoded(whole.size());
    for (std::size_t p = 0; p < n; ++p) {
      copy_rows(run(level, two, shape, cache, q, {seq.piece(p, p, 1)}), p, decoded, p, 1, width);
    }
    EXPECT_EQ(std::memcmp(whole.data(), decoded.data(), whole.size() * sizeof(float)), 0);
    // Chunks of 5, 1, 37 and the rest, as a chunked prefill runs them.
    std::vector<float> chunked(whole.size());
    const std::size_t sizes[] = {5, 1, 37, n};
    for (std::size_t start = 0, c = 0; start < n; ++c) {
      const std::size_t count = std::min(sizes[std::min<std::size_t>(c, 3)], n - start);
      copy_rows(run(level, two, shape, cache, q, {seq.piece(start, start, count)}), start, chunked, start, count,
                width);
      start += count;
    }
    EXPECT_EQ(std::memcmp(whole.data(), chunked.data(), whole.size() * sizeof(float)), 0);
    // After another sequence's prefill in the same call, our rows after its rows.
    std::vector<float> crowd_q(other.queries());
    crowd_q.insert(crowd_q.end(), q.begin(), q.end());
    const auto crowd = run(level, two, shape, cache, crowd_q, {other.piece(0, 0, extra), seq.piece(extra, 0, n)});
    std::vector<float> ours(whole.size());
    copy_rows(crowd, extra, ours, 0, n, width);
    EXPECT_EQ(std::memcmp(whole.data(), ours.data(), whole.size() * sizeof(float)), 0);
  }
}

// A sliding window (Gemma 3's local layers, Mistral, gpt-oss), soft-capped scores (Gemma 2) and attention sinks
// (gpt-oss): against float64 over the window's keys alone (and the sinks), and the same bits in decode steps and
// in chunks, as without them.
struct Windowed {
  Shape shape;
  std::size_t window;
  float softcap;
  bool sinks = false;  // a random sink logit per q head (gpt-oss)
};

class WindowedAttention : public testing::TestWithParam<Windowed> {};

TEST_P(WindowedAttention, MatchesFloat64OverTheWindowAndKeepsItsBitsInDecodeAndChunks) {
  const auto [shape, window, softcap, with_sinks] = GetParam();
  const std::size_t n = shape.length, width = q_width(shape);
  Cache cache(shape, blocks_for(shape, n));
  const Sequence seq(shape, cache, 9, n);
  std::vector<float> sinks;
  std::mt19937 rng(13);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  if (with_sinks) {
    for (std::size_t h = 0; h < q_heads(shape); ++h) sinks.push_back(normal(rng));
  }
  const auto over_stored = seq.reference(shape.type, 0, window, softcap, sinks);
  const auto full = seq.reference(shape.type, 0);
  const double arithmetic = kArithmetic * seq.max_value();
  const auto& q = seq.queries();
  engine::cpu::ThreadPool two(2);
  for (const auto level : engine::cpu::supported_simd_levels()) {
    SCOPED_TRACE(std::string(level));
    const auto whole = run(level, two, shape, cache, q, {seq.piece(0, 0, n)}, window, softcap, sinks);
    double worst = 0, from_full = 0;
    for (std::size_t i = 0; i < whole.size(); ++i) {
      ASSERT_TRUE(std::isfinite(whole[i])) << "element " << i;
      worst = std::max(worst, std::abs(whole[i] - over_stored.out[i]));
      from_full = std::max(from_full, std::abs(whole[i] - full.out[i]));
    }
    EXPECT_LE(worst, arithmetic);
    EXPECT_GT(from_full, 100 * arithmetic) << "the window, cap and sinks changed nothing";
    std::vector<float> decoded(whole.size()), chunked(whole.size());
    for (std::size_t p = 0; p < n; ++p) {
      copy_rows(run(level, two, shape, cache, q, {seq.piece(p, p, 1)}, window, softcap, sinks), p, decoded, p, 1,
                width);
    }
    EXPECT_EQ(std::memcmp(whole.data(), decoded.data(), whole.size() * sizeof(float)), 0);
    for (std::size_t start = 0; start < n; start += 23) {
      const std::size_t count = std::min<std::size_t>(23, n - start);
      copy_rows(run(level, two, shape, cache, q, {seq.piece(start, start, count)}, window, softcap, sinks), start,
                chunked, start, count, width);
    }
    EXPECT_EQ(std::memcmp(whole.data(), chunked.data(), whole.size() * sizeof(float)), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, WindowedAttention,
                         testing::Values(Windowed{Shape{WeightType::F32, 128, 16, 2, 2, 150}, 40, 0},
                                         Windowed{Shape{WeightType::F32, 64, 1, 1, 1, 40}, 7, 0},
                                         Windowed{Shape{WeightType::BF16, 64, 8, 2, 4, 70}, 1, 0},
                                         Windowed{Shape{WeightType::F16, 80, 32, 1, 2, 200}, 130, 0},
                                         Windowed{Shape{WeightType::F32, 72, 128, 2, 1, 130}, 0, 2.0f},
                                         Windowed{Shape{WeightType::BF16, 128, 16, 2, 2, 150}, 33, 3.0f},
                                         Windowed{Shape{WeightType::F32, 64, 16, 8, 8, 150}, 0, 0, true},
                                         Windowed{Shape{WeightType::BF16, 64, 16, 2, 4, 300}, 128, 0, true}),
                         [](const testing::TestParamInfo<Windowed>& windowed) {
                           return shape_name({windowed.param.shape, windowed.index}) + "_w" +
                                  std::to_string(windowed.param.window) + "_cap" +
                                  std::to_string(static_cast<int>(windowed.param.softcap)) +
                                  (windowed.param.sinks ? "_sinks" : "");
                         });

TEST(AttentionLayout, RefusesWhatItCannotStoreByName) {
  KvCacheLayout layout{WeightType::Q8_0, 2, 2, 64, 16};
  EXPECT_THAT([&] { engine::cpu::check_kv_cache_layout(layout); },
              testing::ThrowsMessage<std::invalid_argument>(testing::HasSubstr("a KV cache of Q8_0")));
  layout.type = WeightType::BF16;
  layout.head_dim = 0;
  EXPECT_THAT([&] { engine::cpu::check_kv_cache_layout(layout); },
              testing::ThrowsMessage<std::invalid_argument>(testing::HasSubstr("none may be 0")));
}

TEST(AttentionLayout, RefusesQueryHeadsThatDoNotShareTheKvHeadsEvenly) {
  const Shape shape{WeightType::F32, 64, 16, 2, 1, 4};
  Cache cache(shape, 1);
  const Sequence seq(shape, cache, 1, 4);
  std::vector<float> out(seq.queries().size());
  const std::vector<AttentionSequence> pieces = {seq.piece(0, 0, 4)};
  engine::cpu::ThreadPool pool(1);
  EXPECT_THAT(
      [&] {
        engine::cpu::attention(pool,
                               {&cache.layout(), cache.data(), 1, seq.queries().data(), out.data(), 3, 1.0f, pieces});
      },
      testing::ThrowsMessage<std::invalid_argument>(
          testing::HasSubstr("3 query heads do not share 2 kv heads evenly")));
  const std::vector<float> sinks(3, 0.0f);  // the two q heads need one each
  EXPECT_THAT(
      [&] {
        engine::cpu::attention(
            pool, {&cache.layout(), cache.data(), 1, seq.queries().data(), out.data(), 2, 1.0f, pieces, 0, 0, sinks});
      },
      testing::ThrowsMessage<std::invalid_argument>(testing::HasSubstr("3 sinks for 2 query heads (one each)")));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, Attention,
    testing::Values(Shape{WeightType::F32, 128, 16, 2, 2, 150}, Shape{WeightType::BF16, 128, 16, 2, 2, 150},
                    Shape{WeightType::F16, 128, 16, 2, 2, 150}, Shape{WeightType::F32, 64, 1, 1, 1, 40},
                    Shape{WeightType::BF16, 64, 8, 2, 4, 70}, Shape{WeightType::F16, 80, 32, 1, 2, 33},
                    Shape{WeightType::F32, 72, 128, 2, 1, 130}, Shape{WeightType::BF16, 128, 64, 1, 8, 32},
                    Shape{WeightType::F32, 128, 16, 3, 1, 1}),
    shape_name);

}  // namespace
