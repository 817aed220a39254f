// The --reasoning-parser names, the parser each makes, and what a prompt tells about the reasoning.
#include <array>

#include "serverd/parsers/harmony_reasoning_parser.h"
#include "serverd/parsers/reasoning_parser.h"
#include "serverd/parsers/think_reasoning_parser.h"
#include "serverd/parsers/unknown_parser.h"

namespace serverd::parsers {
namespace {

constexpr std::array<std::string_view, 3> kNames = {"deepseek_r1", "openai_gptoss", "qwen3"};

}  // namespace

std::span<const std::string_view> reasoning_parser_names() {
  return kNames;
}

std::unique_ptr<ReasoningParser> make_reasoning_parser(std::string_view name, ReasoningOptions options) {
  if (name == "deepseek_r1") return std::make_unique<ThinkReasoningParser>(kNames[0], options.prompt_closes_reasoning);
  if (name == "qwen3") {
    const bool thinking_off = options.enable_thinking.has_value() && !*options.enable_thinking;
    return std::make_unique<ThinkReasoningParser>(kNames[2], options.prompt_closes_reasoning || thinking_off);
  }
  // Harmony has no think tags for a prompt or enable_thinking to close: gpt-oss always writes its channels.
  if (name == "openai_gptoss") return std::make_unique<HarmonyReasoningParser>(options.keep_function_calls);
  throw unknown_parser("reasoning parser", name, kNames);
}

bool prompt_closes_reasoning(std::string_view prompt) {
  const std::size_t end = prompt.rfind("</think>");
  if (end == std::string_view::npos) return false;
  const std::size_t start = prompt.rfind("<think>");
  return start == std::string_view::npos || start < end;
}

}  // namespace serverd::parsers
