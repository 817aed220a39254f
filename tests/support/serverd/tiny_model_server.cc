#include "tests/support/serverd/tiny_model_server.h"

#include <chrono>
#include <stdexcept>

#include "engine/model_writer/model_writer.h"
#include "serverd/options/server_options.h"

namespace serverd_test {

TinyModelServer::TinyModelServer(const std::vector<std::string>& flags) {
  engine::tools::ModelWriterOptions writer;
  writer.arch = engine::model::Architecture::Qwen3;
  writer.out_dir = dir_ / "model";
  writer.seed = 11;
  engine::tools::write_model(writer);

  std::vector<std::string> args = {"--model", writer.out_dir.string(), "--device", "cpu", "--served-model-name",
                                   "tiny",    "--max-model-len",       "1024"};
  args.insert(args.end(), flags.begin(), flags.end());
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  const auto options = serverd::parse_server_options(argv, {});
  if (!options) throw std::logic_error("serverd flags asked for --help");

  serverd::api::ApiServerOptions server;
  server.http.io_threads = 2;
  server.api.version = "9.9.9";
  server.api.parsers.reasoning_parser = options->reasoning_parser;
  server.api.parsers.tool_call_parser = options->tool_call_parser;
  server.api.parsers.enable_auto_tool_choice = options->enable_auto_tool_choice;
  server_ = std::make_unique<serverd::api::ApiServer>(std::move(server));
  server_->start();
  model_ = serverd::load_model(*options, [](const std::string&) {});
  if (!model_) throw std::runtime_error("this build has no inference engine");
  server_->serve(model_->info(), model_->generator());
}

TinyModelServer::~TinyModelServer() {
  server_->shutdown(std::chrono::milliseconds(0));
}

}  // namespace serverd_test
