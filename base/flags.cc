#include "base/flags.h"

#include <charconv>
#include <cstdlib>

namespace base {

void FlagParser::add_string(std::string name, std::string value_name, std::string help, std::string* target) {
  flags_.push_back({std::move(name), std::move(value_name), std::move(help),
                    [target](std::string_view v) { *target = std::string(v); }});
}

void FlagParser::add_uint(std::string name, std::string value_name, std::string help, std::uint64_t* target,
                          std::uint64_t min, std::uint64_t max) {
  flags_.push_back({name, std::move(value_name), std::move(help), [name, target, min, max](std::string_view v) {
                      std::uint64_t value = 0;
                      const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), value);
                      if (ec != std::errc() || end != v.data() + v.size() || value < min || value > max) {
                        throw UsageError("--" + name + " takes a whole number from " + std::to_string(min) + " to " +
                                         std::to_string(max) + ", not '" + std::string(v) + "'");
                      }
                      *target = value;
                    }});
}

void FlagParser::add_double(std::string name, std::string value_name, std::string help, double* target, double min,
                            double max) {
  flags_.push_back({name, std::move(value_name), std::move(help), [name, target, min, max](std::string_view v) {
                      const std::string text(v);
                      char* end = nullptr;
                      const double value = std::strtod(text.c_str(), &end);
                      if (text.empty() || end != text.c_str() + text.size() || !(value >= min && value <= max)) {
                        throw UsageError("--" + name + " takes a number from " + std::to_string(min) + " to " +
                                         std::to_string(max) + ", not '" + text + "'");
                      }
                      *target = value;
                    }});
}

void FlagParser::add_switch(std::string name, std::string help, bool* target) {
  flags_.push_back({std::move(name), "", std::move(help), [target](std::string_view) { *target = true; }});
}

void FlagParser::add_choice(std::string name, std::vector<std::string> choices, std::string help, std::string* target) {
  std::string value_name;
  for (const auto& c : choices) value_name += (value_name.empty() ? "" : "|") + c;
  flags_.push_back({name, value_name, std::move(help), [name, choices, target](std::string_view v) {
                      for (const auto& c : choices) {
                        if (c == v) {
                          *target = c;
                          return;
                        }
                      }
                      std::string list;
                      for (const auto& c : choices) list += (list.empty() ? "" : ", ") + c;
                      throw UsageError("--" + name + " takes one of " + list + ", not '" + std::string(v) + "'");
                    }});
}

void FlagParser::add_value(std::string name, std::string value_name, std::string help,
                           std::function<void(std::string_view)> set) {
  flags_.push_back({std::move(name), std::move(value_name), std::move(help), std::move(set)});
}

const FlagParser::Flag* FlagParser::find(std::string_view name) const {
  for (const auto& flag : flags_) {
    if (flag.name == name) return &flag;
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

bool FlagParser::parse_views(std::span<const std::string_view> args) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    if (arg == "--help" || arg == "-h") return false;
    if (!arg.starts_with("--")) throw UsageError("unexpected argument '" + std::string(arg) + "' (see --help)");
    const auto eq = arg.find('=');
    const std::string_view name = arg.substr(2, eq == std::string_view::npos ? std::string_view::npos : eq - 2);
    const Flag* flag = find(name);
    if (flag == nullptr) throw UsageError("unknown flag --" + std::string(name) + " (see --help)");
    if (flag->value_name.empty()) {
      if (eq != std::string_view::npos) throw UsageError("--" + flag->name + " takes no value");
      flag->set({});
    } else if (eq != std::string_view::npos) {
      flag->set(arg.substr(eq + 1));
    } else {
      if (i + 1 >= args.size()) throw UsageError("--" + flag->name + " needs a value " + flag->value_name);
      flag->set(args[++i]);
    }
  }
  return true;
}

std::string FlagParser::help() const {
  std::string out = usage_line_ + "\n\nOptions:\n";
  for (const auto& flag : flags_) {
    std::string left = "  --" + flag.name + (flag.value_name.empty() ? "" : " " + flag.value_name);
    if (left.size() < 30)
      left.resize(30, ' ');
    else
      left += "\n" + std::string(30, ' ');
    out += left + flag.help + "\n";
  }
  out += "  --help                      Show this help and exit\n";
  return out;
}

}  // namespace base
