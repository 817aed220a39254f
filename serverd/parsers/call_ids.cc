#include "serverd/parsers/call_ids.h"

#include <memory>
#include <random>
#include <string_view>
#include <utility>

namespace serverd::parsers {
namespace {

RandomBits device_seeded_bits() {
  // One generator per parser: ids only need to be unique, and a per-parser engine needs no locking.
  auto engine = std::make_shared<std::mt19937_64>(std::random_device{}());
  return [engine] { return (*engine)(); };
}

std::string hex_id(const RandomBits& random_bits) {
  static constexpr std::string_view kHex = "0123456789abcdef";
  std::string id = "chatcmpl-tool-";
  for (int half = 0; half < 2; ++half) {
    const std::uint64_t bits = random_bits();
    for (int shift = 60; shift >= 0; shift -= 4) id += kHex[(bits >> shift) & 0xF];
  }
  return id;
}

std::string alphanumeric_id(const RandomBits& random_bits) {
  // The alphabet Python's string.ascii_letters + string.digits gives vLLM's MistralToolCall.
  static constexpr std::string_view kAlphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  static constexpr unsigned kLimit = 256 / kAlphabet.size() * kAlphabet.size();  // 248: no modulo bias
  std::string id;
  while (id.size() < 9) {
    std::uint64_t bits = random_bits();
    for (int byte = 0; byte < 8 && id.size() < 9; ++byte, bits >>= 8) {
      const unsigned b = bits & 0xFF;
      if (b < kLimit) id += kAlphabet[b % kAlphabet.size()];
    }
  }
  return id;
}

}  // namespace

CallIds::CallIds(CallIdStyle style, RandomBits random_bits)
    : style_(style), random_bits_(random_bits ? std::move(random_bits) : device_seeded_bits()) {}

std::string CallIds::next() {
  return style_ == CallIdStyle::kVllm ? hex_id(random_bits_) : alphanumeric_id(random_bits_);
}

}  // namespace serverd::parsers
