#pragma once

#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace testing_support {

// An environment made of a map, for code that reads its settings through a lookup function (fetchd's
// hub::Environment): an absent or empty value is unset, as in the process environment.
inline std::function<std::optional<std::string>(std::string_view)> map_environment(
    std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](std::string_view name) -> std::optional<std::string> {
    const auto it = vars.find(std::string(name));
    if (it == vars.end() || it->second.empty()) return std::nullopt;
    return it->second;
  };
}

// The environment variable `name`, or `compiled` (a path fixed at configure time: a binary, a script, an
// interpreter) when it is unset or empty. Test binaries carried to another machine (scripts/gpu-proof.sh)
// find the source and build trees elsewhere through these.
inline std::string env_or(const char* name, const char* compiled) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : compiled;
}

// The device tests that run the engine use: ENGINE_TEST_DEVICE, "cpu" (the default) or "cuda".
inline std::string engine_test_device() {
  const std::string device = env_or("ENGINE_TEST_DEVICE", "cpu");
  if (device != "cpu" && device != "cuda") {
    throw std::invalid_argument("ENGINE_TEST_DEVICE=" + device + ": expected cpu or cuda");
  }
  return device;
}

}  // namespace testing_support
