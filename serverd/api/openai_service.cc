#include "serverd/api/openai_service.h"

#include <algorithm>
#include <ctime>
#include <iostream>

#include "base/printable.h"
#include "engine/tokenizer/tokenizer.h"
#include "serverd/api/api_error.h"
#include "serverd/api/json_io.h"
#include "serverd/api/prompts.h"
#include "serverd/api/responses_formatter.h"
#include "serverd/api/structured_outputs.h"
#include "serverd/api/tool_call_schema.h"

namespace serverd::api {
namespace {

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
  if (requested && *requested != model.served_name &&
      std::find(model.aliases.begin(), model.aliases.end(), *requested) == model.aliases.end()) {
    throw ApiException(ApiError{404, "The model `" + *requested + "` does not exist.", "model", std::nullopt});
  }
}

// A pooling model (vLLM's pooling runner) generates nothing: its generating endpoints answer as vLLM's do.
void refuse_if_pooling(const ModelInfo& model, std::string_view api) {
  if (model.pooling) throw_bad_request("The model does not support " + std::string(api));
}

std::int64_t now_seconds() {
  return static_cast<std::int64_t>(std::time(nullptr));
}

}  // namespace

OpenAiService::OpenAiService(ApiOptions options)
    : options_(std::move(options)),
      counters_(std::make_shared<ServiceCounters>()),
      registry_(std::make_shared<prometheus::Registry>()),
      http_metrics_(std::make_shared<HttpMetrics>(registry_)),
      random_(std::random_device{}()),
      seeds_(options_.seed.value_or(0)) {}

void OpenAiService::set_phase(std::string phase) {
  std::lock_guard lock(mutex_);
  phase_ = std::move(phase);
}

