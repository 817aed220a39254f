#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace engine::tokenizer {

// One step of a decoder pipeline that works on token texts (the SentencePiece-style decoders; ByteLevel
// is handled apart because it works on bytes). Each step turns the list of token strings into another,
// as the reference's decode_chain does, and the decoded text is the concatenation of the final list.
struct DecoderStep {
  enum class Kind {
    Replace,       // every occurrence of `pattern` (a literal) in each token becomes `content`
    ByteFallback,  // runs of <0xNN> tokens become their bytes: one string if valid UTF-8, else U+FFFD per byte
    Fuse,          // all tokens become one
    Strip,         // up to `start` leading and `stop` trailing `content` characters removed from each token
    Metaspace,     // `pattern` (the replacement character) becomes a space; dropped in the first token if `prepend`
  };
  Kind kind;
  std::string pattern;
  std::string content;
  std::size_t start = 0, stop = 0;
  bool prepend = true;
};

// The decoder of a tokenizer.json whose decoder is a Sequence of DecoderSteps (or one of them). The loader
// checks the shape: only Strip and one-character Replace steps may follow Fuse, so that a stream can be
// cut between tokens (see settled()).
class DecoderChain {
 public:
  explicit DecoderChain(std::vector<DecoderStep> steps) : steps_(std::move(steps)) {}

  // The text of `tokens`. `at_start`: the first token is the first of the decoded sequence (some steps
  // treat the start of the text specially); otherwise the tokens continue a settled prefix.
  std::string decode(std::vector<std::string> tokens, bool at_start) const;

  // Whether `tokens` can be cut off the stream: decode(tokens ++ rest, at_start) equals
  // decode(tokens, at_start) + decode(rest, false) for every rest. False while a byte run may continue,
  // while a stripped start may still grow, or while trailing characters may still be stripped.
  bool settled(const std::vector<std::string>& tokens, bool at_start) const;

  // What one token contributes in the middle of a text, before any byte is judged as UTF-8: a byte token
  // its byte (with ByteFallback), other tokens their text through the per-token steps. Steps that only
  // act at the edges of the whole text (Strip after Fuse) are left out.
  std::string piece(std::string_view token) const;

  // The byte a <0xNN> token stands for, read as the reference reads it (two hex digits at offset 3).
  static std::optional<unsigned char> byte_token(std::string_view token);

 private:
  // One step on the token list; `fused`: a Fuse came before it.
  static void apply(const DecoderStep& step, std::vector<std::string>& tokens, bool at_start, bool fused);

  std::vector<DecoderStep> steps_;
};

}  // namespace engine::tokenizer
