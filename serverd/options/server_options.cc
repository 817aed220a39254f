#include "serverd/options/server_options.h"

#include <rapidjson/document.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>

#include "base/flags.h"
#include "engine/cpu/cpu_set.h"
#include "serverd/options/cpu_threads.h"
#include "serverd/options/flag_table.h"
#include "serverd/options/generation_override.h"
#include "serverd/parsers/reasoning_parser.h"
#include "serverd/parsers/tool_call_parser.h"

namespace serverd {
namespace {

// vLLM's start-up checks of the tool-call and reasoning flags.
void check_parser_flags(const ServerOptions& o) {
  if (o.enable_auto_tool_choice && o.tool_call_parser.empty()) {
    throw base::UsageError("--enable-auto-tool-choice requires --tool-call-parser");
  }
  try {
    if (!o.tool_call_parser.empty()) parsers::make_tool_call_parser(o.tool_call_parser);
    if (!o.reasoning_parser.empty()) parsers::make_reasoning_parser(o.reasoning_parser);
  } catch (const std::invalid_argument& e) {
    throw base::UsageError(e.what());
  }
}

using base::UsageError;

template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};

// A flag's value once read: what it holds, and how notes and refusals show it.
struct FlagValue {
  std::string shown;
  std::variant<std::string, std::uint64_t, double, bool, std::vector<std::string>> value;
};

std::vector<std::string_view> split_bars(std::string_view s) {
  std::vector<std::string_view> out;
  while (!s.empty()) {
    const auto bar = s.find('|');
    out.push_back(s.substr(0, bar));
    if (bar == std::string_view::npos) break;
    s.remove_prefix(bar + 1);
  }
  return out;
}

std::string flag_name(const FlagRow& row) {
  return "--" + std::string(row.name);
}

std::uint64_t whole_number(const FlagRow& row, std::string_view text) {
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    throw UsageError(flag_name(row) + " takes a whole number, not '" + std::string(text) + "'");
  }
  return value;
}

std::string shortest(double d) {
  char buffer[32];
  const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, d);
  return ec == std::errc() ? std::string(buffer, end) : std::to_string(d);
}

void check_bounds(const FlagRow& row, double value, std::string_view text) {
  if (value < row.min || (row.max != 0 && value > row.max)) {
    throw UsageError(flag_name(row) + " takes a value from " + shortest(row.min) + " to " +
                     (row.max != 0 ? shortest(row.max) : std::string("any")) + ", not '" + std::string(text) + "'");
  }
}

std::vector<std::string> json_strings(const FlagRow& row, std::string_view text) {
  rapidjson::Document doc;
  doc.Parse(text.data(), text.size());
  const std::string refusal =
      flag_name(row) + " takes a JSON list of strings, e.g. '[\"*\"]', not '" + std::string(text) + "'";
  if (doc.HasParseError() || !doc.IsArray()) throw UsageError(refusal);
  std::vector<std::string> out;
  for (const auto& item : doc.GetArray()) {
    if (!item.IsString()) throw UsageError(refusal);
    out.emplace_back(item.GetString(), item.GetStringLength());
  }
  return out;
}

