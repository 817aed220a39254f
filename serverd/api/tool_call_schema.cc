#include "serverd/api/tool_call_schema.h"

#include <map>
#include <utility>

#include "serverd/api/api_error.h"
#include "serverd/api/json_io.h"

namespace serverd::api {
namespace {

using rapidjson::Value;
using Kind = engine::grammar::StructuredOutputSpec::Kind;

StructuredOutputRequest schema_constraint(std::string schema) {
  StructuredOutputRequest r;
  r.spec.kind = Kind::JsonSchema;
  r.spec.text = std::move(schema);
  r.field = "tool_choice";
  return r;
}

// The `$defs` of every tool, each name once; the tools' own schemas are written without them.
std::map<std::string, std::string> gathered_defs(const std::vector<FunctionTool>& tools) {
  std::map<std::string, std::string> defs;
  for (const FunctionTool& tool : tools) {
    if (tool.parameters == nullptr || !tool.parameters->IsObject()) continue;
    const Value* own = field(*tool.parameters, "$defs");
    if (own == nullptr || !own->IsObject()) continue;
    for (const auto& def : own->GetObject()) {
      const std::string name(def.name.GetString(), def.name.GetStringLength());
      const std::string schema = to_json(def.value);
      const auto [at, added] = defs.emplace(name, schema);
      if (!added && at->second != schema) {
        throw_bad_request("Tool definition '" + name + "' has multiple schemas, which is not supported.", "tools");
      }
    }
  }
  return defs;
}

// A tool's parameters schema without its `$defs` (they move to the top of the array's schema).
void write_parameters(JsonWriter& w, const FunctionTool& tool) {
  if (tool.parameters == nullptr || (tool.parameters->IsObject() && tool.parameters->ObjectEmpty())) {
    w.begin_object().key("type").value("object").key("properties").begin_object().end_object().end_object();
    return;
  }
  if (!tool.parameters->IsObject()) {
    w.value(*tool.parameters);
    return;
  }
  w.begin_object();
  for (const auto& member : tool.parameters->GetObject()) {
    const std::string_view name(member.name.GetString(), member.name.GetStringLength());
    if (name == "$defs") continue;
    w.key(name).value(member.value);
  }
  w.end_object();
}

std::string required_calls_schema(const std::vector<FunctionTool>& tools) {
  const auto defs = gathered_defs(tools);
  JsonWriter w;
  w.begin_object();
  w.key("type").value("array");
  w.key("minItems").value(1);
  w.key("items").begin_object();
  w.key("type").value("object");
  w.key("anyOf").begin_array();
  for (const FunctionTool& tool : tools) {
    w.begin_object();
    w.key("properties").begin_object();
    w.key("name").begin_object().key("type").value("string").key("enum").begin_array().value(tool.name).end_array();
    w.end_object();
    w.key("parameters");
    write_parameters(w, tool);
    w.end_object();
    w.key("required").begin_array().value("name").value("parameters").end_array();
    w.end_object();
  }
  w.end_array();
  w.end_object();
  if (!defs.empty()) {
    w.key("$defs").begin_object();
    for (const auto& [name, schema] : defs) w.key(name).raw(schema);
    w.end_object();
  }
  w.end_object();
  return w.take();
}

}  // namespace

std::vector<FunctionTool> chat_function_tools(const Value& tools) {
  std::vector<FunctionTool> out;
  if (!tools.IsArray()) return out;
  for (const auto& tool : tools.GetArray()) {
    const Value* function = tool.IsObject() ? field(tool, "function") : nullptr;
    const Value* name = function != nullptr && function->IsObject() ? field(*function, "name") : nullptr;
    if (name == nullptr || !name->IsString()) {
      throw_bad_request("Each of 'tools' must be {\"type\": \"function\", \"function\": {\"name\": ...}}", "tools");
    }
    out.push_back({std::string(name->GetString(), name->GetStringLength()), field(*function, "parameters")});
  }
  return out;
}

std::optional<StructuredOutputRequest> tool_call_constraint(ToolChoice choice, std::string_view function,
                                                            const std::vector<FunctionTool>& tools) {
  if (choice == ToolChoice::kNamed) {
    for (const FunctionTool& tool : tools) {
      if (tool.name != function) continue;
      // vLLM's `parameters or <the request's own schema>`: no parameters, or {}, constrain nothing.
      if (tool.parameters == nullptr || (tool.parameters->IsObject() && tool.parameters->ObjectEmpty())) {
        return std::nullopt;
      }
      return schema_constraint(to_json(*tool.parameters));
    }
    throw_bad_request("Tool '" + std::string(function) + "' has not been passed in `tools`.", "tool_choice");
  }
  if (choice == ToolChoice::kRequired) return schema_constraint(required_calls_schema(tools));
  return std::nullopt;
}

std::optional<StructuredOutputRequest> with_tool_constraint(std::optional<StructuredOutputRequest> request,
                                                            std::optional<StructuredOutputRequest> tools) {
  if (!tools) return request;
  if (request && request->spec.kind != Kind::JsonSchema) {
    throw_bad_request("You can only use one kind of structured outputs constraint but multiple are specified: " +
                          tools->field + ", " + request->field,
                      request->field);
  }
  return tools;
}

std::optional<StructuredOutputRequest> chat_constraint(const ChatRequest& request) {
  if (request.tool_choice != ToolChoice::kRequired && request.tool_choice != ToolChoice::kNamed) {
    return request.common.structured_output;
  }
  rapidjson::Document tools;
  tools.Parse(request.tools_json.c_str(), request.tools_json.size());
  return with_tool_constraint(
      request.common.structured_output,
      tool_call_constraint(request.tool_choice, request.tool_choice_name, chat_function_tools(tools)));
}

}  // namespace serverd::api
