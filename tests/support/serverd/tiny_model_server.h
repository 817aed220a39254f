#pragma once

// serverd's API over loopback in front of a real model: a tiny random-weight Qwen3 model written by
// model-writer (byte-level BPE tokenizer, ChatML template) and loaded as serverd loads any model
// (serverd::load_model: the CPU engine, the scheduler, the grammar engine over the model's vocabulary),
// served by an ApiServer on port 0. Random weights emit noise, so whatever a constrained request returns is
// the constraint's doing.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "serverd/api/api_server.h"
#include "serverd/loader/engine_loader.h"
#include "tests/support/temp_dir.h"

namespace serverd_test {

class TinyModelServer {
 public:
  // `flags`: serverd flags besides --model (e.g. "--reasoning-parser", "qwen3").
  explicit TinyModelServer(const std::vector<std::string>& flags = {});
  ~TinyModelServer();
  TinyModelServer(const TinyModelServer&) = delete;
  TinyModelServer& operator=(const TinyModelServer&) = delete;

  std::uint16_t port() const { return server_->port(); }
  const serverd::api::ModelInfo& model() const { return model_->info(); }

 private:
  testing_support::TempDir dir_;
  std::unique_ptr<serverd::LoadedModel> model_;
  std::unique_ptr<serverd::api::ApiServer> server_;  // last: stopped before the model goes
};

}  // namespace serverd_test
