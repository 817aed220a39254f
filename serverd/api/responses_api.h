#pragma once

// OpenAI's Responses API (POST /v1/responses) as vLLM serves it for a text model: the request translated
// into the chat completions request the chat path already serves (messages for the template, sampling,
// limits), and the response object, output items and usage written in vLLM's shapes. Nothing is stored
// (vLLM without VLLM_ENABLE_RESPONSES_API_STORE): `store: true` is accepted and not honoured, as vLLM
// does, and `previous_response_id` finds nothing. Every field the server cannot honour is refused by name.

#include <rapidjson/document.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "serverd/api/chat_parsing.h"
#include "serverd/api/json_io.h"
#include "serverd/api/protocol.h"

namespace serverd::api {

struct ResponsesRequest {
  ChatRequest chat;  // what the chat path generates from: messages, tools for the template, sampling
  std::optional<std::string> instructions;
  std::string metadata_json = "null";  // echoed
  std::optional<std::string> user;     // echoed
  bool parallel_tool_calls = true;
  std::string tools_json = "[]";         // the request's tools as given, echoed
  std::string tool_choice = "\"auto\"";  // JSON, echoed: "auto", "none", "required" or the named tool object
  bool parse_tool_calls = false;         // tools given and tool_choice "auto": the tool-call parser runs
  std::string reasoning_json = "null";   // echoed
  std::string text_json = "null";        // echoed
  std::string truncation = "disabled";
};

// Throws ApiException (400, naming the field) for what is malformed or not supported, and 404 for a
// previous_response_id (nothing is stored).
ResponsesRequest parse_responses_request(const rapidjson::Value& body, const ParseLimits& limits,
                                         const ChatParserOptions& parsers);

// One output item as it is built.
struct OutputItem {
  enum class Kind { kReasoning, kMessage, kFunctionCall };
  Kind kind = Kind::kMessage;
  std::string id;       // rs_..., msg_..., fc_...
  std::string text;     // reasoning or message text; a function call's arguments
  std::string call_id;  // function calls
  std::string name;     // function calls
};

// `done`: the finished item (status "completed", its content); else the item as output_item.added opens it.
void write_output_item(JsonWriter& w, const OutputItem& item, bool done);

struct ResponseUsage {
  std::size_t input_tokens = 0;
  std::size_t output_tokens = 0;
  std::size_t reasoning_tokens = 0;
};
void write_response_usage(JsonWriter& w, const ResponseUsage& usage);

// What every response object of one request repeats.
struct ResponseEcho {
  std::string id;  // resp_...
  std::int64_t created_at = 0;
  std::string model;
  const ResponsesRequest* request = nullptr;
  double temperature = 1.0;  // the sampling's, after the model's defaults
  double top_p = 1.0;
  std::size_t max_output_tokens = 0;  // as resolved
};

// The response object. `status` is "in_progress", "completed" or "incomplete" (then incomplete_details
// says max_output_tokens); `usage` null while in progress.
std::string response_json(const ResponseEcho& echo, std::string_view status, const std::vector<OutputItem>& output,
                          const std::optional<ResponseUsage>& usage);

// One server-sent event as vLLM streams the Responses API: "event: TYPE\ndata: JSON\n\n".
std::string responses_sse_event(std::string_view type, std::string_view json);

}  // namespace serverd::api
