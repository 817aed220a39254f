#pragma once

// A small model for serverd's tests: a byte-level tokenizer (one token per byte, ids 0..255) with three
// special tokens, <|endoftext|> (256, the EOS), <|im_start|> (257) and <|im_end|> (258), and a ChatML
// template that honours enable_thinking=false and refuses the role "forbidden" with raise_exception.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/template/chat_template.h"
#include "engine/tokenizer/tokenizer.h"
#include "serverd/api/generator.h"

namespace serverd_test {

inline constexpr std::int32_t kEos = 256;
inline constexpr std::int32_t kImStart = 257;
inline constexpr std::int32_t kImEnd = 258;

struct TestModel {
  TestModel();

  engine::tokenizer::Tokenizer tokenizer;
  engine::template_::ChatTemplate chat_template;

  // The ModelInfo a server gets; the pointers point into this object.
  serverd::api::ModelInfo info(std::size_t max_model_len = 256) const;
};

// The ids of `text`, one per byte.
std::vector<std::int32_t> bytes(std::string_view text);

}  // namespace serverd_test
