#include "engine/model/pooling.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>
#include <utility>

#include "engine/format/json.h"
#include "engine/model/model_config.h"

namespace engine::model {

namespace {

constexpr std::array<std::pair<std::string_view, PoolingType>, 3> kPoolingModes = {{
    {"pooling_mode_lasttoken", PoolingType::Last},
    {"pooling_mode_mean_tokens", PoolingType::Mean},
    {"pooling_mode_cls_token", PoolingType::Cls},
}};

rapidjson::Document parse(std::string_view json, std::string_view name) {
  std::size_t consumed = 0;
  std::string error;
  auto doc = format::parse_json_prefix(json, consumed, error);
  if (!error.empty()) throw ConfigError(std::string(name) + ": not valid JSON: " + error);
  return doc;
}

std::string_view string_member(const rapidjson::Value& object, const char* key) {
  const auto it = object.FindMember(key);
  if (it == object.MemberEnd() || !it->value.IsString()) return {};
  return {it->value.GetString(), it->value.GetStringLength()};
}

// The Pooling module's config.json: the one pooling_mode_* key set to true.
PoolingType pooling_mode(std::string_view json, std::string_view name) {
  const auto doc = parse(json, name);
  if (!doc.IsObject()) throw ConfigError(std::string(name) + ": not a JSON object");
  std::optional<PoolingType> found;
  std::string modes;
  for (const auto& m : doc.GetObject()) {
    const std::string_view key(m.name.GetString(), m.name.GetStringLength());
    if (key == "include_prompt" && m.value.IsBool() && !m.value.GetBool()) {
      throw ConfigError(std::string(name) +
                        ": include_prompt false (pooling without the instruction's tokens) is not supported; "
                        "the engine pools over every prompt token");
    }
    if (!key.starts_with("pooling_mode_") || !m.value.IsBool() || !m.value.GetBool()) continue;
    modes += (modes.empty() ? "" : ", ") + std::string(key);
    const auto* known =
        std::find_if(kPoolingModes.begin(), kPoolingModes.end(), [&](const auto& k) { return k.first == key; });
    if (known == kPoolingModes.end()) {
      throw ConfigError(std::string(name) + ": " + std::string(key) +
                        " is not supported; the engine pools by pooling_mode_lasttoken, pooling_mode_mean_tokens "
                        "or pooling_mode_cls_token");
    }
    found = known->second;
  }
  if (modes.find(',') != std::string::npos) {
    throw ConfigError(std::string(name) + ": several pooling modes are set (" + modes +
                      "), which concatenates their vectors; the engine pools by one");
  }
  if (!found)
    throw ConfigError(std::string(name) + ": no pooling_mode_* is true; set the one the model was trained with");
  return *found;
}

}  // namespace

std::string_view pooling_type_name(PoolingType type) {
  switch (type) {
    case PoolingType::Last: return "LAST";
    case PoolingType::Mean: return "MEAN";
    case PoolingType::Cls: return "CLS";
  }
  return "?";
}

PoolingConfig parse_sentence_transformers(std::string_view modules_json, std::string_view name,
                                          const std::function<std::string(const std::string&)>& read_module_file) {
  const auto doc = parse(modules_json, name);
  if (!doc.IsArray()) throw ConfigError(std::string(name) + ": not a JSON array of modules");
  PoolingConfig config{kDefaultPooling.type, false};
  bool pooled = false;
  for (const auto& module : doc.GetArray()) {
    if (!module.IsObject()) throw ConfigError(std::string(name) + ": a module that is not a JSON object");
    const std::string_view type = string_member(module, "type");
    if (type == "sentence_transformers.models.Transformer") continue;
    if (type == "sentence_transformers.models.Normalize") {
      config.normalize = true;
      continue;
    }
    if (type == "sentence_transformers.models.Pooling" && !pooled) {
      const std::string path = std::string(string_member(module, "path"));
      const std::string file = (path.empty() ? "" : path + "/") + "config.json";
      config.type = pooling_mode(read_module_file(file), file);
      pooled = true;
      continue;
    }
    throw ConfigError(std::string(name) + ": the module " + (type.empty() ? "without a type" : std::string(type)) +
                      " is not supported (the engine applies a Transformer, one Pooling and a Normalize module); "
                      "serve a model without it");
  }
  return config;
}

std::optional<PoolingConfig> read_sentence_transformers(const std::filesystem::path& dir) {
  const auto modules = dir / "modules.json";
  std::error_code ec;
  if (!std::filesystem::exists(modules, ec)) return std::nullopt;
  return parse_sentence_transformers(read_small_json(modules), modules.string(),
                                     [&](const std::string& file) { return read_small_json(dir / file); });
}

std::optional<PoolingConfig> gguf_pooling(const format::GgufLayout& gguf, std::string_view name) {
  const auto* arch = gguf.find("general.architecture");
  if (arch == nullptr || arch->as_string() == nullptr) return std::nullopt;
  const std::string key = *arch->as_string() + ".pooling_type";
  const auto* value = gguf.find(key);
  if (value == nullptr) return std::nullopt;
  const auto type = value->as_uint();
  switch (type.value_or(99)) {
    case 0: return std::nullopt;
    case 1: return PoolingConfig{PoolingType::Mean, true};
    case 2: return PoolingConfig{PoolingType::Cls, true};
    case 3: return PoolingConfig{PoolingType::Last, true};
    default:
      throw ConfigError(std::string(name) + ": " + key + " " +
                        (type ? std::to_string(*type) : std::string("(not an integer)")) +
                        " is not supported; the engine pools by 1 (mean), 2 (cls) or 3 (last)");
  }
}

Matryoshka parse_matryoshka(std::string_view config_json, std::string_view name) {
  const auto doc = parse(config_json, name);
  Matryoshka m;
  if (!doc.IsObject()) return m;
  if (const auto it = doc.FindMember("matryoshka_dimensions"); it != doc.MemberEnd() && !it->value.IsNull()) {
    if (!it->value.IsArray())
      throw ConfigError(std::string(name) + ": matryoshka_dimensions must be a list of lengths");
    for (const auto& d : it->value.GetArray()) {
      if (!d.IsUint64() || d.GetUint64() == 0) {
        throw ConfigError(std::string(name) + ": matryoshka_dimensions holds something that is not a positive length");
      }
      m.dimensions.push_back(static_cast<std::size_t>(d.GetUint64()));
    }
  }
  const auto flag = doc.FindMember("is_matryoshka");
  m.enabled = !m.dimensions.empty() || (flag != doc.MemberEnd() && flag->value.IsBool() && flag->value.GetBool());
  return m;
}

PooledState::PooledState(PoolingType type, std::size_t hidden_size)
    : type_(type), hidden_size_(hidden_size), pooled_(hidden_size, 0.0) {}

void PooledState::add(std::size_t first, std::span<const float> rows) {
  if (hidden_size_ == 0 || rows.size() % hidden_size_ != 0) {
    throw std::invalid_argument("PooledState::add: " + std::to_string(rows.size()) + " floats are not rows of " +
                                std::to_string(hidden_size_));
  }
  if (first == 0) {
    positions_ = 0;
    std::fill(pooled_.begin(), pooled_.end(), 0.0);
  }
  // Last-token pooling reads only the last row: the positions before a chunk may come from the prefix cache.
  if (type_ == PoolingType::Last) positions_ = first;
  if (first != positions_) {
    throw std::invalid_argument("PooledState::add: a chunk at position " + std::to_string(first) + " after " +
                                std::to_string(positions_) + " positions");
  }
  const std::size_t count = rows.size() / hidden_size_;
  if (count == 0) return;
  const auto row = [&](std::size_t r) { return rows.subspan(r * hidden_size_, hidden_size_); };
  switch (type_) {
    case PoolingType::Mean:
      for (std::size_t r = 0; r < count; ++r) {
        const auto values = row(r);
        for (std::size_t i = 0; i < hidden_size_; ++i) pooled_[i] += values[i];
      }
      break;
    case PoolingType::Last: std::copy(row(count - 1).begin(), row(count - 1).end(), pooled_.begin()); break;
    case PoolingType::Cls:
      if (first == 0) std::copy(row(0).begin(), row(0).end(), pooled_.begin());
      break;
  }
  positions_ += count;
}

std::vector<float> PooledState::finish(std::size_t prompt_tokens, std::size_t dimensions, bool normalize) const {
  if (prompt_tokens == 0 || positions_ != prompt_tokens) {
    throw std::invalid_argument("PooledState::finish: " + std::to_string(positions_) + " of " +
                                std::to_string(prompt_tokens) + " positions were added");
  }
  const std::size_t size = dimensions == 0 ? hidden_size_ : std::min(dimensions, hidden_size_);
  std::vector<double> v(pooled_.begin(), pooled_.begin() + static_cast<std::ptrdiff_t>(size));
  if (type_ == PoolingType::Mean) {
    for (auto& x : v) x /= static_cast<double>(prompt_tokens);
  }
  if (normalize) {
    double norm = 0;
    for (const double x : v) norm += x * x;
    // As torch's F.normalize: a zero vector stays zero.
    norm = std::max(std::sqrt(norm), 1e-12);
    for (auto& x : v) x /= norm;
  }
  return {v.begin(), v.end()};
}

}  // namespace engine::model
