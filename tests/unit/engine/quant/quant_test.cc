#include "engine/quant/quant.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/format/ggml_types.h"
#include "engine/quant/iq_grids.h"
#include "tests/support/weight_blocks.h"

namespace engine::quant {
namespace {

using testing_support::kAllTypes;

std::vector<float> random_row(std::size_t n, std::uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> row(n);
  for (auto& v : row) v = dist(rng);
  return row;
}

std::vector<std::byte> quantize(WeightType type, const std::vector<float>& row) {
  std::vector<std::byte> bytes(*row_bytes(type, row.size()));
  quantize_row(type, row, bytes);
  return bytes;
}

std::vector<float> dequantize(WeightType type, const std::vector<std::byte>& bytes, std::size_t n) {
  std::vector<float> row(n);
  dequantize_row(type, bytes, row);
  return row;
}

void put_u16(std::vector<std::byte>& b, std::size_t at, std::uint16_t v) {
  b[at] = static_cast<std::byte>(v & 0xFF);
  b[at + 1] = static_cast<std::byte>(v >> 8);
}

std::uint16_t get_u16(const std::vector<std::byte>& b, std::size_t at) {
  return static_cast<std::uint16_t>(std::to_integer<unsigned>(b[at]) | (std::to_integer<unsigned>(b[at + 1]) << 8));
}

// ---- type facts ------------------------------------------------------------------------------------

TEST(WeightTypes, AgreeWithTheGgufTypeTable) {
  for (const WeightType type : kAllTypes) {
    if (type == WeightType::F8_E4M3) continue;  // safetensors' FP8, below: GGUF has no such type
    ASSERT_TRUE(ggml_type_id(type).has_value()) << weight_type_name(type);
    const auto* info = format::ggml_type_info(*ggml_type_id(type));
    ASSERT_NE(info, nullptr) << weight_type_name(type);
    EXPECT_EQ(info->name, weight_type_name(type));
    EXPECT_EQ(info->block_size, block_elements(type));
    EXPECT_EQ(info->type_size, block_bytes(type));
    EXPECT_EQ(weight_type_from_name(weight_type_name(type)), type);
    EXPECT_EQ(weight_type_from_ggml(*ggml_type_id(type)), type);
  }
  EXPECT_EQ(ggml_type_id(WeightType::F8_E4M3), std::nullopt);
  EXPECT_EQ(weight_type_from_name("F8_E4M3"), WeightType::F8_E4M3);
  EXPECT_EQ(block_elements(WeightType::F8_E4M3), 1u);
  EXPECT_EQ(block_bytes(WeightType::F8_E4M3), 1u);
  EXPECT_EQ(ggml_type_id(WeightType::BF16), 30u);
  EXPECT_EQ(ggml_type_id(WeightType::Q4_K), 12u);
  EXPECT_EQ(block_bytes(WeightType::Q4_K), 144u);
  EXPECT_EQ(block_bytes(WeightType::Q5_K), 176u);
  EXPECT_EQ(block_bytes(WeightType::Q6_K), 210u);
  EXPECT_EQ(ggml_type_id(WeightType::Q4_1), 3u);
  EXPECT_EQ(ggml_type_id(WeightType::Q5_0), 6u);
  EXPECT_EQ(ggml_type_id(WeightType::Q5_1), 7u);
  EXPECT_EQ(ggml_type_id(WeightType::Q2_K), 10u);
  // ggml's codebook types (ggml-common.h's block structs: 2 + 64, + 8 scales; 2 + 64 + 8 + 8; 2 + 96;
  // 2 + 64 + 8 + 32 + 4; 2 + 32 + 16; 32 + 16 + 8).
  for (const auto& [type, id, bytes] :
       {std::tuple{WeightType::IQ2_XXS, 16u, 66u}, std::tuple{WeightType::IQ2_XS, 17u, 74u},
        std::tuple{WeightType::IQ2_S, 22u, 82u}, std::tuple{WeightType::IQ3_XXS, 18u, 98u},
        std::tuple{WeightType::IQ3_S, 21u, 110u}, std::tuple{WeightType::IQ1_S, 19u, 50u},
        std::tuple{WeightType::IQ1_M, 29u, 56u}}) {
    EXPECT_EQ(ggml_type_id(type), id) << weight_type_name(type);
    EXPECT_EQ(block_elements(type), 256u) << weight_type_name(type);
    EXPECT_EQ(block_bytes(type), bytes) << weight_type_name(type);
  }
  EXPECT_EQ(ggml_type_id(WeightType::MXFP4), 39u);  // ggml-common.h's block_mxfp4: u8 e, 16 bytes of nibbles
  EXPECT_EQ(block_elements(WeightType::MXFP4), 32u);
  EXPECT_EQ(block_bytes(WeightType::MXFP4), 17u);
  EXPECT_EQ(weight_type_from_name("TQ1_0"), std::nullopt);
  EXPECT_EQ(weight_type_from_ggml(34), std::nullopt);  // TQ1_0: a real ggml type the engine does not use
}

TEST(WeightTypes, NamesListEveryType) {
  const std::string names = weight_type_names();
  for (const WeightType type : kAllTypes) {
    EXPECT_NE(names.find(std::string(weight_type_name(type))), std::string::npos) << names;
  }
  EXPECT_EQ(names.substr(0, 15), "F32, F16, BF16,");
}

TEST(WeightTypes, RowBytes) {
  EXPECT_EQ(row_bytes(WeightType::F32, 7), 28u);
  EXPECT_EQ(row_bytes(WeightType::BF16, 7), 14u);
  EXPECT_EQ(row_bytes(WeightType::Q8_0, 1024), 1024u / 32 * 34);
  EXPECT_EQ(row_bytes(WeightType::Q6_K, 3072), 3072u / 256 * 210);
  EXPECT_EQ(row_bytes(WeightType::Q8_0, 48), std::nullopt);
  EXPECT_EQ(row_bytes(WeightType::Q4_K, 128), std::nullopt);
}

TEST(WeightTypes, RejectsPartialBlocksAndWrongBufferSizes) {
  for (const WeightType type : kAllTypes) {
    if (block_elements(type) == 1) continue;
    const std::size_t n = block_elements(type) + 16;  // one block and a half-ish
    std::vector<float> src(n, 1.0f);
    std::vector<std::byte> dst(block_bytes(type) * 2);
    EXPECT_THROW(quantize_row(type, src, dst), std::invalid_argument) << weight_type_name(type);
    EXPECT_THROW(dequantize_row(type, dst, src), std::invalid_argument) << weight_type_name(type);
    std::vector<float> whole(block_elements(type), 1.0f);
    std::vector<std::byte> short_dst(block_bytes(type) - 1);
    EXPECT_THROW(quantize_row(type, whole, short_dst), std::invalid_argument) << weight_type_name(type);
    EXPECT_THROW(dequantize_row(type, short_dst, whole), std::invalid_argument) << weight_type_name(type);
  }
  std::vector<float> three(3);
  std::vector<std::byte> five(5);
  EXPECT_THROW(quantize_row(WeightType::F16, three, five), std::invalid_argument);
}

// ---- f16 / bf16 ------------------------------------------------------------------------------------

TEST(Half, KnownEncodings) {
  EXPECT_EQ(f32_to_f16(0.0f), 0x0000);
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_f16(1.0f), 0x3C00);
  EXPECT_EQ(f32_to_f16(-2.0f), 0xC000);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7BFF);  // largest half
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7BFF);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7C00);  // the tie above 65504 rounds to even: infinity
  EXPECT_EQ(f32_to_f16(1e10f), 0x7C00);
  EXPECT_EQ(f32_to_f16(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_EQ(f32_to_f16(-std::numeric_limits<float>::infinity()), 0xFC00);
  // Ties to even in the normal range: 1 + 2^-11 lies halfway between 1 and 1 + 2^-10.
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);
  EXPECT_EQ(f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3C01);
  // Carry out of the mantissa into the exponent: 2 - 2^-12 rounds up to 2.
  EXPECT_EQ(f32_to_f16(2.0f - std::ldexp(1.0f, -12)), 0x4000);
  // Subnormals: 2^-24 is the smallest; 2^-25 ties to 0 (even); 3 * 2^-25 ties to 2 * 2^-24 (even).
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -14)), 0x0400);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25) * 1.0001f), 0x0001);
  EXPECT_EQ(f32_to_f16(3 * std::ldexp(1.0f, -25)), 0x0002);
  EXPECT_EQ(f32_to_f16(5 * std::ldexp(1.0f, -25)), 0x0002);
  EXPECT_EQ(f32_to_f16(-std::ldexp(1.0f, -24)), 0x8001);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -14) - std::ldexp(1.0f, -25)), 0x0400);  // rounds up to the smallest normal
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -30)), 0x0000);
  EXPECT_EQ(f32_to_f16(std::numeric_limits<float>::denorm_min()), 0x0000);
}

