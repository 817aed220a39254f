#include "serverd/options/generation_override.h"

#include <rapidjson/document.h>

#include <string>

#include "base/flags.h"

namespace serverd {
namespace {

constexpr std::string_view kFlag = "--override-generation-config";

[[noreturn]] void refuse(const std::string& why) {
  throw base::UsageError(std::string(kFlag) + ": " + why);
}

double number(const rapidjson::Value& v, std::string_view key) {
  if (!v.IsNumber()) refuse("'" + std::string(key) + "' must be a number");
  return v.GetDouble();
}

std::int64_t whole(const rapidjson::Value& v, std::string_view key) {
  if (!v.IsInt64()) refuse("'" + std::string(key) + "' must be a whole number");
  return v.GetInt64();
}

}  // namespace

engine::model::GenerationDefaults apply_generation_override(engine::model::GenerationDefaults defaults,
                                                            std::string_view json) {
  rapidjson::Document doc;
  doc.Parse(json.data(), json.size());
  if (doc.HasParseError() || !doc.IsObject()) refuse("takes a JSON object, not '" + std::string(json) + "'");
  for (const auto& member : doc.GetObject()) {
    const std::string_view key(member.name.GetString(), member.name.GetStringLength());
    const auto& v = member.value;
    const bool clear = v.IsNull();
    if (key == "temperature") {
      defaults.temperature = clear ? std::nullopt : std::optional(number(v, key));
    } else if (key == "top_p") {
      defaults.top_p = clear ? std::nullopt : std::optional(number(v, key));
    } else if (key == "min_p") {
      defaults.min_p = clear ? std::nullopt : std::optional(number(v, key));
    } else if (key == "repetition_penalty") {
      defaults.repetition_penalty = clear ? std::nullopt : std::optional(number(v, key));
    } else if (key == "top_k") {
      defaults.top_k = clear ? std::nullopt : std::optional(whole(v, key));
    } else if (key == "max_new_tokens") {
      if (clear) {
        defaults.max_new_tokens.reset();
        continue;
      }
      const std::int64_t n = whole(v, key);
      if (n < 1) refuse("'max_new_tokens' must be at least 1, not " + std::to_string(n));
      defaults.max_new_tokens = static_cast<std::uint64_t>(n);
    } else {
      refuse("'" + std::string(key) +
             "' is not a sampling default serverd takes (temperature, top_p, top_k, min_p, repetition_penalty, "
             "max_new_tokens)");
    }
  }
  return defaults;
}

}  // namespace serverd
