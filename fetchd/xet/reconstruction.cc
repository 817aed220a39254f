#include "fetchd/xet/reconstruction.h"

#include "engine/format/json.h"
#include "fetchd/request/fetch_error.h"

namespace fetchd::xet {

namespace {

constexpr std::size_t kMaxReconstructionBytes = 64u << 20;
constexpr std::uint64_t kMaxChunksPerXorb = 1u << 20;

[[noreturn]] void refuse(const std::string& what) {
  throw FetchError(ErrorKind::Integrity, "the Xet store's reconstruction answer " + what);
}

std::uint64_t u64(const rapidjson::Value& object, const char* name, const std::string& where) {
  const auto it = object.FindMember(name);
  if (it == object.MemberEnd() || !it->value.IsUint64())
    refuse("has no number '" + std::string(name) + "' in " + where);
  return it->value.GetUint64();
}

ChunkRange chunk_range(const rapidjson::Value& value, const std::string& where) {
  if (!value.IsObject()) refuse("has a chunk range that is not an object in " + where);
  const auto start = u64(value, "start", where);
  const auto end = u64(value, "end", where);
  if (start >= end || end > kMaxChunksPerXorb) {
    refuse("has the chunk range [" + std::to_string(start) + ", " + std::to_string(end) + ") in " + where);
  }
  return {static_cast<std::uint32_t>(start), static_cast<std::uint32_t>(end)};
}

ByteRange byte_range(const rapidjson::Value& value, const std::string& where) {
  if (!value.IsObject()) refuse("has a byte range that is not an object in " + where);
  const auto start = u64(value, "start", where);
  const auto end = u64(value, "end", where);
  if (end < start) refuse("has the byte range " + std::to_string(start) + "-" + std::to_string(end) + " in " + where);
  return {start, end};
}

std::string string_member(const rapidjson::Value& object, const char* name, const std::string& where) {
  const auto it = object.FindMember(name);
  if (it == object.MemberEnd() || !it->value.IsString())
    refuse("has no string '" + std::string(name) + "' in " + where);
  return {it->value.GetString(), it->value.GetStringLength()};
}

}  // namespace

const FetchSource* Reconstruction::source_for(const ReconstructionTerm& term, const FetchRange** range) const {
  const auto it = sources.find(term.xorb);
  if (it == sources.end()) return nullptr;
  for (const auto& source : it->second) {
    for (const auto& r : source.ranges) {
      if (r.chunks.contains(term.chunks)) {
        if (range != nullptr) *range = &r;
        return &source;
      }
    }
  }
  return nullptr;
}

Reconstruction parse_reconstruction(std::string_view json) {
  if (json.size() > kMaxReconstructionBytes) refuse("is " + std::to_string(json.size()) + " bytes, over the limit");
  std::size_t consumed = 0;
  std::string error;
  const auto doc = engine::format::parse_json_prefix(json, consumed, error);
  if (!error.empty()) refuse("is not valid JSON (" + error + ")");
  if (!doc.IsObject()) refuse("is not a JSON object");

  Reconstruction r;
  if (const auto it = doc.FindMember("offset_into_first_range"); it != doc.MemberEnd()) {
    if (!it->value.IsUint64()) refuse("has a non-numeric offset_into_first_range");
    r.offset_into_first_range = it->value.GetUint64();
  }
  const auto terms = doc.FindMember("terms");
  if (terms == doc.MemberEnd() || !terms->value.IsArray()) refuse("has no 'terms' array");
  for (const auto& t : terms->value.GetArray()) {
    const std::string where = "term " + std::to_string(r.terms.size());
    if (!t.IsObject()) refuse("has a term that is not an object");
    ReconstructionTerm term;
    term.xorb = string_member(t, "hash", where);
    term.unpacked_length = u64(t, "unpacked_length", where);
    const auto range = t.FindMember("range");
    if (range == t.MemberEnd()) refuse("has no chunk range in " + where);
    term.chunks = chunk_range(range->value, where);
    r.terms.push_back(std::move(term));
  }

  if (const auto v1 = doc.FindMember("fetch_info"); v1 != doc.MemberEnd() && v1->value.IsObject()) {
    for (const auto& [name, list] : v1->value.GetObject()) {
      const std::string xorb(name.GetString(), name.GetStringLength());
      if (!list.IsArray()) refuse("has fetch_info for " + xorb + " that is not an array");
      for (const auto& item : list.GetArray()) {
        const std::string where = "fetch_info of xorb " + xorb;
        FetchSource source;
        source.url = string_member(item, "url", where);
        const auto chunks = item.FindMember("range");
        const auto bytes = item.FindMember("url_range");
        if (chunks == item.MemberEnd() || bytes == item.MemberEnd()) refuse("has an entry without ranges in " + where);
        source.ranges.push_back({chunk_range(chunks->value, where), byte_range(bytes->value, where)});
        r.sources[xorb].push_back(std::move(source));
      }
    }
  } else if (const auto v2 = doc.FindMember("xorbs"); v2 != doc.MemberEnd() && v2->value.IsObject()) {
    for (const auto& [name, list] : v2->value.GetObject()) {
      const std::string xorb(name.GetString(), name.GetStringLength());
      if (!list.IsArray()) refuse("has xorbs for " + xorb + " that is not an array");
      for (const auto& item : list.GetArray()) {
        const std::string where = "xorbs entry of " + xorb;
        FetchSource source;
        source.url = string_member(item, "url", where);
        const auto ranges = item.FindMember("ranges");
        if (ranges == item.MemberEnd() || !ranges->value.IsArray()) refuse("has no ranges in " + where);
        for (const auto& range : ranges->value.GetArray()) {
          const auto chunks = range.FindMember("chunks");
          const auto bytes = range.FindMember("bytes");
          if (chunks == range.MemberEnd() || bytes == range.MemberEnd())
            refuse("has a range without chunks or bytes in " + where);
          source.ranges.push_back({chunk_range(chunks->value, where), byte_range(bytes->value, where)});
        }
        r.sources[xorb].push_back(std::move(source));
      }
    }
  } else if (!r.terms.empty()) {
    refuse("names terms but neither fetch_info (V1) nor xorbs (V2)");
  }
  for (const auto& term : r.terms) {
    if (r.source_for(term, nullptr) == nullptr) {
      refuse("gives no source for chunks [" + std::to_string(term.chunks.start) + ", " +
             std::to_string(term.chunks.end) + ") of xorb " + term.xorb);
    }
  }
  return r;
}

}  // namespace fetchd::xet