// Reads one value of `row` by its kind (lists and booleans arrive already split).
FlagValue read_value(const FlagRow& row, std::string_view text) {
  FlagValue v{std::string(text), std::string(text)};
  switch (row.kind) {
    case FlagKind::kUint: {
      const std::uint64_t n = whole_number(row, text);
      check_bounds(row, static_cast<double>(n), text);
      v.value = n;
      return v;
    }
    case FlagKind::kLimit: {
      if (text == "-1") return v;  // no limit: stored as nullopt
      const std::string s(text);
      char* end = nullptr;
      errno = 0;
      const unsigned long long n = std::strtoull(s.c_str(), &end, 10);
      if (s.empty() || !std::isdigit(static_cast<unsigned char>(s[0])) || end != s.c_str() + s.size() ||
          errno == ERANGE || (row.max != 0 && static_cast<double>(n) > row.max)) {
        throw UsageError(flag_name(row) + " takes -1 (no limit) or a whole number from 0" +
                         (row.max != 0 ? " to " + shortest(row.max) : std::string()) + ", not '" + s + "'");
      }
      v.value = static_cast<std::uint64_t>(n);
      return v;
    }
    case FlagKind::kContextLength:
      if (text == "auto" || text == "-1") {
        v.value = std::uint64_t{0};
        return v;
      }
      [[fallthrough]];
    case FlagKind::kSize: {
      const std::uint64_t n = base::parse_human_uint(text, flag_name(row));
      check_bounds(row, static_cast<double>(n), text);
      v.value = n;
      return v;
    }
    case FlagKind::kDouble: {
      const std::string s(text);
      char* end = nullptr;
      const double d = std::strtod(s.c_str(), &end);
      if (s.empty() || end != s.c_str() + s.size() || !(d == d)) {
        throw UsageError(flag_name(row) + " takes a number, not '" + s + "'");
      }
      check_bounds(row, d, text);
      v.value = d;
      return v;
    }
    case FlagKind::kChoice: {
      const auto choices = split_bars(row.value_name);
      if (std::find(choices.begin(), choices.end(), text) == choices.end()) {
        std::string list;
        for (const auto c : choices) list += (list.empty() ? "" : ", ") + std::string(c);
        throw UsageError(flag_name(row) + " takes one of " + list + ", not '" + std::string(text) + "'");
      }
      return v;
    }
    case FlagKind::kJsonObject: {
      rapidjson::Document doc;
      doc.Parse(text.data(), text.size());
      if (doc.HasParseError() || !doc.IsObject()) {
        throw UsageError(flag_name(row) + " takes a JSON object, e.g. '{\"key\": 1}', not '" + std::string(text) + "'");
      }
      return v;
    }
    case FlagKind::kJsonList: v.value = json_strings(row, text); return v;
    case FlagKind::kString:
    case FlagKind::kSwitch:
    case FlagKind::kBool:
    case FlagKind::kList: return v;
  }
  return v;
}

// Whether `v` is one of `row.accepted`'s values (numbers compared as numbers).
bool accepted(const FlagRow& row, const FlagValue& v) {
  if (row.accepted.empty()) return true;
  for (const auto a : split_bars(row.accepted)) {
    if (const auto* d = std::get_if<double>(&v.value)) {
      if (std::strtod(std::string(a).c_str(), nullptr) == *d) return true;
    } else if (const auto* n = std::get_if<std::uint64_t>(&v.value)) {
      if (std::to_string(*n) == a) return true;
    } else if (a == v.shown) {
      return true;
    }
  }
  return false;
}

void store(ServerOptions& o, const FlagRow& row, const FlagValue& v) {
  const auto as_uint = [&]() -> std::uint64_t {
    if (const auto* n = std::get_if<std::uint64_t>(&v.value)) return *n;
    return whole_number(row, std::get<std::string>(v.value));  // a kChoice of numbers (--block-size)
  };
  std::visit(
      Overloaded{
          [](std::monostate) {},
          [&](std::string ServerOptions::*m) { o.*m = std::get<std::string>(v.value); },
          [&](std::uint64_t ServerOptions::*m) { o.*m = as_uint(); },
          [&](std::optional<std::uint64_t> ServerOptions::*m) {
            if (row.kind == FlagKind::kLimit && v.shown == "-1") {
              o.*m = std::nullopt;
            } else {
              o.*m = as_uint();
            }
          },
          [&](double ServerOptions::*m) { o.*m = std::get<double>(v.value); },
          [&](bool ServerOptions::*m) { o.*m = std::get<bool>(v.value); },
          [&](std::vector<std::string> ServerOptions::*m) { o.*m = std::get<std::vector<std::string>>(v.value); },
      },
      row.target);
}

std::string help_text(const FlagRow& row) {
  switch (row.status) {
    case FlagStatus::kAcceptedAsIs: return "Taken as is: " + std::string(row.text);
    case FlagStatus::kParsedOnly: return std::string(row.text) + " (parsed; not wired yet)";
    case FlagStatus::kRefused: return "Refused: " + std::string(row.text);
    case FlagStatus::kHonoured:
    case FlagStatus::kCheckedAtLoad: break;
  }
  return std::string(row.text);
}

