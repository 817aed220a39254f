#include "engine/grammar/json_string_formats.h"

#include <map>
#include <string>

namespace engine::grammar {
namespace {

// Years divisible by 4 and not by 100, or by 400: the only ones with a 29 February.
constexpr std::string_view kLeapYear =
    "(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[048]|[2468][048]|[13579][26])00)";
constexpr std::string_view kMonthDay =
    "(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8])"
    ")";
constexpr std::string_view kTime =
    "(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]+)?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])";
constexpr std::string_view kOctet = "(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";

const std::map<std::string, std::string, std::less<>>& formats() {
  static const std::map<std::string, std::string, std::less<>> table = [] {
    const std::string date = "(?:[0-9]{4}-" + std::string(kMonthDay) + "|" + std::string(kLeapYear) + "-02-29)";
    const std::string octet(kOctet);
    return std::map<std::string, std::string, std::less<>>{
        {"date", date},
        {"time", std::string(kTime)},
        {"date-time", date + "T" + std::string(kTime)},
        {"uuid", "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"},
        {"email",
         "[a-zA-Z0-9_+-]+(?:\\.[a-zA-Z0-9_+-]+)*@(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?\\.)+"
         "[a-zA-Z](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?"},
        {"ipv4", "(?:" + octet + "\\.){3}" + octet},
    };
  }();
  return table;
}

}  // namespace

std::optional<std::string_view> string_format_regex(std::string_view format) {
  const auto found = formats().find(format);
  if (found == formats().end()) return std::nullopt;
  return found->second;
}

const std::vector<std::string_view>& supported_string_formats() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> out;
    for (const auto& [name, regex] : formats()) out.push_back(name);
    return out;
  }();
  return names;
}

}  // namespace engine::grammar
