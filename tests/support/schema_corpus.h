#pragma once

// The structured-outputs correctness corpus: the hand-written schemas of tests/data/grammar/schemas (one
// JSON schema per line, a file per theme) and schemas generated from a seed (nested objects, recursive
// $defs, enums, long property lists, arrays, bounded numbers, patterns), the same on every run.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace testing_support {

struct CorpusSchema {
  std::string id;      // "objects.jsonl:3" or "generated:17"
  std::string schema;  // JSON text
};

// Every non-empty line of every *.jsonl file under `dir`, files in name order.
std::vector<CorpusSchema> hand_written_schemas(const std::filesystem::path& dir);

// `count` schemas from `seed`; every one is within what the converter supports, and every one has a
// finite valid value (recursion always has a way out).
std::vector<CorpusSchema> generated_schemas(std::uint64_t seed, std::size_t count);

}  // namespace testing_support
