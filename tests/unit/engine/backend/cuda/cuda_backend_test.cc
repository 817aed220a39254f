// Every kernel of the CUDA backend against the CPU backend (the reference) on fresh random inputs, with
// the GPU's outputs poisoned (NaN) before each call so an element left unwritten fails. On a machine
// without a GPU these tests are skipped, saying why; the suite still compiles them wherever nvcc exists.

#include "engine/backend/cuda/cuda_backend.h"

#include <cuda_runtime.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/quant/quant.h"
#include "tests/support/require_gpu.h"
#include "tests/support/weight_blocks.h"

namespace engine::backend {
namespace {

using quant::WeightType;

bool on_gpu(const Backend& b) {
  return b.name().starts_with("cuda");
}

void upload(const Backend& b, Tensor t, const std::vector<float>& values) {
  ASSERT_EQ(values.size(), t.rows * t.cols);
  if (on_gpu(b)) {
    ASSERT_EQ(cudaMemcpy(t.data, values.data(), values.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  } else {
    std::memcpy(t.data, values.data(), values.size() * sizeof(float));
  }
}

void poison(const Backend& b, Tensor t) {
  upload(b, t, std::vector<float>(t.rows * t.cols, std::numeric_limits<float>::quiet_NaN()));
}

std::vector<float> download(Backend& b, Tensor t) {
  std::vector<float> out(t.rows * t.cols);
  b.read(t, out);
  return out;
}

// ‖got − want‖ / ‖want‖, and infinity when any element is not finite.
double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return std::numeric_limits<double>::infinity();
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return std::numeric_limits<double>::infinity();
    diff += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
    norm += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(diff / std::max(norm, 1e-30));
}

// The same kernels on both backends: host copies of every input, weights kept alive for the CPU backend.
class CudaBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing_support::no_gpu_reason().empty()) return;
    cpu_ = make_cpu_backend(2);
    gpu_ = make_gpu();
  }

  // Eager: these tests call kernels one by one, not in the graph's order that a captured step replays.
  static std::unique_ptr<Backend> make_gpu(bool tensor_core_attention = true) {
    return make_cuda_backend({.enforce_eager = true, .tensor_core_attention = tensor_core_attention});
  }

  void init(std::size_t head_dim, WeightType kv_type, bool interleaved = false) {
    shape_.num_layers = 2;
    shape_.num_kv_heads = 2;
    shape_.head_dim = head_dim;
    shape_.block_size = 16;
    shape_.num_blocks = 256;
    RopeSpec rope;
    rope.interleaved = interleaved;
    for (std::size_t i = 0; i < head_dim / 2; ++i) {
      rope.inv_freq.push_back(1.0 / std::pow(1e6, 2.0 * static_cast<double>(i) / static_cast<double>(head_dim)));
    }
    KvCacheShape cpu_shape = shape_;
    cpu_shape.kv_type = WeightType::F32;
    shape_.kv_type = kv_type;
    cpu_->init_cache(cpu_shape, rope);
    gpu_->init_cache(shape_, rope);
    // Blocks handed out in a shuffled order, so a table is never the identity.
    free_blocks_.resize(shape_.num_blocks);
    std::iota(free_blocks_.begin(), free_blocks_.end(), 0);
    std::shuffle(free_blocks_.begin(), free_blocks_.end(), rng_);
  }

