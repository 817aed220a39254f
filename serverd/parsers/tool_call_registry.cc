// The --tool-call-parser names and the parser each one makes.
#include <array>
#include <utility>

#include "serverd/parsers/hermes_parser.h"
#include "serverd/parsers/llama3_json_parser.h"
#include "serverd/parsers/mistral_parser.h"
#include "serverd/parsers/openai_tool_parser.h"
#include "serverd/parsers/pythonic_parser.h"
#include "serverd/parsers/tool_call_parser.h"
#include "serverd/parsers/unknown_parser.h"

namespace serverd::parsers {
namespace {

constexpr std::array<std::string_view, 5> kNames = {"hermes", "llama3_json", "mistral", "openai", "pythonic"};

}  // namespace

std::span<const std::string_view> tool_call_parser_names() {
  return kNames;
}

std::unique_ptr<ToolCallParser> make_tool_call_parser(std::string_view name, ToolCallOptions options) {
  if (name == "hermes") return std::make_unique<HermesToolParser>(std::move(options));
  if (name == "llama3_json") return std::make_unique<Llama3JsonToolParser>(std::move(options));
  if (name == "mistral") return std::make_unique<MistralToolParser>(std::move(options));
  if (name == "openai") return std::make_unique<OpenAiToolParser>(std::move(options));
  if (name == "pythonic") return std::make_unique<PythonicToolParser>(std::move(options));
  throw unknown_parser("tool-call parser", name, kNames);
}

}  // namespace serverd::parsers
