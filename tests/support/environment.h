#pragma once

#include <functional>
#include <map>
#include <optional>
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

}  // namespace testing_support