TEST(Half, NanStaysNan) {
  for (const std::uint32_t bits : {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0x7FBFFFFFu, 0xFF800001u}) {
    const std::uint16_t h = f32_to_f16(std::bit_cast<float>(bits));
    EXPECT_EQ(h & 0x7C00, 0x7C00) << std::hex << bits;
    EXPECT_NE(h & 0x03FF, 0) << std::hex << bits;
    EXPECT_EQ(h & 0x8000, (bits >> 16) & 0x8000) << std::hex << bits;
    EXPECT_TRUE(std::isnan(f16_to_f32(h)));
  }
}

TEST(Half, Decoding) {
  EXPECT_EQ(f16_to_f32(0x3C00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xC000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x7BFF), 65504.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16_to_f32(0x03FF), 1023 * std::ldexp(1.0f, -24));
  EXPECT_EQ(f16_to_f32(0x0400), std::ldexp(1.0f, -14));
  EXPECT_EQ(f16_to_f32(0x3555), 0.333251953125f);
  EXPECT_EQ(f16_to_f32(0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(f16_to_f32(0xFC00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::signbit(f16_to_f32(0x8000)));
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7E00)));
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7C01)));
}

// Every non-NaN half decodes exactly and encodes back to itself; every value halfway between two adjacent
// halves rounds to the one with an even mantissa.
TEST(Half, ExhaustiveRoundTripAndTies) {
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const auto bits = static_cast<std::uint16_t>(h);
    const float f = f16_to_f32(bits);
    if ((bits & 0x7C00) == 0x7C00 && (bits & 0x03FF) != 0) continue;
    ASSERT_EQ(f32_to_f16(f), bits) << std::hex << h;
    // Ties between this half and the next larger magnitude (both finite).
    if ((bits & 0x7FFF) >= 0x7BFF) continue;
    const float next = f16_to_f32(static_cast<std::uint16_t>(bits + 1));
    const double mid = (static_cast<double>(f) + static_cast<double>(next)) / 2;
    const auto mid_f = static_cast<float>(mid);
    ASSERT_EQ(static_cast<double>(mid_f), mid);  // halfway points of halves are exact floats
    const std::uint16_t even = (bits & 1) == 0 ? bits : static_cast<std::uint16_t>(bits + 1);
    ASSERT_EQ(f32_to_f16(mid_f), even) << std::hex << h;
    ASSERT_EQ(f32_to_f16(std::nextafter(mid_f, 0.0f)), bits) << std::hex << h;
    ASSERT_EQ(f32_to_f16(std::nextafter(mid_f, 2 * mid_f)), static_cast<std::uint16_t>(bits + 1)) << std::hex << h;
  }
}

