#include "serverd/api/responses_formatter.h"

#include <utility>

namespace serverd::api {

ResponsesFormatter::ResponsesFormatter(ResponsesRequest request, ResponseEcho echo,
                                       std::unique_ptr<parsers::ChoiceParser> parser)
    : request_(std::move(request)), echo_(std::move(echo)), parser_(std::move(parser)) {
  echo_.request = &request_;
}

std::uint64_t ResponsesFormatter::item_index() const {
  return static_cast<std::uint64_t>(items_.size() - 1);
}

std::string ResponsesFormatter::event(std::string_view type, std::string body_fields) {
  // `type` is one of this file's event names: plain ASCII that needs no escaping.
  std::string json = "{\"type\":\"" + std::string(type) + "\",\"sequence_number\":" + std::to_string(sequence_++);
  if (!body_fields.empty()) json += "," + body_fields;
  json += "}";
  return responses_sse_event(type, json);
}

std::string ResponsesFormatter::item_event(std::string_view type, const OutputItem& item, bool done) {
  JsonWriter w;
  w.begin_object();
  w.key("output_index").value(item_index());
  w.key("item");
  write_output_item(w, item, done);
  w.end_object();
  std::string fields = w.take();
  return event(type, fields.substr(1, fields.size() - 2));
}

namespace {

std::string members(JsonWriter& w) {
  std::string json = w.end_object().take();
  return json.substr(1, json.size() - 2);
}

void write_part(JsonWriter& w, OutputItem::Kind kind, std::string_view text) {
  w.begin_object();
  if (kind == OutputItem::Kind::kReasoning) {
    w.key("type").value("reasoning_text").key("text").value(text);
  } else {
    w.key("type").value("output_text").key("text").value(text);
    w.key("annotations").begin_array().end_array().key("logprobs").begin_array().end_array();
  }
  w.end_object();
}

}  // namespace

std::string ResponsesFormatter::open(OutputItem::Kind kind, std::string call_id, std::string name) {
  std::string out = close();
  OutputItem item;
  item.kind = kind;
  const char* prefix = kind == OutputItem::Kind::kReasoning ? "rs_"
                       : kind == OutputItem::Kind::kMessage ? "msg_"
                                                            : "fc_";
  item.id = prefix + echo_.id.substr(echo_.id.find('_') + 1) + "-" + std::to_string(next_item_++);
  item.call_id = std::move(call_id);
  item.name = std::move(name);
  items_.push_back(std::move(item));
  open_ = true;
  out += item_event("response.output_item.added", items_.back(), false);
  if (kind != OutputItem::Kind::kFunctionCall) {
    JsonWriter w;
    w.begin_object();
    w.key("item_id").value(items_.back().id);
    w.key("output_index").value(item_index());
    w.key("content_index").value(0);
    w.key("part");
    write_part(w, kind, "");
    out += event(kind == OutputItem::Kind::kReasoning ? "response.reasoning_part.added" : "response.content_part.added",
                 members(w));
  }
  return out;
}

std::string ResponsesFormatter::close() {
  if (!open_) return {};
  open_ = false;
  const OutputItem& item = items_.back();
  std::string out;
  if (item.kind == OutputItem::Kind::kFunctionCall) {
    JsonWriter w;
    w.begin_object().key("item_id").value(item.id).key("output_index").value(item_index());
    w.key("name").value(item.name).key("arguments").value(item.text);
    out += event("response.function_call_arguments.done", members(w));
  } else {
    const bool reasoning = item.kind == OutputItem::Kind::kReasoning;
    JsonWriter text;
    text.begin_object().key("item_id").value(item.id).key("output_index").value(item_index());
    text.key("content_index").value(0).key("text").value(item.text);
    if (!reasoning) text.key("logprobs").begin_array().end_array();
    out += event(reasoning ? "response.reasoning_text.done" : "response.output_text.done", members(text));
    JsonWriter part;
    part.begin_object().key("item_id").value(item.id).key("output_index").value(item_index());
    part.key("content_index").value(0).key("part");
    write_part(part, item.kind, item.text);
    out += event(reasoning ? "response.reasoning_part.done" : "response.content_part.done", members(part));
  }
  out += item_event("response.output_item.done", item, true);
  return out;
}

std::string ResponsesFormatter::text_delta(OutputItem::Kind kind, std::string_view text) {
  std::string out;
  if (!open_ || items_.back().kind != kind) out += open(kind);
  OutputItem& item = items_.back();
  item.text += text;
  JsonWriter w;
  w.begin_object().key("item_id").value(item.id).key("output_index").value(item_index());
  w.key("content_index").value(0).key("delta").value(text);
  const bool reasoning = kind == OutputItem::Kind::kReasoning;
  if (!reasoning) w.key("logprobs").begin_array().end_array();
  out += event(reasoning ? "response.reasoning_text.delta" : "response.output_text.delta", members(w));
  return out;
}

std::string ResponsesFormatter::apply(const parsers::ChoiceDelta& delta) {
  std::string out;
  if (!delta.reasoning.empty()) out += text_delta(OutputItem::Kind::kReasoning, delta.reasoning);
  if (!delta.content.empty()) out += text_delta(OutputItem::Kind::kMessage, delta.content);
  for (const parsers::ToolCallDelta& piece : delta.tool_calls) {
    if (piece.starts_call()) out += open(OutputItem::Kind::kFunctionCall, piece.id, piece.name);
    if (piece.arguments.empty()) continue;
    OutputItem& item = items_.back();
    item.text += piece.arguments;
    JsonWriter w;
    w.begin_object().key("item_id").value(item.id).key("output_index").value(item_index());
    w.key("delta").value(piece.arguments);
    out += event("response.function_call_arguments.delta", members(w));
  }
  return out;
}

std::string ResponsesFormatter::begin() {
  const std::string initial = response_json(echo_, "in_progress", {}, std::nullopt);
  std::string out = event("response.created", "\"response\":" + initial);  // its own statement: numbered first
  out += event("response.in_progress", "\"response\":" + initial);
  return out;
}

std::string ResponsesFormatter::feed(std::string_view text, std::size_t tokens) {
  if (text.empty()) return {};
  return apply(parser_->feed(text, tokens));
}

std::string ResponsesFormatter::finish(const ChoiceOutput& out, std::size_t prompt_tokens) {
  std::string events = apply(parser_->finish());
  events += close();
  events += event("response.completed", "\"response\":" + whole(out, prompt_tokens));
  return events;
}

std::string ResponsesFormatter::whole(const ChoiceOutput& out, std::size_t prompt_tokens) const {
  ResponseUsage usage;
  usage.input_tokens = prompt_tokens;
  usage.output_tokens = out.token_count();
  usage.reasoning_tokens = parser_->reasoning_tokens();
  // vLLM: a response cut short by the token limit is "incomplete".
  const std::string_view status = out.finish_reason() == "length" ? "incomplete" : "completed";
  return response_json(echo_, status, items_, usage);
}

}  // namespace serverd::api
