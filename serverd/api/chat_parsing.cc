#include "serverd/api/chat_parsing.h"

#include "serverd/api/api_error.h"
#include "serverd/parsers/forced_tool_calls.h"

namespace serverd::api {
namespace {

bool parses_tools(const ChatRequest& request, const ChatParserOptions& options) {
  return request.tool_choice == ToolChoice::kAuto && options.enable_auto_tool_choice &&
         !options.tool_call_parser.empty();
}

// The tool-call parser of one choice: the forced calls' reader, the --tool-call-parser for "auto", or none.
std::unique_ptr<parsers::ToolCallParser> forced_or_auto_parser(ToolChoice forced, const std::string& function,
                                                               const std::string& tool_name,
                                                               const parsers::ToolCallOptions& tools) {
  if (forced == ToolChoice::kNamed) return std::make_unique<parsers::NamedToolCallParser>(function, tools);
  if (forced == ToolChoice::kRequired) return std::make_unique<parsers::RequiredToolCallsParser>(tools);
  if (tool_name.empty()) return nullptr;
  return parsers::make_tool_call_parser(tool_name, tools);
}

}  // namespace

void check_tool_choice(const ChatRequest& request, const ChatParserOptions& options) {
  if (request.tool_choice == ToolChoice::kAuto && !parses_tools(request, options)) {
    throw_bad_request("\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set",
                      "tool_choice");
  }
}

std::string_view template_tools(const ChatRequest& request, const ChatParserOptions& options) {
  if (request.tool_choice == ToolChoice::kNone && options.exclude_tools_when_tool_choice_none) return {};
  return request.tools_json;
}

bool parser_needs_special_tokens(const ChatRequest& request, const ChatParserOptions& options) {
  if (!options.reasoning_parser.empty() &&
      parsers::make_reasoning_parser(options.reasoning_parser)->needs_special_tokens()) {
    return true;
  }
  return parses_tools(request, options) &&
         parsers::make_tool_call_parser(options.tool_call_parser)->needs_special_tokens();
}

ChatParsing chat_parsing(const ChatRequest& request, const ChatParserOptions& options, std::string_view prompt) {
  ChatParsing parsing;
  parsing.reasoning = !options.reasoning_parser.empty();
  parsing.auto_tools = parses_tools(request, options);
  const bool forced = request.tool_choice == ToolChoice::kRequired || request.tool_choice == ToolChoice::kNamed;
  if (forced) parsing.forced_tools = request.tool_choice;
  parsing.include_reasoning = request.include_reasoning;
  if (!parsing.reasoning && !parsing.auto_tools && !forced) return parsing;

  parsers::ReasoningOptions reasoning;
  reasoning.enable_thinking = request.enable_thinking;
  reasoning.prompt_closes_reasoning = parsing.reasoning && parsers::prompt_closes_reasoning(prompt);
  // openai reads calls in harmony's own syntax, which the reasoning parser would otherwise strip.
  reasoning.keep_function_calls = parsing.auto_tools && options.tool_call_parser == "openai";
  if (parsing.reasoning) {
    const auto probe = parsers::make_reasoning_parser(options.reasoning_parser, reasoning);
    parsing.starts_in_reasoning = probe->in_reasoning() && !probe->passes_through();
    parsing.reasoning_end = probe->end_marker();
  }
  parsers::ToolCallOptions tools;
  tools.parallel_tool_calls = request.parallel_tool_calls;
  parsing.make_parser = [reasoning_name = options.reasoning_parser,
                         tool_name = parsing.auto_tools ? options.tool_call_parser : std::string(), reasoning, tools,
                         forced = parsing.forced_tools, function = request.tool_choice_name]() {
    return std::make_unique<parsers::ChoiceParser>(
        reasoning_name.empty() ? nullptr : parsers::make_reasoning_parser(reasoning_name, reasoning),
        forced_or_auto_parser(forced, function, tool_name, tools));
  };
  return parsing;
}

}  // namespace serverd::api
