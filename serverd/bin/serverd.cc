// serverd: resolves --model (directly for local paths, through fetchd for hub names), loads it into the
// engine and serves the OpenAI API until SIGTERM or SIGINT, then drains and exits 0.
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <future>
#include <iostream>
#include <span>
#include <stop_token>
#include <thread>

#include "base/flags.h"
#include "base/printable.h"
#include "engine/cpu/cpu_set.h"
#include "fetchd/request/fetch_error.h"
#include "serverd/api/api_server.h"
#include "serverd/loader/engine_loader.h"
#include "serverd/options/server_options.h"

namespace {

// How long requests in flight may take to finish after SIGTERM.
constexpr std::chrono::seconds kShutdownGrace{30};

serverd::api::ApiServerOptions api_server_options(const serverd::ServerOptions& options) {
  serverd::api::ApiServerOptions o;
  o.http.host = options.host;
  // A few I/O threads: they parse, tokenize and format; the engine has the cores. Counted from the CPUs this
  // process may run on (a container's cpuset), not every CPU of the machine.
  o.http.io_threads = std::clamp<std::size_t>(engine::cpu::allowed_cpus().size() / 4, 2, 8);
  o.http.port = static_cast<std::uint16_t>(options.port);
  o.http.uds = options.uds;
  o.http.ssl_certfile = options.ssl_certfile;
  o.http.ssl_keyfile = options.ssl_keyfile;
  o.http.ssl_ca_certs = options.ssl_ca_certs;
  o.http.ssl_cert_reqs = static_cast<int>(options.ssl_cert_reqs);
  o.http.allowed_origins = options.allowed_origins;
  o.http.allowed_methods = options.allowed_methods;
  o.http.allowed_headers = options.allowed_headers;
  o.http.allow_credentials = options.allow_credentials;
  o.http.root_path = options.root_path;
  o.http.verbose = options.verbose;
  o.api.api_keys = options.api_key;
  o.api.version = MODELSERVE_VERSION;
  o.api.chat.content_format = serverd::api::parse_content_format(options.chat_template_content_format)
                                  .value_or(serverd::api::ContentFormat::kAuto);
  o.api.chat.default_kwargs_json = options.default_chat_template_kwargs;
  o.api.chat.trust_request_chat_template = options.trust_request_chat_template;
  o.api.chat.response_role = options.response_role;
  o.api.seed = options.seed;
  o.api.force_include_usage = options.enable_force_include_usage;
  o.api.prompt_tokens_details = options.enable_prompt_tokens_details;
  if (options.enable_log_requests) {
    o.api.request_log = [](const std::string& line) { std::cerr << "serverd: " << base::printable(line) << '\n'; };
  }
  o.api.logprobs = {options.max_logprobs ? static_cast<int>(*options.max_logprobs) : -1,
                    options.return_tokens_as_token_ids};
  o.api.parsers.enable_auto_tool_choice = options.enable_auto_tool_choice;
  o.api.parsers.tool_call_parser = options.tool_call_parser;
  o.api.parsers.reasoning_parser = options.reasoning_parser;
  o.api.parsers.exclude_tools_when_tool_choice_none = options.exclude_tools_when_tool_choice_none;
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const auto options =
        serverd::parse_server_options(std::span<char* const>(argv + 1, static_cast<std::size_t>(argc - 1)),
                                      serverd::ServerEnvironment::from_process());
    if (!options) return 0;
    for (const auto& note : options->notes) std::cerr << "serverd: " << base::printable(note) << '\n';

    // SIGTERM and SIGINT are taken by one thread (every thread started later inherits the mask).
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    // The signal also stops a download still loading the model (serverd::load_model), so that a pod
    // deleted while it pulls stops within its grace period.
    std::promise<int> stop;
    auto stopped = stop.get_future();
    std::stop_source stop_loading;
    std::thread([&signals, stop = std::move(stop), stop_loading]() mutable {
      int signal = 0;
      sigwait(&signals, &signal);
      stop.set_value(signal);
      stop_loading.request_stop();
    }).detach();

    serverd::api::ApiServer server(api_server_options(*options));
    server.start();
    server.set_phase("loading");
    std::unique_ptr<serverd::LoadedModel> model;
    try {
      model = serverd::load_model(
          *options, [&server](std::string phase) { server.set_phase(std::move(phase)); }, stop_loading.get_token());
    } catch (const std::exception&) {
      if (!stop_loading.stop_requested()) throw;
      std::cerr << "serverd: " << (stopped.get() == SIGINT ? "SIGINT" : "SIGTERM")
                << " while loading the model; stopped\n";
      server.shutdown(std::chrono::seconds(0));
      return 0;
    }
    if (!model) {
      std::cerr << "serverd: this build has no inference engine yet, so it cannot serve '"
                << base::printable(options->model) << "'\n";
      return 1;
    }
    server.serve(model->info(), model->generator());
    const std::string where =
        !options->uds.empty() ? "unix:" + options->uds : options->host + ':' + std::to_string(server.port());
    std::cerr << "serverd: serving '" << base::printable(options->served_model_name.front()) << "' on "
              << base::printable(where) << (options->ssl_certfile.empty() ? "" : " (TLS)") << '\n';
    stopped.wait();
    std::cerr << "serverd: shutting down\n";
    server.shutdown(kShutdownGrace);
    return 0;
  } catch (const base::UsageError& e) {
    std::cerr << "serverd: " << base::printable(e.what()) << '\n';
    return fetchd::exit_code(fetchd::ErrorKind::Usage);
  } catch (const fetchd::FetchError& e) {
    std::cerr << "serverd: " << base::printable(e.what()) << '\n';
    return fetchd::exit_code(e.kind());
  } catch (const std::exception& e) {
    std::cerr << "serverd: " << base::printable(e.what()) << '\n';
    return 1;
  }
}