TEST(BFloat16, KnownEncodings) {
  const auto from_bits = [](std::uint32_t b) { return std::bit_cast<float>(b); };
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(f32_to_bf16(-2.0f), 0xC000);
  EXPECT_EQ(f32_to_bf16(from_bits(0x3F808000u)), 0x3F80);  // tie, even below
  EXPECT_EQ(f32_to_bf16(from_bits(0x3F818000u)), 0x3F82);  // tie, even above
  EXPECT_EQ(f32_to_bf16(from_bits(0x3F808001u)), 0x3F81);
  EXPECT_EQ(f32_to_bf16(from_bits(0x3F807FFFu)), 0x3F80);
  EXPECT_EQ(f32_to_bf16(from_bits(0x3FFF8000u)), 0x4000);  // carry into the exponent
  EXPECT_EQ(f32_to_bf16(from_bits(0x7F7FFFFFu)), 0x7F80);  // FLT_MAX rounds to infinity
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(f32_to_bf16(-std::numeric_limits<float>::infinity()), 0xFF80);
  EXPECT_EQ(f32_to_bf16(-0.0f), 0x8000);
  // Subnormals round like any other value (no flushing).
  EXPECT_EQ(f32_to_bf16(from_bits(0x00010000u)), 0x0001);
  EXPECT_EQ(f32_to_bf16(from_bits(0x00008000u)), 0x0000);
  EXPECT_EQ(f32_to_bf16(from_bits(0x00018000u)), 0x0002);
  EXPECT_EQ(f32_to_bf16(from_bits(0x00008001u)), 0x0001);
  EXPECT_EQ(f32_to_bf16(from_bits(0x80018000u)), 0x8002);
  for (const std::uint32_t nan : {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0x7F80FFFFu, 0x7FFFFFFFu}) {
    const std::uint16_t b = f32_to_bf16(from_bits(nan));
    EXPECT_TRUE(std::isnan(bf16_to_f32(b))) << std::hex << nan;
    EXPECT_EQ(b & 0x8000, (nan >> 16) & 0x8000) << std::hex << nan;
  }
  EXPECT_EQ(bf16_to_f32(0x3F80), 1.0f);
  EXPECT_EQ(bf16_to_f32(0x0001), from_bits(0x00010000u));
  EXPECT_EQ(bf16_to_f32(0xFF80), -std::numeric_limits<float>::infinity());
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const float f = bf16_to_f32(static_cast<std::uint16_t>(b));
    ASSERT_EQ(std::bit_cast<std::uint32_t>(f), b << 16);
    if (!std::isnan(f)) {
      ASSERT_EQ(f32_to_bf16(f), b);
    }
  }
}

TEST(FloatRows, RoundTrip) {
  const auto row = random_row(37, 1);
  EXPECT_EQ(dequantize(WeightType::F32, quantize(WeightType::F32, row), row.size()), row);
  const auto half = dequantize(WeightType::F16, quantize(WeightType::F16, row), row.size());
  const auto bf = dequantize(WeightType::BF16, quantize(WeightType::BF16, row), row.size());
  for (std::size_t i = 0; i < row.size(); ++i) {
    EXPECT_EQ(half[i], f16_to_f32(f32_to_f16(row[i])));
    EXPECT_NEAR(half[i], row[i], std::fabs(row[i]) * 0x1p-11f + 0x1p-25f);
    EXPECT_EQ(bf[i], bf16_to_f32(f32_to_bf16(row[i])));
    EXPECT_NEAR(bf[i], row[i], std::fabs(row[i]) * 0x1p-8f);
  }
}

// ---- hand-built blocks: expected values from the layout description, computed independently -------------

TEST(HandBuiltBlocks, Q8_0) {
  std::vector<std::byte> block(34);
  put_u16(block, 0, 0xB800);  // d = -0.5
  std::vector<int> q(32);
  for (int j = 0; j < 32; ++j) q[j] = (j * 37 + 11) % 256 - 128;  // covers -128 .. 127 spread
  q[0] = -128;
  q[31] = 127;
  for (int j = 0; j < 32; ++j) block[2 + j] = static_cast<std::byte>(static_cast<std::uint8_t>(q[j]));
  const auto y = dequantize(WeightType::Q8_0, block, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], -0.5f * static_cast<float>(q[j])) << j;
}

TEST(HandBuiltBlocks, Q4_0) {
  std::vector<std::byte> block(18);
  put_u16(block, 0, 0x4100);  // d = 2.5
  std::vector<int> q(32);
  for (int j = 0; j < 32; ++j) q[j] = (j * 7 + 3) % 16;
  // Byte 2 + j holds element j in its low nibble and element j + 16 in its high nibble.
  for (int j = 0; j < 16; ++j) block[2 + j] = static_cast<std::byte>(q[j] | (q[j + 16] << 4));
  const auto y = dequantize(WeightType::Q4_0, block, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], 2.5f * static_cast<float>(q[j] - 8)) << j;
}

// Q4_1 { d; m; qs[16] }, Q5_0 { d; qh[4]; qs[16] }, Q5_1 { d; m; qh[4]; qs[16] }: nibbles as Q4_0, the fifth
// bit of element j is bit j of qh (little-endian); x = d q + m, or d (q - 16) for Q5_0.
std::vector<std::byte> nibble_block(WeightType type, std::uint16_t d, std::uint16_t m, const std::vector<int>& q) {
  const bool with_min = type != WeightType::Q5_0, five_bit = type != WeightType::Q4_1;
  std::vector<std::byte> block(block_bytes(type));
  put_u16(block, 0, d);
  if (with_min) put_u16(block, 2, m);
  const std::size_t qh = with_min ? 4 : 2, qs = qh + (five_bit ? 4 : 0);
  std::uint32_t high = 0;
  for (int j = 0; j < 32; ++j) high |= static_cast<std::uint32_t>((q[j] >> 4) & 1) << j;
  for (int i = 0; five_bit && i < 4; ++i) block[qh + i] = static_cast<std::byte>((high >> (8 * i)) & 0xFF);
  for (int j = 0; j < 16; ++j) block[qs + j] = static_cast<std::byte>((q[j] & 0xF) | ((q[j + 16] & 0xF) << 4));
  return block;
}

TEST(HandBuiltBlocks, Q4_1) {
  std::vector<int> q(32);
  for (int j = 0; j < 32; ++j) q[j] = (j * 7 + 3) % 16;
  const auto y = dequantize(WeightType::Q4_1, nibble_block(WeightType::Q4_1, 0x4100, 0xBC00, q), 32);  // 2.5, -1
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], 2.5f * static_cast<float>(q[j]) - 1.0f) << j;
}

TEST(HandBuiltBlocks, Q5_0) {
  std::vector<int> q(32);
  for (int j = 0; j < 32; ++j) q[j] = (j * 13 + 5) % 32;
  q[0] = 31;
  q[31] = 16;
  const auto y = dequantize(WeightType::Q5_0, nibble_block(WeightType::Q5_0, 0xB800, 0, q), 32);  // d = -0.5
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], -0.5f * static_cast<float>(q[j] - 16)) << j;
}

TEST(HandBuiltBlocks, Q5_1) {
  std::vector<int> q(32);
  for (int j = 0; j < 32; ++j) q[j] = (j * 11 + 1) % 32;
  const auto y = dequantize(WeightType::Q5_1, nibble_block(WeightType::Q5_1, 0x3400, 0x4000, q), 32);  // 0.25, 2
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], 0.25f * static_cast<float>(q[j]) + 2.0f) << j;
}

constexpr int kIq4Levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

