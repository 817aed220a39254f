#include "tests/support/schema_corpus.h"

#include <algorithm>
#include <fstream>
#include <stdexcept>

#include "base/splitmix64.h"

namespace testing_support {
namespace {

// Builds schemas as JSON text from a seeded stream.
class SchemaGenerator {
 public:
  explicit SchemaGenerator(std::uint64_t seed) : random_(seed) {}

  std::string schema(std::size_t index) {
    switch (index % 8) {
      case 0: return nested_object(1 + below(3));
      case 1: return enum_schema();
      case 2: return long_object();
      case 3: return recursive_schema();
      case 4: return array_schema();
      case 5: return bounded_number();
      case 6: return string_schema();
      default: return alternatives();
    }
  }

 private:
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(random_.next() % n); }
  bool chance(unsigned percent) { return below(100) < percent; }
  long long between(long long lo, long long hi) {
    return lo + static_cast<long long>(below(static_cast<std::size_t>(hi - lo + 1)));
  }

  std::string name() {
    static const char* const kWords[] = {"id",   "name",  "value", "kind", "count", "label", "items", "note", "score",
                                         "when", "owner", "size",  "tags", "flag",  "ratio", "city",  "code", "x"};
    return std::string(kWords[below(std::size(kWords))]) + (chance(40) ? "_" + std::to_string(below(100)) : "");
  }

  std::string quoted(const std::string& text) { return "\"" + text + "\""; }

  std::string leaf() {
    switch (below(9)) {
      case 0: return R"({"type":"string","maxLength":)" + std::to_string(below(12)) + "}";
      case 1: {
        const long long lo = between(-500, 500);
        return R"({"type":"integer","minimum":)" + std::to_string(lo) + R"(,"maximum":)" +
               std::to_string(lo + between(0, 3000)) + "}";
      }
      case 2: return R"({"type":"integer"})";
      case 3:
        return R"({"type":"number","minimum":)" + std::to_string(between(-20, 0)) + R"(,"maximum":)" +
               std::to_string(between(1, 20)) + "}";
      case 4: return R"({"type":"boolean"})";
      case 5: return R"({"type":["string","null"],"maxLength":4})";
      case 6: return enum_schema();
      case 7: {
        static const char* const kFormats[] = {"date", "time", "date-time", "uuid", "email", "ipv4"};
        return R"({"type":"string","format":")" + std::string(kFormats[below(std::size(kFormats))]) + "\"}";
      }
      default: return string_schema();
    }
  }

  // Properties with distinct names, a random subset required.
  std::string object_of(std::size_t properties, std::size_t depth, bool closed) {
    std::vector<std::string> names;
    while (names.size() < properties) {
      std::string n = name();
      if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
    }
    std::string props;
    std::string required;
    for (const std::string& n : names) {
      props +=
          (props.empty() ? "" : ",") + quoted(n) + ":" + (depth > 1 && chance(35) ? nested_object(depth - 1) : leaf());
      if (chance(50)) required += (required.empty() ? "" : ",") + quoted(n);
    }
    std::string out = R"({"type":"object","properties":{)" + props + "},\"required\":[" + required + "]";
    if (!closed) out += R"(,"additionalProperties":)" + std::string(chance(50) ? "true" : R"({"type":"integer"})");
    return out + "}";
  }

  std::string nested_object(std::size_t depth) { return object_of(1 + below(4), depth, !chance(20)); }
  std::string long_object() { return object_of(20 + below(41), 1, true); }

  std::string enum_schema() {
    std::string values;
    const std::size_t n = 1 + below(30);
    for (std::size_t i = 0; i < n; ++i) {
      const std::string v = chance(60) ? quoted("v" + std::to_string(i) + (chance(20) ? " \\\"q\\\"" : ""))
                                       : std::to_string(static_cast<long long>(i) * 7 - 40);
      values += (values.empty() ? "" : ",") + v;
    }
    return R"({"enum":[)" + values + "]}";
  }