  std::vector<float> random(std::size_t n, float scale = 1.0f) {
    std::normal_distribution<float> dist(0.0f, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = dist(rng_);
    return v;
  }

  // One weight added to both backends, stored as `type`.
  std::pair<Weight, Weight> weight(WeightType type, std::size_t rows, std::size_t cols, float scale = 0.1f) {
    const auto values = random(rows * cols, scale);
    auto& bytes = storage_.emplace_back(*quant::row_bytes(type, cols) * rows);
    for (std::size_t r = 0; r < rows; ++r) {
      const std::span<const float> row(values.data() + r * cols, cols);
      const std::span<std::byte> out(bytes.data() + r * *quant::row_bytes(type, cols), *quant::row_bytes(type, cols));
      if (type == WeightType::F32) {
        std::memcpy(out.data(), row.data(), cols * sizeof(float));
      } else if (type == WeightType::F16 || type == WeightType::BF16) {
        for (std::size_t c = 0; c < cols; ++c) {
          const std::uint16_t bits = type == WeightType::F16 ? quant::f32_to_f16(row[c]) : quant::f32_to_bf16(row[c]);
          std::memcpy(out.data() + 2 * c, &bits, 2);
        }
      } else {
        const auto blocks = testing_support::blocks_for(type, std::vector<float>(row.begin(), row.end()),
                                                        static_cast<std::uint32_t>(r));
        std::copy(blocks.begin(), blocks.end(), out.begin());
      }
    }
    const WeightSource source{type, bytes, rows, cols};
    return {cpu_->add_weight(source), gpu_->add_weight(source)};
  }

  std::pair<Weight, Weight> norm_weight(std::size_t width) {
    auto values = random(width, 0.2f);
    for (auto& v : values) v += 1.0f;
    auto& bytes = storage_.emplace_back(width * sizeof(float));
    std::memcpy(bytes.data(), values.data(), bytes.size());
    const WeightSource source{WeightType::F32, bytes, 1, width};
    return {cpu_->add_weight(source), gpu_->add_weight(source)};
  }

  // A sequence of the step: its start position and new tokens; blocks grow from the shuffled pool.
  struct Seq {
    std::size_t start = 0;
    std::size_t count = 0;
    std::vector<std::int32_t> table;
  };

  void begin(std::vector<Seq*> seqs, bool logits_of_all = true) {
    layout_ = {};
    for (auto* s : seqs) {
      while (s->table.size() * shape_.block_size < s->start + s->count) {
        s->table.push_back(free_blocks_.back());
        free_blocks_.pop_back();
      }
    }
    std::size_t tokens = 0;
    for (auto* s : seqs) {
      layout_.sequences.push_back({s->start, s->count, {s->table}});
      for (std::size_t i = 0; i < s->count; ++i) layout_.tokens.push_back(static_cast<std::int32_t>((tokens + i) % 97));
      tokens += s->count;
      if (logits_of_all) {
        for (std::size_t i = tokens - s->count; i < tokens; ++i) layout_.logit_rows.push_back(i);
      }
    }
    cpu_->begin_step(layout_);
    gpu_->begin_step(layout_);
  }

  // The same random tensor on both backends.
  std::pair<Tensor, Tensor> input(std::size_t rows, std::size_t cols, float scale = 1.0f) {
    const auto values = random(rows * cols, scale);
    const Tensor c = cpu_->alloc(rows, cols), g = gpu_->alloc(rows, cols);
    upload(*cpu_, c, values);
    upload(*gpu_, g, values);
    return {c, g};
  }
  std::pair<Tensor, Tensor> output(std::size_t rows, std::size_t cols) {
    const Tensor c = cpu_->alloc(rows, cols), g = gpu_->alloc(rows, cols);
    poison(*gpu_, g);
    return {c, g};
  }
  double error(std::pair<Tensor, Tensor> t) {
    return relative_error(download(*gpu_, t.second), download(*cpu_, t.first));
  }

  std::mt19937 rng_{std::random_device{}()};
  std::unique_ptr<Backend> cpu_, gpu_;
  KvCacheShape shape_;
  std::vector<std::int32_t> free_blocks_;
  std::deque<std::vector<std::byte>> storage_;
  StepLayout layout_;
};

TEST_F(CudaBackendTest, MatmulOfEveryWeightTypeMatchesTheCpu) {
  REQUIRE_GPU();
  init(64, WeightType::F32);
  for (const auto type : {WeightType::F32, WeightType::F16, WeightType::BF16, WeightType::Q8_0, WeightType::Q4_0,
                          WeightType::Q4_K, WeightType::Q5_K, WeightType::Q6_K}) {
    // 1-8 tokens go through the weight kernels, more through cuBLAS.
    for (const std::size_t tokens : {1, 3, 8, 9, 40}) {
      Seq s{0, tokens, {}};
      begin({&s});
      const auto w = weight(type, 200, 512);
      const auto bias = norm_weight(200);
      const auto x = input(tokens, 512);
      const auto out = output(tokens, 200);
      const bool with_bias = tokens % 2 == 1;
      cpu_->matmul(x.first, w.first, with_bias ? &bias.first : nullptr, out.first);
      gpu_->matmul(x.second, w.second, with_bias ? &bias.second : nullptr, out.second);
      // f32 weights compute in f32 on both; others may round activations to bf16 for the tensor cores.
      const double tolerance = type == WeightType::F32 ? 1e-5 : 1e-2;
      EXPECT_LT(error(out), tolerance) << quant::weight_type_name(type) << " with " << tokens << " tokens";
    }
  }
}

// The types the GPU kernels do not read are refused at load, naming the type and what to do.
TEST_F(CudaBackendTest, WeightTypesWithoutGpuKernelsAreRefusedByName) {
  REQUIRE_GPU();
  init(64, WeightType::F32);
  for (const auto type :
       {WeightType::Q4_1, WeightType::Q5_0, WeightType::Q5_1, WeightType::Q3_K, WeightType::IQ4_NL, WeightType::IQ4_XS,
        WeightType::Q2_K, WeightType::IQ2_XXS, WeightType::IQ2_XS, WeightType::IQ2_S, WeightType::IQ3_XXS,
        WeightType::IQ3_S, WeightType::IQ1_S, WeightType::IQ1_M, WeightType::MXFP4, WeightType::F8_E4M3}) {
    const std::string name(quant::weight_type_name(type));
    try {
      weight(type, 8, 256);  // whole blocks of every type
      ADD_FAILURE() << name << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(name + " weights are not supported on the GPU"), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("--device cpu"), std::string::npos) << e.what();
    }
  }
}

