#pragma once

// Every `vllm serve` flag serverd knows, declared once, so that a vLLM launch line either runs or stops at
// start with a sentence naming the flag: nothing is silently ignored. Each row says what kind of value the
// flag takes (vLLM's forms: `--name`/`--no-name` booleans, lists, human-readable sizes, JSON) and what
// serverd does with it:
//
//   honoured         it changes what serverd does; `target` is where the value lands in ServerOptions
//   accepted as is   serverd already behaves so: one line saying so is logged (`text`); values outside
//                    `accepted` are refused with `refusal`
//   checked at load  stored in `target`, compared with the checkpoint when it loads (dtype, formats)
//   parsed only      stored with vLLM's name and type; the listener and tool-call work wires them, and until
//                    then a value other than the default is refused at start with `refusal`
//   refused          any use stops serverd with `text`: why, and what to use instead
//
// server_options.cc registers the rows with base::FlagParser; docs/serverd.md lists them (a test checks it).

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "serverd/options/server_options.h"

namespace serverd {

enum class FlagKind {
  kSwitch,         // `--name` only (argparse's store_true)
  kBool,           // `--name` and `--no-name`
  kString,         // one value
  kUint,           // a whole number
  kSize,           // a whole number, or vLLM's human-readable form (32k, 1M)
  kContextLength,  // a kSize, or auto / -1 (the model's)
  kLimit,          // a whole number, or -1 (no limit)
  kDouble,         // a number
  kChoice,         // one of `value_name`'s '|'-separated choices
  kList,           // one or more values (argparse's nargs="+")
  kJsonObject,     // a JSON object, kept as its text
  kJsonList,       // a JSON array of strings
};

enum class FlagStatus { kHonoured, kAcceptedAsIs, kCheckedAtLoad, kParsedOnly, kRefused };

using FlagTarget = std::variant<std::monostate, std::string ServerOptions::*, std::uint64_t ServerOptions::*,
                                std::optional<std::uint64_t> ServerOptions::*, double ServerOptions::*,
                                bool ServerOptions::*, std::vector<std::string> ServerOptions::*>;

struct FlagRow {
  std::string_view name = {};  // as vLLM spells it, without the dashes
  FlagKind kind = FlagKind::kString;
  FlagStatus status = FlagStatus::kHonoured;
  std::string_view value_name = {};  // what --help shows; for kChoice the choices
  // Honoured, checked at load, parsed only: what the flag does. Accepted as is: the sentence logged.
  // Refused: why, and what to use instead.
  std::string_view text = {};
  FlagTarget target = {};
  std::string_view example = {};          // a value the tests pass (a switch takes none; a kBool "true"/"false")
  std::string_view accepted = {};         // '|'-separated values taken; empty: every value
  std::string_view refusal = {};          // for a value outside `accepted` (or, parsed only, not the default)
  std::string_view refused_example = {};  // a value `refusal` answers
  std::string_view alias = {};            // vLLM's short spelling without the dash ("tp"), if any
  double min = 0;                         // bounds of kUint, kSize and kDouble values; max 0: none
  double max = 0;
};

std::span<const FlagRow> server_flag_table();
const FlagRow* find_flag_row(std::string_view name);
std::string_view status_name(FlagStatus status);  // "honoured", "accepted as is", ...

}  // namespace serverd
