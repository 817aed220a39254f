#pragma once

// What vLLM's --enable-auto-tool-choice, --tool-call-parser and --reasoning-parser do to one chat request:
// whether its tool_choice can be honoured (vLLM's 400 when not), whether the template sees its tools, whether
// decoding keeps special tokens, and the parser each of its choices' text goes through
// (serverd/parsers/choice_parser.h).

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "serverd/api/protocol.h"
#include "serverd/parsers/choice_parser.h"

namespace serverd::api {

// The server's flags (ServerOptions' fields of the same names).
struct ChatParserOptions {
  bool enable_auto_tool_choice = false;
  std::string tool_call_parser;  // empty: none
  std::string reasoning_parser;  // empty: none
  bool exclude_tools_when_tool_choice_none = false;
};

// How one request's choices are parsed.
struct ChatParsing {
  // A fresh parser for one choice; empty when the choices' text is content as it is.
  std::function<std::unique_ptr<parsers::ChoiceParser>()> make_parser;
  bool reasoning = false;         // a reasoning parser is on: usage has completion_tokens_details
  bool include_reasoning = true;  // the request's include_reasoning: false drops the split-off reasoning
  bool auto_tools = false;        // tool calls are parsed: finish_reason "tool_calls" when some were made
  // kRequired or kNamed: the output, constrained to the calls' JSON (tool_call_schema.h), is read as calls
  // (serverd/parsers/forced_tool_calls.h); kNone otherwise.
  ToolChoice forced_tools = ToolChoice::kNone;
  // The generated text starts inside the reasoning (a reasoning parser is on and neither the prompt nor
  // enable_thinking=false closed it): structured outputs wait for reasoning_end.
  bool starts_in_reasoning = false;
  // What ends the reasoning parser's reasoning (`</think>`, harmony's final channel header).
  std::string reasoning_end;
};

// Throws ApiException (400, vLLM's message) when the request's tool_choice is "auto" and the server was not
// started with --enable-auto-tool-choice and --tool-call-parser ("required" and named functions need
// neither: structured outputs make the calls).
void check_tool_choice(const ChatRequest& request, const ChatParserOptions& options);

// The tools the chat template sees: vLLM shows them for tool_choice "none" too, unless
// --exclude-tools-when-tool-choice-none.
std::string_view template_tools(const ChatRequest& request, const ChatParserOptions& options);

// True when decoding must keep special tokens for a parser to see its markers: the tool-call parser's
// when tools are parsed (vLLM turns skip_special_tokens off for such parsers), the reasoning parser's
// always (openai_gptoss: vLLM reads harmony from token ids, where the markers are never skipped).
bool parser_needs_special_tokens(const ChatRequest& request, const ChatParserOptions& options);

// The parsing of `request`'s choices; `prompt` is the rendered prompt (a prompt that closed the think
// block makes everything generated content).
ChatParsing chat_parsing(const ChatRequest& request, const ChatParserOptions& options, std::string_view prompt);

}  // namespace serverd::api