// A mixture's experts are refused at load, naming the models and what to do (the CPU backend runs them).
TEST_F(CudaBackendTest, ExpertsAreRefusedByName) {
  REQUIRE_GPU();
  init(64, WeightType::F32);
  const std::vector<float> values(8 * 64, 0.5f);
  WeightSource source{WeightType::F32, std::as_bytes(std::span<const float>(values)), 8, 64};
  source.expert = true;
  try {
    gpu_->add_weight(source);
    ADD_FAILURE() << "an expert was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("mixture-of-experts models (Qwen3-MoE, Qwen2-MoE, Mixtral)"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("--device cpu"), std::string::npos) << e.what();
  }
}

TEST_F(CudaBackendTest, EmbedNormsAndElementwiseKernelsMatchTheCpu) {
  REQUIRE_GPU();
  init(128, WeightType::F32);
  Seq a{0, 5, {}}, b{40, 3, {}};
  begin({&a, &b});
  for (const auto type : {WeightType::F32, WeightType::BF16, WeightType::Q8_0, WeightType::Q4_K, WeightType::Q6_K}) {
    const auto table = weight(type, 97, 256);
    const auto out = output(8, 256);
    cpu_->embed(table.first, out.first);
    gpu_->embed(table.second, out.second);
    EXPECT_LT(error(out), 1e-6) << "embed of " << quant::weight_type_name(type);
  }

  const auto norm = norm_weight(1024);
  const auto x = input(8, 1024, 3.0f);
  const auto normed = output(8, 1024);
  cpu_->rms_norm(x.first, norm.first, 1e-6f, normed.first);
  gpu_->rms_norm(x.second, norm.second, 1e-6f, normed.second);
  EXPECT_LT(error(normed), 1e-5) << "rms_norm";

  const auto head_norm = norm_weight(128);
  const auto heads = input(8, 1024);
  const auto heads_out = output(8, 1024);
  cpu_->rms_norm(heads.first, head_norm.first, 1e-6f, heads_out.first);
  gpu_->rms_norm(heads.second, head_norm.second, 1e-6f, heads_out.second);
  EXPECT_LT(error(heads_out), 1e-5) << "per-head rms_norm";

  const auto gate = input(8, 3072, 2.0f);
  const auto up = input(8, 3072);
  const auto swiglu = output(8, 3072);
  cpu_->silu_mul(gate.first, up.first, swiglu.first);
  gpu_->silu_mul(gate.second, up.second, swiglu.second);
  EXPECT_LT(error(swiglu), 1e-5) << "silu_mul";

  cpu_->add(gate.first, up.first);
  gpu_->add(gate.second, up.second);
  EXPECT_LT(error(gate), 1e-6) << "add";

  const auto rows = output(8, 1024);
  cpu_->gather_logit_rows(normed.first, rows.first);
  gpu_->gather_logit_rows(normed.second, rows.second);
  EXPECT_LT(error(rows), 1e-6) << "gather_logit_rows";
}

