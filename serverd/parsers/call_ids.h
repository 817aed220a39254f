#pragma once

// Tool-call ids in the forms vLLM gives them, drawn from an injected random source.

#include <string>

#include "serverd/parsers/tool_call_parser.h"

namespace serverd::parsers {

enum class CallIdStyle {
  kVllm,     // "chatcmpl-tool-" and 32 lowercase hex digits (vLLM's make_tool_call_id: a uuid4's hex)
  kMistral,  // 9 ASCII letters and digits (what mistral-common's validator accepts)
};

class CallIds {
 public:
  // `random_bits` empty: a generator seeded from std::random_device.
  CallIds(CallIdStyle style, RandomBits random_bits);

  std::string next();

 private:
  CallIdStyle style_;
  RandomBits random_bits_;
};

}  // namespace serverd::parsers