void OpenAiService::serve(ModelInfo model, Generator& generator) {
  auto served = std::make_shared<Served>();
  served->metrics =
      std::make_shared<Metrics>(registry_, MetricsConfig{model.served_name, model.max_model_len, model.kv_cache});
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

void OpenAiService::handle(const std::shared_ptr<http::Exchange>& received) {
  const auto& request = received->request();
  const Route* const found = find_route(request.path());
  // The instrumentator labels a request with its route's template; a path that is none is "none".
  const std::string_view handler = found ? found->path : "none";
  const std::shared_ptr<http::Exchange> exchange =
      HttpMetrics::excluded(handler)
          ? received
          : std::make_shared<MeasuredExchange>(received, http_metrics_, std::string(handler));
  std::vector<http::Header> headers;
  const auto given = request.header("x-request-id");
  headers.push_back({"X-Request-Id", given && !given->empty() ? std::string(*given) : random_id()});
  try {
    route(exchange, found, headers);
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

void OpenAiService::route(const std::shared_ptr<http::Exchange>& exchange, const Route* found,
                          const std::vector<http::Header>& headers) {
  const auto& request = exchange->request();
  const std::string_view path = request.path();
  const std::string& method = request.method;
  if (path.starts_with("/v1") && method != "OPTIONS") check_auth(request);

  if (found == nullptr) throw ApiException(ApiError{404, "Not Found", std::nullopt, std::nullopt});
  if (found->endpoint == Endpoint::kRefused) {
    throw ApiException(ApiError{found->status, std::string(found->message), std::nullopt, std::nullopt});
  }
  if (!allows(*found, method)) {
    http::Response response = error_response(ApiError{405, "Method Not Allowed", std::nullopt, std::nullopt});
    response.headers.push_back({"Allow", std::string(found->allow)});
    response.headers.insert(response.headers.begin(), headers.begin(), headers.end());
    exchange->respond(std::move(response));
    return;
  }

  const std::string& request_id = headers.front().value;
  http::Response response;
  switch (found->endpoint) {
    case Endpoint::kCompletions:
    case Endpoint::kChatCompletions:
    case Endpoint::kResponses: {
      rapidjson::Document body;
      parse_request_body(request.body, body);
      if (found->endpoint == Endpoint::kCompletions) {
        completions(exchange, headers, request_id, body);
      } else if (found->endpoint == Endpoint::kChatCompletions) {
        chat_completions(exchange, headers, request_id, body);
      } else {
        responses(exchange, headers, request_id, body);
      }
      return;
    }
    case Endpoint::kEmbeddings: {
      rapidjson::Document body;
      parse_request_body(request.body, body);
      embeddings(exchange, headers, request_id, body);
      return;
    }
    case Endpoint::kInvocations: invocations(exchange, headers, request_id); return;
    case Endpoint::kHealth:
    case Endpoint::kPing: response = health(); break;  // vLLM's /ping is /health, for SageMaker
    case Endpoint::kLoad: {
      JsonWriter w;
      w.begin_object().key("server_load").value(static_cast<std::uint64_t>(counters_->active_requests.load()));
      w.end_object();
      response = json_response(w.take(), {});
      break;
    }
    case Endpoint::kMetrics: response = metrics(); break;
    case Endpoint::kVersion: {
      JsonWriter w;
      w.begin_object().key("version").value(options_.version).end_object();
      response = json_response(w.take(), {});
      break;
    }
    case Endpoint::kModels: response = models(); break;
    case Endpoint::kTokenize: response = tokenize(request); break;
    case Endpoint::kDetokenize: response = detokenize(request); break;
    case Endpoint::kRefused: break;  // answered above
  }
  response.headers.insert(response.headers.begin(), headers.begin(), headers.end());
  exchange->respond(std::move(response));
}

void OpenAiService::check_auth(const http::Request& request) const {
  if (options_.api_keys.empty()) return;
  const auto given = request.header("authorization");
  bool match = false;
  // Every key is compared, so the time taken does not tell which one came close.
  for (const auto& key : options_.api_keys) match = (given && constant_time_equal(*given, "Bearer " + key)) || match;
  if (match) return;
  throw ApiException(ApiError{401, "Unauthorized", std::nullopt, std::nullopt});
}

void OpenAiService::seed_unseeded(std::vector<SequenceSpec>& sequences) {
  if (!options_.seed) return;
  std::lock_guard lock(mutex_);
  for (auto& spec : sequences) {
    if (!spec.request.sampling.seed) spec.request.sampling.seed = seeds_.next();
  }
}

void OpenAiService::log_request(const std::string& id, const std::vector<std::size_t>& prompt_tokens,
                                std::size_t max_tokens, std::size_t n) const {
  if (!options_.request_log) return;
  std::string counts;
  for (const std::size_t count : prompt_tokens) counts += (counts.empty() ? "" : ", ") + std::to_string(count);
  options_.request_log("request " + id + ": prompt tokens " + counts + ", max_tokens " + std::to_string(max_tokens) +
                       ", n " + std::to_string(n));
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
  ConstraintFactory constraint;                // structured outputs: each sequence's own constraint; empty: none
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
    r.make_constraint = p.constraint;
    out.push_back(std::move(spec));
  }
}

ChatPromptInputs chat_prompt_inputs(const ChatRequest& request, const ChatParserOptions& parsers) {
  ChatPromptInputs inputs;
  inputs.messages = &request.messages;
  inputs.tools_json = template_tools(request, parsers);
  inputs.template_kwargs_json = request.template_kwargs_json;
  inputs.request_template = &request.chat_template;
  inputs.add_generation_prompt = request.add_generation_prompt;
  inputs.continue_final_message = request.continue_final_message;
  inputs.add_special_tokens = request.common.add_special_tokens;
  inputs.truncate_prompt_tokens = request.common.truncate_prompt_tokens;
  return inputs;
}

SessionSettings settings_for(ApiKind kind, std::string id, const CommonFields& fields, const ModelInfo& model,
                             const LogprobPlan& logprobs, const std::vector<http::Header>& headers,
                             const ApiOptions& options) {
  SessionSettings s;
  s.kind = kind;
  s.id = std::move(id);
  s.created = now_seconds();
  s.model_name = model.served_name;
  s.stream = fields.stream;
  s.include_usage = fields.include_usage || (fields.stream && options.force_include_usage);
  s.continuous_usage = s.include_usage && fields.continuous_usage;
  s.prompt_tokens_details = options.prompt_tokens_details;
  s.logprobs = logprobs.sampled;
  s.headers = headers;
  s.tokens_as_ids = logprobs.tokens_as_ids;
  s.prompt_logprobs_field = logprobs.prompt && logprobs.prompt_field;
  s.echo_prompt_logprobs = logprobs.prompt && logprobs.echo_prompt;
  return s;
}

}  // namespace

void OpenAiService::embeddings(const std::shared_ptr<http::Exchange>& exchange,
                               const std::vector<http::Header>& headers, const std::string& request_id,
                               const rapidjson::Document& body) {
  const auto served = require_served();
  const ModelInfo& model = served->model;
  if (!model.pooling) throw_bad_request("The model does not support Embeddings API");
  const EmbeddingRequest request = parse_embedding_request(body, options_.limits);
  check_model(request.model, model);
  const PoolingRequest pooling = plan_pooling(request, model);

  EmbeddingSettings settings{"embd-" + request_id, now_seconds(), model.served_name, request.base64, 0, headers};
  std::vector<GenerationRequest> sequences;
  for (std::size_t i = 0; i < request.inputs.size(); ++i) {
    GenerationRequest sequence;
    sequence.request_id = settings.id + "-" + std::to_string(i);
    sequence.prompt_tokens =
        prompt_tokens(request.inputs[i], request.add_special_tokens, request.truncate_prompt_tokens, model, "input");
    check_prompt_fits(sequence.prompt_tokens.size(), model);
    sequence.max_tokens = 0;
    sequence.pooling = pooling;
    settings.prompt_tokens += sequence.prompt_tokens.size();
    sequences.push_back(std::move(sequence));
  }
  check_capacity(sequences.size());
  std::vector<std::size_t> lengths;
  for (const auto& sequence : sequences) lengths.push_back(sequence.prompt_tokens.size());
  log_request(settings.id, lengths, 0, 1);
  auto session = std::make_shared<EmbeddingSession>(std::move(settings), counters_, exchange, *served->generator);
  session->start(std::move(sequences));
}

void OpenAiService::completions(const std::shared_ptr<http::Exchange>& exchange,
                                const std::vector<http::Header>& headers, const std::string& request_id,
                                const rapidjson::Document& body) {
  const auto served = require_served();
  const ModelInfo& model = served->model;
  refuse_if_pooling(model, "Completions API");
  const CompletionRequest request = parse_completion_request(body, options_.limits);
  check_model(request.common.model, model);
  const auto prompts = build_completion_prompts(request, model);
  const LogprobPlan logprobs = plan_completion_logprobs(request, options_.logprobs, model);
  SequencePlan p = plan(request.common, model, logprobs);
  p.constraint = compile_constraint(request.common.structured_output, model);

  const std::string id = "cmpl-" + request_id;
  SessionSettings settings = settings_for(ApiKind::kCompletion, id, request.common, model, logprobs, headers, options_);
  std::vector<SequenceSpec> sequences;
  std::size_t last_max_tokens = 0;
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
    last_max_tokens = max_tokens;
  }
  check_capacity(sequences.size());
  seed_unseeded(sequences);
  log_request(id, settings.prompt_tokens, last_max_tokens, request.common.n);
  auto session = std::make_shared<GenerationSession>(std::move(settings), counters_, served->metrics, exchange,
                                                     *model.tokenizer, *served->generator);
  session->start(std::move(sequences));
}

