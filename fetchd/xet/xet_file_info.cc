// xet_info_from_headers (declared in xet_download.h): what a resolve answer says about a Xet file.

#include <algorithm>
#include <cctype>
#include <string>

#include "fetchd/transfer/decimal.h"
#include "fetchd/xet/xet_download.h"
#include "fetchd/xet/xet_hash.h"

namespace fetchd::xet {

std::optional<XetFileInfo> xet_info_from_headers(const transfer::HttpHeaders& headers, std::string_view endpoint,
                                                 std::optional<std::uint64_t> listed_size) {
  const auto hash = headers.get("X-Xet-Hash");
  if (!hash || !parse_hex(*hash)) return std::nullopt;
  XetFileInfo info;
  info.file_hash = *hash;
  std::transform(info.file_hash.begin(), info.file_hash.end(), info.file_hash.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (auto auth = transfer::find_link(headers, "xet-auth")) {
    info.token_url = transfer::resolve_url(std::string(endpoint) + "/", *auth);
  } else if (auto route = headers.get("X-Xet-Refresh-Route")) {
    info.token_url = transfer::resolve_url(std::string(endpoint) + "/", *route);
  } else {
    return std::nullopt;
  }
  const auto linked = headers.get("X-Linked-Size");
  const auto size = linked ? transfer::parse_u64(*linked) : listed_size;
  if (!size) return std::nullopt;
  info.size = *size;
  return info;
}

}  // namespace fetchd::xet
