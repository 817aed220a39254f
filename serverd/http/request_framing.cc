#include "serverd/http/request_framing.h"

#include <algorithm>
#include <cctype>
#include <vector>

#include "base/printable.h"

namespace serverd::http {

namespace {

std::string lowercase_trimmed(std::string_view text) {
  const std::size_t first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  text = text.substr(first, text.find_last_not_of(" \t") - first + 1);
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::size_t count_of(std::span<const Header> fields, std::string_view name) {
  return static_cast<std::size_t>(
      std::count_if(fields.begin(), fields.end(), [&](const Header& h) { return ascii_iequals(h.name, name); }));
}

}  // namespace

bool ascii_iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

bool has_obs_fold(std::string_view data) {
  const std::size_t end = data.find("\r\n\r\n");
  const std::string_view header = data.substr(0, end == std::string_view::npos ? data.size() : end + 2);
  for (std::size_t at = header.find("\r\n"); at != std::string_view::npos; at = header.find("\r\n", at + 2)) {
    if (at + 2 < header.size() && (header[at + 2] == ' ' || header[at + 2] == '\t')) return true;
  }
  return false;
}

std::optional<FramingRefusal> framing_refusal(std::span<const Header> fields, bool http10) {
  if (count_of(fields, "host") > 1) return FramingRefusal{400, "The request has more than one Host header"};
  if (count_of(fields, "content-length") > 1) {
    return FramingRefusal{400, "The request has more than one Content-Length header"};
  }
  std::vector<std::string> codings;
  std::string written;
  for (const auto& field : fields) {
    if (!ascii_iequals(field.name, "transfer-encoding")) continue;
    const std::string_view value = field.value;
    written += (written.empty() ? "" : ", ") + field.value;
    for (std::size_t start = 0;;) {
      const std::size_t comma = value.find(',', start);
      codings.push_back(lowercase_trimmed(value.substr(start, comma - start)));
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
  }
  if (codings.empty()) return std::nullopt;
  const std::string shown = base::printable(written.substr(0, 200));
  for (const auto& coding : codings) {
    if (coding != "chunked") {
      return FramingRefusal{501, "Transfer-Encoding '" + shown +
                                     "' is not supported: send the body with Content-Length, or with "
                                     "Transfer-Encoding: chunked alone"};
    }
  }
  if (codings.size() != 1) {
    return FramingRefusal{400, "Transfer-Encoding '" + shown + "' names chunked more than once"};
  }
  // Transfer-Encoding: chunked beside Content-Length never gets here: the parser refuses it
  // (bad_content_length, bad_transfer_encoding).
  if (http10) return FramingRefusal{400, "Transfer-Encoding is not allowed in an HTTP/1.0 request"};
  return std::nullopt;
}

}  // namespace serverd::http