void OpenAiService::chat_completions(const std::shared_ptr<http::Exchange>& exchange,
                                     const std::vector<http::Header>& headers, const std::string& request_id,
                                     const rapidjson::Document& body) {
  const auto served = require_served();
  const ModelInfo& model = served->model;
  refuse_if_pooling(model, "Chat Completions API");
  ChatRequest request = parse_chat_request(body, options_.limits);
  check_model(request.common.model, model);
  check_tool_choice(request, options_.parsers);
  // vLLM keeps special tokens when the tool-call parser's markers are special tokens.
  if (parser_needs_special_tokens(request, options_.parsers)) request.common.skip_special_tokens = false;

  const PreparedPrompt prompt = build_chat_prompt(chat_prompt_inputs(request, options_.parsers), model, options_.chat);
  const std::size_t max_tokens =
      resolve_max_tokens(request.common.max_tokens, std::nullopt, prompt.tokens.size(), model);
  const LogprobPlan logprobs = plan_chat_logprobs(request, options_.logprobs, model);
  SequencePlan p = plan(request.common, model, logprobs);

  const std::string id = "chatcmpl-" + request_id;
  SessionSettings settings = settings_for(ApiKind::kChat, id, request.common, model, logprobs, headers, options_);
  settings.role = response_role(options_.chat, request.add_generation_prompt, request.messages);
  settings.prompt_tokens.push_back(prompt.tokens.size());
  settings.first_prompt_tokens.push_back(prompt.tokens.front());
  settings.parsing = chat_parsing(request, options_.parsers, prompt.text);
  p.constraint = compile_constraint(chat_constraint(request), model);
  // vLLM constrains only what follows the reasoning; a prompt that closed the think block starts after it.
  if (settings.parsing.starts_in_reasoning) {
    p.constraint =
        after_reasoning(std::move(p.constraint), model.tokenizer->encode(settings.parsing.reasoning_end, false));
  }
  // vLLM's echo for chat: the reply starts with the last message when that is the assistant's.
  if (request.common.echo && request.messages.last_role == "assistant" && request.messages.last_content) {
    settings.echo.push_back(*request.messages.last_content);
  }
  std::vector<SequenceSpec> sequences;
  add_sequences(p, id, 0, prompt.tokens, max_tokens, sequences);
  check_capacity(sequences.size());
  seed_unseeded(sequences);
  log_request(id, settings.prompt_tokens, max_tokens, request.common.n);
  auto session = std::make_shared<GenerationSession>(std::move(settings), counters_, served->metrics, exchange,
                                                     *model.tokenizer, *served->generator);
  session->start(std::move(sequences));
}

