#pragma once

#include <stdexcept>
#include <string>

namespace engine::tokenizer {

// A tokenizer file that is malformed, or asks for something this library does not implement. The
// message names the file and the field (e.g. "tokenizer.json: pre_tokenizer.pretokenizers[1].type: ...").
class TokenizerError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace engine::tokenizer
