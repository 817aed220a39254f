#include "serverd/api/protocol.h"

#include <charconv>
#include <cstdint>
#include <limits>
#include <string_view>

#include "serverd/api/api_error.h"
#include "serverd/api/json_io.h"

namespace serverd::api {
namespace {

using rapidjson::Value;

std::string text(const Value& v) {
  return std::string(v.GetString(), v.GetStringLength());
}

std::int32_t token_id(const Value& v, std::string_view what) {
  const std::int64_t id = as_int(v, what);
  if (id < 0 || id > std::numeric_limits<std::int32_t>::max()) {
    throw_bad_request("'" + std::string(what) + "' holds token ids, which are integers from 0 to 2147483647; got " +
                          std::to_string(id),
                      std::string(what));
  }
  return static_cast<std::int32_t>(id);
}

std::vector<std::int32_t> token_ids(const Value& v, std::string_view what) {
  if (!v.IsArray()) throw_bad_request("'" + std::string(what) + "' must be an array of token ids", std::string(what));
  std::vector<std::int32_t> ids;
  ids.reserve(v.Size());
  for (const auto& item : v.GetArray()) ids.push_back(token_id(item, what));
  return ids;
}

std::optional<float> float_field(const Value& body, std::string_view name) {
  const auto d = number_field(body, name);
  if (!d) return std::nullopt;
  return static_cast<float>(*d);
}

// vLLM's validation wording for counts: "n must be at least 1, got 0."
std::size_t count_at_least(std::int64_t value, std::int64_t minimum, std::string_view name) {
  if (value < minimum) {
    throw_bad_request(
        std::string(name) + " must be at least " + std::to_string(minimum) + ", got " + std::to_string(value) + ".",
        std::string(name));
  }
  return static_cast<std::size_t>(value);
}

[[noreturn]] void unsupported(std::string_view name, std::string_view why = {}) {
  throw_bad_request("'" + std::string(name) + "' is not supported by this server" +
                        (why.empty() ? std::string() : ": " + std::string(why)),
                    std::string(name));
}

// Fields this server knows but cannot honour: present with a value that asks for something, they are
// refused rather than silently ignored.
void refuse_unsupported(const Value& body) {
  if (bool_field(body, "use_beam_search").value_or(false)) unsupported("use_beam_search");
  for (const char* name : {"logprob_token_ids", "prompt_embeds"}) {
    if (field(body, name) != nullptr) unsupported(name);
  }
  for (const char* name : {"allowed_token_ids", "bad_words"}) {
    const auto* value = field(body, name);
    if (value != nullptr && !(value->IsArray() && value->Empty())) unsupported(name);
  }
}

std::vector<std::string> stop_strings(const Value& body, const ParseLimits& limits) {
  std::vector<std::string> stops;
  const auto* stop = field(body, "stop");
  if (stop == nullptr) return stops;
  if (stop->IsString()) {
    stops.push_back(text(*stop));
  } else if (stop->IsArray()) {
    for (const auto& item : stop->GetArray()) {
      if (!item.IsString()) throw_bad_request("'stop' must be a string or an array of strings", "stop");
      stops.push_back(text(item));
    }
  } else {
    throw_bad_request("'stop' must be a string or an array of strings", "stop");
  }
  if (stops.size() > limits.max_stop_strings) {
    throw_bad_request("stop may hold at most " + std::to_string(limits.max_stop_strings) + " strings, got " +
                          std::to_string(stops.size()) + ".",
                      "stop");
  }
  for (const auto& s : stops) {
    if (s.empty()) throw_bad_request("stop cannot contain an empty string.", "stop");
    if (s.size() > limits.max_stop_string_bytes) {
      throw_bad_request("stop strings may be at most " + std::to_string(limits.max_stop_string_bytes) + " bytes long",
                        "stop");
    }
  }
  return stops;
}

std::vector<std::pair<std::int32_t, float>> logit_bias(const Value& body) {
  std::vector<std::pair<std::int32_t, float>> bias;
  const auto* object = field(body, "logit_bias");
  if (object == nullptr) return bias;
  if (!object->IsObject())
    throw_bad_request("'logit_bias' must be an object mapping token ids to numbers", "logit_bias");
  for (const auto& member : object->GetObject()) {
    const std::string_view key(member.name.GetString(), member.name.GetStringLength());
    std::int32_t id = 0;
    const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
    if (ec != std::errc() || end != key.data() + key.size() || id < 0) {
      throw_bad_request("logit_bias keys must be token ids, got '" + std::string(key) + "'", "logit_bias");
    }
    if (!member.value.IsNumber()) throw_bad_request("logit_bias values must be numbers", "logit_bias");
    bias.emplace_back(id, static_cast<float>(member.value.GetDouble()));
  }
  return bias;
}

enum class Endpoint { kCompletions, kChat };

// truncate_prompt_tokens: -1 (the context length) or a positive count.
std::optional<std::int64_t> truncate_prompt_tokens(const Value& body) {
  const auto truncate = int_field(body, "truncate_prompt_tokens");
  if (truncate && (*truncate < -1 || *truncate == 0)) {
    throw_bad_request("truncate_prompt_tokens must be -1 or at least 1, got " + std::to_string(*truncate) + ".",
                      "truncate_prompt_tokens");
  }
  return truncate;
}

CommonFields parse_common(const Value& body, const ParseLimits& limits, Endpoint endpoint) {
  refuse_unsupported(body);
  CommonFields c;
  c.model = string_field(body, "model");
  string_field(body, "user");  // type-checked, otherwise ignored (as vLLM does)
  c.echo = bool_field(body, "echo").value_or(false);

  if (const auto n = int_field(body, "n")) {
    c.n = count_at_least(*n, 1, "n");
    if (c.n > limits.max_n) {
      throw_bad_request("n must be at most " + std::to_string(limits.max_n) + ", got " + std::to_string(*n) + ".", "n");
    }
  }

  std::optional<std::int64_t> max_tokens;
  std::string max_tokens_name = "max_tokens";
  if (endpoint == Endpoint::kChat) {
    if (const auto completion = int_field(body, "max_completion_tokens")) {
      max_tokens = completion;
      max_tokens_name = "max_completion_tokens";
    }
  }
  if (!max_tokens) max_tokens = int_field(body, "max_tokens");
  if (max_tokens) {
    // Completions with echo may ask for no new tokens: the response is the prompt alone.
    const bool echo_only = endpoint == Endpoint::kCompletions && c.echo && *max_tokens == 0;
    c.max_tokens = echo_only ? 0 : count_at_least(*max_tokens, 1, max_tokens_name);
  }

  c.stream = bool_field(body, "stream").value_or(false);
  if (const auto prompt_logprobs = int_field(body, "prompt_logprobs")) {
    // A streamed response has no place for them (vLLM's checks, in its order).
    if (c.stream && (*prompt_logprobs > 0 || *prompt_logprobs == -1)) {
      throw_bad_request("`prompt_logprobs` are not available when `stream=True`.", "prompt_logprobs");
    }
    if (*prompt_logprobs < -1) {
      throw_bad_request("`prompt_logprobs` must be a positive value or -1.", "prompt_logprobs");
    }
    c.prompt_logprobs = prompt_logprobs;
  }
  c.return_tokens_as_token_ids = bool_field(body, "return_tokens_as_token_ids");
  if (const auto* options = field(body, "stream_options")) {
    if (!options->IsObject()) throw_bad_request("'stream_options' must be an object", "stream_options");
    if (!c.stream) {
      throw_bad_request("Stream options can only be defined when `stream=True`.", "stream_options");
    }
    c.include_usage = bool_field(*options, "include_usage").value_or(false);
    c.continuous_usage = bool_field(*options, "continuous_usage_stats").value_or(false);
  }

  c.temperature = float_field(body, "temperature");
  c.top_p = float_field(body, "top_p");
  c.min_p = float_field(body, "min_p");
  c.repetition_penalty = float_field(body, "repetition_penalty");
  c.presence_penalty = float_field(body, "presence_penalty").value_or(0.0f);
  c.frequency_penalty = float_field(body, "frequency_penalty").value_or(0.0f);
  if (const auto top_k = int_field(body, "top_k")) {
    if (*top_k < std::numeric_limits<int>::min() || *top_k > std::numeric_limits<int>::max()) {
      throw_bad_request("top_k is out of range, got " + std::to_string(*top_k) + ".", "top_k");
    }
    c.top_k = static_cast<int>(*top_k);
  }
  if (const auto seed = int_field(body, "seed")) c.seed = static_cast<std::uint64_t>(*seed);

  c.stop = stop_strings(body, limits);
  if (const auto* ids = field(body, "stop_token_ids")) c.stop_token_ids = token_ids(*ids, "stop_token_ids");
  c.include_stop_str_in_output = bool_field(body, "include_stop_str_in_output").value_or(false);
  c.ignore_eos = bool_field(body, "ignore_eos").value_or(false);
  c.skip_special_tokens = bool_field(body, "skip_special_tokens").value_or(true);
  bool_field(body, "spaces_between_special_tokens");  // accepted; byte-level decoders have no such spaces
  if (const auto min_tokens = int_field(body, "min_tokens")) {
    if (*min_tokens < 0) {
      throw_bad_request("min_tokens must be greater than or equal to 0, got " + std::to_string(*min_tokens) + ".",
                        "min_tokens");
    }
    c.min_tokens = static_cast<std::size_t>(*min_tokens);
    if (c.max_tokens && c.min_tokens > *c.max_tokens) {
      throw_bad_request("min_tokens must be less than or equal to max_tokens=" + std::to_string(*c.max_tokens) +
                            ", got " + std::to_string(*min_tokens) + ".",
                        "min_tokens");
    }
  }
  c.logit_bias = logit_bias(body);
  c.truncate_prompt_tokens = truncate_prompt_tokens(body);
  c.add_special_tokens = bool_field(body, "add_special_tokens").value_or(endpoint == Endpoint::kCompletions);
  c.structured_output = parse_structured_output(body);
  return c;
}

// The prompts of a completions request ("prompt") or an embeddings request ("input"): a string, an array of
// strings, an array of token ids or an array of token id arrays. `empty` is the refusal of none.
std::vector<PromptInput> parse_prompts(const Value& body, const ParseLimits& limits, const char* name,
                                       std::string_view empty) {
  const std::string key(name);
  const std::string shape =
      "'" + key + "' must be a string, an array of strings, an array of token ids or an array of token id arrays";
  const auto* prompt = field(body, name);
  if (prompt == nullptr) throw_bad_request(std::string(empty), key);
  std::vector<PromptInput> prompts;
  if (prompt->IsString()) {
    if (prompt->GetStringLength() == 0) throw_bad_request(std::string(empty), key);
    prompts.push_back({false, text(*prompt), {}});
    return prompts;
  }
  if (!prompt->IsArray()) throw_bad_request(shape, key);
  if (prompt->Empty()) throw_bad_request(std::string(empty), key);
  const auto& first = (*prompt)[0];
  if (first.IsNumber()) {
    prompts.push_back({true, {}, token_ids(*prompt, key)});
    return prompts;
  }
  if (prompt->Size() > limits.max_prompts) {
    throw_bad_request(key + " list length " + std::to_string(prompt->Size()) +
                          " exceeds the maximum allowed count of " + std::to_string(limits.max_prompts) + ".",
                      key);
  }
  for (const auto& item : prompt->GetArray()) {
    if (item.IsString() && first.IsString()) {
      prompts.push_back({false, text(item), {}});
    } else if (item.IsArray() && first.IsArray()) {
      prompts.push_back({true, {}, token_ids(item, key)});
    } else {
      throw_bad_request(shape, key);
    }
  }
  return prompts;
}

// A message's text parts: a string is one part, null none, a list its text parts in order (vLLM's text
// part types; anything else is refused, as this server takes text only).
std::optional<std::vector<std::string>> message_parts(const Value& content) {
  if (content.IsNull()) return std::nullopt;
  if (content.IsString()) return std::vector<std::string>{text(content)};
  if (!content.IsArray()) throw_bad_request("A message's 'content' must be a string or an array of parts", "messages");
  std::vector<std::string> parts;
  for (const auto& part : content.GetArray()) {
    if (!part.IsObject()) throw_bad_request("A message's content parts must be objects", "messages");
    const auto type = string_field(part, "type").value_or("text");
    if (type != "text" && type != "input_text" && type != "output_text" && type != "refusal") {
      throw_bad_request("Content parts of type '" + type + "' are not supported; this server takes text only",
                        "messages");
    }
    const std::string key = type == "refusal" ? "refusal" : "text";
    const auto part_text = string_field(part, key);
    if (!part_text) throw_bad_request("A " + type + " content part needs a '" + key + "' string", "messages");
    parts.push_back(*part_text);
  }
  return parts;
}

std::string joined(const std::vector<std::string>& parts) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) out += (i == 0 ? "" : "\n") + parts[i];
  return out;
}