void OpenAiService::responses(const std::shared_ptr<http::Exchange>& exchange, const std::vector<http::Header>& headers,
                              const std::string& request_id, const rapidjson::Document& body) {
  const auto served = require_served();
  const ModelInfo& model = served->model;
  refuse_if_pooling(model, "Responses API");
  ResponsesRequest request = parse_responses_request(body, options_.limits, options_.parsers);
  ChatRequest& chat = request.chat;
  check_model(chat.common.model, model);
  if (parser_needs_special_tokens(chat, options_.parsers)) chat.common.skip_special_tokens = false;
  const PreparedPrompt prompt = build_chat_prompt(chat_prompt_inputs(chat, options_.parsers), model, options_.chat);
  check_prompt_fits(prompt.tokens.size(), model);
  // vLLM caps max_output_tokens at what the context leaves rather than refusing it.
  if (chat.common.max_tokens) {
    chat.common.max_tokens = std::min(*chat.common.max_tokens, model.max_model_len - prompt.tokens.size());
  }
  const std::size_t max_tokens = resolve_max_tokens(chat.common.max_tokens, std::nullopt, prompt.tokens.size(), model);
  // The same parsers as chat completions: one choice, so one parser (content as it is without any).
  const ChatParsing parsing = chat_parsing(chat, options_.parsers, prompt.text);
  auto parser = parsing.make_parser ? parsing.make_parser() : std::make_unique<parsers::ChoiceParser>(nullptr, nullptr);
  const LogprobPlan no_logprobs;  // the Responses API asks for none (top_logprobs > 0 is refused)
  SequencePlan p = plan(chat.common, model, no_logprobs);
  // text.format and a forced tool_choice constrain the output as they do in chat completions.
  p.constraint = compile_constraint(chat_constraint(chat), model);
  if (parsing.starts_in_reasoning) {
    p.constraint = after_reasoning(std::move(p.constraint), model.tokenizer->encode(parsing.reasoning_end, false));
  }

  const std::string id = "resp_" + request_id;
  SessionSettings settings = settings_for(ApiKind::kResponses, id, chat.common, model, no_logprobs, headers, options_);
  settings.prompt_tokens.push_back(prompt.tokens.size());
  ResponseEcho echo;
  echo.id = id;
  echo.created_at = settings.created;
  echo.model = model.served_name;
  echo.temperature = p.sampling.temperature;
  echo.top_p = p.sampling.top_p;
  echo.max_output_tokens = max_tokens;
  std::vector<SequenceSpec> sequences;
  add_sequences(p, id, 0, prompt.tokens, max_tokens, sequences);
  settings.formatter = std::make_shared<ResponsesFormatter>(std::move(request), std::move(echo), std::move(parser));
  check_capacity(sequences.size());
  auto session = std::make_shared<GenerationSession>(std::move(settings), counters_, served->metrics, exchange,
                                                     *model.tokenizer, *served->generator);
  session->start(std::move(sequences));
}

