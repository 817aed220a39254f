#include "serverd/api/responses_api.h"

#include <algorithm>
#include <array>

#include "serverd/api/api_error.h"

namespace serverd::api {
namespace {

using rapidjson::Value;

std::string text_of(const Value& v) {
  return std::string(v.GetString(), v.GetStringLength());
}

[[noreturn]] void unsupported(std::string_view name, std::string_view why) {
  throw_bad_request("'" + std::string(name) + "' is not supported by this server's Responses API: " + std::string(why),
                    std::string(name));
}

// Every top-level field this server reads; anything else is refused by name rather than ignored.
constexpr std::array<std::string_view, 22> kKnownFields = {"model",
                                                           "input",
                                                           "instructions",
                                                           "max_output_tokens",
                                                           "temperature",
                                                           "top_p",
                                                           "stream",
                                                           "tools",
                                                           "tool_choice",
                                                           "store",
                                                           "previous_response_id",
                                                           "reasoning",
                                                           "text",
                                                           "metadata",
                                                           "user",
                                                           "parallel_tool_calls",
                                                           "truncation",
                                                           "background",
                                                           "include",
                                                           "service_tier",
                                                           "top_logprobs",
                                                           "max_tool_calls"};

void refuse_unknown_fields(const Value& body) {
  for (const auto& member : body.GetObject()) {
    const std::string_view name(member.name.GetString(), member.name.GetStringLength());
    if (std::find(kKnownFields.begin(), kKnownFields.end(), name) == kKnownFields.end()) {
      unsupported(name, "this server does not implement it");
    }
  }
}

// The fields that are accepted only with the value that asks for nothing.
void refuse_unsupported_values(const Value& body) {
  const bool store = bool_field(body, "store").value_or(true);
  if (bool_field(body, "background").value_or(false)) {
    if (!store) throw_bad_request("background can only be used when `store` is true", "background");
    // vLLM's refusal when its response store is off, as it is here.
    throw_bad_request(
        "This server does not support `store=True` and therefore does not support the background mode (serverd "
        "keeps no responses).",
        "background");
  }
  if (const auto* include = field(body, "include")) {
    if (!include->IsArray()) throw_bad_request("'include' must be an array", "include");
    if (!include->Empty()) unsupported("include", "no additional output data (logprobs, ...) can be included");
  }
  if (const auto tier = string_field(body, "service_tier"); tier && *tier != "auto") {
    unsupported("service_tier", "only 'auto' is served, got '" + *tier + "'");
  }
  if (const auto top = int_field(body, "top_logprobs"); top && *top != 0) {
    unsupported("top_logprobs", "output log-probabilities are not implemented for /v1/responses");
  }
  if (field(body, "max_tool_calls") != nullptr) unsupported("max_tool_calls", "it needs built-in tools");
  if (const auto previous = string_field(body, "previous_response_id")) {
    // Nothing is stored (vLLM without VLLM_ENABLE_RESPONSES_API_STORE), so no id is ever found.
    throw ApiException(ApiError{404,
                                "Response with id '" + *previous +
                                    "' not found. (serverd stores no responses; send the whole conversation in "
                                    "'input' instead.)",
                                "previous_response_id", std::nullopt});
  }
}

// A chat message as the template receives it, before it is written.
struct Message {
  std::string role;
  std::optional<std::string> content;  // null for an assistant turn that only called tools
  std::vector<std::string> content_parts;
  bool parts = false;  // content is content_parts (text parts, joined by the chat path)
  std::string tool_call_id;
  std::string tool_calls_json;  // "[...]" entries, comma-joined, for an assistant turn
};

std::string required_string(const Value& item, std::string_view name, std::string_view item_type) {
  const auto value = string_field(item, name);
  if (!value) {
    throw_bad_request(
        "An input item of type '" + std::string(item_type) + "' needs a '" + std::string(name) + "' string", "input");
  }
  return *value;
}

void add_message_item(const Value& item, std::vector<Message>& out) {
  const auto role = string_field(item, "role");
  if (!role || (*role != "user" && *role != "system" && *role != "developer" && *role != "assistant")) {
    throw_bad_request("An input message's 'role' must be one of 'user', 'system', 'developer', 'assistant'; got " +
                          (role ? "'" + *role + "'" : std::string("none")),
                      "input");
  }
  Message m;
  // Chat templates know no "developer" role; OpenAI defines it as the system's instructions.
  m.role = *role == "developer" ? "system" : *role;
  const auto* content = field(item, "content");
  if (content == nullptr) throw_bad_request("An input message needs 'content'", "input");
  if (content->IsString()) {
    m.content = text_of(*content);
  } else if (content->IsArray()) {
    m.parts = true;
    for (const auto& part : content->GetArray()) {
      const auto type = part.IsObject() ? string_field(part, "type") : std::nullopt;
      if (!type) throw_bad_request("An input message's content parts must be objects with a 'type'", "input");
      if (*type != "input_text" && *type != "output_text") {
        throw_bad_request("Content parts of type '" + *type +
                              "' are not supported; this server takes 'input_text' and 'output_text' only",
                          "input");
      }
      m.content_parts.push_back(required_string(part, "text", *type));
    }
  } else {
    throw_bad_request("An input message's 'content' must be a string or an array of content parts", "input");
  }
  out.push_back(std::move(m));
}

void add_function_call(const Value& item, std::vector<Message>& out) {
  JsonWriter w;
  w.begin_object();
  w.key("id").value(required_string(item, "call_id", "function_call"));
  w.key("type").value("function");
  w.key("function").begin_object();
  w.key("name").value(required_string(item, "name", "function_call"));
  w.key("arguments").value(required_string(item, "arguments", "function_call"));
  w.end_object().end_object();
  // Calls made in one turn are one assistant message, as the chat path receives them.
  if (out.empty() || out.back().role != "assistant" || out.back().tool_calls_json.empty()) {
    Message m;
    m.role = "assistant";
    out.push_back(std::move(m));
  } else {
    out.back().tool_calls_json += ',';
  }
  out.back().tool_calls_json += w.take();
}

std::vector<Message> input_messages(const Value& body) {
  std::vector<Message> messages;
  if (const auto instructions = string_field(body, "instructions")) {
    messages.push_back(Message{"system", *instructions, {}, false, {}, {}});
  }
  const auto* input = field(body, "input");
  if (input == nullptr) throw_bad_request("'input' is required", "input");
  if (input->IsString()) {
    messages.push_back(Message{"user", text_of(*input), {}, false, {}, {}});
    return messages;
  }
  if (!input->IsArray()) throw_bad_request("'input' must be a string or an array of input items", "input");
  if (input->Empty()) throw_bad_request("'input' must not be an empty array", "input");
  for (const auto& item : input->GetArray()) {
    if (!item.IsObject()) throw_bad_request("Each input item must be an object", "input");
    const std::string type = string_field(item, "type").value_or("message");
    if (type == "message") {
      add_message_item(item, messages);
    } else if (type == "function_call") {
      add_function_call(item, messages);
    } else if (type == "function_call_output") {
      Message m;
      m.role = "tool";
      m.tool_call_id = required_string(item, "call_id", type);
      m.content = required_string(item, "output", type);
      messages.push_back(std::move(m));
    } else if (type == "reasoning") {
      // A previous turn's reasoning is not sent back to the model (vLLM skips it too).
    } else {
      throw_bad_request("Input items of type '" + type +
                            "' are not supported; this server takes 'message', 'function_call', "
                            "'function_call_output' and 'reasoning' items",
                        "input");
    }
  }
  return messages;
}

void write_messages(JsonWriter& w, const std::vector<Message>& messages) {
  w.begin_array();
  for (const Message& m : messages) {
    w.begin_object();
    w.key("role").value(m.role);
    w.key("content");
    if (m.parts) {
      w.begin_array();
      for (const std::string& part : m.content_parts) {
        w.begin_object().key("type").value("text").key("text").value(part).end_object();
      }
      w.end_array();
    } else if (m.content) {
      w.value(*m.content);
    } else {
      w.null();
    }
    if (!m.tool_call_id.empty()) w.key("tool_call_id").value(m.tool_call_id);
    if (!m.tool_calls_json.empty()) w.key("tool_calls").raw("[" + m.tool_calls_json + "]");
    w.end_object();
  }
  w.end_array();
}

// The flattened function tools of the Responses API as chat templates take them.
std::string chat_tools(const Value& tools) {
  if (!tools.IsArray()) throw_bad_request("'tools' must be an array", "tools");
  JsonWriter w;
  w.begin_array();
  for (const auto& tool : tools.GetArray()) {
    const auto type = tool.IsObject() ? string_field(tool, "type") : std::nullopt;
    if (!type) throw_bad_request("Each tool must be an object with a 'type'", "tools");
    if (*type != "function") unsupported("tools", "tools of type '" + *type + "' (only 'function' tools are served)");
    const auto name = string_field(tool, "name");
    if (!name) throw_bad_request("A function tool needs a 'name' string", "tools");
    w.begin_object().key("type").value("function").key("function").begin_object();
    w.key("name").value(*name);
    if (const auto description = string_field(tool, "description")) w.key("description").value(*description);
    if (const auto* parameters = field(tool, "parameters")) w.key("parameters").value(*parameters);
    w.end_object().end_object();
  }
  w.end_array();
  return w.take();
}

// tool_choice: "none", "auto", "required", or {"type": "function", "name": ...}; `echo` is it as given.
ToolChoice tool_choice(const Value& body, std::string& function, std::string& echo) {
  const auto* choice = field(body, "tool_choice");
  if (choice == nullptr) return ToolChoice::kAuto;
  if (choice->IsObject()) {
    const auto type = string_field(*choice, "type");
    const auto name = string_field(*choice, "name");
    if (type != "function" || !name) {
      unsupported("tool_choice",
                  "a named tool choice must be {\"type\": \"function\", \"name\": ...} (function "
                  "tools only)");
    }
    function = *name;
    echo = to_json(*choice);
    return ToolChoice::kNamed;
  }
  const std::string mode = choice->IsString() ? text_of(*choice) : to_json(*choice);
  echo = JsonWriter().value(mode).take();
  if (mode == "auto") return ToolChoice::kAuto;
  if (mode == "none") return ToolChoice::kNone;
  if (mode == "required") return ToolChoice::kRequired;
  throw_bad_request("'tool_choice' must be 'none', 'auto', 'required' or a named tool; got '" + mode + "'",
                    "tool_choice");
}

// reasoning.effort reaches the template as reasoning_effort, as vLLM passes it; a summary cannot be made.
std::optional<std::string> reasoning_effort(const Value& body) {
  const auto* reasoning = field(body, "reasoning");
  if (reasoning == nullptr) return std::nullopt;
  if (!reasoning->IsObject()) throw_bad_request("'reasoning' must be an object", "reasoning");
  for (const auto& member : reasoning->GetObject()) {
    const std::string_view name(member.name.GetString(), member.name.GetStringLength());
    if (name != "effort" && !member.value.IsNull()) unsupported("reasoning", "'reasoning." + std::string(name) + "'");
  }
  const auto effort = string_field(*reasoning, "effort");
  if (effort && *effort != "minimal" && *effort != "low" && *effort != "medium" && *effort != "high") {
    throw_bad_request("'reasoning.effort' must be 'minimal', 'low', 'medium' or 'high'; got '" + *effort + "'",
                      "reasoning");
  }
  return effort;
}

// text.format: {"type": "text"} (none), {"type": "json_object"}, or {"type": "json_schema", "name", "schema",
// "strict", "description"}: the same constraint as chat's response_format, named "text.format" in errors.
std::optional<StructuredOutputRequest> text_format(const Value& body) {
  const auto* text = field(body, "text");
  if (text == nullptr) return std::nullopt;
  if (!text->IsObject()) throw_bad_request("'text' must be an object", "text");
  for (const auto& member : text->GetObject()) {
    const std::string_view name(member.name.GetString(), member.name.GetStringLength());
    if (name != "format" && !member.value.IsNull()) unsupported("text", "'text." + std::string(name) + "'");
  }
  const auto* format = field(*text, "format");
  if (format == nullptr) return std::nullopt;
  if (!format->IsObject()) throw_bad_request("'text.format' must be an object", "text");
  const auto type = string_field(*format, "type");
  if (!type || *type == "text") return std::nullopt;
  StructuredOutputRequest r;
  r.field = "text.format";
  if (*type == "json_object") {
    r.spec.kind = engine::grammar::StructuredOutputSpec::Kind::JsonObject;
    return r;
  }
  if (*type != "json_schema") {
    throw_bad_request("'text.format.type' must be 'text', 'json_object' or 'json_schema'; got '" + *type + "'", "text");
  }
  if (!string_field(*format, "name")) throw_bad_request("'text.format' of type 'json_schema' needs a 'name'", "text");
  string_field(*format, "description");  // type-checked; it does not change the output
  bool_field(*format, "strict");         // the output always matches the schema, strict or not
  const auto* schema = field(*format, "schema");
  if (schema == nullptr || !schema->IsObject()) {
    throw_bad_request("'text.format' of type 'json_schema' needs a 'schema' object", "text");
  }
  r.spec.kind = engine::grammar::StructuredOutputSpec::Kind::JsonSchema;
  r.spec.text = to_json(*schema);
  return r;
}

void copy_field(JsonWriter& w, const Value& body, std::string_view from, std::string_view to) {
  if (const auto* value = field(body, from)) w.key(to).value(*value);
}

}  // namespace

ResponsesRequest parse_responses_request(const Value& body, const ParseLimits& limits,
                                         const ChatParserOptions& parsers) {
  refuse_unknown_fields(body);
  refuse_unsupported_values(body);
  ResponsesRequest r;
  bool_field(body, "store");  // type-checked; nothing is kept either way (vLLM with its store off)
  r.instructions = string_field(body, "instructions");
  r.user = string_field(body, "user");
  r.parallel_tool_calls = bool_field(body, "parallel_tool_calls").value_or(true);
  if (const auto* metadata = field(body, "metadata")) {
    if (!metadata->IsObject()) throw_bad_request("'metadata' must be an object of strings", "metadata");
    for (const auto& member : metadata->GetObject()) {
      if (!member.value.IsString()) throw_bad_request("'metadata' values must be strings", "metadata");
    }
    r.metadata_json = to_json(*metadata);
  }
  if (const auto truncation = string_field(body, "truncation")) {
    if (*truncation == "auto") unsupported("truncation", "'auto' would drop input items; use 'disabled'");
    if (*truncation != "disabled") {
      throw_bad_request("'truncation' must be 'auto' or 'disabled'; got '" + *truncation + "'", "truncation");
    }
  }
  std::optional<StructuredOutputRequest> format = text_format(body);
  if (const auto* text = field(body, "text")) r.text_json = to_json(*text);
  const std::optional<std::string> effort = reasoning_effort(body);
  if (const auto* reasoning = field(body, "reasoning")) r.reasoning_json = to_json(*reasoning);
  const auto max_output = int_field(body, "max_output_tokens");
  if (max_output && *max_output < 1) {
    throw_bad_request("max_output_tokens must be at least 1, got " + std::to_string(*max_output) + ".",
                      "max_output_tokens");
  }

  std::string tools_for_template;
  std::string function;
  const ToolChoice choice = tool_choice(body, function, r.tool_choice);
  if (const auto* tools = field(body, "tools")) {
    r.tools_json = to_json(*tools);
    tools_for_template = chat_tools(*tools);
    if (tools->Empty()) tools_for_template.clear();
  }
  if (tools_for_template.empty() && (choice == ToolChoice::kRequired || choice == ToolChoice::kNamed)) {
    throw_bad_request("When using `tool_choice`, `tools` must be set.", "tool_choice");
  }
  r.parse_tool_calls = !tools_for_template.empty() && choice == ToolChoice::kAuto;
  if (r.parse_tool_calls && (!parsers.enable_auto_tool_choice || parsers.tool_call_parser.empty())) {
    throw_bad_request("\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set",
                      "tool_choice");
  }

  // The chat completions request this one is: parsed by the chat path, so its checks and defaults apply.
  JsonWriter w;
  w.begin_object();
  copy_field(w, body, "model", "model");
  copy_field(w, body, "temperature", "temperature");
  copy_field(w, body, "top_p", "top_p");
  copy_field(w, body, "stream", "stream");
  if (max_output) w.key("max_completion_tokens").value(*max_output);
  w.key("messages");
  write_messages(w, input_messages(body));
  if (effort) w.key("chat_template_kwargs").begin_object().key("reasoning_effort").value(*effort).end_object();
  w.end_object();
  rapidjson::Document chat_body;
  parse_request_body(w.take(), chat_body);
  r.chat = parse_chat_request(chat_body, limits);
  r.chat.tools_json = tools_for_template;
  // What chat_parsing reads to set up this response's parsers, as for a chat request.
  r.chat.tool_choice = (r.parse_tool_calls || choice != ToolChoice::kAuto) ? choice : ToolChoice::kNone;
  r.chat.tool_choice_name = function;
  r.chat.parallel_tool_calls = r.parallel_tool_calls;
  r.chat.common.structured_output = std::move(format);
  return r;
}

void write_output_item(JsonWriter& w, const OutputItem& item, bool done) {
  const char* status = done ? "completed" : "in_progress";
  w.begin_object();
  w.key("id").value(item.id);
  switch (item.kind) {
    case OutputItem::Kind::kReasoning:
      w.key("type").value("reasoning");
      w.key("summary").begin_array().end_array();
      w.key("content").begin_array();
      if (done) w.begin_object().key("text").value(item.text).key("type").value("reasoning_text").end_object();
      w.end_array();
      w.key("encrypted_content").null();
      // vLLM: only the item still open has a status.
      w.key("status");
      if (done) {
        w.null();
      } else {
        w.value(status);
      }
      break;
    case OutputItem::Kind::kMessage:
      w.key("type").value("message");
      w.key("role").value("assistant");
      w.key("content").begin_array();
      if (done) {
        w.begin_object().key("type").value("output_text").key("text").value(item.text);
        w.key("annotations").begin_array().end_array().key("logprobs").null().end_object();
      }
      w.end_array();
      w.key("status").value(status);
      break;
    case OutputItem::Kind::kFunctionCall:
      w.key("type").value("function_call");
      w.key("call_id").value(item.call_id);
      w.key("name").value(item.name);
      w.key("arguments").value(done ? item.text : std::string());
      w.key("status").value(status);
      break;
  }
  w.end_object();
}

void write_response_usage(JsonWriter& w, const ResponseUsage& usage) {
  w.begin_object();
  w.key("input_tokens").value(static_cast<std::uint64_t>(usage.input_tokens));
  w.key("input_tokens_details").begin_object().key("cached_tokens").value(0).end_object();
  w.key("output_tokens").value(static_cast<std::uint64_t>(usage.output_tokens));
  w.key("output_tokens_details").begin_object();
  w.key("reasoning_tokens").value(static_cast<std::uint64_t>(usage.reasoning_tokens));
  w.key("tool_output_tokens").value(0);
  w.end_object();
  w.key("total_tokens").value(static_cast<std::uint64_t>(usage.input_tokens + usage.output_tokens));
  w.end_object();
}

std::string response_json(const ResponseEcho& echo, std::string_view status, const std::vector<OutputItem>& output,
                          const std::optional<ResponseUsage>& usage) {
  const ResponsesRequest& request = *echo.request;
  JsonWriter w;
  w.begin_object();
  w.key("id").value(echo.id);
  w.key("object").value("response");
  w.key("created_at").value(echo.created_at);
  w.key("status").value(status);
  w.key("incomplete_details");
  if (status == "incomplete") {
    w.begin_object().key("reason").value("max_output_tokens").end_object();
  } else {
    w.null();
  }
  w.key("error").null();
  w.key("instructions");
  if (request.instructions) {
    w.value(*request.instructions);
  } else {
    w.null();
  }
  w.key("metadata").raw(request.metadata_json);
  w.key("model").value(echo.model);
  w.key("output").begin_array();
  for (const OutputItem& item : output) write_output_item(w, item, true);
  w.end_array();
  w.key("parallel_tool_calls").value(request.parallel_tool_calls);
  w.key("temperature").value(echo.temperature);
  w.key("tool_choice").raw(request.tool_choice);
  w.key("tools").raw(request.tools_json);
  w.key("top_p").value(echo.top_p);
  w.key("background").value(false);
  w.key("max_output_tokens").value(static_cast<std::uint64_t>(echo.max_output_tokens));
  w.key("max_tool_calls").null();
  w.key("previous_response_id").null();
  w.key("prompt").null();
  w.key("reasoning").raw(request.reasoning_json);
  w.key("service_tier").value("auto");
  w.key("text").raw(request.text_json);
  w.key("top_logprobs").value(0);
  w.key("truncation").value(request.truncation);
  w.key("usage");
  if (usage) {
    write_response_usage(w, *usage);
  } else {
    w.null();
  }
  w.key("user");
  if (request.user) {
    w.value(*request.user);
  } else {
    w.null();
  }
  w.end_object();
  return w.take();
}

std::string responses_sse_event(std::string_view type, std::string_view json) {
  std::string out = "event: ";
  out += type;
  out += "\ndata: ";
  out += json;
  out += "\n\n";
  return out;
}

}  // namespace serverd::api