// One message's content in both formats.
void write_content(const std::optional<std::vector<std::string>>& parts, bool tool, JsonWriter& as_string,
                   JsonWriter& as_parts) {
  const std::string text_value = parts ? joined(*parts) : std::string();
  as_string.key("content").value(text_value);
  as_parts.key("content");
  if (tool) {
    as_parts.value(text_value);  // vLLM hands tool results to templates as strings in either format
    return;
  }
  as_parts.begin_array();
  for (const auto& part : parts.value_or(std::vector<std::string>{})) {
    as_parts.begin_object().key("type").value("text").key("text").value(part).end_object();
  }
  as_parts.end_array();
}

// A replayed call's arguments as the template gets them: JSON text parsed into its value, as vLLM does
// (templates write them with tojson); text that is not JSON, null and other types become {} as in vLLM.
void write_call_arguments(JsonWriter& w, const Value* arguments) {
  if (arguments != nullptr && (arguments->IsObject() || arguments->IsArray())) {
    w.value(*arguments);
    return;
  }
  if (arguments != nullptr && arguments->IsString()) {
    rapidjson::Document parsed;
    parsed.Parse(arguments->GetString(), arguments->GetStringLength());
    if (!parsed.HasParseError()) {
      w.value(static_cast<const Value&>(parsed));
      return;
    }
  }
  w.begin_object().end_object();
}

