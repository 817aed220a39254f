#include "tests/support/structured_validation.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "tests/support/temp_dir.h"

namespace testing_support {
namespace {

void string_member(rapidjson::Writer<rapidjson::StringBuffer>& json, const char* key, const std::string& value) {
  json.Key(key);
  json.String(value.data(), static_cast<rapidjson::SizeType>(value.size()));
}

}  // namespace

std::string validation_lines(const std::vector<ValidationCase>& cases) {
  std::string lines;
  for (const ValidationCase& c : cases) {
    rapidjson::StringBuffer buffer;
    rapidjson::Writer<rapidjson::StringBuffer> json(buffer);
    json.StartObject();
    string_member(json, "id", c.id);
    switch (c.kind) {
      case ValidationCase::Kind::Json:
        string_member(json, "kind", "json");
        json.Key("schema");
        json.RawValue(c.schema.data(), c.schema.size(), rapidjson::kObjectType);
        break;
      case ValidationCase::Kind::Regex:
        string_member(json, "kind", "regex");
        string_member(json, "pattern", c.pattern);
        break;
      case ValidationCase::Kind::Choice:
        string_member(json, "kind", "choice");
        json.Key("choices");
        json.StartArray();
        for (const std::string& choice : c.choices)
          json.String(choice.data(), static_cast<rapidjson::SizeType>(choice.size()));
        json.EndArray();
        break;
    }
    string_member(json, "output", c.output);
    json.EndObject();
    lines.append(buffer.GetString(), buffer.GetSize());
    lines += '\n';
  }
  return lines;
}

ValidationReport validate_structured(const std::string& node, const std::string& script,
                                     const std::vector<ValidationCase>& cases) {
  const TempDir dir;
  const auto input = dir / "cases.jsonl";
  write_file(input, validation_lines(cases));
  ValidationReport report;
  report.status = run_command("'" + node + "' '" + script + "' < '" + input.string() + "'", report.output);
  return report;
}

}  // namespace testing_support