TEST(HandBuiltBlocks, IQ4_NL) {
  std::vector<std::byte> block(18);
  put_u16(block, 0, 0x3800);  // d = 0.5
  std::vector<int> q(32);
  for (int j = 0; j < 32; ++j) q[j] = (j * 5 + 2) % 16;
  for (int j = 0; j < 16; ++j) block[2 + j] = static_cast<std::byte>(q[j] | (q[j + 16] << 4));
  const auto y = dequantize(WeightType::IQ4_NL, block, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], 0.5f * static_cast<float>(kIq4Levels[q[j]])) << j;
}

// FP4 E2M1 (OCP Microscaling Formats v1.0, section 5.3.3) from its bits, independent of the engine's table:
// sign, two exponent bits (bias 1), one mantissa bit; exponent 0 is subnormal (0 or 0.5).
float e2m1(int bits) {
  const int exponent = (bits >> 1) & 3, mantissa = bits & 1;
  const float magnitude = exponent == 0 ? 0.5f * static_cast<float>(mantissa)
                                        : std::ldexp(1.0f + 0.5f * static_cast<float>(mantissa), exponent - 1);
  return (bits & 8) != 0 ? -magnitude : magnitude;
}

TEST(HandBuiltBlocks, MXFP4) {
  // Element j's nibble: j's low nibble for j < 16, j - 16's high one after; the scale 2^(e - 127) (E8M0).
  for (const int e : {127, 130, 100, 1, 0, 200}) {
    std::vector<std::byte> block(17);
    block[0] = static_cast<std::byte>(e);
    std::vector<int> q(32);
    for (int j = 0; j < 32; ++j) q[j] = (j * 7 + 3) % 16;
    for (int j = 0; j < 16; ++j) block[1 + j] = static_cast<std::byte>(q[j] | (q[j + 16] << 4));
    const auto y = dequantize(WeightType::MXFP4, block, 32);
    for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], std::ldexp(e2m1(q[j]), e - 127)) << "e " << e << ", element " << j;
  }
}

TEST(HandBuiltBlocks, IQ4_XS) {
  std::vector<std::byte> block(136);
  put_u16(block, 0, 0x3400);  // d = 0.25
  // Block scales s (6 bits, value s - 32): low nibbles in bytes 4-7 (block 2i low, 2i + 1 high), top two
  // bits at bits 2 ib of the word at byte 2.
  const int s[8] = {0, 63, 32, 31, 1, 47, 16, 40};
  std::uint16_t high = 0;
  for (int ib = 0; ib < 8; ++ib) {
    block[4 + ib / 2] |= static_cast<std::byte>((s[ib] & 0xF) << (4 * (ib % 2)));
    high = static_cast<std::uint16_t>(high | ((s[ib] >> 4) << (2 * ib)));
  }
  put_u16(block, 2, high);
  std::vector<int> q(256);
  for (int i = 0; i < 256; ++i) {
    q[i] = (i * 7 + i / 32) % 16;
    const int ib = i / 32, j = i % 32;
    block[8 + 16 * ib + j % 16] |= static_cast<std::byte>(q[i] << (j < 16 ? 0 : 4));
  }
  const auto y = dequantize(WeightType::IQ4_XS, block, 256);
  for (int i = 0; i < 256; ++i) {
    EXPECT_EQ(y[i], 0.25f * static_cast<float>((s[i / 32] - 32) * kIq4Levels[q[i]])) << i;
  }
}

TEST(HandBuiltBlocks, Q2_K) {
  std::vector<std::byte> block(84);
  put_u16(block, 80, 0x3800);  // d = 0.5
  put_u16(block, 82, 0x3400);  // dmin = 0.25
  // Byte s (s < 16): the 4-bit scale (low nibble) and min (high) of elements 16 s .. 16 s + 15.
  const int sc[16] = {0, 15, 7, 1, 9, 3, 12, 5, 2, 14, 6, 10, 4, 13, 8, 11};
  for (int s = 0; s < 16; ++s) block[s] = static_cast<std::byte>(sc[s] | (sc[15 - s] << 4));
  std::vector<int> q(256);
  for (int i = 0; i < 256; ++i) {
    q[i] = (i * 3 + i / 64) % 4;
    // Element 128 h + 32 k + l: bits 2k of byte 16 + 32 h + l.
    const int h = i / 128, k = (i % 128) / 32, l = i % 32;
    block[16 + 32 * h + l] |= static_cast<std::byte>(q[i] << (2 * k));
  }
  const auto y = dequantize(WeightType::Q2_K, block, 256);
  for (int i = 0; i < 256; ++i) {
    const float expected = 0.5f * static_cast<float>(sc[i / 16] * q[i]) - 0.25f * static_cast<float>(sc[15 - i / 16]);
    EXPECT_EQ(y[i], expected) << i;
  }
}

TEST(HandBuiltBlocks, Q3_K) {
  std::vector<std::byte> block(110);
  put_u16(block, 108, 0x3800);  // d = 0.5, stored last
  // 16 scales s (6 bits, value s - 32): low nibbles in bytes 96-103 (sub-blocks 0-7 low, 8-15 high), top
  // two bits of sub-block j at bits 2 (j / 4) of byte 104 + j % 4.
  const int s[16] = {0, 63, 32, 31, 1, 47, 16, 40, 5, 60, 33, 12, 29, 50, 2, 61};
  for (int j = 0; j < 16; ++j) {
    block[96 + j % 8] |= static_cast<std::byte>((s[j] & 0xF) << (j < 8 ? 0 : 4));
    block[104 + j % 4] |= static_cast<std::byte>((s[j] >> 4) << (2 * (j / 4)));
  }
  std::vector<int> q(256);
  for (int i = 0; i < 256; ++i) {
    q[i] = (i * 3 + i / 64) % 8 - 4;  // -4 .. 3
    // Element 128 h + 32 k + l: low two bits at bits 2k of byte 32 + 32 h + l; bit 4h + k of hmask[l] set
    // when q >= 0 (the stored level is q + 4).
    const int level = q[i] + 4, h = i / 128, k = (i % 128) / 32, l = i % 32;
    block[32 + 32 * h + l] |= static_cast<std::byte>((level & 3) << (2 * k));
    if (level >= 4) block[l] |= static_cast<std::byte>(1 << (4 * h + k));
  }
  const auto y = dequantize(WeightType::Q3_K, block, 256);
  for (int i = 0; i < 256; ++i) EXPECT_EQ(y[i], 0.5f * static_cast<float>((s[i / 16] - 32) * q[i])) << i;
}