void write_tool_calls(JsonWriter& w, const Value& calls) {
  if (!calls.IsArray()) throw_bad_request("An assistant message's 'tool_calls' must be an array", "messages");
  w.begin_array();
  for (const auto& call : calls.GetArray()) {
    if (!call.IsObject()) throw_bad_request("Each of a message's 'tool_calls' must be an object", "messages");
    const auto* function = field(call, "function");
    if (function == nullptr || !function->IsObject()) {
      throw_bad_request("Each of a message's 'tool_calls' needs a 'function' object", "messages");
    }
    w.begin_object();
    for (const auto& member : call.GetObject()) {
      const std::string_view name(member.name.GetString(), member.name.GetStringLength());
      w.key(name);
      if (name != "function") {
        w.value(member.value);
        continue;
      }
      w.begin_object();
      for (const auto& part : function->GetObject()) {
        const std::string_view part_name(part.name.GetString(), part.name.GetStringLength());
        if (part_name != "arguments") w.key(part_name).value(part.value);
      }
      w.key("arguments");
      write_call_arguments(w, field(*function, "arguments"));
      w.end_object();
    }
    w.end_object();
  }
  w.end_array();
}

ChatMessages parse_messages(const Value& body) {
  const auto* messages = field(body, "messages");
  if (messages == nullptr) throw_bad_request("'messages' is required", "messages");
  if (!messages->IsArray()) throw_bad_request("'messages' must be an array of message objects", "messages");
  if (messages->Empty()) throw_bad_request("'messages' must not be empty", "messages");
  ChatMessages out;
  JsonWriter as_string;
  JsonWriter as_parts;
  as_string.begin_array();
  as_parts.begin_array();
  for (const auto& message : messages->GetArray()) {
    if (!message.IsObject()) throw_bad_request("Each message must be an object", "messages");
    const auto* role = field(message, "role");
    if (role == nullptr || !role->IsString()) throw_bad_request("Each message needs a 'role' string", "messages");
    out.last_role = text(*role) == "developer" ? "system" : text(*role);
    std::optional<std::vector<std::string>> parts;
    if (const auto* content = field(message, "content")) parts = message_parts(*content);
    out.last_content = parts ? std::optional(joined(*parts)) : std::nullopt;
    as_string.begin_object();
    as_parts.begin_object();
    for (auto* w : {&as_string, &as_parts}) w->key("role").value(out.last_role);
    write_content(parts, out.last_role == "tool", as_string, as_parts);
    for (const auto& member : message.GetObject()) {
      const std::string_view name(member.name.GetString(), member.name.GetStringLength());
      if (name == "role" || name == "content") continue;
      if (name == "tool_calls") {
        // vLLM drops an empty or null list, so the template takes its plain assistant path; string
        // arguments reach the template as the JSON they hold.
        if (member.value.IsNull() || (member.value.IsArray() && member.value.Empty())) continue;
        for (auto* w : {&as_string, &as_parts}) {
          w->key(name);
          write_tool_calls(*w, member.value);
        }
        continue;
      }
      for (auto* w : {&as_string, &as_parts}) w->key(name).value(member.value);
    }
    as_string.end_object();
    as_parts.end_object();
  }
  as_string.end_array();
  as_parts.end_array();
  out.json = as_string.take();
  out.openai_json = as_parts.take();
  return out;
}

