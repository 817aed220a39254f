#include "serverd/api/embeddings.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <iostream>

#include "serverd/api/api_error.h"
#include "serverd/api/json_io.h"

namespace serverd::api {
namespace {

static_assert(std::endian::native == std::endian::little, "base64 embeddings are little-endian float32 bytes");

// RFC 4648 base64, padded, of the floats' bytes.
std::string base64_floats(const std::vector<float>& values) {
  constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::vector<unsigned char> bytes(values.size() * sizeof(float));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  std::string out;
  out.reserve(4 * ((bytes.size() + 2) / 3));
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    const std::size_t n = std::min<std::size_t>(3, bytes.size() - i);
    std::uint32_t group = std::uint32_t{bytes[i]} << 16;
    if (n > 1) group |= std::uint32_t{bytes[i + 1]} << 8;
    if (n > 2) group |= bytes[i + 2];
    for (std::size_t k = 0; k < 4; ++k) out += k <= n ? kAlphabet[(group >> (18 - 6 * k)) & 63] : '=';
  }
  return out;
}

class EmbeddingSink final : public GenerationSink {
 public:
  EmbeddingSink(std::shared_ptr<EmbeddingSession> session, std::size_t index)
      : session_(std::move(session)), index_(index) {}

  void on_prompt_logprobs(std::span<const PromptLogprob> /*entries*/) override {}
  void on_tokens(std::span<const GeneratedToken> /*tokens*/) override {}
  void on_pooled(std::vector<float> embedding) override { session_->pooled(index_, std::move(embedding)); }
  void on_finish(FinishReason reason, std::optional<std::int32_t> /*stop_token*/,
                 const SequenceTimings& /*timings*/) override {
    session_->finished(index_, reason);
  }

 private:
  std::shared_ptr<EmbeddingSession> session_;
  std::size_t index_;
};

}  // namespace

PoolingRequest plan_pooling(const EmbeddingRequest& request, const ModelInfo& model) {
  PoolingRequest pooling{*model.pooling, 0};
  if (request.normalize) pooling.config.normalize = *request.normalize;
  if (!request.dimensions) return pooling;
  const std::int64_t dimensions = *request.dimensions;
  const std::string name = "Model \"" + model.served_name + "\"";
  if (!model.matryoshka.enabled) {
    throw_bad_request(name +
                          " does not support matryoshka representation, changing output dimensions will lead to "
                          "poor results.",
                      "dimensions");
  }
  const auto& allowed = model.matryoshka.dimensions;
  if (!allowed.empty()) {
    if (dimensions < 1 ||
        std::find(allowed.begin(), allowed.end(), static_cast<std::size_t>(dimensions)) == allowed.end()) {
      std::string list;
      for (const auto d : allowed) list += (list.empty() ? "" : ", ") + std::to_string(d);
      throw_bad_request(name + " only supports [" + list +
                            "] matryoshka dimensions, use other output dimensions will lead to poor results.",
                        "dimensions");
    }
  } else if (dimensions < 1) {
    throw_bad_request("Dimensions must be greater than 0", "dimensions");
  }
  pooling.dimensions = static_cast<std::size_t>(dimensions);
  return pooling;
}

std::string embedding_response_json(const std::string& id, std::int64_t created, const std::string& model,
                                    const std::vector<std::vector<float>>& embeddings, bool base64,
                                    std::size_t prompt_tokens) {
  JsonWriter w;
  w.begin_object().key("id").value(id).key("object").value("list").key("created").value(created);
  w.key("model").value(model).key("data").begin_array();
  for (std::size_t i = 0; i < embeddings.size(); ++i) {
    w.begin_object().key("index").value(static_cast<std::uint64_t>(i)).key("object").value("embedding");
    w.key("embedding");
    if (base64) {
      w.value(base64_floats(embeddings[i]));
    } else {
      w.begin_array();
      for (const float x : embeddings[i]) w.value(static_cast<double>(x));
      w.end_array();
    }
    w.end_object();
  }
  w.end_array();
  const auto tokens = static_cast<std::uint64_t>(prompt_tokens);
  w.key("usage").begin_object().key("prompt_tokens").value(tokens).key("total_tokens").value(tokens);
  w.key("completion_tokens").value(std::uint64_t{0}).key("prompt_tokens_details").null().end_object();
  w.end_object();
  return w.take();
}

