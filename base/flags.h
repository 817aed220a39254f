#pragma once

// Command lines of every binary, parsed one way.

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace base {

// A command-line mistake that names the flag and the value; the binaries print it after their name and
// exit with their usage code (2).
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Long flags in the style vLLM and huggingface_hub use: `--name value`, `--name=value`, `--switch`.
class FlagParser {
 public:
  explicit FlagParser(std::string usage_line) : usage_line_(std::move(usage_line)) {}

  void add_string(std::string name, std::string value_name, std::string help, std::string* target);
  void add_uint(std::string name, std::string value_name, std::string help, std::uint64_t* target,
                std::uint64_t min = 0, std::uint64_t max = UINT64_MAX);
  void add_double(std::string name, std::string value_name, std::string help, double* target, double min, double max);
  void add_switch(std::string name, std::string help, bool* target);
  // Accepts one of `choices`.
  void add_choice(std::string name, std::vector<std::string> choices, std::string help, std::string* target);
  // A flag whose value `set` reads, for what the kinds above cannot hold (an enum, a list, a path that must
  // exist). `set` runs at each occurrence, so a repeated flag can add up, and throws UsageError to refuse.
  void add_value(std::string name, std::string value_name, std::string help, std::function<void(std::string_view)> set);

  // Parses every argument; positional arguments are refused. Throws UsageError naming the flag.
  // Returns false when --help was given (the caller prints help() and exits 0).
  bool parse(std::span<char* const> args);
  bool parse(std::span<const std::string> args);
  std::string help() const;

 private:
  struct Flag {
    std::string name;
    std::string value_name;  // empty for switches
    std::string help;
    std::function<void(std::string_view)> set;
  };
  const Flag* find(std::string_view name) const;
  bool parse_views(std::span<const std::string_view> args);

  std::string usage_line_;
  std::vector<Flag> flags_;
};

}  // namespace base