TEST_F(CudaBackendTest, QkNormAndRopeMatchTheCpuAtLongPositions) {
  REQUIRE_GPU();
  for (const bool interleaved : {false, true}) {
    cpu_ = make_cpu_backend(2);
    gpu_ = make_gpu();
    init(128, WeightType::F32, interleaved);
    Seq a{0, 4, {}}, b{3000, 2, {}};  // far positions: the angles must keep their precision
    begin({&a, &b});
    const auto q_norm = norm_weight(128);
    const auto k_norm = norm_weight(128);
    for (const bool with_norms : {true, false}) {
      const auto q = input(6, 8 * 128);
      const auto k = input(6, 2 * 128);
      const auto v = input(6, 2 * 128);
      cpu_->qk_norm_rope_store(0, q.first, k.first, v.first, with_norms ? &q_norm.first : nullptr,
                               with_norms ? &k_norm.first : nullptr, 1e-6f, 128);
      gpu_->qk_norm_rope_store(0, q.second, k.second, v.second, with_norms ? &q_norm.second : nullptr,
                               with_norms ? &k_norm.second : nullptr, 1e-6f, 128);
      EXPECT_LT(error(q), 1e-5) << "q, interleaved " << interleaved << ", norms " << with_norms;
      EXPECT_LT(error(k), 1e-5) << "k, interleaved " << interleaved << ", norms " << with_norms;
      cpu_->rope(0, q.first, k.first, 128);
      gpu_->rope(0, q.second, k.second, 128);
      EXPECT_LT(error(q), 1e-5) << "q rotated again, interleaved " << interleaved;
      EXPECT_LT(error(k), 1e-5) << "k rotated again, interleaved " << interleaved;
    }
  }
}

// The GPU stores keys and values inside its norm + rope kernel: attention over what it stored (a prefill,
// then a decode over it, in both layers) matches the CPU, which stores them on their own.
TEST_F(CudaBackendTest, KeysAndValuesStoredWithRopeFeedAttention) {
  REQUIRE_GPU();
  for (const auto kv_type : {WeightType::F32, WeightType::BF16}) {
    cpu_ = make_cpu_backend(2);
    gpu_ = make_gpu();
    init(128, kv_type);
    const double tolerance = kv_type == WeightType::F32 ? 1e-5 : 2e-2;
    const auto q_norm = norm_weight(128);
    const auto k_norm = norm_weight(128);
    Seq a{0, 37, {}}, b{0, 5, {}};
    for (int step = 0; step < 2; ++step) {
      begin({&a, &b});
      const std::size_t tokens = a.count + b.count;
      for (std::size_t layer = 0; layer < 2; ++layer) {
        const auto q = input(tokens, 8 * 128);
        const auto k = input(tokens, 2 * 128);
        const auto v = input(tokens, 2 * 128);
        const auto out = output(tokens, 8 * 128);
        cpu_->qk_norm_rope_store(layer, q.first, k.first, v.first, &q_norm.first, &k_norm.first, 1e-6f, 128);
        gpu_->qk_norm_rope_store(layer, q.second, k.second, v.second, &q_norm.second, &k_norm.second, 1e-6f, 128);
        cpu_->attention(layer, q.first, 0.088f, out.first);
        gpu_->attention(layer, q.second, 0.088f, out.second);
        EXPECT_LT(error(out), tolerance) << quant::weight_type_name(kv_type) << " cache, step " << step << ", layer "
                                         << layer;
      }
      a = {a.start + a.count, 1, a.table};
      b = {b.start + b.count, 1, b.table};
    }
  }
}

