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

// vLLM's human-readable integers: digits, or a number with one suffix, where lowercase k, m, g, t are
// decimal (1k = 1000; "25.6k" = 25600, the fraction truncated) and uppercase K, M, G, T binary (1K = 1024,
// whole numbers only). Surrounding spaces are ignored. Throws UsageError naming `flag` (e.g. "--max-model-len").
std::uint64_t parse_human_uint(std::string_view text, std::string_view flag);

// Long flags in the style vLLM (argparse) and huggingface_hub use: `--name value`, `--name=value`,
// `--switch`, `--name` / `--no-name` for booleans, `--name v1 v2` for lists, `_` and `-` alike in names
// (`--max_model_len`), short aliases such as `-tp 2`, and positional arguments where a binary takes them.
class FlagParser {
 public:
  explicit FlagParser(std::string usage_line) : usage_line_(std::move(usage_line)) {}

  void add_string(std::string name, std::string value_name, std::string help, std::string* target);
  void add_uint(std::string name, std::string value_name, std::string help, std::uint64_t* target,
                std::uint64_t min = 0, std::uint64_t max = UINT64_MAX);
  // A whole number written as vLLM's human-readable integers (parse_human_uint): `32k`, `1M`.
  void add_size(std::string name, std::string value_name, std::string help, std::uint64_t* target,
                std::uint64_t min = 0, std::uint64_t max = UINT64_MAX);
  void add_double(std::string name, std::string value_name, std::string help, double* target, double min, double max);
  // `--name` alone, as argparse's store_true.
  void add_switch(std::string name, std::string help, bool* target);
  void add_switch(std::string name, std::string help, std::function<void()> set);
  // `--name` sets true and `--no-name` false, as argparse's BooleanOptionalAction (vLLM's booleans).
  void add_bool(std::string name, std::string help, std::function<void(bool)> set);
  void add_bool(std::string name, std::string help, bool* target);
  // Accepts one of `choices`.
  void add_choice(std::string name, std::vector<std::string> choices, std::string help, std::string* target);
  // A flag whose value `set` reads, for what the kinds above cannot hold (an enum, a path that must
  // exist). `set` runs at each occurrence, so a repeated flag can add up, and throws UsageError to refuse.
  void add_value(std::string name, std::string value_name, std::string help, std::function<void(std::string_view)> set);
  // `--name v1 v2 ...`: every argument up to the next flag, at least one (argparse's nargs="+"). A repeated
  // flag replaces the earlier list, as argparse does.
  void add_list(std::string name, std::string value_name, std::string help,
                std::function<void(std::vector<std::string>)> set);
  // `-short` means `--long` (vLLM's `-tp`, `-pp`, `-q`); `long_name` must be added already.
  void add_alias(std::string short_name, const std::string& long_name);
  // Arguments that are not flags go to `set`, in order; without this they are refused.
  void set_positional(std::string value_name, std::string help, std::function<void(std::string_view)> set);

  // Parses every argument. Throws UsageError naming the flag. Returns false when --help was given (the
  // caller prints help() and exits 0).
  bool parse(std::span<char* const> args);
  bool parse(std::span<const std::string> args);
  std::string help() const;

 private:
  enum class Kind { kSwitch, kBool, kValue, kList };
  struct Flag {
    std::string name{};
    std::string value_name{};  // empty for switches and booleans
    std::string help{};
    Kind kind = Kind::kValue;
    std::function<void(std::string_view)> set{};               // kValue
    std::function<void(bool)> set_bool{};                      // kSwitch (always true) and kBool
    std::function<void(std::vector<std::string>)> set_list{};  // kList
    std::string alias{};                                       // "-tp", or empty
  };
  void add(Flag flag);
  const Flag* find(std::string_view name) const;
  const Flag* find_alias(std::string_view name) const;
  bool parse_views(std::span<const std::string_view> args);
  // Reads the flag at args[i] (its name already split from any "=value"), advancing i past its values.
  void read_flag(const Flag& flag, bool negated, std::optional<std::string_view> joined,
                 std::span<const std::string_view> args, std::size_t& i) const;

  std::string usage_line_;
  std::vector<Flag> flags_;
  std::string positional_name_;
  std::string positional_help_;
  std::function<void(std::string_view)> positional_;
};

}  // namespace base