// Scales and mins of the 8 sub-blocks of a Q4_K / Q5_K block, laid out in its 12 scale bytes: bytes 0-3
// hold scale 0-3 in bits 0-5 and the top two bits of scale 4-7 in bits 6-7; bytes 4-7 likewise for the
// mins; bytes 8-11 hold the low nibble of scale 4-7 (bits 0-3) and of min 4-7 (bits 4-7).
std::vector<std::uint8_t> pack_k_scales(const int (&sc)[8], const int (&mn)[8]) {
  std::vector<std::uint8_t> b(12, 0);
  for (int i = 0; i < 4; ++i) {
    b[i] = static_cast<std::uint8_t>(sc[i] | ((sc[i + 4] >> 4) << 6));
    b[4 + i] = static_cast<std::uint8_t>(mn[i] | ((mn[i + 4] >> 4) << 6));
    b[8 + i] = static_cast<std::uint8_t>((sc[i + 4] & 0xF) | ((mn[i + 4] & 0xF) << 4));
  }
  return b;
}

constexpr int kSubScales[8] = {1, 63, 17, 0, 48, 33, 5, 62};
constexpr int kSubMins[8] = {0, 9, 63, 31, 16, 47, 2, 61};

TEST(HandBuiltBlocks, Q4_K) {
  std::vector<std::byte> block(144);
  put_u16(block, 0, 0x3800);  // d = 0.5
  put_u16(block, 2, 0x3400);  // dmin = 0.25
  const auto scales = pack_k_scales(kSubScales, kSubMins);
  for (int i = 0; i < 12; ++i) block[4 + i] = static_cast<std::byte>(scales[i]);
  std::vector<int> q(256);
  for (int i = 0; i < 256; ++i) {
    q[i] = (i * 5 + i / 16) % 16;
    // Element i sits in byte 16 + 32 * (i / 64) + i % 32; the first 32 of each 64 in the low nibble.
    const int byte = 16 + 32 * (i / 64) + i % 32;
    const int shift = (i % 64) < 32 ? 0 : 4;
    block[byte] |= static_cast<std::byte>(q[i] << shift);
  }
  const auto y = dequantize(WeightType::Q4_K, block, 256);
  for (int i = 0; i < 256; ++i) {
    const int s = i / 32;
    const float expected = 0.5f * static_cast<float>(kSubScales[s] * q[i]) - 0.25f * static_cast<float>(kSubMins[s]);
    EXPECT_EQ(y[i], expected) << i;
  }
}

TEST(HandBuiltBlocks, Q5_K) {
  std::vector<std::byte> block(176);
  put_u16(block, 0, 0x3400);  // d = 0.25
  put_u16(block, 2, 0x3C00);  // dmin = 1
  const auto scales = pack_k_scales(kSubScales, kSubMins);
  for (int i = 0; i < 12; ++i) block[4 + i] = static_cast<std::byte>(scales[i]);
  std::vector<int> q(256);
  for (int i = 0; i < 256; ++i) {
    q[i] = (i * 11 + i / 32) % 32;
    // Low 4 bits as in Q4_K (from byte 48); the fifth bit of element i is bit i / 32 of qh[i % 32].
    const int byte = 48 + 32 * (i / 64) + i % 32;
    const int shift = (i % 64) < 32 ? 0 : 4;
    block[byte] |= static_cast<std::byte>((q[i] & 0xF) << shift);
    if (q[i] >= 16) block[16 + i % 32] |= static_cast<std::byte>(1 << (i / 32));
  }
  const auto y = dequantize(WeightType::Q5_K, block, 256);
  for (int i = 0; i < 256; ++i) {
    const int s = i / 32;
    const float expected = 0.25f * static_cast<float>(kSubScales[s] * q[i]) - static_cast<float>(kSubMins[s]);
    EXPECT_EQ(y[i], expected) << i;
  }
}

TEST(HandBuiltBlocks, Q6_K) {
  std::vector<std::byte> block(210);
  put_u16(block, 208, 0x3400);  // d = 0.25, stored last
  const int scales[16] = {1, -1, 127, -128, 0, 5, -7, 64, 3, -3, 100, -100, 2, 9, -50, 33};
  for (int i = 0; i < 16; ++i) block[192 + i] = static_cast<std::byte>(static_cast<std::uint8_t>(scales[i]));
  std::vector<int> q(256);
  for (int i = 0; i < 256; ++i) {
    q[i] = (i * 13 + i / 64) % 64;
    // Within each 128-element half h, element 32k + l (k < 4, l < 32) keeps its low nibble in
    // ql[64h + l + 32 (k odd)] (low nibble for k < 2, high for k >= 2) and its top two bits in bits 2k..2k+1
    // of qh[32h + l].
    const int h = i / 128, k = (i % 128) / 32, l = i % 32;
    const int ql = 64 * h + l + ((k & 1) != 0 ? 32 : 0);
    block[ql] |= static_cast<std::byte>((q[i] & 0xF) << (k >= 2 ? 4 : 0));
    block[128 + 32 * h + l] |= static_cast<std::byte>((q[i] >> 4) << (2 * k));
  }
  const auto y = dequantize(WeightType::Q6_K, block, 256);
  for (int i = 0; i < 256; ++i) {
    const float expected = 0.25f * static_cast<float>(scales[i / 16] * (q[i] - 32));
    EXPECT_EQ(y[i], expected) << i;
  }
}

// ---- the codebooks ---------------------------------------------------------------------------------

// FNV-1a over each entry's bytes (byte k: weight k), to catch any transcription error in iq_grids.h.
template <class Entry, std::size_t N>
std::uint64_t grid_hash(const Entry (&grid)[N], std::set<int>& bytes) {
  std::uint64_t h = 0xcbf29ce484222325u;
  for (const Entry entry : grid) {
    for (std::size_t k = 0; k < sizeof(Entry); ++k) {
      const auto byte = static_cast<unsigned>((entry >> (8 * k)) & 0xFF);
      bytes.insert(static_cast<int>(byte));
      h = (h ^ byte) * 0x100000001b3u;
    }
  }
  return h;
}