std::string template_kwargs(const Value& body, std::optional<std::string>& chat_template,
                            std::optional<bool>* enable_thinking = nullptr) {
  chat_template = string_field(body, "chat_template");
  const auto* kwargs = field(body, "chat_template_kwargs");
  if (kwargs == nullptr) return {};
  if (!kwargs->IsObject()) throw_bad_request("'chat_template_kwargs' must be an object", "chat_template_kwargs");
  JsonWriter w;
  w.begin_object();
  for (const auto& member : kwargs->GetObject()) {
    const std::string_view name(member.name.GetString(), member.name.GetStringLength());
    if (name == "chat_template") {
      if (!member.value.IsString() && !member.value.IsNull()) {
        throw_bad_request("chat_template_kwargs.chat_template must be a string", "chat_template_kwargs");
      }
      if (!chat_template && member.value.IsString()) chat_template = text(member.value);
      continue;
    }
    w.key(name).value(member.value);
  }
  if (enable_thinking != nullptr) *enable_thinking = bool_field(*kwargs, "enable_thinking");
  w.end_object();
  return w.take();
}

// The tools the template is shown.
std::string tool_list(const Value& body) {
  const auto* list = field(body, "tools");
  if (list == nullptr) return {};
  if (!list->IsArray()) throw_bad_request("'tools' must be an array", "tools");
  if (list->Empty()) {
    throw_bad_request(
        "`tools` must not be an empty array. Either provide at least one tool or omit the field entirely.", "tools");
  }
  return to_json(*list);
}

