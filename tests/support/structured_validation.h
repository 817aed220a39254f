#pragma once

// Hands constrained outputs to tests/interop/structured_validate.mjs (ajv for JSON Schema, JavaScript's
// RegExp for regexes, equality for choices): one node run for all of them, since starting node and
// compiling ajv dominate a single check.

#include <string>
#include <vector>

namespace testing_support {

struct ValidationCase {
  enum class Kind { Json, Regex, Choice };
  std::string id;  // named in the validator's report of a failure
  Kind kind = Kind::Json;
  std::string schema;                // Json: the schema's JSON text
  std::string pattern;               // Regex
  std::vector<std::string> choices;  // Choice
  std::string output;                // valid UTF-8 (the caller checks)
};

struct ValidationReport {
  int status = -1;     // the validator's exit status: 0 when every case is valid
  std::string output;  // what it printed: a line per failing case, then "N of M outputs valid"
};

// The validator's JSON lines for `cases`, one per case.
std::string validation_lines(const std::vector<ValidationCase>& cases);

// Runs `node script` with validation_lines(cases) on its stdin (through a file in a temp dir).
ValidationReport validate_structured(const std::string& node, const std::string& script,
                                     const std::vector<ValidationCase>& cases);

}  // namespace testing_support
