#include "fetchd/hub/repo_listing.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <map>

#include "base/printable.h"
#include "engine/format/json.h"
#include "engine/format/safetensors_index.h"
#include "fetchd/request/fetch_error.h"

namespace fetchd::hub {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c); });
  return out;
}

[[noreturn]] void refuse(std::string_view repo_id, const std::string& what) {
  throw FetchError(ErrorKind::Integrity, "the tree listing for repository '" + std::string(repo_id) + "' " + what +
                                             " The listing is not usable.");
}

std::optional<std::string> string_member(const rapidjson::Value& object, const char* name) {
  const auto it = object.FindMember(name);
  if (it == object.MemberEnd() || !it->value.IsString()) return std::nullopt;
  return std::string(it->value.GetString(), it->value.GetStringLength());
}

std::optional<std::uint64_t> size_member(const rapidjson::Value& object, const char* name) {
  const auto it = object.FindMember(name);
  if (it == object.MemberEnd() || !it->value.IsUint64()) return std::nullopt;
  return it->value.GetUint64();
}

bool single_repeated_character(std::string_view id) {
  // Only ids as long as real hashes: short test or placeholder values prove nothing either way.
  return id.size() >= 16 && std::all_of(id.begin(), id.end(), [&](char c) { return c == id.front(); });
}

std::string shorten(std::string_view id) {
  return std::string(id.substr(0, 12)) + (id.size() > 12 ? "…" : "");
}

}  // namespace

std::vector<ListingEntry> parse_tree_page(std::string_view json, std::string_view repo_id) {
  std::size_t consumed = 0;
  std::string error;
  const auto doc = engine::format::parse_json_prefix(json, consumed, error);
  if (!error.empty()) refuse(repo_id, "is not valid JSON (" + error + ").");
  if (!doc.IsArray()) refuse(repo_id, "is not a JSON array.");
  std::vector<ListingEntry> entries;
  for (const auto& item : doc.GetArray()) {
    if (!item.IsObject()) refuse(repo_id, "holds an entry that is not a JSON object.");
    const auto type = string_member(item, "type");
    const auto path = string_member(item, "path");
    if (!path) refuse(repo_id, "holds an entry without a path.");
    if (type == "directory") continue;
    // The path becomes a file name in the snapshot and a word in log lines: it must be plain text.
    if (base::has_control_characters(*path)) {
      refuse(repo_id, "names the path '" + base::printable(*path) +
                          "', which holds a control character or bytes that are not UTF-8; no repository file "
                          "can be named so.");
    }
    if (!engine::format::is_safe_relative_path(*path)) {
      refuse(repo_id, "names the path '" + *path + "', which could reach outside the repository folder.");
    }
    ListingEntry e;
    e.path = *path;
    e.size = size_member(item, "size");
    e.oid = lower(string_member(item, "oid").value_or(""));
    const auto lfs = item.FindMember("lfs");
    if (lfs != item.MemberEnd() && lfs->value.IsObject()) {
      if (auto oid = string_member(lfs->value, "oid")) e.lfs_oid = lower(*oid);
      if (!e.lfs_oid) {
        if (auto sha = string_member(lfs->value, "sha256")) e.lfs_oid = lower(*sha);
      }
      e.lfs_size = size_member(lfs->value, "size");
    }
    if (auto xet = string_member(item, "xetHash"); xet && !xet->empty() && !single_repeated_character(*xet)) {
      e.xet_hash = lower(*xet);  // real listings mask it as 64 '*' for some callers: that means "not given"
    }
    entries.push_back(std::move(e));
  }
  return entries;
}

std::string listing_to_json(const std::vector<ListingEntry>& entries) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> json(buffer);
  const auto string = [&](const std::string& s) { json.String(s.c_str(), static_cast<rapidjson::SizeType>(s.size())); };
  json.StartArray();
  for (const auto& e : entries) {
    json.StartObject();
    json.Key("type");
    json.String("file");
    json.Key("path");
    string(e.path);
    if (!e.oid.empty()) {
      json.Key("oid");
      string(e.oid);
    }
    if (e.size) {
      json.Key("size");
      json.Uint64(*e.size);
    }
    if (e.lfs_oid) {
      json.Key("lfs");
      json.StartObject();
      json.Key("oid");
      string(*e.lfs_oid);
      if (e.lfs_size) {
        json.Key("size");
        json.Uint64(*e.lfs_size);
      }
      json.EndObject();
    }
    if (e.xet_hash) {
      json.Key("xetHash");
      string(*e.xet_hash);
    }
    json.EndObject();
  }
  json.EndArray();
  return {buffer.GetString(), buffer.GetSize()};
}

void check_listing_integrity(const std::vector<ListingEntry>& entries, std::string_view repo_id) {
  struct Owner {
    std::uint64_t size;
    const std::string* path;
  };
  std::map<std::string, Owner, std::less<>> by_id;
  std::map<std::string_view, std::optional<std::uint64_t>> by_path;

  const auto claim = [&](const std::string& id, std::optional<std::uint64_t> size, const ListingEntry& e) {
    if (id.empty()) return;
    if (single_repeated_character(id)) {
      refuse(repo_id, "gives '" + e.path + "' the object identifier " + shorten(id) + ", whose " +
                          std::to_string(id.size()) + " characters are all '" + id.front() +
                          "'. No content hash produces that value, so the hub is not telling the truth about "
                          "this repository (a gated repository answers this way without a valid token: set "
                          "HF_TOKEN).");
    }
    if (!size) return;  // without a size an entry cannot own an id, nor switch the check off for others
    const auto [it, inserted] = by_id.try_emplace(id, Owner{*size, &e.path});
    if (!inserted && it->second.size != *size) {
      refuse(repo_id, "gives object identifier " + shorten(id) + " to '" + *it->second.path + "' at " +
                          std::to_string(it->second.size) + " bytes and to '" + e.path + "' at " +
                          std::to_string(*size) + " bytes. One content hash cannot name two different sizes.");
    }
  };

  for (const auto& e : entries) {
    claim(e.oid, e.size, e);
    if (e.lfs_oid) claim(*e.lfs_oid, e.content_size(), e);
    // One path, one file: which of two entries would the snapshot hold, and which id would prove it?
    const auto size = e.content_size();
    const auto [it, inserted] = by_path.try_emplace(e.path, size);
    if (!inserted) {
      const bool sized = it->second && size && *it->second != *size;
      refuse(repo_id, "lists '" + e.path + "' twice" +
                          (sized ? ", at " + std::to_string(*it->second) + " and " + std::to_string(*size) + " bytes"
                                 : std::string()) +
                          ".");
    }
  }
}

}  // namespace fetchd::hub