// Reads flags into options row by row; one note per accepted-as-is flag, the last occurrence's.
class FlagReader {
 public:
  explicit FlagReader(ServerOptions& options) : options_(options) {}

  void handle(const FlagRow& row, const FlagValue& v) {
    // As typed: a boolean by its form (--name or --no-name), anything else with its value.
    const std::string spelled = row.kind == FlagKind::kBool
                                    ? (std::get<bool>(v.value) ? flag_name(row) : "--no-" + std::string(row.name))
                                    : flag_name(row) + (v.shown.empty() ? "" : " " + v.shown);
    if (row.status == FlagStatus::kRefused) throw UsageError(flag_name(row) + ": " + std::string(row.text));
    if (!accepted(row, v)) throw UsageError(spelled + ": " + std::string(row.refusal));
    if (row.status == FlagStatus::kAcceptedAsIs) {
      std::string note = spelled + ": " + std::string(row.text);
      const auto same = std::find_if(notes_.begin(), notes_.end(), [&](const auto& n) { return n.first == &row; });
      if (same != notes_.end()) {
        same->second = std::move(note);
      } else {
        notes_.emplace_back(&row, std::move(note));
      }
      return;
    }
    store(options_, row, v);
  }

  void add_to(base::FlagParser& flags, const FlagRow& row) {
    const std::string name(row.name);
    const std::string value_name(row.value_name);
    switch (row.kind) {
      case FlagKind::kSwitch:
        flags.add_switch(name, help_text(row), [this, &row] { handle(row, FlagValue{"", true}); });
        break;
      case FlagKind::kBool:
        flags.add_bool(name, help_text(row), [this, &row](bool b) { handle(row, FlagValue{b ? "true" : "false", b}); });
        break;
      case FlagKind::kList:
        flags.add_list(name, value_name, help_text(row), [this, &row](std::vector<std::string> values) {
          std::string shown;
          for (const auto& s : values) shown += (shown.empty() ? "" : " ") + s;
          handle(row, FlagValue{shown, std::move(values)});
        });
        break;
      default:
        flags.add_value(name, value_name, help_text(row), [this, &row](std::string_view text) {
          // A refused flag is refused whatever its value says.
          handle(row, row.status == FlagStatus::kRefused ? FlagValue{std::string(text), std::string(text)}
                                                         : read_value(row, text));
        });
        break;
    }
    if (!row.alias.empty()) flags.add_alias(std::string(row.alias), name);
  }

  std::vector<std::string> take_notes() {
    std::vector<std::string> out;
    for (auto& [row, note] : notes_) out.push_back(std::move(note));
    return out;
  }

 private:
  ServerOptions& options_;
  std::vector<std::pair<const FlagRow*, std::string>> notes_;  // in the order the flags came
};

std::uint64_t cpu_kv_cache_bytes(const std::optional<std::string>& gib) {
  if (!gib || gib->empty()) return 0;
  std::uint64_t n = 0;
  const auto [end, ec] = std::from_chars(gib->data(), gib->data() + gib->size(), n);
  if (ec != std::errc() || end != gib->data() + gib->size() || n > (std::uint64_t{1} << 20)) {
    throw UsageError(
        "VLLM_CPU_KVCACHE_SPACE takes a whole number of GiB for the CPU KV cache (0: the default 4), "
        "not '" +
        *gib + "'");
  }
  return n << 30;
}

bool allow_long(const std::optional<std::string>& value) {
  if (!value) return false;
  std::string v = *value;
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (v == "1" || v == "true") return true;
  if (v.empty() || v == "0" || v == "false") return false;
  throw UsageError("VLLM_ALLOW_LONG_MAX_MODEL_LEN takes 1 or true (0 or false: no), not '" + *value + "'");
}