// The hashes, sizes and byte sets of ggml-common.h's grids (computed from that file), and entries seen there.
TEST(Codebooks, AreGgmls) {
  const std::set<int> iq2{8, 25, 43};
  std::set<int> bytes;
  EXPECT_EQ(grid_hash(iq_grids::kIq2XxsGrid, bytes), 0xbb4ee025b5ac6e8eu);
  EXPECT_EQ(bytes, iq2);
  bytes.clear();
  EXPECT_EQ(grid_hash(iq_grids::kIq2XsGrid, bytes), 0xc9b1ee61e79909bdu);
  EXPECT_EQ(bytes, iq2);
  bytes.clear();
  EXPECT_EQ(grid_hash(iq_grids::kIq2SGrid, bytes), 0x123edd38a3b62b90u);
  EXPECT_EQ(bytes, iq2);
  bytes.clear();
  EXPECT_EQ(grid_hash(iq_grids::kIq3XxsGrid, bytes), 0xdfa5dc83d6a155d5u);
  EXPECT_EQ(bytes, (std::set<int>{4, 12, 20, 28, 36, 44, 52, 62}));
  bytes.clear();
  EXPECT_EQ(grid_hash(iq_grids::kIq3SGrid, bytes), 0xfa37020c25b44829u);
  EXPECT_EQ(bytes, (std::set<int>{1, 3, 5, 7, 9, 11, 13, 15}));
  bytes.clear();
  EXPECT_EQ(grid_hash(iq_grids::kIq1SGrid, bytes), 0x6703ed863501ae2eu);
  EXPECT_EQ(bytes, (std::set<int>{0, 1, 255}));
  EXPECT_EQ(std::size(iq_grids::kIq2XxsGrid), 256u);
  EXPECT_EQ(std::size(iq_grids::kIq2XsGrid), 512u);
  EXPECT_EQ(std::size(iq_grids::kIq2SGrid), 1024u);
  EXPECT_EQ(std::size(iq_grids::kIq3XxsGrid), 256u);
  EXPECT_EQ(std::size(iq_grids::kIq3SGrid), 512u);
  EXPECT_EQ(std::size(iq_grids::kIq1SGrid), 2048u);
  EXPECT_EQ(iq_grids::kIq2XxsGrid[1], 0x080808080808082bu);
  EXPECT_EQ(iq_grids::kIq2XxsGrid[255], 0x2b2b2b1908081908u);
  EXPECT_EQ(iq_grids::kIq3XxsGrid[255], 0x3e341c04u);
  EXPECT_EQ(iq_grids::kIq3SGrid[511], 0x0f0f0101u);
  EXPECT_EQ(iq_grids::kIq1SGrid[1], 0xffffffffffffff01u);
  EXPECT_EQ(iq_grids::kIq1SGrid[2047], 0x0101010101010101u);
}

TEST(HandBuiltBlocks, IQ2_XXS) {
  std::vector<std::byte> block(66);
  put_u16(block, 0, 0x3C00);  // d = 1
  block[2] = std::byte{1};    // group 0: entry 1 (43, then seven 8s); groups 1-3: entry 0 (eight 8s)
  // The word after the indices: group 0's seven sign bits 0000001 (an odd count: the eighth is set too),
  // group 1's none, scale 3 at the top: multiplier (3 + 1/2) / 4 = 0.875.
  block[6] = std::byte{0x01};
  block[9] = std::byte{0x30};
  const auto y = dequantize(WeightType::IQ2_XXS, block, 256);
  EXPECT_EQ(y[0], -0.875f * 43);
  for (int j = 1; j < 7; ++j) EXPECT_EQ(y[j], 7.0f) << j;
  EXPECT_EQ(y[7], -7.0f);
  for (int j = 8; j < 32; ++j) EXPECT_EQ(y[j], 7.0f) << j;
  EXPECT_EQ(y[32], 0.125f * 8);  // block 1: scale 0, multiplier 1/8
}

TEST(HandBuiltBlocks, IQ1_M) {
  std::vector<std::byte> block(56);
  // d = 0.5 (0x3800) in the top nibbles of the scale words: 0, 0, 8, 3.
  block[53] = std::byte{0x80};
  block[55] = std::byte{0x30};
  // Block 0's 3-bit scales: 2 (weights 0-15: d (2*2 + 1) = 2.5) and 1 (16-31: 1.5).
  block[48] = std::byte{2 | (1 << 3)};
  block[0] = std::byte{1};      // group 0: entry 1 (1, then seven -1s)
  block[32] = std::byte{0x08};  // group 0's shift negative (-1/8), group 1's positive
  const auto y = dequantize(WeightType::IQ1_M, block, 256);
  EXPECT_EQ(y[0], 2.5f * (1 - 0.125f));
  for (int j = 1; j < 8; ++j) EXPECT_EQ(y[j], 2.5f * (-1 - 0.125f)) << j;
  for (int j = 8; j < 16; ++j) EXPECT_EQ(y[j], 2.5f * (-1 + 0.125f)) << j;
  for (int j = 16; j < 32; ++j) EXPECT_EQ(y[j], 1.5f * (-1 + 0.125f)) << j;
}

// ---- FP8 E4M3 ----------------------------------------------------------------------------------------

// Every code against the OCP 8-bit float definition: sign, exponent e of bias 7, mantissa m of 3 bits; e = 0 is
// subnormal (m / 8 * 2^-6); S.1111.111 is NaN, and there are no infinities.
TEST(Fp8E4m3, EveryCodeDecodesAsTheFormatDefinesIt) {
  for (int code = 0; code < 256; ++code) {
    const int sign = code >> 7, e = (code >> 3) & 0xF, m = code & 7;
    const float value = e4m3_to_f32(static_cast<std::uint8_t>(code));
    if (e == 15 && m == 7) {
      EXPECT_TRUE(std::isnan(value)) << code;
      continue;
    }
    const double magnitude = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
    EXPECT_EQ(static_cast<double>(value), sign != 0 ? -magnitude : magnitude) << code;
  }
  EXPECT_EQ(e4m3_to_f32(0x7E), 448.0f);
  EXPECT_EQ(e4m3_to_f32(0x01), 0x1p-9f);
  // dequantize_row reads the same values.
  std::vector<std::byte> row(256);
  for (int i = 0; i < 256; ++i) row[i] = static_cast<std::byte>(i);
  const auto values = dequantize(WeightType::F8_E4M3, row, 256);
  for (int i = 0; i < 256; ++i) {
    if (i == 0x7F || i == 0xFF) continue;
    EXPECT_EQ(values[i], e4m3_to_f32(static_cast<std::uint8_t>(i))) << i;
  }
}