// tool_choice with vLLM's checks and messages. Whether "auto" can be honoured depends on the server's flags
// (chat_parsing.h checks it); a named function must be one of the tools (tool_call_schema.h checks it).
ToolChoice tool_choice(const Value& body, bool has_tools, std::string& name) {
  const auto* choice = field(body, "tool_choice");
  if (choice == nullptr) return has_tools ? ToolChoice::kAuto : ToolChoice::kNone;
  if (choice->IsString() && text(*choice) == "none") return ToolChoice::kNone;
  if (!has_tools) throw_bad_request("When using `tool_choice`, `tools` must be set.", "tool_choice");
  if (choice->IsObject()) {
    const auto* function = field(*choice, "function");
    const auto type = string_field(*choice, "type");
    const auto function_name = function && function->IsObject() ? string_field(*function, "name") : std::nullopt;
    if (type.value_or("function") != "function" || !function_name) {
      throw_bad_request("A named `tool_choice` must be {\"type\": \"function\", \"function\": {\"name\": ...}}",
                        "tool_choice");
    }
    name = *function_name;
    return ToolChoice::kNamed;
  }
  const std::string mode = choice->IsString() ? text(*choice) : to_json(*choice);
  if (mode == "auto") return ToolChoice::kAuto;
  if (mode == "required") return ToolChoice::kRequired;
  throw_bad_request("Invalid value for `tool_choice`: " + mode +
                        "! Only named tools, \"none\", \"auto\" or \"required\" are supported.",
                    "tool_choice");
}

void parse_generation_prompt(const Value& body, bool& add_generation_prompt, bool& continue_final_message) {
  const auto add = bool_field(body, "add_generation_prompt");
  continue_final_message = bool_field(body, "continue_final_message").value_or(false);
  if (continue_final_message && add.value_or(false)) {
    throw_bad_request("Cannot set both `continue_final_message` and `add_generation_prompt` to True.");
  }
  add_generation_prompt = add.value_or(!continue_final_message);
}

// A count of log-probabilities: -1 (the whole vocabulary) or at least 0. The cap (--max-logprobs) needs the
// vocabulary, so resolve_logprobs checks it.
std::int64_t logprobs_count(std::int64_t value, std::string_view name) {
  if (value < -1) throw_bad_request("`" + std::string(name) + "` must be a positive value or -1.", std::string(name));
  return value;
}

}  // namespace

