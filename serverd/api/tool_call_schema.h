#pragma once

// The structured-output constraint vLLM puts on a request whose tool_choice forces calls:
//   - a named function: the function's `parameters` schema (the output is its arguments object); a function
//     without parameters constrains nothing, as in vLLM;
//   - "required": a JSON array of at least one {"name": <one tool's name>, "parameters": <that tool's
//     schema>} object (anyOf over the tools; a tool without parameters takes an empty object), the tools'
//     `$defs` gathered at the top so their `$ref`s resolve.
// The constraint's field is "tool_choice", so a schema the grammar engine refuses is a 400 naming it.

#include <rapidjson/document.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "serverd/api/protocol.h"
#include "serverd/api/structured_output_request.h"

namespace serverd::api {

// One function a request offers: its name, and its parameters schema (null: none). Points into the request.
struct FunctionTool {
  std::string name;
  const rapidjson::Value* parameters = nullptr;
};

// The functions of a chat request's `tools` ([{"type": "function", "function": {"name", "parameters"}}]).
// Throws ApiException (400) for a tool without a function name.
std::vector<FunctionTool> chat_function_tools(const rapidjson::Value& tools);

// The constraint for `choice` (nullopt for "none" and "auto"). Throws ApiException (400): a named function
// that is not among `tools` (vLLM's "Tool 'NAME' has not been passed in `tools`."), or two tools defining
// one `$defs` name differently.
std::optional<StructuredOutputRequest> tool_call_constraint(ToolChoice choice, std::string_view function,
                                                            const std::vector<FunctionTool>& tools);

// The request's own constraint and the tool choice's together, as vLLM takes them: the tool choice's schema
// stands in for a JSON schema the request gave; beside any other kind it is a 400 (two constraints).
std::optional<StructuredOutputRequest> with_tool_constraint(std::optional<StructuredOutputRequest> request,
                                                            std::optional<StructuredOutputRequest> tools);

// A chat request's constraint: its structured-output fields and its tool_choice.
std::optional<StructuredOutputRequest> chat_constraint(const ChatRequest& request);

}  // namespace serverd::api