// Narrowing picks the nearest code, ties to the even one, saturates past 448 and keeps NaN and signed zeros.
TEST(Fp8E4m3, NarrowingRoundsToNearestEvenAndSaturates) {
  for (int code = 0; code < 256; ++code) {
    if ((code & 0x7F) == 0x7F) continue;
    EXPECT_EQ(f32_to_e4m3(e4m3_to_f32(static_cast<std::uint8_t>(code))), code) << code;  // exact values stay
  }
  // Every midpoint between neighbouring codes goes to the even one, and just off it to the nearer one.
  for (int code = 0; code < 0x7E; ++code) {
    const float low = e4m3_to_f32(static_cast<std::uint8_t>(code));
    const float high = e4m3_to_f32(static_cast<std::uint8_t>(code + 1));
    const float middle = (low + high) / 2;
    EXPECT_EQ(f32_to_e4m3(middle), (code & 1) == 0 ? code : code + 1) << code;
    EXPECT_EQ(f32_to_e4m3(std::nextafter(middle, 0.0f)), code) << code;
    EXPECT_EQ(f32_to_e4m3(std::nextafter(middle, 1000.0f)), code + 1) << code;
    EXPECT_EQ(f32_to_e4m3(-middle), 0x80 | ((code & 1) == 0 ? code : code + 1)) << code;
  }
  EXPECT_EQ(f32_to_e4m3(464.0f), 0x7E);  // beyond 448: saturated, not NaN
  EXPECT_EQ(f32_to_e4m3(1e30f), 0x7E);
  EXPECT_EQ(f32_to_e4m3(-std::numeric_limits<float>::infinity()), 0xFE);
  EXPECT_EQ(f32_to_e4m3(1e-30f), 0x00);
  EXPECT_EQ(f32_to_e4m3(-0.0f), 0x80);
  EXPECT_TRUE(std::isnan(e4m3_to_f32(f32_to_e4m3(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(BlockScales, AddressTheBlockOfEachElement) {
  const std::vector<float> values = {1, 2, 3, 4, 5, 6};  // 3 row blocks x 2 column blocks
  const BlockScales scales{values, 2, 3};                // of a 5 x 4 matrix: blocks of 2 x 3
  EXPECT_EQ(block_scales_count(scales, 5, 4), 6u);
  EXPECT_EQ(block_scales_mismatch(scales, 5, 4), std::nullopt);
  EXPECT_EQ(scales.at(0, 0, 4), 1);
  EXPECT_EQ(scales.at(1, 3, 4), 2);
  EXPECT_EQ(scales.at(2, 2, 4), 3);
  EXPECT_EQ(scales.at(4, 3, 4), 6);
  const auto mismatch = block_scales_mismatch(scales, 7, 4);  // 4 row blocks: 8 scales
  ASSERT_TRUE(mismatch.has_value());
  EXPECT_NE(mismatch->find("6 scales where blocks of 2 x 3 of a 7 x 4 matrix need 8"), std::string::npos) << *mismatch;
  EXPECT_TRUE(block_scales_mismatch(BlockScales{values, 0, 3}, 5, 4).has_value());
}

// ---- quantizer round trips ---------------------------------------------------------------------------

// Every type the engine reads it can write: model-writer offers each, and a quantized file of any of them
// round-trips (KQuantRoundTrip, reference_model.Types/Quantization).
TEST(Quantizers, EveryWeightTypeHasAQuantizer) {
  for (const WeightType type : kAllTypes) EXPECT_TRUE(has_quantizer(type)) << weight_type_name(type);
}

TEST(Quantizers, ZeroRowsStayZero) {
  for (const WeightType type : kAllTypes) {
    const std::vector<float> zeros(512, 0.0f);
    const auto bytes = quantize(type, zeros);
    // Q4_0 and Q5_0 store zeros as their middle level (8, 16) with d = 0 / -8 = -0 (0x8000), as ggml does.
    if (type == WeightType::Q4_0) {
      EXPECT_EQ(get_u16(bytes, 0), 0x8000);
      EXPECT_EQ(bytes[2], std::byte{0x88});
    } else if (type == WeightType::Q5_0) {
      EXPECT_EQ(get_u16(bytes, 0), 0x8000);
      EXPECT_EQ(bytes[2], std::byte{0xFF});  // every fifth bit set: level 16
      EXPECT_EQ(bytes[6], std::byte{0x00});
    } else if (type == WeightType::IQ4_XS) {
      // d = -0 / 32, every block scale 0 (stored 32: 0xAAAA's top bits) and level 8 (the level nearest 0).
      EXPECT_EQ(get_u16(bytes, 0), 0x8000);
      EXPECT_EQ(get_u16(bytes, 2), 0xAAAA);
      EXPECT_EQ(bytes[8], std::byte{0x88});
    } else {
      for (const std::byte b : bytes) EXPECT_EQ(b, std::byte{0}) << weight_type_name(type);
    }
    EXPECT_EQ(dequantize(type, bytes, zeros.size()), zeros) << weight_type_name(type);
  }
}

TEST(Quantizers, Q8_0ErrorWithinHalfAStep) {
  auto row = random_row(32 * 64, 2, 3.0f);
  row[5] = 0.0f;
  const auto bytes = quantize(WeightType::Q8_0, row);
  const auto back = dequantize(WeightType::Q8_0, bytes, row.size());
  for (std::size_t b = 0; b < row.size() / 32; ++b) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(row[32 * b + j]));
    const float d = f16_to_f32(get_u16(bytes, 34 * b));
    EXPECT_NEAR(d, amax / 127, amax / 127 * 0x1p-11f);
    // Half a step of the exact scale, plus up to 127 times the scale's own f16 rounding.
    const float bound = 0.5f * (amax / 127) + 127 * std::fabs(d - amax / 127) + 1e-6f;
    for (int j = 0; j < 32; ++j) ASSERT_LE(std::fabs(back[32 * b + j] - row[32 * b + j]), bound) << b << ":" << j;
  }
  EXPECT_EQ(back[5], 0.0f);
}

TEST(Quantizers, Q4_0ErrorWithinAStep) {
  const auto row = random_row(32 * 64, 3, 0.5f);
  const auto bytes = quantize(WeightType::Q4_0, row);
  const auto back = dequantize(WeightType::Q4_0, bytes, row.size());
  for (std::size_t b = 0; b < row.size() / 32; ++b) {
    const float d = f16_to_f32(get_u16(bytes, 18 * b));
    float max = 0;
    for (int j = 0; j < 32; ++j) {
      if (std::fabs(row[32 * b + j]) > std::fabs(max)) max = row[32 * b + j];
    }
    // The largest-magnitude value maps to level 0 (-8 steps) exactly, up to d's f16 rounding.
    EXPECT_NEAR(d, max / -8, std::fabs(max / 8) * 0x1p-11f);
    // Within half a step, except values at the far end that clamp from level 16 to 15: one step.
    const float bound = std::fabs(d) + 8 * std::fabs(d - max / -8) + 1e-6f;
    for (int j = 0; j < 32; ++j) ASSERT_LE(std::fabs(back[32 * b + j] - row[32 * b + j]), bound) << b << ":" << j;
  }
}

// Q4_1 and Q5_1 span each block's [min, max] in 15 and 31 steps, Q5_0 maps its largest magnitude to level 0
// of 32: every value comes back within half a step (Q5_0: one step where the far end clamps), plus the
// scale's and min's own f16 rounding times the levels.
TEST(Quantizers, LegacyTypesErrorWithinAStep) {
  for (const auto& [type, steps] :
       {std::pair{WeightType::Q4_1, 15}, std::pair{WeightType::Q5_0, 16}, std::pair{WeightType::Q5_1, 31}}) {
    const auto row = random_row(32 * 64, 6, 0.5f);
    const auto back = dequantize(type, quantize(type, row), row.size());
    for (std::size_t b = 0; b < row.size() / 32; ++b) {
      float low = row[32 * b], high = row[32 * b], largest = 0;
      for (int j = 0; j < 32; ++j) {
        low = std::min(low, row[32 * b + j]);
        high = std::max(high, row[32 * b + j]);
        largest = std::max(largest, std::fabs(row[32 * b + j]));
      }
      const float step = type == WeightType::Q5_0 ? largest / 16 : (high - low) / static_cast<float>(steps);
      const float half_step = type == WeightType::Q5_0 ? step : 0.5f * step;
      const float bound = half_step + 32 * step * 0x1p-11f + largest * 0x1p-11f + 1e-6f;
      for (int j = 0; j < 32; ++j) {
        ASSERT_LE(std::fabs(back[32 * b + j] - row[32 * b + j]), bound)
            << weight_type_name(type) << " " << b << ":" << j;
      }
    }
  }
}

struct KQuantBounds {
  WeightType type;
  double max_rms_ratio;  // RMS error over RMS value, Gaussian rows
};

class KQuantRoundTrip : public ::testing::TestWithParam<KQuantBounds> {};

TEST_P(KQuantRoundTrip, ErrorWithinBounds) {
  const auto [type, max_rms_ratio] = GetParam();
  const auto row = random_row(256 * 32, 4, 0.02f);
  const auto back = dequantize(type, quantize(type, row), row.size());
  double err2 = 0, val2 = 0, max_err = 0, max_val = 0;
  for (std::size_t i = 0; i < row.size(); ++i) {
    const double e = static_cast<double>(back[i]) - row[i];
    err2 += e * e;
    val2 += static_cast<double>(row[i]) * row[i];
    max_err = std::max(max_err, std::fabs(e));
    max_val = std::max(max_val, static_cast<double>(std::fabs(row[i])));
  }
  const double ratio = std::sqrt(err2 / val2);
  EXPECT_LT(ratio, max_rms_ratio) << weight_type_name(type);
  EXPECT_GT(ratio, max_rms_ratio / 20) << weight_type_name(type) << ": suspiciously exact";
  EXPECT_LT(max_err, max_val * max_rms_ratio * 2.5) << weight_type_name(type);
}

INSTANTIATE_TEST_SUITE_P(Types, KQuantRoundTrip,
                         ::testing::Values(KQuantBounds{WeightType::Q2_K, 0.45}, KQuantBounds{WeightType::Q3_K, 0.22},
                                           KQuantBounds{WeightType::Q4_K, 0.12}, KQuantBounds{WeightType::Q5_K, 0.06},
                                           KQuantBounds{WeightType::Q6_K, 0.03}, KQuantBounds{WeightType::IQ4_NL, 0.12},
                                           KQuantBounds{WeightType::IQ4_XS, 0.12},
                                           KQuantBounds{WeightType::IQ3_XXS, 0.25},
                                           KQuantBounds{WeightType::IQ3_S, 0.2}, KQuantBounds{WeightType::IQ2_XXS, 0.4},
                                           KQuantBounds{WeightType::IQ2_XS, 0.35},
                                           KQuantBounds{WeightType::IQ2_S, 0.35}, KQuantBounds{WeightType::IQ1_S, 0.55},
                                           KQuantBounds{WeightType::IQ1_M, 0.65},
                                           KQuantBounds{WeightType::MXFP4, 0.15}),
                         [](const auto& param_info) { return std::string(weight_type_name(param_info.param.type)); });

// Values that a block represents exactly come back unchanged: requantizing a dequantized row reproduces it.
TEST(Quantizers, DequantizedRowsAreFixedPoints) {
  for (const WeightType type :
       {WeightType::Q8_0, WeightType::Q4_0, WeightType::Q5_0, WeightType::Q4_1, WeightType::Q5_1, WeightType::Q6_K}) {
    const auto row = random_row(512, 5);
    const auto once = dequantize(type, quantize(type, row), row.size());
    const auto twice = dequantize(type, quantize(type, once), row.size());
    for (std::size_t i = 0; i < row.size(); ++i) {
      ASSERT_NEAR(twice[i], once[i], 1e-6f * std::fabs(once[i]) + 1e-7f) << weight_type_name(type) << " " << i;
    }
  }
}

// All-positive data: the K-quant offsets clamp at zero (ggml never uses a positive min), so the levels span
// [0, max]; a constant sub-block sits among them. The error stays within about half a step of that span.
TEST(Quantizers, KQuantsOnPositiveData) {
  for (const auto& [type, levels] :
       {std::pair{WeightType::Q4_K, 15}, std::pair{WeightType::Q5_K, 31}, std::pair{WeightType::Q6_K, 32}}) {
    std::vector<float> row(256);
    for (int i = 0; i < 256; ++i) row[i] = i < 32 ? 0.5f : 1.0f + static_cast<float>(i % 32) / 64.0f;
    const auto back = dequantize(type, quantize(type, row), row.size());
    const float bound = 0.6f * 1.5f / static_cast<float>(levels);
    for (int i = 0; i < 256; ++i) EXPECT_NEAR(back[i], row[i], bound) << weight_type_name(type) << " " << i;
  }
}

}  // namespace
}  // namespace engine::quant
