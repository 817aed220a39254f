#include "serverd/parsers/unknown_parser.h"

#include <string>

#include "base/printable.h"

namespace serverd::parsers {

std::invalid_argument unknown_parser(std::string_view kind, std::string_view name,
                                     std::span<const std::string_view> known) {
  std::string message = "unknown " + std::string(kind) + " '" + base::printable(name) + "': choose one of ";
  for (std::size_t i = 0; i < known.size(); ++i) message += (i == 0 ? "" : ", ") + std::string(known[i]);
  return std::invalid_argument(message);
}

}  // namespace serverd::parsers
