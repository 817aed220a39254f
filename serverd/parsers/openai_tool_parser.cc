#include "serverd/parsers/openai_tool_parser.h"

#include <array>
#include <stdexcept>
#include <utility>

#include "engine/template/value.h"

namespace serverd::parsers {
namespace {

constexpr std::string_view kFunctions = "functions.";
constexpr std::array<std::string_view, 3> kMarkers = {"<|channel|>", "<|message|>", "<|call|>"};

// A call's arguments as vLLM passes them on: JSON (the content type names it, or none is named) loaded and
// dumped again with json.dumps' defaults; anything else, or text that is not JSON, as the model wrote it.
std::string call_arguments_text(const std::string& text, std::string_view content_type) {
  if (!content_type.empty() && content_type.find("json") == std::string_view::npos) return text;
  using engine::template_::Value;
  try {
    Value::JsonOptions options;
    options.ensure_ascii = true;
    return Value::parse_json(text, "tool call arguments").to_json(options);
  } catch (const std::invalid_argument&) {  // not JSON, nested too deeply, or too large to write
    return text;
  }
}

}  // namespace

OpenAiToolParser::OpenAiToolParser(ToolCallOptions options)
    : ToolCallParserBase(CallIdStyle::kVllm, std::move(options)) {}

std::span<const std::string_view> OpenAiToolParser::markers() const {
  return kMarkers;
}

void OpenAiToolParser::consume(std::string_view text, ToolParserDelta& out) {
  out_ = &out;
  reader_.feed(text, *this);
  out_ = nullptr;
}

void OpenAiToolParser::end(ToolParserDelta& out) {
  out_ = &out;
  reader_.finish(*this);
  out_ = nullptr;
}

void OpenAiToolParser::on_text(std::string_view text, const HarmonyHeader* header) {
  if (in_call_) {
    arguments_.append(text);
  } else if (header == nullptr || (header->recipient.empty() && header->channel != "analysis")) {
    outside(text, *out_);
  }
}

void OpenAiToolParser::on_begin(const HarmonyHeader& header) {
  in_call_ = header.recipient.starts_with(kFunctions) && header.recipient.size() > kFunctions.size();
  arguments_.clear();
}

void OpenAiToolParser::on_end(const HarmonyHeader& header, std::string_view /*marker*/) {
  if (!in_call_) return;
  in_call_ = false;
  emit_call({header.recipient.substr(kFunctions.size()), call_arguments_text(arguments_, header.content_type)}, *out_);
}

}  // namespace serverd::parsers