// A decoder layer's projections, each as the transformer calls it: q, k and v of the normed residual (on the
// GPU one launch per weight type among them, the norm applied as the GEMV reads x),
// the output projection added into the residual, and SwiGLU's product through the down projection added
// into it; at the GEMV's token counts and past them (cuBLAS).
TEST_F(CudaBackendTest, DecoderLayerProjectionsMatchTheCpu) {
  REQUIRE_GPU();
  init(64, WeightType::F32);
  for (const auto type : {WeightType::BF16, WeightType::Q8_0, WeightType::Q4_K}) {
    for (const std::size_t tokens : {1, 5, 8, 12}) {
      Seq s{0, tokens, {}};
      begin({&s});
      const auto wq = weight(type, 512, 256), wk = weight(type, 128, 256);
      // v in another type on every other round (as GGUF files often keep it): it gets a launch of its own.
      const auto wv = weight(tokens % 2 == 0 ? WeightType::F16 : type, 128, 256);
      const auto bq = norm_weight(512), bk = norm_weight(128), bv = norm_weight(128);
      const auto norm = norm_weight(256);
      const auto x = input(tokens, 256, 3.0f);
      const auto normed = output(tokens, 256);
      const auto q = output(tokens, 512), k = output(tokens, 128), v = output(tokens, 128);
      const Projection cpu_group[] = {
          {&wq.first, &bq.first, q.first}, {&wk.first, &bk.first, k.first}, {&wv.first, &bv.first, v.first}};
      const Projection gpu_group[] = {
          {&wq.second, &bq.second, q.second}, {&wk.second, &bk.second, k.second}, {&wv.second, &bv.second, v.second}};
      cpu_->norm_matmul_group(x.first, norm.first, 1e-6f, normed.first, cpu_group);
      gpu_->norm_matmul_group(x.second, norm.second, 1e-6f, normed.second, gpu_group);
      const std::string what = std::string(quant::weight_type_name(type)) + ", " + std::to_string(tokens) + " tokens";
      EXPECT_LT(error(q), 1e-2) << "q, " << what;
      EXPECT_LT(error(k), 1e-2) << "k, " << what;
      EXPECT_LT(error(v), 1e-2) << "v, " << what;

      const auto wo = weight(type, 256, 512);
      const auto attn = input(tokens, 512);
      const auto product = output(tokens, 256);
      cpu_->matmul_add(attn.first, wo.first, product.first, x.first);
      gpu_->matmul_add(attn.second, wo.second, product.second, x.second);
      EXPECT_LT(error(x), 1e-2) << "residual after matmul_add, " << what;

      const auto down = weight(type, 256, 512);
      const auto gate = input(tokens, 512, 2.0f);
      const auto up = input(tokens, 512);
      cpu_->swiglu_matmul_add(gate.first, up.first, down.first, product.first, x.first);
      gpu_->swiglu_matmul_add(gate.second, up.second, down.second, product.second, x.second);
      EXPECT_LT(error(x), 1e-2) << "residual after swiglu_matmul_add, " << what;
    }
  }
}

// Prefills (tiled kernels), mixed decodes and short chunks (per-token kernel), and a long context split into
// partitions, over shuffled block tables in both layers; f32 and bf16 caches, bf16 ones with the prefill on
// the tensor cores and on the CUDA cores.
class CudaAttentionTest : public CudaBackendTest,
                          public ::testing::WithParamInterface<std::tuple<std::size_t, WeightType, bool>> {
 protected:
  // Runs attention for both layers of the current step on random q/k/v; returns the worst error.
  double attend(std::size_t q_heads) {
    const std::size_t tokens = layout_.tokens.size();
    const std::size_t d = shape_.head_dim;
    double worst = 0;
    for (std::size_t layer = 0; layer < shape_.num_layers; ++layer) {
      const auto q = input(tokens, q_heads * d);
      const auto k = input(tokens, shape_.num_kv_heads * d);
      const auto v = input(tokens, shape_.num_kv_heads * d);
      const auto out = output(tokens, q_heads * d);
      const float scale = 1.0f / std::sqrt(static_cast<float>(d));
      cpu_->store_kv(layer, k.first, v.first);
      gpu_->store_kv(layer, k.second, v.second);
      cpu_->attention(layer, q.first, scale, out.first);
      gpu_->attention(layer, q.second, scale, out.second);
      worst = std::max(worst, error(out));
    }
    return worst;
  }
};

