#include "tests/hub/hub_xet_service.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <span>
#include <stdexcept>
#include <utility>

#include "fetchd/xet/xorb_chunk.h"

namespace testing_support::hub {
namespace {

namespace xet = fetchd::xet;

// Signed URLs longer than this are split, as the CAS splits V2 multi-range URLs near 8 KiB.
constexpr std::size_t kMaxUrlLength = 8000;
// How long a signed gateway URL stays valid; "already expired" URLs expired this long ago.
constexpr std::chrono::seconds kUrlLifetime{3600};
constexpr std::string_view kXetFileInfoType = "application/vnd.xet-fileinfo+json";

std::int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string hex_of(std::span<const unsigned char> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  for (const unsigned char c : bytes) {
    hex.push_back(kDigits[c >> 4]);
    hex.push_back(kDigits[c & 0x0f]);
  }
  return hex;
}

std::optional<std::string> unhex(std::string_view hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  std::string bytes;
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    const auto byte = [&](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      return -1;
    };
    const int high = byte(hex[i]);
    const int low = byte(hex[i + 1]);
    if (high < 0 || low < 0) return std::nullopt;
    bytes.push_back(static_cast<char>(high * 16 + low));
  }
  return bytes;
}

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  for (std::size_t start = 0;;) {
    const std::size_t end = text.find(separator, start);
    parts.push_back(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

std::string trim(std::string_view text) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  return std::string(text);
}

// One "S-E" (both given) range; nullopt when malformed or E < S.
std::optional<XorbByteRange> parse_closed_range(std::string_view text) {
  const std::size_t dash = text.find('-');
  if (dash == std::string_view::npos) return std::nullopt;
  const auto first = parse_number(text.substr(0, dash));
  const auto last = parse_number(text.substr(dash + 1));
  if (!first || !last || *last < *first) return std::nullopt;
  return XorbByteRange{*first, *last};
}

std::string ranges_text(const std::vector<XorbByteRange>& ranges) {
  std::string text;
  for (const XorbByteRange& range : ranges) {
    if (!text.empty()) text.push_back(',');
    text += std::to_string(range.first) + "-" + std::to_string(range.last);
  }
  return text;
}

// The ranges of a `Range: bytes=A-B,C-,...` header over `size` bytes, each clamped to the end. A suffix
// range (-N) is the last N bytes. nullopt when the header is malformed; an empty vector when a range
// starts at or past the end (416).
std::optional<std::vector<XorbByteRange>> parse_ranges(std::string_view header, std::uint64_t size) {
  constexpr std::string_view kUnit = "bytes=";
  if (!header.starts_with(kUnit)) return std::nullopt;
  std::vector<XorbByteRange> ranges;
  for (const std::string_view piece : split(header.substr(kUnit.size()), ',')) {
    const std::string spec = trim(piece);
    const std::size_t dash = spec.find('-');
    if (dash == std::string::npos) return std::nullopt;
    const std::string first_text = spec.substr(0, dash);
    const std::string last_text = spec.substr(dash + 1);
    if (first_text.empty()) {
      const auto suffix = parse_number(last_text);
      if (!suffix || *suffix == 0) return std::nullopt;
      if (size == 0) return std::vector<XorbByteRange>{};
      ranges.push_back({size - std::min(*suffix, size), size - 1});
      continue;
    }
    const auto first = parse_number(first_text);
    const auto last = last_text.empty() ? std::optional<std::uint64_t>(UINT64_MAX) : parse_number(last_text);
    if (!first || !last || *last < *first) return std::nullopt;
    if (*first >= size) return std::vector<XorbByteRange>{};
    ranges.push_back({*first, std::min(*last, size - 1)});
  }
  return ranges;
}

// Chunk ranges [start, end) of one xorb, merged where they overlap or touch, in ascending order.
std::vector<std::pair<std::uint32_t, std::uint32_t>> merged_chunk_ranges(
    std::vector<std::pair<std::uint32_t, std::uint32_t>> ranges) {
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<std::uint32_t, std::uint32_t>> merged;
  for (const auto& range : ranges) {
    if (!merged.empty() && range.first <= merged.back().second) {
      merged.back().second = std::max(merged.back().second, range.second);
    } else {
      merged.push_back(range);
    }
  }
  return merged;
}

void write_range(JsonWriter& json, std::uint64_t start, std::uint64_t end) {
  json.StartObject();
  json.Key("start");
  json.Uint64(start);
  json.Key("end");
  json.Uint64(end);
  json.EndObject();
}

// A record of the same length that decodes to the chunk's bytes with one bit changed; nullopt when no
// such record is found (a compressed chunk whose every changed form compresses to another length).
std::optional<std::vector<std::byte>> decodable_corruption(std::span<const std::byte> record) {
  const xet::ChunkHeader header = xet::read_chunk_header(record);
  std::vector<std::byte> decoded;
  xet::decode_chunk(record, decoded);
  if (decoded.empty()) return std::nullopt;
  // Try positions spread over the chunk: one inside a run of literals keeps an LZ4 frame's length.
  constexpr std::size_t kAttempts = 257;
  for (std::size_t attempt = 0; attempt < kAttempts; ++attempt) {
    std::vector<std::byte> changed = decoded;
    changed[(attempt * decoded.size()) / kAttempts] ^= std::byte{0x01};
    std::vector<std::byte> encoded = xet::encode_chunk(changed, static_cast<xet::CompressionScheme>(header.scheme));
    if (encoded.size() == record.size()) return encoded;
  }
  return std::nullopt;
}

// The same record made undecodable: a compressed payload loses its LZ4 frame magic; a stored (raw) one is
// relabelled as an LZ4 frame, which its bytes are not.
std::vector<std::byte> undecodable_corruption(std::span<const std::byte> record) {
  std::vector<std::byte> damaged(record.begin(), record.end());
  const xet::ChunkHeader header = xet::read_chunk_header(record);
  if (header.scheme == static_cast<std::uint8_t>(xet::CompressionScheme::None)) {
    damaged[4] = static_cast<std::byte>(xet::CompressionScheme::Lz4);
  } else {
    damaged[xet::kChunkHeaderSize] ^= std::byte{0xff};
  }
  return damaged;
}

HttpResponse text_error(int status, const std::string& message) {
  return hub_error(status, "", message);
}

}  // namespace

XetService::XetService(const HubStore& store, HubFaults& faults, std::string api_endpoint, std::string cas_endpoint,
                       std::string gateway_endpoint)
    : store_(store),
      faults_(faults),
      api_endpoint_(std::move(api_endpoint)),
      cas_endpoint_(std::move(cas_endpoint)),
      gateway_endpoint_(std::move(gateway_endpoint)) {
  std::random_device random;
  for (int i = 0; i < 32; ++i) secret_.push_back(static_cast<char>(random() & 0xff));
}

std::string XetService::hmac_hex(const std::string& message) const {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (HMAC(EVP_sha256(), secret_.data(), static_cast<int>(secret_.size()),
           reinterpret_cast<const unsigned char*>(message.data()), message.size(), digest, &length) == nullptr) {
    throw std::runtime_error("test hub: HMAC-SHA256 failed");
  }
  return hex_of(std::span<const unsigned char>(digest, length));
}

// ---- Resolve and token --------------------------------------------------------------------------------

HttpResponse XetService::resolve(HttpResponse response, const HttpRequest& request, const Repository& repository,
                                 const Commit& commit, const StoredFile& file,
                                 const HubFaults::Settings& settings) const {
  const XetFile& xet_file = *file.xet;
  const std::string token_route = "/api/models/" + repository.id + "/xet-read-token/" + commit.id;
  const std::string reconstruction_url = cas_endpoint_ + "/v1/reconstructions/" + xet_file.hex;
  response.add_header("X-Linked-Size", std::to_string(file.size()));
  response.add_header("X-Linked-Etag", quoted(file.lfs_sha256));
  switch (settings.xet_headers) {
    case XetHeaders::link:
      response.add_header("X-Xet-Hash", xet_file.hex);
      response.add_header("Link", "<" + api_endpoint_ + token_route + ">; rel=\"xet-auth\", <" + reconstruction_url +
                                      ">; rel=\"xet-reconstruction-info\"");
      break;
    case XetHeaders::refresh_route:
      response.add_header("X-Xet-Hash", xet_file.hex);
      response.add_header("X-Xet-Refresh-Route", token_route);
      break;
    case XetHeaders::none: break;
  }

  // Today's hub answers a client that asks for Xet file info (the npm client does, with Range: bytes=0-0)
  // with that info instead of a redirect.
  if (settings.xet_headers == XetHeaders::link &&
      request.header("accept").find(kXetFileInfoType) != std::string::npos) {
    rapidjson::StringBuffer buffer;
    JsonWriter json(buffer);
    json.StartObject();
    json.Key("hash");
    write_string(json, xet_file.hex);
    json.Key("refreshUrl");
    write_string(json, api_endpoint_ + token_route);
    json.Key("reconstructionUrl");
    write_string(json, reconstruction_url);
    json.Key("etag");
    write_string(json, file.lfs_sha256);
    json.Key("size");
    json.Uint64(file.size());
    json.EndObject();
    response.status = 200;
    response.add_header("Content-Type", std::string(kXetFileInfoType));
    response.set_body(buffer.GetString());
    return response;
  }

  const std::string location = api_endpoint_ + "/xet/files/" + xet_file.hex;
  response.status = 302;
  response.add_header("Location", location);
  response.add_header("Content-Type", "text/plain; charset=utf-8");
  response.set_body("Found. Redirecting to " + location);
  return response;
}

std::string XetService::access_token(const std::string& repo_id, std::int64_t expires) const {
  const std::string payload = "xet_" + std::to_string(expires) + "_" +
                              hex_of(std::span(reinterpret_cast<const unsigned char*>(repo_id.data()), repo_id.size()));
  return payload + "_" + hmac_hex("token\n" + payload);
}

std::optional<std::string> XetService::token_repository(const std::string& token) const {
  const std::vector<std::string_view> parts = split(token, '_');
  if (parts.size() != 4 || parts[0] != "xet") return std::nullopt;
  const std::string payload = token.substr(0, token.rfind('_'));
  const std::string expected = hmac_hex("token\n" + payload);
  if (parts[3].size() != expected.size() || CRYPTO_memcmp(parts[3].data(), expected.data(), expected.size()) != 0) {
    return std::nullopt;
  }
  const auto expires = parse_number(parts[1]);
  if (!expires || static_cast<std::int64_t>(*expires) <= unix_now()) return std::nullopt;
  return unhex(parts[2]);
}

HttpResponse XetService::read_token(const Repository& repository, const HubFaults::Settings& settings) const {
  if (settings.xet_token_refused) return text_error(401, "Invalid credentials for the Xet read token");
  const std::int64_t expires = unix_now() + settings.xet_token_lifetime.count();
  const std::string token = access_token(repository.id, expires);
  if (settings.xet_token_in_headers) {
    HttpResponse response;
    response.add_header("X-Xet-Access-Token", token);
    response.add_header("X-Xet-Token-Expiration", std::to_string(expires));
    response.add_header("X-Xet-Cas-Url", cas_endpoint_);
    response.set_body(std::string());
    return response;
  }
  rapidjson::StringBuffer buffer;
  JsonWriter json(buffer);
  json.StartObject();
  json.Key("accessToken");
  write_string(json, token);
  json.Key("exp");
  json.Int64(expires);
  json.Key("casUrl");
  write_string(json, cas_endpoint_);
  json.EndObject();
  return json_response(200, buffer.GetString());
}

bool XetService::repository_holds(const std::string& repo_id, const std::string& file_hex) const {
  const std::shared_ptr<const Repository> repository = store_.repository(repo_id);
  if (repository == nullptr) return false;
  for (const auto& [id, commit] : repository->commits) {
    for (const auto& [path, file] : commit->files) {
      if (file.xet != nullptr && file.xet->hex == file_hex) return true;
    }
  }
  return false;
}

// ---- CAS ----------------------------------------------------------------------------------------------

std::string XetService::signed_url(const XetXorb& xorb, const std::vector<XorbByteRange>& ranges,
                                   const HubFaults::Settings& settings) const {
  const std::int64_t expires = unix_now() + (settings.xet_urls_expired ? -kUrlLifetime.count() : kUrlLifetime.count());
  const std::string granted = ranges_text(ranges);
  const std::string serial = std::to_string(serial_.fetch_add(1));
  const std::string signature =
      hmac_hex("xorb\n" + xorb.hex + "\n" + granted + "\n" + std::to_string(expires) + "\n" + serial);
  return gateway_endpoint_ + "/xorbs/" + xorb.hex + "?granted=" + granted + "&expires=" + std::to_string(expires) +
         "&n=" + serial + "&sig=" + signature;
}

HttpResponse XetService::reconstruction(const HttpRequest& request, const RequestTarget& target,
                                        const HubFaults::Settings& settings) const {
  const std::vector<std::string>& segments = target.segments;
  const bool v2 = segments[0] == "v2";
  const std::string authorization = request.header("authorization");
  constexpr std::string_view kBearer = "Bearer ";
  const std::optional<std::string> repo_id =
      authorization.starts_with(kBearer) ? token_repository(authorization.substr(kBearer.size())) : std::nullopt;
  if (!repo_id) return text_error(401, "A valid, unexpired Xet access token is required (Authorization: Bearer)");
  if (v2 && settings.xet_v2_disabled) return text_error(501, "Not Implemented: this CAS serves /v1/reconstructions");
  if (faults_.take_xet_unpinned()) return text_error(404, "File not yet pinned; retry later");

  const std::string& hash = segments[2];
  const std::shared_ptr<const XetFile> file = store_.xet().file(hash);
  if (file == nullptr || !repository_holds(*repo_id, hash)) return text_error(404, "File not found: " + hash);

  std::optional<std::pair<std::uint64_t, std::uint64_t>> range;
  if (const std::string header = request.header("range"); !header.empty()) {
    // One closed or open-ended range over the file's bytes, as clients send.
    constexpr std::string_view kUnit = "bytes=";
    const std::string spec = header.starts_with(kUnit) ? header.substr(kUnit.size()) : std::string();
    const std::size_t dash = spec.find('-');
    const auto first = dash == std::string::npos ? std::nullopt : parse_number(spec.substr(0, dash));
    const auto last = dash == std::string::npos || dash + 1 == spec.size() ? std::optional<std::uint64_t>(UINT64_MAX)
                                                                           : parse_number(spec.substr(dash + 1));
    if (!first || !last || *last < *first) return text_error(400, "Malformed Range header: " + header);
    range.emplace(*first, *last);
  }
  std::optional<XetReconstruction> plan = plan_reconstruction(*file, range);
  if (!plan) {
    HttpResponse response = text_error(416, "Range starts at or past the end of the file");
    response.add_header("Content-Range", "bytes */" + std::to_string(file->size));
    return response;
  }
  if (settings.xet_short_term && *settings.xet_short_term < plan->terms.size()) {
    plan->terms[*settings.xet_short_term].unpacked_length += 1;
  }

  // The chunk ranges each xorb must serve, merged, keyed (and so emitted) by xorb hash in sorted order.
  std::map<std::string, std::pair<std::shared_ptr<const XetXorb>, std::vector<std::pair<std::uint32_t, std::uint32_t>>>>
      needed;
  for (const XetTerm& term : plan->terms) {
    auto& entry = needed[term.xorb->hex];
    entry.first = term.xorb;
    entry.second.emplace_back(term.first_chunk, term.end_chunk);
  }

  rapidjson::StringBuffer buffer;
  JsonWriter json(buffer);
  json.StartObject();
  json.Key("offset_into_first_range");
  json.Uint64(plan->offset_into_first_range);
  json.Key("terms");
  json.StartArray();
  for (const XetTerm& term : plan->terms) {
    json.StartObject();
    json.Key("hash");
    write_string(json, term.xorb->hex);
    json.Key("unpacked_length");
    json.Uint64(term.unpacked_length);
    json.Key("range");
    write_range(json, term.first_chunk, term.end_chunk);
    json.EndObject();
  }
  json.EndArray();
  json.Key(v2 ? "xorbs" : "fetch_info");
  json.StartObject();
  for (auto& [hex, entry] : needed) {
    const XetXorb& xorb = *entry.first;
    const auto chunk_ranges = merged_chunk_ranges(std::move(entry.second));
    write_string(json, hex);
    json.StartArray();
    if (!v2) {  // V1: one URL per merged chunk range
      for (const auto& [start, end] : chunk_ranges) {
        const XorbByteRange bytes = record_byte_range(xorb, start, end);
        json.StartObject();
        json.Key("range");
        write_range(json, start, end);
        json.Key("url");
        write_string(json, signed_url(xorb, {bytes}, settings));
        json.Key("url_range");
        write_range(json, bytes.first, bytes.last);
        json.EndObject();
      }
    } else {  // V2: one multi-range URL per xorb, split only when it would grow too long
      std::size_t next = 0;
      while (next < chunk_ranges.size()) {
        std::vector<XorbByteRange> granted;
        std::size_t end = next;
        std::size_t length = gateway_endpoint_.size() + 200;  // path, expiry, serial and signature
        for (; end < chunk_ranges.size(); ++end) {
          const XorbByteRange bytes = record_byte_range(xorb, chunk_ranges[end].first, chunk_ranges[end].second);
          const std::size_t added = ranges_text({bytes}).size() + 1;
          if (end > next && length + added > kMaxUrlLength) break;
          length += added;
          granted.push_back(bytes);
        }
        json.StartObject();
        json.Key("url");
        write_string(json, signed_url(xorb, granted, settings));
        json.Key("ranges");
        json.StartArray();
        for (std::size_t i = next; i < end; ++i) {
          json.StartObject();
          json.Key("chunks");
          write_range(json, chunk_ranges[i].first, chunk_ranges[i].second);
          json.Key("bytes");
          write_range(json, granted[i - next].first, granted[i - next].last);
          json.EndObject();
        }
        json.EndArray();
        json.EndObject();
        next = end;
      }
    }
    json.EndArray();
  }
  json.EndObject();
  json.EndObject();
  return json_response(200, buffer.GetString());
}

// ---- Gateway ------------------------------------------------------------------------------------------

std::shared_ptr<const std::string> XetService::served_bytes(const XetXorb& xorb,
                                                            const HubFaults::Settings& settings) const {
  if (!settings.xet_corrupt_chunk) return xorb.bytes;
  const XetCorruption& corruption = *settings.xet_corrupt_chunk;
  const std::shared_ptr<const XetFile> file = store_.xet().file(corruption.file_hash);
  if (file == nullptr) return xorb.bytes;
  // Find the record that holds the file's chunk.
  std::size_t chunks_before = 0;
  for (const XetTerm& term : file->terms) {
    const std::size_t count = term.end_chunk - term.first_chunk;
    if (corruption.chunk_index < chunks_before + count) {
      if (term.xorb->hex != xorb.hex) return xorb.bytes;
      const std::size_t index = term.first_chunk + (corruption.chunk_index - chunks_before);
      const std::size_t offset = xorb.record_offsets[index];
      const auto record = std::as_bytes(std::span(xorb.bytes->data(), xorb.bytes->size()))
                              .subspan(offset, xorb.record_offsets[index + 1] - offset);
      std::optional<std::vector<std::byte>> damaged =
          corruption.decodable ? decodable_corruption(record) : undecodable_corruption(record);
      if (!damaged) return nullptr;
      auto copy = std::make_shared<std::string>(*xorb.bytes);
      std::copy(damaged->begin(), damaged->end(), reinterpret_cast<std::byte*>(copy->data()) + offset);
      return copy;
    }
    chunks_before += count;
  }
  return xorb.bytes;
}

HttpResponse XetService::xorb(const HttpRequest& request, const RequestTarget& target,
                              const HubFaults::Settings& settings) const {
  const std::string& hex = target.segments[1];
  // A presigned URL is its own credential; storage refuses a second one, so a client that leaks its hub or
  // CAS token to the gateway is caught.
  if (!request.header("authorization").empty()) {
    return text_error(400, "Only one auth mechanism allowed: the signed URL, not an Authorization header");
  }
  const std::string granted_text = target.query_value("granted");
  const std::string expires_text = target.query_value("expires");
  const std::string serial = target.query_value("n");
  const std::string signature = target.query_value("sig");
  const std::string expected = hmac_hex("xorb\n" + hex + "\n" + granted_text + "\n" + expires_text + "\n" + serial);
  if (signature.size() != expected.size() || CRYPTO_memcmp(signature.data(), expected.data(), expected.size()) != 0) {
    return text_error(403, "The request signature does not match");
  }
  const auto expires = parse_number(expires_text);
  const auto url_serial = parse_number(serial);
  if (!expires || !url_serial || static_cast<std::int64_t>(*expires) <= unix_now() ||
      (settings.xet_urls_expire_after &&
       !faults_.use_xet_url(*url_serial, serial_.load(), *settings.xet_urls_expire_after))) {
    return text_error(403, "Request has expired");
  }
  std::vector<XorbByteRange> granted;
  for (const std::string_view piece : split(granted_text, ',')) {
    const auto range = parse_closed_range(piece);
    if (!range) return text_error(403, "Malformed grant");
    granted.push_back(*range);
  }
  const std::shared_ptr<const XetXorb> xorb = store_.xet().xorb(hex);
  if (xorb == nullptr) return text_error(404, "No such xorb: " + hex);
  const std::uint64_t size = xorb->bytes->size();

  std::vector<XorbByteRange> ranges;
  if (const std::string header = request.header("range"); header.empty()) {
    ranges.push_back({0, size - 1});
  } else {
    auto parsed = parse_ranges(header, size);
    if (!parsed) return text_error(400, "Malformed Range header: " + header);
    if (parsed->empty()) {
      HttpResponse response = text_error(416, "Range not satisfiable");
      response.add_header("Content-Range", "bytes */" + std::to_string(size));
      return response;
    }
    ranges = std::move(*parsed);
  }
  for (const XorbByteRange& range : ranges) {
    const bool inside = std::any_of(granted.begin(), granted.end(), [&](const XorbByteRange& grant) {
      return grant.first <= range.first && range.last <= grant.last;
    });
    if (!inside) {
      return text_error(403, "Range " + std::to_string(range.first) + "-" + std::to_string(range.last) +
                                 " is not inside the signed ranges " + granted_text);
    }
  }

  const std::shared_ptr<const std::string> bytes = served_bytes(*xorb, settings);
  if (bytes == nullptr) {
    return text_error(500, "test hub: no same-length corruption of that chunk decodes; use decodable = false");
  }
  HttpResponse response;
  response.status = 206;
  response.add_header("Accept-Ranges", "bytes");
  response.add_header("ETag", quoted(hex));
  if (request.header("range").empty()) {
    response.status = 200;
    response.add_header("Content-Type", "application/octet-stream");
    response.set_body(bytes, 0, size);
  } else if (ranges.size() == 1) {
    response.add_header("Content-Type", "application/octet-stream");
    response.add_header("Content-Range", "bytes " + std::to_string(ranges[0].first) + "-" +
                                             std::to_string(ranges[0].last) + "/" + std::to_string(size));
    response.set_body(bytes, ranges[0].first, ranges[0].last - ranges[0].first + 1);
  } else {
    if (settings.xet_multipart_reversed) std::reverse(ranges.begin(), ranges.end());
    const std::string boundary = "xet-test-hub-" + signature.substr(0, 24);
    std::string body;
    for (const XorbByteRange& range : ranges) {
      body += "--" + boundary + "\r\nContent-Type: application/octet-stream\r\nContent-Range: bytes " +
              std::to_string(range.first) + "-" + std::to_string(range.last) + "/" + std::to_string(size) + "\r\n\r\n";
      body.append(*bytes, range.first, range.last - range.first + 1);
      body += "\r\n";
    }
    body += "--" + boundary + "--\r\n";
    response.add_header("Content-Type", "multipart/byteranges; boundary=" + boundary);
    response.set_body(std::move(body));
  }
  response.close_after = settings.truncate_at;
  response.stall_after = settings.stall_at;
  return response;
}

// ---- Plain path ---------------------------------------------------------------------------------------

HttpResponse XetService::plain_file(const RequestTarget& target, const HubFaults::Settings& settings) const {
  const std::string& hex = target.segments[2];
  const std::shared_ptr<const XetFile> file = store_.xet().file(hex);
  if (file == nullptr) return text_error(404, "File not found: " + hex);
  HttpResponse response;
  try {
    // Rebuilt from the xorbs on every request, as the CAS does when it serves a file itself.
    response.set_body(reconstruct(*file));
  } catch (const std::exception& failure) {
    return text_error(500, std::string("test hub: cannot reconstruct ") + hex + ": " + failure.what());
  }
  // Range is ignored, as OpenWeights ignores it here: always the whole file.
  response.status = 200;
  response.add_header("Content-Type", "application/octet-stream");
  response.add_header("ETag", quoted(hex));
  response.add_header("X-Xet-Hash", hex);
  response.close_after = settings.truncate_at;
  response.stall_after = settings.stall_at;
  return response;
}

}  // namespace testing_support::hub