CompletionRequest parse_completion_request(const Value& body, const ParseLimits& limits) {
  CompletionRequest r;
  r.common = parse_common(body, limits, Endpoint::kCompletions);
  if (field(body, "suffix") != nullptr) throw_bad_request("suffix is not currently supported", "suffix");
  if (const auto best_of = int_field(body, "best_of"); best_of && *best_of != static_cast<std::int64_t>(r.common.n)) {
    unsupported("best_of", "best_of must equal n");
  }
  if (const auto logprobs = int_field(body, "logprobs")) r.logprobs = logprobs_count(*logprobs, "logprobs");
  r.prompts = parse_prompts(body, limits, "prompt", "Either prompt or prompt_embeds must be provided and non-empty.");
  return r;
}

EmbeddingRequest parse_embedding_request(const Value& body, const ParseLimits& limits) {
  EmbeddingRequest r;
  r.model = string_field(body, "model");
  if (field(body, "messages") != nullptr) {
    unsupported("messages", "embed text or token ids given as 'input' (a chat rendered by /tokenize, for one)");
  }
  r.inputs = parse_prompts(body, limits, "input", "'input' must be provided and non-empty.");
  if (const auto format = string_field(body, "encoding_format")) {
    if (*format == "base64") {
      r.base64 = true;
    } else if (*format != "float") {
      throw_bad_request("encoding_format must be 'float' or 'base64', got '" + *format + "'", "encoding_format");
    }
  }
  // vLLM's base64 variants: serverd writes float32, little-endian (this machine's order) only.
  if (const auto dtype = string_field(body, "embed_dtype"); dtype && *dtype != "float32") {
    unsupported("embed_dtype", "embeddings are float32");
  }
  if (const auto order = string_field(body, "endianness"); order && *order != "native" && *order != "little") {
    unsupported("endianness", "base64 embeddings are little-endian");
  }
  if (const auto dimensions = int_field(body, "dimensions")) r.dimensions = dimensions;
  r.truncate_prompt_tokens = truncate_prompt_tokens(body);
  r.add_special_tokens = bool_field(body, "add_special_tokens").value_or(true);
  r.normalize = bool_field(body, "normalize");
  return r;
}

ChatRequest parse_chat_request(const Value& body, const ParseLimits& limits) {
  ChatRequest r;
  r.common = parse_common(body, limits, Endpoint::kChat);
  r.messages = parse_messages(body);
  if (field(body, "documents") != nullptr) unsupported("documents");
  r.tools_json = tool_list(body);
  r.tool_choice = tool_choice(body, !r.tools_json.empty(), r.tool_choice_name);
  r.parallel_tool_calls = bool_field(body, "parallel_tool_calls").value_or(true);
  r.include_reasoning = bool_field(body, "include_reasoning").value_or(true);
  r.template_kwargs_json = template_kwargs(body, r.chat_template, &r.enable_thinking);
  parse_generation_prompt(body, r.add_generation_prompt, r.continue_final_message);
  r.logprobs = bool_field(body, "logprobs").value_or(false);
  if (const auto top = int_field(body, "top_logprobs")) {
    r.top_logprobs = logprobs_count(*top, "top_logprobs");
    if (r.top_logprobs != 0 && !r.logprobs) {
      throw_bad_request("when using `top_logprobs`, `logprobs` must be set to true.", "top_logprobs");
    }
  }
  return r;
}

TokenizeRequest parse_tokenize_request(const Value& body) {
  TokenizeRequest r;
  r.model = string_field(body, "model");
  r.return_token_strs = bool_field(body, "return_token_strs").value_or(false);
  if (field(body, "messages") != nullptr) {
    r.chat = true;
    r.messages = parse_messages(body);
    r.tools_json = tool_list(body);  // vLLM's tokenize takes no tool_choice
    r.template_kwargs_json = template_kwargs(body, r.chat_template);
    parse_generation_prompt(body, r.add_generation_prompt, r.continue_final_message);
    r.add_special_tokens = bool_field(body, "add_special_tokens").value_or(false);
  } else {
    const auto prompt = string_field(body, "prompt");
    if (!prompt) throw_bad_request("Either 'prompt' or 'messages' is required", "prompt");
    r.prompt = *prompt;
    r.add_special_tokens = bool_field(body, "add_special_tokens").value_or(true);
  }
  return r;
}

DetokenizeRequest parse_detokenize_request(const Value& body) {
  DetokenizeRequest r;
  r.model = string_field(body, "model");
  const auto* tokens = field(body, "tokens");
  if (tokens == nullptr) throw_bad_request("'tokens' is required", "tokens");
  r.tokens = token_ids(*tokens, "tokens");
  return r;
}

}  // namespace serverd::api