TEST_P(CudaAttentionTest, MatchesTheCpuForPrefillDecodeAndLongContexts) {
  REQUIRE_GPU();
  const auto [head_dim, kv_type, tensor_cores] = GetParam();
  gpu_ = make_gpu(tensor_cores);
  init(head_dim, kv_type);
  // bf16 keys and values round to 8 bits of mantissa.
  const double tolerance = kv_type == WeightType::F32 ? 1e-5 : 2e-2;
  Seq a{0, 45, {}}, b{0, 70, {}}, c{0, 1, {}};
  begin({&a, &b, &c});
  EXPECT_LT(attend(8), tolerance) << "prefill";

  a = {45, 1, a.table};
  b = {70, 5, b.table};
  c = {1, 1, c.table};
  begin({&a, &b, &c});
  EXPECT_LT(attend(8), tolerance) << "decode and a short chunk";

  Seq longest{0, 1500, {}};
  begin({&longest}, false);
  EXPECT_LT(attend(8), tolerance) << "a long prefill";
  longest = {1500, 1, longest.table};
  begin({&longest});
  EXPECT_LT(attend(8), tolerance) << "a decode over 1501 positions";
}

INSTANTIATE_TEST_SUITE_P(HeadDimAndCache, CudaAttentionTest,
                         ::testing::Combine(::testing::Values(std::size_t{64}, std::size_t{128}),
                                            ::testing::Values(WeightType::F32, WeightType::BF16), ::testing::Bool()));

// A cache of 4 blocks of 16 positions, one kv head.
KvCacheShape small_cache(std::size_t layers, std::size_t head_dim) {
  KvCacheShape shape;
  shape.num_layers = layers;
  shape.num_kv_heads = 1;
  shape.head_dim = head_dim;
  shape.block_size = 16;
  shape.num_blocks = 4;
  return shape;
}

TEST(CudaBackend, RefusesAHeadDimItsAttentionCannotRun) {
  REQUIRE_GPU();
  auto gpu = make_cuda_backend({});
  const KvCacheShape shape = small_cache(1, 72);
  RopeSpec rope;
  rope.inv_freq.assign(36, 1.0);
  try {
    gpu->init_cache(shape, rope);
    FAIL() << "head_dim 72 was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("head_dim 72 is not"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--device cpu"), std::string::npos) << e.what();
  }
}

// The CUDA kernels rotate every layer with one RoPE over every position: a plan with a layer that needs more
// (Gemma's windows and local RoPE, SmolLM3's layers without RoPE, Gemma 2's caps, Phi-4-mini's partial rotary)
// is refused, naming the layer or the RoPE.
TEST(CudaBackend, RefusesLayersItsKernelsCannotAttendWith) {
  REQUIRE_GPU();
  const KvCacheShape shape = small_cache(2, 64);
  RopeSpec rope;
  rope.inv_freq.assign(32, 1.0);
  const auto refusal = [&](const AttentionPlan& plan) -> std::string {
    try {
      make_cuda_backend({})->init_cache(shape, plan);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_THAT(refusal({{rope}, {LayerAttention{}, LayerAttention{.sliding_window = 512}}}),
              testing::HasSubstr("layer 1 attends over a sliding window of 512 positions, which the CUDA kernels do "
                                 "not implement yet; run this model with --device cpu"));
  EXPECT_THAT(refusal({{rope, rope}, {LayerAttention{}, LayerAttention{.rope = 1}}}),
              testing::HasSubstr("the layers rotate with 2 different rotary embeddings"));
  EXPECT_THAT(refusal({{rope}, {LayerAttention{.rope = std::nullopt}, LayerAttention{}}}),
              testing::HasSubstr("layer 0 has no rotary embedding"));
  EXPECT_THAT(refusal({{rope}, {LayerAttention{}, LayerAttention{.logit_softcap = 50}}}),
              testing::HasSubstr("layer 1 soft-caps its attention scores"));
  RopeSpec partial;  // Phi-4-mini's RoPE over three quarters of each head
  partial.inv_freq.assign(24, 1.0);
  EXPECT_THAT(refusal({{partial}, {LayerAttention{}, LayerAttention{}}}),
              testing::HasSubstr("RoPE over 48 dimensions of heads of 64 (partial rotary, Phi-4-mini's)"));
  EXPECT_EQ(refusal({{rope}, {LayerAttention{}, LayerAttention{}}}), "");
}

TEST(CudaBackend, ABadDeviceIndexIsRefusedByName) {
  REQUIRE_GPU();
  try {
    make_cuda_backend({.device = 999});
    FAIL() << "device 999 was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("GPU 999"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace engine::backend
