#pragma once

#include <stdexcept>
#include <string>

namespace engine::format {

// Every reader in this folder reports a malformed or unreadable file with this exception. The message
// names the file, the field and the numbers that disagree.
class FormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace engine::format
