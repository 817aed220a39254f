#include "engine/format/json.h"

#include <rapidjson/encodedstream.h>
#include <rapidjson/error/en.h>
#include <rapidjson/memorystream.h>

#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace engine::format {

rapidjson::Document parse_json_prefix(std::string_view text, std::size_t& consumed, std::string& error,
                                      DuplicateKeys duplicates) {
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
    return doc;
  }
  if (duplicates == DuplicateKeys::kKeepLast) keep_last_duplicate_members(doc);
  return doc;
}

namespace {

std::string_view name_of(const rapidjson::Value& name) {
  return {name.GetString(), name.GetStringLength()};
}

std::optional<std::string_view> duplicate_name(const rapidjson::Value& object) {
  const auto members = object.MemberBegin();
  const rapidjson::SizeType count = object.MemberCount();
  // Request bodies and configs are mostly small objects: comparing pairs costs less than a hash set there.
  if (count <= 16) {
    for (rapidjson::SizeType i = 1; i < count; ++i) {
      for (rapidjson::SizeType j = 0; j < i; ++j) {
        if (name_of(members[i].name) == name_of(members[j].name)) return name_of(members[i].name);
      }
    }
    return std::nullopt;
  }
  std::unordered_set<std::string_view> seen;
  seen.reserve(object.MemberCount());
  for (const auto& member : object.GetObject()) {
    if (!seen.insert(name_of(member.name)).second) return name_of(member.name);
  }
  return std::nullopt;
}

// Calls visit(value) on `root` and everything inside it, without recursion.
template <typename V, typename Visit>
void for_each_value(V& root, Visit&& visit) {
  std::vector<V*> pending{&root};
  while (!pending.empty()) {
    V* value = pending.back();
    pending.pop_back();
    visit(*value);
    if (value->IsObject()) {
      for (auto& member : value->GetObject()) pending.push_back(&member.value);
    } else if (value->IsArray()) {
      for (auto& item : value->GetArray()) pending.push_back(&item);
    }
  }
}

// Moves each repeated key's last value into its first slot and closes the gaps, keeping the order of first
// appearance. Names are copied: moving members moves short strings stored inside them.
void merge_duplicate_names(rapidjson::Value& object) {
  std::unordered_map<std::string, rapidjson::SizeType> first_slot;
  const auto members = object.MemberBegin();
  const rapidjson::SizeType count = object.MemberCount();
  rapidjson::SizeType kept = 0;
  for (rapidjson::SizeType read = 0; read < count; ++read) {
    const auto [slot, inserted] = first_slot.try_emplace(std::string(name_of(members[read].name)), kept);
    if (!inserted) {
      members[slot->second].value = members[read].value;  // RapidJSON's assignment moves
      continue;
    }
    if (kept != read) {
      members[kept].name = members[read].name;
      members[kept].value = members[read].value;
    }
    ++kept;
  }
  object.EraseMember(members + kept, object.MemberEnd());
}

}  // namespace

void keep_last_duplicate_members(rapidjson::Value& root) {
  // An object's members are merged before its values are visited.
  for_each_value(root, [](rapidjson::Value& value) {
    if (value.IsObject() && duplicate_name(value)) merge_duplicate_names(value);
  });
}

std::optional<std::string> repeated_key(const rapidjson::Value& root) {
  std::optional<std::string> found;
  for_each_value(root, [&](const rapidjson::Value& value) {
    if (found || !value.IsObject()) return;
    if (const auto name = duplicate_name(value)) found = std::string(*name);
  });
  return found;
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
