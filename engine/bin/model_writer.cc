// model-writer: random models for tests and benchmarks (see model_writer.h).
#include "engine/model_writer/model_writer.h"

#include <chrono>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    const auto options = engine::tools::parse_model_writer_command_line(args);
    if (!options) {
      std::fputs(engine::tools::model_writer_usage().c_str(), stdout);
      return 0;
    }
    const auto start = std::chrono::steady_clock::now();
    const auto written = engine::tools::write_model(*options);
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    for (const auto& file : written.files) std::printf("wrote %s\n", file.string().c_str());
    std::printf("%llu parameters in %.2f s\n", static_cast<unsigned long long>(written.parameters), took.count());
    return 0;
  } catch (const engine::tools::UsageError& e) {
    std::fprintf(stderr, "model-writer: %s\n%s", e.what(), engine::tools::model_writer_usage().c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "model-writer: %s\n", e.what());
    return 1;
  }
}