void OpenAiService::invocations(const std::shared_ptr<http::Exchange>& exchange,
                                const std::vector<http::Header>& headers, const std::string& request_id) {
  // vLLM tries the request types its model serves, chat first: a body with "messages" is a chat completion,
  // one with "prompt" a completion; for a pooling model, one with "input" is an embeddings request.
  rapidjson::Document body;
  parse_request_body(exchange->request().body, body);
  if (require_served()->model.pooling) {
    if (!body.HasMember("input")) {
      throw_bad_request("Cannot find suitable handler for request. Expected one of: ['EmbeddingRequest']");
    }
    embeddings(exchange, headers, request_id, body);
  } else if (body.HasMember("messages")) {
    chat_completions(exchange, headers, request_id, body);
  } else if (body.HasMember("prompt")) {
    completions(exchange, headers, request_id, body);
  } else {
    throw_bad_request(
        "Cannot find suitable handler for request. Expected one of: ['ChatCompletionRequest', 'CompletionRequest']");
  }
}

http::Response OpenAiService::models() const {
  const auto served = require_served();
  const ModelInfo& model = served->model;
  const std::int64_t created = now_seconds();
  std::vector<std::string> names{model.served_name};
  names.insert(names.end(), model.aliases.begin(), model.aliases.end());
  JsonWriter w;
  w.begin_object();
  w.key("object").value("list");
  w.key("data").begin_array();
  for (const auto& name : names) {
    w.begin_object();
    w.key("id").value(name);
    w.key("object").value("model");
    w.key("created").value(created);
    w.key("owned_by").value("vllm");
    w.key("root").value(model.root.empty() ? name : model.root);
    w.key("parent").null();
    w.key("max_model_len").value(static_cast<std::uint64_t>(model.max_model_len));
    w.key("permission").begin_array().begin_object();
    w.key("id").value("modelperm-" + name);
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
    w.end_object();
  }
  w.end_array();
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
  if (served) served->metrics->update(served->generator->stats());
  http::Response response;
  response.headers.push_back({"Content-Type", "text/plain; version=0.0.4; charset=utf-8"});
  response.body = render_exposition(*registry_);
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
    inputs.request_template = &request.chat_template;
    inputs.add_generation_prompt = request.add_generation_prompt;
    inputs.continue_final_message = request.continue_final_message;
    inputs.add_special_tokens = request.add_special_tokens;
    tokens = build_chat_prompt(inputs, model, options_.chat).tokens;
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
