#include "tests/support/sample_models.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace testing_support {

namespace {

using engine::format::GgufType;
using engine::format::GgufValue;

std::vector<std::byte> pattern(std::size_t n, unsigned seed) {
  std::vector<std::byte> out(n);
  std::uint32_t x = seed * 2654435761u + 1;
  for (auto& b : out) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<std::byte>(x >> 24);
  }
  return out;
}

template <typename T>
GgufValue array_of(std::initializer_list<T> values) {
  return GgufValue::array<T>(std::span<const T>(values.begin(), values.size()));
}

}  // namespace

engine::format::GgufWriter sample_gguf(std::uint32_t version, std::uint32_t alignment) {
  engine::format::GgufWriter w(version, alignment);
  w.add_metadata("general.architecture", GgufValue::string("llama"));
  w.add_metadata("general.name", GgufValue::string("tiny \xe2\x9c\x93 model \"quoted\"\n"));
  w.add_metadata("test.u8", GgufValue::scalar<std::uint8_t>(255));
  w.add_metadata("test.i8", GgufValue::scalar<std::int8_t>(-128));
  w.add_metadata("test.u16", GgufValue::scalar<std::uint16_t>(65535));
  w.add_metadata("test.i16", GgufValue::scalar<std::int16_t>(-32768));
  w.add_metadata("test.u32", GgufValue::scalar<std::uint32_t>(4294967295u));
  w.add_metadata("test.i32", GgufValue::scalar<std::int32_t>(-2147483647 - 1));
  w.add_metadata("test.f32", GgufValue::scalar<float>(0.1f));
  w.add_metadata("test.f32_negzero", GgufValue::scalar<float>(-0.0f));
  w.add_metadata("test.bool_true", GgufValue::scalar<bool>(true));
  w.add_metadata("test.bool_false", GgufValue::scalar<bool>(false));
  w.add_metadata("test.u64", GgufValue::scalar<std::uint64_t>(std::numeric_limits<std::uint64_t>::max()));
  w.add_metadata("test.i64", GgufValue::scalar<std::int64_t>(std::numeric_limits<std::int64_t>::min()));
  w.add_metadata("test.f64", GgufValue::scalar<double>(1e-300));
  w.add_metadata("test.empty_string", GgufValue::string(""));
  w.add_metadata("test.arr_u8", array_of<std::uint8_t>({0, 1, 255}));
  w.add_metadata("test.arr_i32", array_of<std::int32_t>({-1, 0, 7, 2147483647}));
  w.add_metadata("test.arr_f32", array_of<float>({-1.5f, 0.25f, 3.0e38f}));
  w.add_metadata("test.arr_bool", array_of<bool>({true, false, true}));
  w.add_metadata("test.arr_u64", array_of<std::uint64_t>({0, std::numeric_limits<std::uint64_t>::max()}));
  w.add_metadata("test.arr_f64", array_of<double>({2.5, -0.0}));
  w.add_metadata("test.arr_empty", array_of<std::int16_t>({}));
  w.add_metadata("tokenizer.ggml.tokens",
                 GgufValue::string_array({"<s>", "</s>", "\xc4\xa0the", "", "\xf0\x9f\x98\x80"}));
  w.add_metadata("test.nested",
                 GgufValue::nested_array({array_of<std::int8_t>({1, -2}), GgufValue::string_array({"a", "bc"}),
                                          array_of<std::uint32_t>({})}));
  w.add_metadata("test.nested_deep",
                 GgufValue::nested_array({GgufValue::nested_array({array_of<std::uint16_t>({9, 8})})}));

  const auto add = [&](const char* name, std::vector<std::uint64_t> dims, const char* type, unsigned seed) {
    const auto& info = *engine::format::ggml_type_by_name(type);
    std::uint64_t elements = 1;
    for (const auto d : dims) elements *= d;
    w.add_tensor(name, std::move(dims), info, pattern(*engine::format::ggml_byte_size(info, elements), seed));
  };
  add("token_embd.weight", {8, 5}, "F32", 1);
  add("blk.0.attn_q.weight", {64, 3}, "Q8_0", 2);
  add("blk.0.ffn_down.weight", {256, 2}, "Q4_K", 3);
  add("blk.0.ffn_up.weight", {256}, "Q6_K", 4);
  add("blk.0.attn_norm.weight", {7}, "BF16", 5);
  add("output_norm.weight", {3, 1, 1, 2}, "F16", 6);
  add("blk.0.attn_k.weight", {256}, "Q5_K", 7);
  add("blk.0.attn_v.weight", {32}, "Q4_0", 8);
  return w;
}

}  // namespace testing_support
