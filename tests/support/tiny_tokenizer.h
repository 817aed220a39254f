#pragma once

// Small hand-written tokenizer.json files for the tokenizer's unit tests.
#include <string>
#include <utility>
#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/unicode.h"

namespace tiny {

// A JSON string literal for `text`.
inline std::string json_quote(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      static const char* hex = "0123456789abcdef";
      out += "\\u00";
      out += hex[(c >> 4) & 0xF];
      out += hex[c & 0xF];
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// The parts of a tokenizer.json; the defaults make a GPT-2 style byte-level BPE tokenizer whose vocabulary
// is the 256 byte-level characters (id = byte value) followed by the result of each merge, in order.
struct Spec {
  std::vector<std::pair<std::string, std::string>> merges;  // in byte-level spelling ("Ġ" for a space)
  std::string normalizer = "null";
  std::string pre_tokenizer =
      R"({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": true})";
  std::string post_processor = "null";
  std::string decoder = R"({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": true})";
  std::string added_tokens = "[]";
  std::string model_options;       // extra members of "model", e.g. R"("ignore_merges": true,)"
  std::vector<std::string> extra;  // extra vocabulary entries, after the merges
  bool merges_as_pairs = false;
};

inline std::string json(const Spec& spec) {
  const auto& alphabet = engine::tokenizer::unicode::byte_level_alphabet();
  std::vector<std::string> vocab(alphabet.byte_to_utf8.begin(), alphabet.byte_to_utf8.end());
  for (const auto& [left, right] : spec.merges) vocab.push_back(left + right);
  for (const auto& token : spec.extra) vocab.push_back(token);
  std::string out =
      R"({"version": "1.0", "truncation": null, "padding": null, "added_tokens": )" + spec.added_tokens +
      R"(, "normalizer": )" + spec.normalizer + R"(, "pre_tokenizer": )" + spec.pre_tokenizer +
      R"(, "post_processor": )" + spec.post_processor + R"(, "decoder": )" + spec.decoder +
      R"(, "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": "", )" +
      R"("end_of_word_suffix": "", "fuse_unk": false, "byte_fallback": false, )" + spec.model_options +
      R"( "vocab": {)";
  for (std::size_t id = 0; id < vocab.size(); ++id) {
    out += (id ? ", " : "") + json_quote(vocab[id]) + ": " + std::to_string(id);
  }
  out += R"(}, "merges": [)";
  for (std::size_t i = 0; i < spec.merges.size(); ++i) {
    const auto& [left, right] = spec.merges[i];
    out += i ? ", " : "";
    out +=
        spec.merges_as_pairs ? "[" + json_quote(left) + ", " + json_quote(right) + "]" : json_quote(left + " " + right);
  }
  return out + "]}}";
}

inline engine::tokenizer::Tokenizer load(const Spec& spec) {
  return engine::tokenizer::Tokenizer::from_json(json(spec), "tiny.json");
}

// The id the tiny vocabulary gives a token written in plain text ("he", " w"): byte-level spelled.
inline std::int32_t id(const engine::tokenizer::Tokenizer& tokenizer, const std::string& text) {
  return tokenizer.token_to_id(engine::tokenizer::unicode::bytes_to_byte_level(text)).value_or(-1);
}

inline std::vector<std::int32_t> ids(const engine::tokenizer::Tokenizer& tokenizer,
                                     const std::vector<std::string>& tokens) {
  std::vector<std::int32_t> out;
  for (const auto& token : tokens) out.push_back(id(tokenizer, token));
  return out;
}

// Byte-level spelling of a merge written in plain text.
inline std::pair<std::string, std::string> merge(const std::string& left, const std::string& right) {
  return {engine::tokenizer::unicode::bytes_to_byte_level(left),
          engine::tokenizer::unicode::bytes_to_byte_level(right)};
}

}  // namespace tiny
