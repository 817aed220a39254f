#include "serverd/api/chat_parsing.h"

#include "serverd/api/api_error.h"

namespace serverd::api {
namespace {

bool parses_tools(const ChatRequest& request, const ChatParserOptions& options) {
  return request.tool_choice == ToolChoice::kAuto && options.enable_auto_tool_choice &&
         !options.tool_call_parser.empty();
}

}  // namespace

void check_tool_choice(const ChatRequest& request, const ChatParserOptions& options) {
  if (request.tool_choice == ToolChoice::kAuto && !parses_tools(request, options)) {
    throw_bad_request("\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set",
                      "tool_choice");
  }
  if (request.tool_choice == ToolChoice::kRequired || request.tool_choice == ToolChoice::kNamed) {
    throw_bad_request(
        "'tool_choice' is not supported by this server: " +
            std::string(request.tool_choice == ToolChoice::kRequired ? "'required'" : "a named function") +
            " is not served yet; use \"auto\" or a response_format json_schema",
        "tool_choice");
  }
}

std::string_view template_tools(const ChatRequest& request, const ChatParserOptions& options) {
  if (request.tool_choice == ToolChoice::kNone && options.exclude_tools_when_tool_choice_none) return {};
  return request.tools_json;
}

bool parser_needs_special_tokens(const ChatRequest& request, const ChatParserOptions& options) {
  return parses_tools(request, options) &&
         parsers::make_tool_call_parser(options.tool_call_parser)->needs_special_tokens();
}

ChatParsing chat_parsing(const ChatRequest& request, const ChatParserOptions& options, std::string_view prompt) {
  ChatParsing parsing;
  parsing.reasoning = !options.reasoning_parser.empty();
  parsing.auto_tools = parses_tools(request, options);
  parsing.include_reasoning = request.include_reasoning;
  if (!parsing.reasoning && !parsing.auto_tools) return parsing;

  parsers::ReasoningOptions reasoning;
  reasoning.enable_thinking = request.enable_thinking;
  reasoning.prompt_closes_reasoning = parsing.reasoning && parsers::prompt_closes_reasoning(prompt);
  if (parsing.reasoning) {
    const auto probe = parsers::make_reasoning_parser(options.reasoning_parser, reasoning);
    parsing.starts_in_reasoning = probe->in_reasoning() && !probe->passes_through();
  }
  parsers::ToolCallOptions tools;
  tools.parallel_tool_calls = request.parallel_tool_calls;
  parsing.make_parser = [reasoning_name = options.reasoning_parser,
                         tool_name = parsing.auto_tools ? options.tool_call_parser : std::string(), reasoning,
                         tools]() {
    return std::make_unique<parsers::ChoiceParser>(
        reasoning_name.empty() ? nullptr : parsers::make_reasoning_parser(reasoning_name, reasoning),
        tool_name.empty() ? nullptr : parsers::make_tool_call_parser(tool_name, tools));
  };
  return parsing;
}

}  // namespace serverd::api