  std::string recursive_schema() {
    switch (below(3)) {
      case 0:  // a linked list ending in null
        return R"({"$defs":{"node":{"type":"object","properties":{"v":)" + leaf() +
               R"(,"next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},"required":["v","next"]}},"$ref":"#/$defs/node"})";
      case 1:  // a tree whose children may be empty
        return R"({"$defs":{"tree":{"type":"object","properties":{"label":{"type":"string","maxLength":3},"children":{"type":"array","items":{"$ref":"#/$defs/tree"},"maxItems":)" +
               std::to_string(1 + below(3)) + R"(}},"required":["label","children"]}},"$ref":"#/$defs/tree"})";
      default:  // expressions: a number or an operation on two expressions
        return R"({"$defs":{"expr":{"anyOf":[{"type":"integer","minimum":0,"maximum":9},{"type":"object","properties":{"op":{"enum":["+","-","*"]},"args":{"type":"array","prefixItems":[{"$ref":"#/$defs/expr"},{"$ref":"#/$defs/expr"}],"items":false,"minItems":2}},"required":["op","args"]}]}},"$ref":"#/$defs/expr"})";
    }
  }

  std::string array_schema() {
    const std::size_t min_items = below(3);
    const std::size_t max_items = min_items + below(4);
    const std::string items = chance(50) ? leaf() : nested_object(1);
    if (chance(30)) {
      return R"({"type":"array","prefixItems":[)" + leaf() + "," + leaf() + R"(],"items":)" + items +
             R"(,"maxItems":)" + std::to_string(max_items + 2) + "}";
    }
    return R"({"type":"array","items":)" + items + R"(,"minItems":)" + std::to_string(min_items) + R"(,"maxItems":)" +
           std::to_string(max_items) + "}";
  }

  std::string bounded_number() {
    const long long lo = between(-100000, 100000);
    const long long hi = lo + between(0, 200000);
    const char* type = chance(60) ? "integer" : "number";
    const char* low_keyword = chance(50) ? "minimum" : "exclusiveMinimum";
    const char* high_keyword = chance(50) ? "maximum" : "exclusiveMaximum";
    const long long high =
        std::string(high_keyword) == "exclusiveMaximum" || std::string(low_keyword) == "exclusiveMinimum" ? hi + 2 : hi;
    return std::string(R"({"type":")") + type + "\",\"" + low_keyword + "\":" + std::to_string(lo) + ",\"" +
           high_keyword + "\":" + std::to_string(high) + "}";
  }

  std::string string_schema() {
    static const char* const kPatterns[] = {R"(^[a-z]{2,6}$)",
                                            R"(^\\d{3}-\\d{2}$)",
                                            R"(^(red|green|blue)$)",
                                            R"(^[A-Z][a-z]+ [A-Z]\\.$)",
                                            R"(^\\w{1,8}$)",
                                            R"(^[^\\s]{1,5}$)",
                                            R"(^(?:[0-9a-f]{2}:){2}[0-9a-f]{2}$)",
                                            R"(^v\\d+(\\.\\d+){0,2}$)"};
    if (chance(50))
      return R"({"type":"string","pattern":")" + std::string(kPatterns[below(std::size(kPatterns))]) + "\"}";
    const std::size_t lo = below(5);
    return R"({"type":"string","minLength":)" + std::to_string(lo) + R"(,"maxLength":)" +
           std::to_string(lo + below(8)) + "}";
  }

  std::string alternatives() {
    return R"({"anyOf":[{"type":"null"},)" + leaf() + "," + (chance(50) ? nested_object(1) : array_schema()) + "]}";
  }

  base::SplitMix64 random_;
};

}  // namespace

std::vector<CorpusSchema> hand_written_schemas(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".jsonl") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  std::vector<CorpusSchema> out;
  for (const std::filesystem::path& file : files) {
    std::ifstream in(file);
    if (!in) throw std::runtime_error("cannot read " + file.string());
    std::string line;
    for (std::size_t number = 1; std::getline(in, line); ++number) {
      if (!line.empty()) out.push_back({file.filename().string() + ":" + std::to_string(number), line});
    }
  }
  return out;
}

std::vector<CorpusSchema> generated_schemas(std::uint64_t seed, std::size_t count) {
  SchemaGenerator generator(seed);
  std::vector<CorpusSchema> out;
  for (std::size_t i = 0; i < count; ++i) out.push_back({"generated:" + std::to_string(i), generator.schema(i)});
  return out;
}

}  // namespace testing_support