EmbeddingSession::EmbeddingSession(EmbeddingSettings settings, std::shared_ptr<ServiceCounters> counters,
                                   std::shared_ptr<http::Exchange> exchange, Generator& generator)
    : settings_(std::move(settings)),
      counters_(std::move(counters)),
      exchange_(std::move(exchange)),
      generator_(generator) {
  ++counters_->active_requests;
}

EmbeddingSession::~EmbeddingSession() {
  if (!responded_) --counters_->active_requests;
}

void EmbeddingSession::start(std::vector<GenerationRequest> requests) {
  {
    const std::lock_guard lock(mutex_);
    handles_.resize(requests.size());
    embeddings_.resize(requests.size());
    done_.assign(requests.size(), false);
  }
  exchange_->on_abort([weak = weak_from_this()] {
    if (const auto self = weak.lock()) {
      const std::lock_guard lock(self->mutex_);
      self->cancel_locked();
    }
  });
  // The lock is not held while submitting: a sink may be called inside submit().
  for (std::size_t i = 0; i < requests.size(); ++i) {
    ++counters_->active_sequences;
    std::uint64_t handle = 0;
    try {
      handle = generator_.submit(std::move(requests[i]), std::make_shared<EmbeddingSink>(shared_from_this(), i));
    } catch (const GeneratorOverloaded& e) {
      --counters_->active_sequences;
      const std::lock_guard lock(mutex_);
      cancel_locked();
      throw ApiException(
          ApiError{503, "The server is overloaded; retry later. (" + std::string(e.what()) + ")", std::nullopt, 1});
    } catch (...) {
      --counters_->active_sequences;
      const std::lock_guard lock(mutex_);
      cancel_locked();
      throw;
    }
    const std::lock_guard lock(mutex_);
    handles_[i] = handle;
    if (cancelled_ && !done_[i]) generator_.cancel(handle);
  }
}

void EmbeddingSession::pooled(std::size_t index, std::vector<float> embedding) {
  const std::lock_guard lock(mutex_);
  embeddings_.at(index) = std::move(embedding);
}

void EmbeddingSession::finished(std::size_t index, FinishReason reason) {
  --counters_->active_sequences;
  const std::lock_guard lock(mutex_);
  if (done_.at(index)) return;
  done_[index] = true;
  ++finished_;
  if (reason != FinishReason::Length || embeddings_[index].empty()) failed_ = true;
  if (finished_ < done_.size() || cancelled_) return;
  // The response is built and sent on an I/O thread, not on the engine's.
  exchange_->post([self = shared_from_this()] {
    const std::lock_guard held(self->mutex_);
    self->respond_locked();
  });
}

void EmbeddingSession::cancel_locked() {
  cancelled_ = true;
  for (std::size_t i = 0; i < handles_.size(); ++i) {
    if (handles_[i] && !done_[i]) generator_.cancel(*handles_[i]);
  }
}

void EmbeddingSession::respond_locked() {
  if (responded_) return;
  responded_ = true;
  --counters_->active_requests;
  if (failed_) {
    std::cerr << "serverd: request " << settings_.id << " failed: an embedding's sequence was aborted\n";
    http::Response response = error_response(ApiError{500, "Internal server error", std::nullopt, std::nullopt});
    response.headers.insert(response.headers.begin(), settings_.headers.begin(), settings_.headers.end());
    exchange_->respond(std::move(response));
    return;
  }
  http::Response response =
      json_response(embedding_response_json(settings_.id, settings_.created, settings_.model_name, embeddings_,
                                            settings_.base64, settings_.prompt_tokens),
                    settings_.headers);
  exchange_->respond(std::move(response));
}

}  // namespace serverd::api