// Flags parsed but not wired yet: a value other than the default would change behaviour, so it is refused.
void refuse_unwired(const ServerOptions& o) {
  static const ServerOptions defaults{};
  for (const FlagRow& row : server_flag_table()) {
    if (row.status != FlagStatus::kParsedOnly) continue;
    const bool changed = std::visit(Overloaded{
                                        [](std::monostate) { return false; },
                                        [&](auto ServerOptions::*m) { return !(o.*m == defaults.*m); },
                                    },
                                    row.target);
    if (changed) throw UsageError(flag_name(row) + " " + std::string(row.refusal));
  }
}

}  // namespace

ServerEnvironment ServerEnvironment::from_process() {
  const auto get = [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    return v != nullptr ? std::optional<std::string>(v) : std::nullopt;
  };
  ServerEnvironment env;
  env.api_key = get("VLLM_API_KEY");
  env.allow_long_max_model_len = get("VLLM_ALLOW_LONG_MAX_MODEL_LEN");
  env.cpu_kvcache_space = get("VLLM_CPU_KVCACHE_SPACE");
  env.cpu_omp_threads_bind = get("VLLM_CPU_OMP_THREADS_BIND");
  env.cpu_num_of_reserved_cpu = get("VLLM_CPU_NUM_OF_RESERVED_CPU");
  env.omp_num_threads = get("OMP_NUM_THREADS");
  return env;
}

std::optional<ServerOptions> read_server_flags(std::span<char* const> args) {
  // `serverd serve MODEL ...` is `vllm serve MODEL ...`; the subcommand is the only one serverd has.
  if (!args.empty() && std::string_view(args.front()) == "serve") args = args.subspan(1);
  ServerOptions o;
  base::FlagParser flags(
      "usage: serverd [serve] MODEL [options]   (or --model MODEL)\n\n"
      "Serves MODEL (a directory, a .gguf file, org/repo or org/repo:QUANT) over an OpenAI-compatible HTTP API,\n"
      "taking `vllm serve`'s flags (docs/serverd.md lists what each one does here).");
  FlagReader reader(o);
  for (const FlagRow& row : server_flag_table()) reader.add_to(flags, row);
  std::optional<std::string> positional;
  flags.set_positional("MODEL", "The model (as --model)", [&positional](std::string_view v) {
    if (positional) {
      throw UsageError("unexpected argument '" + std::string(v) + "': the model is '" + *positional + "' already");
    }
    positional = std::string(v);
  });
  if (!flags.parse(args)) {
    std::fputs(flags.help().c_str(), stdout);
    return std::nullopt;
  }
  if (positional) {
    if (!o.model.empty() && o.model != *positional) {
      throw UsageError("the model is given twice: '" + *positional + "' as the first argument and '" + o.model +
                       "' with --model; give one");
    }
    o.model = *positional;
  }
  if (o.model.empty()) throw UsageError("a model is required: serverd serve MODEL [options] (see --help)");
  if (!o.override_generation_config.empty()) apply_generation_override({}, o.override_generation_config);
  check_parser_flags(o);
  o.reference = fetchd::request::parse_model_reference(o.model);
  if (o.served_model_name.empty()) o.served_model_name = {o.model};
  o.notes = reader.take_notes();
  return o;
}

std::optional<ServerOptions> parse_server_options(std::span<char* const> args, const ServerEnvironment& env) {
  auto o = read_server_flags(args);
  if (!o) return o;
  if (o->api_key.empty() && env.api_key && !env.api_key->empty()) o->api_key = {*env.api_key};
  o->allow_long_max_model_len = allow_long(env.allow_long_max_model_len);
  o->cpu_kv_cache_bytes = cpu_kv_cache_bytes(env.cpu_kvcache_space);
  auto cpu_threads = cpu_threads_from_env(env.cpu_omp_threads_bind, env.cpu_num_of_reserved_cpu, env.omp_num_threads,
                                          env.allowed_cpus.empty() ? engine::cpu::allowed_cpus() : env.allowed_cpus);
  if (cpu_threads.note) o->notes.push_back(std::move(*cpu_threads.note));
  o->cpu_threads = cpu_threads.threads;
  o->cpu_pinned = std::move(cpu_threads.pinned);
  refuse_unwired(*o);
  return o;
}

}  // namespace serverd
