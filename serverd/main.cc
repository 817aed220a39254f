// serverd: resolves --model (directly for local paths, through fetchd for hub names), loads it into the
// engine and serves the OpenAI API.
#include <cstdlib>
#include <iostream>
#include <span>

#include "fetchd/client/fetch_error.h"
#include "serverd/server_options.h"

int main(int argc, char** argv) {
  try {
    const char* key = std::getenv("VLLM_API_KEY");
    const auto options =
        serverd::parse_server_options(std::span<char* const>(argv + 1, static_cast<std::size_t>(argc - 1)),
                                      key != nullptr && *key != '\0' ? std::optional<std::string>(key) : std::nullopt);
    if (!options) return 0;
    std::cerr << "serverd: this build has no inference engine yet, so it cannot serve '" << options->model << "'\n";
    return 1;
  } catch (const fetchd::FetchError& e) {
    std::cerr << "serverd: " << e.what() << '\n';
    return fetchd::exit_code(e.kind());
  }
}
