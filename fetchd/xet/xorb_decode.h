#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "fetchd/transfer/http_client.h"
#include "fetchd/transfer/partial_file.h"
#include "fetchd/xet/reconstruction_plan.h"

namespace fetchd::xet {

// Takes the store's 206 answer for `unit` (one range, or `multipart/byteranges`), decodes the chunks of
// every range and writes each term the unit serves at its file offset in `file`. Throws
// FetchError(Integrity) when the answer lacks a range, a range does not hold exactly the chunk records the
// reconstruction promised, or a term decodes to another length; `name` is the repository path, for
// messages.
void write_unit_answer(const FetchUnit& unit, const transfer::HttpHeaders& headers, std::span<const std::byte> body,
                       const transfer::PartialFile& file, const std::string& name);

}  // namespace fetchd::xet
