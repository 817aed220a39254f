#include "serverd/api/response_json.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

namespace serverd::api {
namespace {

double floored(float logprob) {
  return std::isnan(logprob) ? kMinLogprob : std::max(static_cast<double>(logprob), kMinLogprob);
}

std::string token_text(const engine::tokenizer::Tokenizer& tokenizer, std::int32_t token) {
  return tokenizer.decode(std::span<const std::int32_t>(&token, 1), false);
}

// A token as the log-probability formats write it.
std::string token_string(const engine::tokenizer::Tokenizer& tokenizer, std::int32_t token, bool as_id) {
  return as_id ? "token_id:" + std::to_string(token) : token_text(tokenizer, token);
}

// Python's len(): code points, which is what vLLM's text_offset counts.
std::size_t code_points(std::string_view text) {
  return static_cast<std::size_t>(
      std::count_if(text.begin(), text.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

void write_bytes(JsonWriter& w, std::string_view text) {
  w.begin_array();
  for (const char c : text) w.value(static_cast<std::int64_t>(static_cast<unsigned char>(c)));
  w.end_array();
}

}  // namespace

void write_usage(JsonWriter& w, std::size_t prompt_tokens, std::size_t completion_tokens,
                 std::optional<std::size_t> cached_tokens, std::optional<std::size_t> reasoning_tokens) {
  w.begin_object();
  w.key("prompt_tokens").value(static_cast<std::uint64_t>(prompt_tokens));
  w.key("total_tokens").value(static_cast<std::uint64_t>(prompt_tokens + completion_tokens));
  w.key("completion_tokens").value(static_cast<std::uint64_t>(completion_tokens));
  w.key("prompt_tokens_details");
  if (cached_tokens && *cached_tokens > 0) {
    w.begin_object().key("cached_tokens").value(static_cast<std::uint64_t>(*cached_tokens)).end_object();
  } else {
    w.null();
  }
  if (reasoning_tokens) {
    w.key("completion_tokens_details").begin_object();
    w.key("reasoning_tokens").value(static_cast<std::uint64_t>(*reasoning_tokens));
    w.end_object();
  }
  w.end_object();
}

void write_message(JsonWriter& w, std::string_view role, const parsers::ChoiceResult& message) {
  const auto optional_text = [&w](const std::optional<std::string>& text) {
    if (text) {
      w.value(*text);
    } else {
      w.null();
    }
  };
  w.begin_object();
  w.key("role").value(role);
  w.key("content");
  optional_text(message.content);
  w.key("refusal").null();
  w.key("tool_calls").begin_array();
  for (const parsers::ToolCall& call : message.calls) {
    w.begin_object();
    w.key("id").value(call.id);
    w.key("type").value("function");
    w.key("function").begin_object().key("name").value(call.name).key("arguments").value(call.arguments).end_object();
    w.end_object();
  }
  w.end_array();
  w.key("reasoning");
  optional_text(message.reasoning);
  w.end_object();
}

void write_delta(JsonWriter& w, const parsers::ChoiceDelta& delta) {
  w.begin_object();
  if (!delta.content.empty()) w.key("content").value(delta.content);
  if (!delta.reasoning.empty()) w.key("reasoning").value(delta.reasoning);
  if (!delta.tool_calls.empty()) {
    w.key("tool_calls").begin_array();
    for (const parsers::ToolCallDelta& piece : delta.tool_calls) {
      w.begin_object();
      w.key("index").value(piece.index);
      if (piece.starts_call()) w.key("id").value(piece.id).key("type").value("function");
      w.key("function").begin_object();
      if (piece.starts_call()) w.key("name").value(piece.name);
      if (!piece.arguments.empty()) w.key("arguments").value(piece.arguments);
      w.end_object();
      w.end_object();
    }
    w.end_array();
  }
  w.end_object();
}

void write_stop_reason(JsonWriter& w, const StopReason& reason) {
  if (const auto* token = std::get_if<std::int32_t>(&reason)) {
    w.value(static_cast<std::int64_t>(*token));
  } else if (const auto* text = std::get_if<std::string>(&reason)) {
    w.value(*text);
  } else {
    w.null();
  }
}

namespace {

// One position's entries in the order vLLM's logprobs dict holds them: the sampled token, then the most
// likely ones (the sampled one not again), at most `limit`. Both APIs list them in this order, so a sampled
// token that is not the most likely leads its list.
std::vector<engine::sampling::TokenLogprob> vllm_order(const LogprobRecord& record, std::size_t limit) {
  std::vector<engine::sampling::TokenLogprob> out;
  if (limit == 0) return out;
  out.push_back({record.token, record.logprob});
  for (const auto& top : record.top) {
    if (out.size() >= limit) break;
    if (top.token != record.token) out.push_back(top);
  }
  return out;
}

}  // namespace

void write_completion_logprobs(JsonWriter& w, const engine::tokenizer::Tokenizer& tokenizer,
                               std::span<const LogprobRecord> records, std::size_t top_logprobs,
                               std::size_t& text_offset, bool tokens_as_ids) {
  std::vector<std::string> tokens;
  tokens.reserve(records.size());
  for (const auto& record : records) tokens.push_back(token_string(tokenizer, record.token, tokens_as_ids));

  w.begin_object();
  w.key("text_offset").begin_array();
  for (const auto& token : tokens) {
    w.value(static_cast<std::uint64_t>(text_offset));
    text_offset += code_points(token);
  }
  w.end_array();
  w.key("token_logprobs").begin_array();
  for (const auto& record : records) {
    if (record.scored) {
      w.value(floored(record.logprob));
    } else {
      w.null();
    }
  }
  w.end_array();
  w.key("tokens").begin_array();
  for (const auto& token : tokens) w.value(token);
  w.end_array();
  w.key("top_logprobs").begin_array();
  for (std::size_t i = 0; i < records.size(); ++i) {
    if (!records[i].scored) {
      w.null();
      continue;
    }
    // Up to top_logprobs + 1 entries, keyed by text as a Python dict would be (a repeated text keeps its
    // first place and its last value).
    std::vector<std::pair<std::string, double>> entries;
    for (const auto& top : vllm_order(records[i], top_logprobs + 1)) {
      std::string text = token_string(tokenizer, top.token, tokens_as_ids);
      const auto same = std::find_if(entries.begin(), entries.end(), [&](const auto& e) { return e.first == text; });
      if (same != entries.end()) {
        same->second = floored(top.logprob);
      } else {
        entries.emplace_back(std::move(text), floored(top.logprob));
      }
    }
    w.begin_object();
    for (const auto& [text, logprob] : entries) w.key(text).value(logprob);
    w.end_object();
  }
  w.end_array();
  w.end_object();
}

void write_chat_logprobs(JsonWriter& w, const engine::tokenizer::Tokenizer& tokenizer,
                         std::span<const LogprobRecord> records, std::size_t top_logprobs, bool tokens_as_ids) {
  w.begin_object();
  w.key("content").begin_array();
  for (const auto& record : records) {
    const std::string token = token_string(tokenizer, record.token, tokens_as_ids);
    w.begin_object();
    w.key("token").value(token);
    w.key("logprob").value(floored(record.logprob));
    w.key("bytes");
    write_bytes(w, token);
    w.key("top_logprobs").begin_array();
    for (const auto& top : vllm_order(record, top_logprobs)) {
      const std::string text = token_string(tokenizer, top.token, tokens_as_ids);
      w.begin_object();
      w.key("token").value(text);
      w.key("logprob").value(floored(top.logprob));
      w.key("bytes");
      write_bytes(w, text);
      w.end_object();
    }
    w.end_array();
    w.end_object();
  }
  w.end_array();
  w.end_object();
}

void write_prompt_logprobs(JsonWriter& w, const engine::tokenizer::Tokenizer& tokenizer,
                           std::span<const PromptLogprob> entries) {
  const auto entry = [&](std::int32_t token, float logprob, std::size_t rank) {
    w.key(std::to_string(token)).begin_object();
    w.key("logprob").value(floored(logprob));
    w.key("rank").value(static_cast<std::uint64_t>(rank));
    w.key("decoded_token").value(token_text(tokenizer, token));
    w.end_object();
  };
  w.begin_array();
  w.null();
  for (const PromptLogprob& e : entries) {
    // As vLLM's dictionary orders them: the prompt token, then the most likely, each id once.
    w.begin_object();
    entry(e.token, e.logprob, e.rank);
    for (std::size_t i = 0; i < e.top.size(); ++i) {
      if (e.top[i].token != e.token) entry(e.top[i].token, e.top[i].logprob, i + 1);
    }
    w.end_object();
  }
  w.end_array();
}

std::vector<LogprobRecord> prompt_records(std::int32_t first_token, std::span<const PromptLogprob> entries) {
  std::vector<LogprobRecord> records;
  records.reserve(entries.size() + 1);
  records.push_back({first_token, 0.0f, {}, false});
  for (const PromptLogprob& e : entries) records.push_back({e.token, e.logprob, e.top});
  return records;
}

std::string sse_event(std::string_view json) {
  std::string out;
  out.reserve(json.size() + 8);
  out.append("data: ").append(json).append("\n\n");
  return out;
}

}  // namespace serverd::api
