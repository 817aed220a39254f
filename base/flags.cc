#include "base/flags.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>

namespace base {

namespace {

bool is_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// argparse reads "-1" and "-.5" as values, not flags.
bool is_negative_number(std::string_view arg) {
  if (arg.size() < 2 || arg[0] != '-') return false;
  const std::string_view rest = arg.substr(1);
  const auto dot = rest.find('.');
  if (dot == std::string_view::npos) return is_digits(rest);
  return (dot == 0 || is_digits(rest.substr(0, dot))) && is_digits(rest.substr(dot + 1));
}

bool looks_like_flag(std::string_view arg) {
  return arg.size() > 1 && arg[0] == '-' && !is_negative_number(arg);
}

// vLLM takes `--max_model_len` for `--max-model-len`.
std::string normalized(std::string_view name) {
  std::string out(name);
  std::replace(out.begin(), out.end(), '_', '-');
  return out;
}

std::string_view trimmed(std::string_view s) {
  const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

std::uint64_t unsigned_or_throw(std::string_view digits, const std::string& what) {
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc() || end != digits.data() + digits.size()) throw UsageError(what);
  return value;
}

}  // namespace

std::uint64_t parse_human_uint(std::string_view text, std::string_view flag) {
  const std::string value(trimmed(text));
  const std::string refusal = std::string(flag) +
                              " takes a whole number, optionally with a suffix (k m g t: thousands, K M G T: "
                              "powers of 1024), not '" +
                              std::string(text) + "'";
  if (is_digits(value)) return unsigned_or_throw(value, refusal);
  if (value.size() < 2) throw UsageError(refusal);
  const char suffix = value.back();
  const std::string_view number = std::string_view(value).substr(0, value.size() - 1);
  const auto dot = number.find('.');
  const bool decimal_number =
      dot != std::string_view::npos && is_digits(number.substr(0, dot)) && is_digits(number.substr(dot + 1));
  if (!is_digits(number) && !decimal_number) throw UsageError(refusal);
  static constexpr std::string_view kDecimal = "kmgt";
  static constexpr std::string_view kBinary = "KMGT";
  if (const auto power = kDecimal.find(suffix); power != std::string_view::npos) {
    // As vLLM computes it: the number as a double times the multiplier, the fraction dropped.
    const double scaled = std::strtod(std::string(number).c_str(), nullptr) * std::pow(1000.0, double(power + 1));
    if (!(scaled < 18446744073709551616.0)) throw UsageError(refusal);
    return static_cast<std::uint64_t>(scaled);
  }
  if (const auto power = kBinary.find(suffix); power != std::string_view::npos) {
    if (decimal_number) {
      throw UsageError(std::string(flag) + " '" + std::string(text) + "': a fraction cannot take the binary suffix " +
                       suffix + " (powers of 1024); write it as a whole number, or use the decimal suffix " +
                       std::string(number) + static_cast<char>(suffix - 'A' + 'a'));
    }
    const std::uint64_t base = unsigned_or_throw(number, refusal);
    const unsigned shift = 10u * static_cast<unsigned>(power + 1);
    if (base > (UINT64_MAX >> shift)) throw UsageError(refusal);
    return base << shift;
  }
  throw UsageError(refusal);
}

void FlagParser::add(Flag flag) {
  if (find(flag.name) != nullptr) throw std::logic_error("the flag --" + flag.name + " is added twice");
  flags_.push_back(std::move(flag));
}

void FlagParser::add_string(std::string name, std::string value_name, std::string help, std::string* target) {
  add_value(std::move(name), std::move(value_name), std::move(help),
            [target](std::string_view v) { *target = std::string(v); });
}

void FlagParser::add_uint(std::string name, std::string value_name, std::string help, std::uint64_t* target,
                          std::uint64_t min, std::uint64_t max) {
  add_value(name, std::move(value_name), std::move(help), [name, target, min, max](std::string_view v) {
    const std::string refusal = "--" + name + " takes a whole number from " + std::to_string(min) + " to " +
                                std::to_string(max) + ", not '" + std::string(v) + "'";
    const std::uint64_t value = unsigned_or_throw(v, refusal);
    if (value < min || value > max) throw UsageError(refusal);
    *target = value;
  });
}

void FlagParser::add_size(std::string name, std::string value_name, std::string help, std::uint64_t* target,
                          std::uint64_t min, std::uint64_t max) {
  add_value(name, std::move(value_name), std::move(help), [name, target, min, max](std::string_view v) {
    const std::uint64_t value = parse_human_uint(v, "--" + name);
    if (value < min || value > max) {
      throw UsageError("--" + name + " " + std::string(v) + " is " + std::to_string(value) + ", outside " +
                       std::to_string(min) + " to " + std::to_string(max));
    }
    *target = value;
  });
}

void FlagParser::add_double(std::string name, std::string value_name, std::string help, double* target, double min,
                            double max) {
  add_value(name, std::move(value_name), std::move(help), [name, target, min, max](std::string_view v) {
    const std::string text(v);
    char* end = nullptr;
    const double value = std::strtod(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size() || !(value >= min && value <= max)) {
      throw UsageError("--" + name + " takes a number from " + std::to_string(min) + " to " + std::to_string(max) +
                       ", not '" + text + "'");
    }
    *target = value;
  });
}

void FlagParser::add_switch(std::string name, std::string help, bool* target) {
  add_switch(std::move(name), std::move(help), [target] { *target = true; });
}

void FlagParser::add_switch(std::string name, std::string help, std::function<void()> set) {
  Flag flag{.name = std::move(name), .help = std::move(help)};
  flag.kind = Kind::kSwitch;
  flag.set_bool = [set = std::move(set)](bool) { set(); };
  add(std::move(flag));
}

void FlagParser::add_bool(std::string name, std::string help, std::function<void(bool)> set) {
  Flag flag{.name = std::move(name), .help = std::move(help)};
  flag.kind = Kind::kBool;
  flag.set_bool = std::move(set);
  add(std::move(flag));
}

void FlagParser::add_bool(std::string name, std::string help, bool* target) {
  add_bool(std::move(name), std::move(help), [target](bool value) { *target = value; });
}

void FlagParser::add_choice(std::string name, std::vector<std::string> choices, std::string help, std::string* target) {
  std::string value_name;
  for (const auto& c : choices) value_name += (value_name.empty() ? "" : "|") + c;
  add_value(name, value_name, std::move(help), [name, choices, target](std::string_view v) {
    if (const auto it = std::find(choices.begin(), choices.end(), v); it != choices.end()) {
      *target = *it;
      return;
    }
    std::string list;
    for (const auto& c : choices) list += (list.empty() ? "" : ", ") + c;
    throw UsageError("--" + name + " takes one of " + list + ", not '" + std::string(v) + "'");
  });
}

void FlagParser::add_value(std::string name, std::string value_name, std::string help,
                           std::function<void(std::string_view)> set) {
  Flag flag{.name = std::move(name), .value_name = std::move(value_name), .help = std::move(help)};
  flag.set = std::move(set);
  add(std::move(flag));
}

void FlagParser::add_list(std::string name, std::string value_name, std::string help,
                          std::function<void(std::vector<std::string>)> set) {
  Flag flag{.name = std::move(name), .value_name = std::move(value_name), .help = std::move(help)};
  flag.kind = Kind::kList;
  flag.set_list = std::move(set);
  add(std::move(flag));
}

void FlagParser::add_alias(std::string short_name, const std::string& long_name) {
  const auto it = std::find_if(flags_.begin(), flags_.end(), [&](const Flag& f) { return f.name == long_name; });
  if (it == flags_.end()) throw std::logic_error("alias -" + short_name + " names no flag --" + long_name);
  it->alias = "-" + short_name;
}

void FlagParser::set_positional(std::string value_name, std::string help, std::function<void(std::string_view)> set) {
  positional_name_ = std::move(value_name);
  positional_help_ = std::move(help);
  positional_ = std::move(set);
}

const FlagParser::Flag* FlagParser::find(std::string_view name) const {
  for (const auto& flag : flags_) {
    if (flag.name == name) return &flag;
  }
  return nullptr;
}

const FlagParser::Flag* FlagParser::find_alias(std::string_view name) const {
  for (const auto& flag : flags_) {
    if (!flag.alias.empty() && flag.alias == name) return &flag;
  }
  return nullptr;
}

bool FlagParser::parse(std::span<char* const> args) {
  const std::vector<std::string_view> views(args.begin(), args.end());
  return parse_views(views);
}

bool FlagParser::parse(std::span<const std::string> args) {
  const std::vector<std::string_view> views(args.begin(), args.end());
  return parse_views(views);
}

void FlagParser::read_flag(const Flag& flag, bool negated, std::optional<std::string_view> joined,
                           std::span<const std::string_view> args, std::size_t& i) const {
  const std::string spelled = negated ? "--no-" + flag.name : "--" + flag.name;
  switch (flag.kind) {
    case Kind::kSwitch:
    case Kind::kBool:
      if (joined) throw UsageError(spelled + " takes no value");
      flag.set_bool(!negated);
      return;
    case Kind::kValue:
      if (joined) {
        flag.set(*joined);
      } else if (i + 1 < args.size() && !args[i + 1].starts_with("--")) {
        flag.set(args[++i]);
      } else {
        throw UsageError(spelled + " needs a value " + flag.value_name);
      }
      return;
    case Kind::kList: {
      std::vector<std::string> values;
      if (joined) {
        values.emplace_back(*joined);
      } else {
        while (i + 1 < args.size() && !looks_like_flag(args[i + 1])) values.emplace_back(args[++i]);
      }
      if (values.empty()) throw UsageError(spelled + " needs at least one value " + flag.value_name);
      flag.set_list(std::move(values));
      return;
    }
  }
}

bool FlagParser::parse_views(std::span<const std::string_view> args) {
  bool only_positionals = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    if (!only_positionals && (arg == "--help" || arg == "-h")) return false;
    if (!only_positionals && arg == "--") {
      only_positionals = true;
      continue;
    }
    if (!only_positionals && looks_like_flag(arg)) {
      const auto eq = arg.find('=');
      const std::optional<std::string_view> joined =
          eq == std::string_view::npos ? std::nullopt : std::optional(arg.substr(eq + 1));
      const std::string_view spelled = arg.substr(0, eq);
      if (!spelled.starts_with("--")) {
        const Flag* flag = find_alias(spelled);
        if (flag == nullptr) throw UsageError("unknown flag " + std::string(spelled) + " (see --help)");
        read_flag(*flag, false, joined, args, i);
        continue;
      }
      const std::string name = normalized(spelled.substr(2));
      const Flag* flag = find(name);
      bool negated = false;
      if (flag == nullptr && name.starts_with("no-")) {
        const Flag* positive = find(std::string_view(name).substr(3));
        if (positive != nullptr && positive->kind == Kind::kBool) {
          flag = positive;
          negated = true;
        }
      }
      if (flag == nullptr) throw UsageError("unknown flag --" + name + " (see --help)");
      read_flag(*flag, negated, joined, args, i);
      continue;
    }
    if (!positional_) throw UsageError("unexpected argument '" + std::string(arg) + "' (see --help)");
    positional_(arg);
  }
  return true;
}

std::string FlagParser::help() const {
  std::string out = usage_line_ + "\n\n";
  const auto line = [&out](std::string left, const std::string& help) {
    if (left.size() < 30) {
      left.resize(30, ' ');
    } else {
      left += "\n" + std::string(30, ' ');
    }
    out += left + help + "\n";
  };
  if (positional_) {
    out += "Arguments:\n";
    line("  " + positional_name_, positional_help_);
    out += "\n";
  }
  out += "Options:\n";
  for (const auto& flag : flags_) {
    std::string left = "  " + (flag.alias.empty() ? "" : flag.alias + ", ") + "--" + flag.name;
    switch (flag.kind) {
      case Kind::kSwitch: break;
      case Kind::kBool: left += ", --no-" + flag.name; break;
      case Kind::kValue: left += " " + flag.value_name; break;
      case Kind::kList: left += " " + flag.value_name + " [" + flag.value_name + " ...]"; break;
    }
    line(std::move(left), flag.help);
  }
  line("  --help", "Show this help and exit");
  return out;
}

}  // namespace base
