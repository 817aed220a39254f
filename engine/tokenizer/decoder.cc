#include "engine/tokenizer/decoder.h"

#include "engine/tokenizer/unicode.h"

namespace engine::tokenizer {

namespace {

void replace_all(std::string& text, std::string_view pattern, std::string_view content) {
  std::size_t pos = text.find(pattern);
  if (pos == std::string::npos) return;
  std::string out;
  std::size_t copied = 0;
  for (; pos != std::string::npos; pos = text.find(pattern, pos)) {
    out.append(text, copied, pos - copied);
    out += content;
    pos += pattern.size();
    copied = pos;
  }
  out.append(text, copied, std::string::npos);
  text = std::move(out);
}

// Metaspace: the replacement character becomes a space, or nothing in the first token of the text.
void metaspace(std::string& text, std::string_view replacement, bool drop) {
  replace_all(text, replacement, drop ? "" : " ");
}

// The bytes of the leading `content` characters Strip removes (at most `count` of them), and of the trailing
// ones (at most `count`, never overlapping the leading ones).
std::size_t leading(std::string_view text, std::string_view content, std::size_t count) {
  std::size_t cut = 0;
  for (std::size_t i = 0; i < count && text.substr(cut).starts_with(content); ++i) cut += content.size();
  return cut;
}
std::size_t trailing(std::string_view text, std::string_view content, std::size_t count, std::size_t floor) {
  std::size_t end = text.size();
  for (std::size_t i = 0;
       i < count && end >= floor + content.size() && text.substr(floor, end - floor).ends_with(content); ++i) {
    end -= content.size();
  }
  return text.size() - end;
}

void byte_fallback(std::vector<std::string>& tokens) {
  std::vector<std::string> out;
  out.reserve(tokens.size());
  std::string bytes;
  std::size_t count = 0;
  const auto flush = [&] {
    if (count == 0) return;
    if (unicode::is_valid_utf8(bytes)) {
      out.push_back(std::move(bytes));
    } else {
      // The reference does not decode the run lossily: every byte of an invalid run is one U+FFFD.
      out.insert(out.end(), count, "\xEF\xBF\xBD");
    }
    bytes.clear();
    count = 0;
  };
  for (auto& token : tokens) {
    if (const auto byte = DecoderChain::byte_token(token)) {
      bytes += static_cast<char>(*byte);
      ++count;
      continue;
    }
    flush();
    out.push_back(std::move(token));
  }
  flush();
  tokens = std::move(out);
}

}  // namespace

std::optional<unsigned char> DecoderChain::byte_token(std::string_view token) {
  if (token.size() != 6 || !token.starts_with("<0x") || token.back() != '>') return std::nullopt;
  // u8::from_str_radix(.., 16) on the two characters: hex digits, or a '+' and one digit.
  const auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  const int low = digit(token[4]);
  if (low < 0) return std::nullopt;
  if (token[3] == '+') return static_cast<unsigned char>(low);
  const int high = digit(token[3]);
  if (high < 0) return std::nullopt;
  return static_cast<unsigned char>(high * 16 + low);
}

void DecoderChain::apply(const DecoderStep& step, std::vector<std::string>& tokens, bool at_start, bool fused) {
  switch (step.kind) {
    case DecoderStep::Kind::Replace:
      for (auto& token : tokens) replace_all(token, step.pattern, step.content);
      break;
    case DecoderStep::Kind::ByteFallback: byte_fallback(tokens); break;
    case DecoderStep::Kind::Fuse: {
      std::string all;
      for (const auto& token : tokens) all += token;
      tokens.assign(1, std::move(all));
      break;
    }
    case DecoderStep::Kind::Strip:
      for (auto& token : tokens) {
        // After Fuse the one token is the whole text, whose start is here only at the start.
        const std::size_t head = fused && !at_start ? 0 : leading(token, step.content, step.start);
        const std::size_t tail = trailing(token, step.content, step.stop, head);
        token = token.substr(head, token.size() - head - tail);
      }
      break;
    case DecoderStep::Kind::Metaspace:
      for (std::size_t i = 0; i < tokens.size(); ++i) {
        metaspace(tokens[i], step.pattern, step.prepend && at_start && i == 0);
      }
      break;
  }
}

std::string DecoderChain::decode(std::vector<std::string> tokens, bool at_start) const {
  bool fused = false;
  for (const auto& step : steps_) {
    fused = fused || step.kind == DecoderStep::Kind::Fuse;
    apply(step, tokens, at_start, fused);
  }
  std::string text;
  for (const auto& token : tokens) text += token;
  return text;
}

bool DecoderChain::settled(const std::vector<std::string>& tokens, bool at_start) const {
  if (tokens.empty()) return true;
  std::vector<std::string> current = tokens;
  bool fused = false;
  for (const auto& step : steps_) {
    fused = fused || step.kind == DecoderStep::Kind::Fuse;
    // A run of byte tokens may go on, and what it decodes to depends on all of it.
    if (step.kind == DecoderStep::Kind::ByteFallback && byte_token(current.back())) return false;
    if (step.kind == DecoderStep::Kind::Strip && fused) {
      const std::string& text = current.front();
      // The stripped start is final once a character other than `content`, or `start` of them, are in.
      if (at_start && step.start > 0) {
        const std::size_t head = leading(text, step.content, step.start);
        if (head == text.size() && head < step.start * step.content.size()) return false;
      }
      // Trailing `content` characters are lost if the text ends there, kept if more follows.
      if (step.stop > 0 && text.ends_with(step.content)) return false;
    }
    apply(step, current, at_start, fused);
  }
  return true;
}

std::string DecoderChain::piece(std::string_view token) const {
  std::string text(token);
  bool fused = false;
  for (const auto& step : steps_) {
    switch (step.kind) {
      case DecoderStep::Kind::Replace: replace_all(text, step.pattern, step.content); break;
      case DecoderStep::Kind::ByteFallback:
        if (const auto byte = byte_token(text)) return std::string(1, static_cast<char>(*byte));
        break;
      case DecoderStep::Kind::Fuse: fused = true; break;
      case DecoderStep::Kind::Strip:
        if (!fused) {
          const std::size_t head = leading(text, step.content, step.start);
          text = text.substr(head, text.size() - head - trailing(text, step.content, step.stop, head));
        }
        break;
      case DecoderStep::Kind::Metaspace: metaspace(text, step.pattern, false); break;
    }
  }
  return text;
}

}  // namespace engine::tokenizer
