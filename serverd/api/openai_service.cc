#include "serverd/api/openai_service.h"

#include <algorithm>
#include <ctime>
#include <iostream>

#include "base/printable.h"
#include "engine/tokenizer/tokenizer.h"
#include "serverd/api/api_error.h"
#include "serverd/api/json_io.h"
#include "serverd/api/prompts.h"

namespace serverd::api {
namespace {

http::Response json_response(std::string body, const std::vector<http::Header>& headers) {
  http::Response response;
  response.headers = headers;
  response.headers.push_back({"Content-Type", "application/json"});
  response.body = std::move(body);
  return response;
}

// Compares in time independent of where the strings differ, so the key cannot be guessed byte by byte.
bool constant_time_equal(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const std::size_t n = std::max(a.size(), b.size());
  for (std::size_t i = 0; i < n; ++i) {
    const char x = i < a.size() ? a[i] : 0;
    const char y = i < b.size() ? b[i] : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

void check_model(const std::optional<std::string>& requested, const ModelInfo& model) {
  if (requested && *requested != model.served_name) {
    throw ApiException(ApiError{404, "The model `" + *requested + "` does not exist.", "model", std::nullopt});
  }
}

std::int64_t now_seconds() {
  return static_cast<std::int64_t>(std::time(nullptr));
}

}  // namespace

OpenAiService::OpenAiService(ApiOptions options)
    : options_(std::move(options)), counters_(std::make_shared<ServiceCounters>()), random_(std::random_device{}()) {}

void OpenAiService::set_phase(std::string phase) {
  std::lock_guard lock(mutex_);
  phase_ = std::move(phase);
}

void OpenAiService::serve(ModelInfo model, Generator& generator) {
  counters_->metrics.set_model_name(model.served_name);
  auto served = std::make_shared<Served>();
  served->model = std::move(model);
  served->generator = &generator;
  std::lock_guard lock(mutex_);
  served_ = std::move(served);
  phase_ = "ready";
}

void OpenAiService::begin_drain() {
  std::lock_guard lock(mutex_);
  draining_ = true;
  phase_ = "draining";
}

std::string OpenAiService::random_id() {
  std::lock_guard lock(mutex_);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id;
  for (int i = 0; i < 2; ++i) {
    std::uint64_t bits = random_();
    for (int j = 0; j < 16; ++j, bits >>= 4) id += kHex[bits & 0xF];
  }
  return id;
}

http::Response OpenAiService::http_error(int status, std::string_view message) {
  return error_response(ApiError{status, std::string(message), std::nullopt, std::nullopt});
}

void OpenAiService::handle(const std::shared_ptr<http::Exchange>& exchange) {
  const auto& request = exchange->request();
  std::vector<http::Header> headers;
  const auto given = request.header("x-request-id");
  headers.push_back({"X-Request-Id", given && !given->empty() ? std::string(*given) : random_id()});
  try {
    route(exchange, headers);
  } catch (const ApiException& e) {
    http::Response response = error_response(e.error());
    response.headers.insert(response.headers.begin(), headers.begin(), headers.end());
    exchange->respond(std::move(response));
  } catch (const std::exception& e) {
    std::cerr << "serverd: " << base::printable(request.method) << ' ' << base::printable(request.path())
              << " failed: " << base::printable(e.what()) << '\n';
    http::Response response = error_response(ApiError{500, "Internal server error", std::nullopt, std::nullopt});
    response.headers.insert(response.headers.begin(), headers.begin(), headers.end());
    exchange->respond(std::move(response));
  }
}

void OpenAiService::route(const std::shared_ptr<http::Exchange>& exchange, const std::vector<http::Header>& headers) {
  const auto& request = exchange->request();
  const std::string_view path = request.path();
  const std::string& method = request.method;
  if (path.starts_with("/v1") && method != "OPTIONS") check_auth(request);

  struct Route {
    std::string_view path;
    std::string_view method;
  };
  static constexpr Route kRoutes[] = {{"/health", "GET"},          {"/metrics", "GET"},
                                      {"/version", "GET"},         {"/v1/models", "GET"},
                                      {"/v1/completions", "POST"}, {"/v1/chat/completions", "POST"},
                                      {"/tokenize", "POST"},       {"/detokenize", "POST"}};
  const auto* route =
      std::find_if(std::begin(kRoutes), std::end(kRoutes), [&](const Route& r) { return r.path == path; });
  if (route == std::end(kRoutes)) throw ApiException(ApiError{404, "Not Found", std::nullopt, std::nullopt});
  if (route->method != method) {
    http::Response response = error_response(ApiError{405, "Method Not Allowed", std::nullopt, std::nullopt});
    response.headers.push_back({"Allow", std::string(route->method)});
    response.headers.insert(response.headers.begin(), headers.begin(), headers.end());
    exchange->respond(std::move(response));
    return;
  }

  const std::string& request_id = headers.front().value;
  http::Response response;
  if (path == "/v1/completions") {
    completions(exchange, headers, request_id);
    return;
  } else if (path == "/v1/chat/completions") {
    chat_completions(exchange, headers, request_id);
    return;
  } else if (path == "/health") {
    response = health();
  } else if (path == "/metrics") {
    response = metrics();
  } else if (path == "/version") {
    JsonWriter w;
    w.begin_object().key("version").value(options_.version).end_object();
    response = json_response(w.take(), {});
  } else if (path == "/v1/models") {
    response = models();
  } else if (path == "/tokenize") {
    response = tokenize(request);
  } else {
    response = detokenize(request);
  }
  response.headers.insert(response.headers.begin(), headers.begin(), headers.end());
  exchange->respond(std::move(response));
}

void OpenAiService::check_auth(const http::Request& request) const {
  if (options_.api_key.empty()) return;
  const auto given = request.header("authorization");
  if (given && constant_time_equal(*given, "Bearer " + options_.api_key)) return;
  throw ApiException(ApiError{401, "Unauthorized", std::nullopt, std::nullopt});
}

std::shared_ptr<const OpenAiService::Served> OpenAiService::require_served() const {
  std::lock_guard lock(mutex_);
  if (draining_) throw ApiException(ApiError{503, "The server is shutting down", std::nullopt, std::nullopt});
  if (!served_) {
    throw ApiException(
        ApiError{503, "The model is not ready yet (" + phase_ + ")", std::nullopt, options_.retry_after_seconds});
  }
  return served_;
}

void OpenAiService::check_capacity(std::size_t sequences) const {
  if (counters_->active_sequences.load() + sequences > options_.max_active_sequences) {
    throw ApiException(
        ApiError{503, "The server is overloaded; retry later.", std::nullopt, options_.retry_after_seconds});
  }
}

namespace {

// What both completion endpoints pass to each sequence.
struct SequencePlan {
  const CommonFields* fields = nullptr;
  const ModelInfo* model = nullptr;
  engine::sampling::SamplingParams sampling;
  std::shared_ptr<const StopStrings> stops;
  std::shared_ptr<const ChoiceConfig> config;
  std::optional<std::size_t> prompt_logprobs;  // scored by each prompt's first sequence, for all its choices
};

SequencePlan plan(const CommonFields& fields, const ModelInfo& model, const LogprobPlan& logprobs) {
  SequencePlan p;
  p.fields = &fields;
  p.model = &model;
  p.sampling = build_sampling(fields, logprobs.sampled ? static_cast<int>(*logprobs.sampled) : -1, model);
  p.prompt_logprobs = logprobs.prompt;
  p.stops = std::make_shared<StopStrings>(fields.stop);
  auto config = std::make_shared<ChoiceConfig>();
  config->skip_special_tokens = fields.skip_special_tokens;
  config->include_stop_str_in_output = fields.include_stop_str_in_output;
  config->min_tokens = fields.min_tokens;
  config->ignore_eos = fields.ignore_eos;
  config->eos_token_ids = model.eos_token_ids;
  config->stop_token_ids = fields.stop_token_ids;
  config->keep_logprobs = logprobs.sampled.has_value();
  p.config = std::move(config);
  return p;
}

// The n sequences of one prompt.
void add_sequences(const SequencePlan& p, const std::string& id, std::size_t prompt_index,
                   const std::vector<std::int32_t>& tokens, std::size_t max_tokens, std::vector<SequenceSpec>& out) {
  if (p.fields->min_tokens > max_tokens && max_tokens > 0) {
    throw_bad_request("min_tokens must be less than or equal to max_tokens=" + std::to_string(max_tokens) + ", got " +
                          std::to_string(p.fields->min_tokens) + ".",
                      "min_tokens");
  }
  for (std::size_t j = 0; j < p.fields->n; ++j) {
    SequenceSpec spec;
    spec.prompt = prompt_index;
    spec.stops = p.stops;
    spec.config = p.config;
    auto& r = spec.request;
    r.request_id = id + "-" + std::to_string(prompt_index) + "-" + std::to_string(j);
    r.prompt_tokens = tokens;
    r.sampling = p.sampling;
    // vLLM seeds the choices of one request apart: seed, seed + 1, ...
    if (r.sampling.seed) r.sampling.seed = *r.sampling.seed + j;
    r.max_tokens = max_tokens;
    r.min_tokens = p.fields->min_tokens;
    r.ignore_eos = p.fields->ignore_eos;
    r.stop_token_ids = p.fields->stop_token_ids;
    if (j == 0) r.prompt_logprobs = p.prompt_logprobs;
    out.push_back(std::move(spec));
  }
}

SessionSettings settings_for(ApiKind kind, std::string id, const CommonFields& fields, const ModelInfo& model,
                             const LogprobPlan& logprobs, const std::vector<http::Header>& headers) {
  SessionSettings s;
  s.kind = kind;
  s.id = std::move(id);
  s.created = now_seconds();
  s.model_name = model.served_name;
  s.stream = fields.stream;
  s.include_usage = fields.include_usage;
  s.logprobs = logprobs.sampled;
  s.headers = headers;
  s.tokens_as_ids = logprobs.tokens_as_ids;
  s.prompt_logprobs_field = logprobs.prompt && logprobs.prompt_field;
  s.echo_prompt_logprobs = logprobs.prompt && logprobs.echo_prompt;
  return s;
}

}  // namespace

void OpenAiService::completions(const std::shared_ptr<http::Exchange>& exchange,
                                const std::vector<http::Header>& headers, const std::string& request_id) {
  const auto served = require_served();
  const ModelInfo& model = served->model;
  rapidjson::Document body;
  parse_request_body(exchange->request().body, body);
  const CompletionRequest request = parse_completion_request(body, options_.limits);
  check_model(request.common.model, model);
  const auto prompts = build_completion_prompts(request, model);
  const LogprobPlan logprobs = plan_completion_logprobs(request, options_.logprobs, model);
  const SequencePlan p = plan(request.common, model, logprobs);

  const std::string id = "cmpl-" + request_id;
  SessionSettings settings = settings_for(ApiKind::kCompletion, id, request.common, model, logprobs, headers);
  std::vector<SequenceSpec> sequences;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    const auto& prompt = prompts[i];
    const bool echo_only = request.common.max_tokens == 0;  // echo with max_tokens 0: the prompt alone
    check_prompt_fits(prompt.tokens.size(), model);
    const std::size_t max_tokens =
        echo_only ? 0 : resolve_max_tokens(request.common.max_tokens, 16, prompt.tokens.size(), model);
    settings.prompt_tokens.push_back(prompt.tokens.size());
    settings.first_prompt_tokens.push_back(prompt.tokens.front());
    if (request.common.echo) settings.echo.push_back(prompt.text);
    add_sequences(p, id, i, prompt.tokens, max_tokens, sequences);
  }
  check_capacity(sequences.size());
  auto session = std::make_shared<GenerationSession>(std::move(settings), counters_, exchange, *model.tokenizer,
                                                     *served->generator);
  session->start(std::move(sequences));
}

void OpenAiService::chat_completions(const std::shared_ptr<http::Exchange>& exchange,
                                     const std::vector<http::Header>& headers, const std::string& request_id) {
  const auto served = require_served();
  const ModelInfo& model = served->model;
  rapidjson::Document body;
  parse_request_body(exchange->request().body, body);
  const ChatRequest request = parse_chat_request(body, options_.limits);
  check_model(request.common.model, model);

  ChatPromptInputs inputs;
  inputs.messages = &request.messages;
  inputs.tools_json = request.tools_json;
  inputs.template_kwargs_json = request.template_kwargs_json;
  inputs.add_generation_prompt = request.add_generation_prompt;
  inputs.continue_final_message = request.continue_final_message;
  inputs.add_special_tokens = request.common.add_special_tokens;
  inputs.truncate_prompt_tokens = request.common.truncate_prompt_tokens;
  const PreparedPrompt prompt = build_chat_prompt(inputs, model);
  const std::size_t max_tokens =
      resolve_max_tokens(request.common.max_tokens, std::nullopt, prompt.tokens.size(), model);
  const LogprobPlan logprobs = plan_chat_logprobs(request, options_.logprobs, model);
  const SequencePlan p = plan(request.common, model, logprobs);

  const std::string id = "chatcmpl-" + request_id;
  SessionSettings settings = settings_for(ApiKind::kChat, id, request.common, model, logprobs, headers);
  settings.prompt_tokens.push_back(prompt.tokens.size());
  settings.first_prompt_tokens.push_back(prompt.tokens.front());
  // vLLM's echo for chat: the reply starts with the last message when that is the assistant's.
  if (request.common.echo && request.messages.last_role == "assistant" && request.messages.last_content) {
    settings.echo.push_back(*request.messages.last_content);
  }
  std::vector<SequenceSpec> sequences;
  add_sequences(p, id, 0, prompt.tokens, max_tokens, sequences);
  check_capacity(sequences.size());
  auto session = std::make_shared<GenerationSession>(std::move(settings), counters_, exchange, *model.tokenizer,
                                                     *served->generator);
  session->start(std::move(sequences));
}

http::Response OpenAiService::models() const {
  const auto served = require_served();
  const ModelInfo& model = served->model;
  const std::int64_t created = now_seconds();
  JsonWriter w;
  w.begin_object();
  w.key("object").value("list");
  w.key("data").begin_array().begin_object();
  w.key("id").value(model.served_name);
  w.key("object").value("model");
  w.key("created").value(created);
  w.key("owned_by").value("vllm");
  w.key("root").value(model.root.empty() ? model.served_name : model.root);
  w.key("parent").null();
  w.key("max_model_len").value(static_cast<std::uint64_t>(model.max_model_len));
  w.key("permission").begin_array().begin_object();
  w.key("id").value("modelperm-" + model.served_name);
  w.key("object").value("model_permission");
  w.key("created").value(created);
  w.key("allow_create_engine").value(false);
  w.key("allow_sampling").value(true);
  w.key("allow_logprobs").value(true);
  w.key("allow_search_indices").value(false);
  w.key("allow_view").value(true);
  w.key("allow_fine_tuning").value(false);
  w.key("organization").value("*");
  w.key("group").null();
  w.key("is_blocking").value(false);
  w.end_object().end_array();
  w.end_object().end_array();
  w.end_object();
  return json_response(w.take(), {});
}

http::Response OpenAiService::health() const {
  std::lock_guard lock(mutex_);
  if (served_ && !draining_) return http::Response{};  // vLLM: 200 with an empty body
  JsonWriter w;
  w.begin_object().key("status").value(phase_).end_object();
  http::Response response = json_response(w.take(), {});
  response.status = 503;
  return response;
}

http::Response OpenAiService::metrics() const {
  std::shared_ptr<const Served> served;
  {
    std::lock_guard lock(mutex_);
    served = served_;
  }
  const GeneratorStats stats = served ? served->generator->stats() : GeneratorStats{};
  http::Response response;
  response.headers.push_back({"Content-Type", "text/plain; version=0.0.4; charset=utf-8"});
  response.body = counters_->metrics.render(stats);
  return response;
}

http::Response OpenAiService::tokenize(const http::Request& http_request) const {
  const auto served = require_served();
  const ModelInfo& model = served->model;
  rapidjson::Document body;
  parse_request_body(http_request.body, body);
  const TokenizeRequest request = parse_tokenize_request(body);
  check_model(request.model, model);
  std::vector<std::int32_t> tokens;
  if (request.chat) {
    ChatPromptInputs inputs;
    inputs.messages = &request.messages;
    inputs.tools_json = request.tools_json;
    inputs.template_kwargs_json = request.template_kwargs_json;
    inputs.add_generation_prompt = request.add_generation_prompt;
    inputs.continue_final_message = request.continue_final_message;
    inputs.add_special_tokens = request.add_special_tokens;
    tokens = build_chat_prompt(inputs, model).tokens;
  } else {
    tokens = model.tokenizer->encode(request.prompt, request.add_special_tokens);
  }
  JsonWriter w;
  w.begin_object();
  w.key("count").value(static_cast<std::uint64_t>(tokens.size()));
  w.key("max_model_len").value(static_cast<std::uint64_t>(model.max_model_len));
  w.key("tokens").begin_array();
  for (const std::int32_t id : tokens) w.value(static_cast<std::int64_t>(id));
  w.end_array();
  w.key("token_strs");
  if (request.return_token_strs) {
    w.begin_array();
    for (const std::int32_t id : tokens) w.value(model.tokenizer->id_to_token(id).value_or(""));
    w.end_array();
  } else {
    w.null();
  }
  w.end_object();
  return json_response(w.take(), {});
}

http::Response OpenAiService::detokenize(const http::Request& http_request) const {
  const auto served = require_served();
  const ModelInfo& model = served->model;
  rapidjson::Document body;
  parse_request_body(http_request.body, body);
  const DetokenizeRequest request = parse_detokenize_request(body);
  check_model(request.model, model);
  const std::size_t vocab = vocab_size(model);
  for (const std::int32_t id : request.tokens) {
    if (static_cast<std::size_t>(id) >= vocab) {
      throw_bad_request("Token id " + std::to_string(id) + " is out of vocabulary", "tokens");
    }
  }
  JsonWriter w;
  w.begin_object().key("prompt").value(model.tokenizer->decode(request.tokens)).end_object();
  return json_response(w.take(), {});
}

}  // namespace serverd::api
