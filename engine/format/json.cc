#include "engine/format/json.h"

#include <rapidjson/encodedstream.h>
#include <rapidjson/error/en.h>
#include <rapidjson/memorystream.h>

namespace engine::format {

rapidjson::Document parse_json_prefix(std::string_view text, std::size_t& consumed, std::string& error) {
  rapidjson::MemoryStream memory(text.data(), text.size());
  rapidjson::EncodedInputStream<rapidjson::UTF8<>, rapidjson::MemoryStream> stream(memory);
  rapidjson::Document doc;
  constexpr unsigned kFlags =
      rapidjson::kParseValidateEncodingFlag | rapidjson::kParseStopWhenDoneFlag | rapidjson::kParseIterativeFlag;
  doc.ParseStream<kFlags, rapidjson::UTF8<>>(stream);
  consumed = memory.Tell();
  error.clear();
  if (doc.HasParseError()) {
    error = std::string(rapidjson::GetParseError_En(doc.GetParseError())) + " at byte " +
            std::to_string(doc.GetErrorOffset());
  }
  return doc;
}

std::string_view json_type_name(const rapidjson::Value& value) {
  if (value.IsNull()) return "null";
  if (value.IsBool()) return "a boolean";
  if (value.IsNumber()) return "a number";
  if (value.IsString()) return "a string";
  if (value.IsArray()) return "an array";
  return "an object";
}

}  // namespace engine::format
