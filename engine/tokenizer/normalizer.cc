#include "engine/tokenizer/normalizer.h"

namespace engine::tokenizer {

void UnicodeNormalizer::normalize(std::string& text) const {
  std::string out;
  if (unicode::normalize(text, form_, out)) text = std::move(out);
}

void LowercaseNormalizer::normalize(std::string& text) const {
  text = unicode::to_lowercase(text);
}

void StripNormalizer::normalize(std::string& text) const {
  std::size_t begin = 0, end = text.size();
  if (left_) {
    while (begin < end) {
      std::size_t next = begin;
      if (!unicode::is_white_space(unicode::next_char(text, next))) break;
      begin = next;
    }
  }
  if (right_) {
    while (end > begin) {
      std::size_t start = end - 1;
      while (start > begin && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
      std::size_t pos = start;
      if (!unicode::is_white_space(unicode::next_char(text, pos))) break;
      end = start;
    }
  }
  text = text.substr(begin, end - begin);
}

void StripAccentsNormalizer::normalize(std::string& text) const {
  std::string out;
  out.reserve(text.size());
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t start = pos;
    if (!unicode::is_mark(unicode::next_char(text, pos))) out.append(text, start, pos - start);
  }
  text = std::move(out);
}

void ReplaceNormalizer::normalize(std::string& text) const {
  std::string out;
  std::size_t copied = 0;
  bool matched = false;
  pattern_.for_each_match(text, [&](std::size_t start, std::size_t end) {
    out.append(text, copied, start - copied);
    out += content_;
    copied = end;
    matched = true;
  });
  if (!matched) return;
  out.append(text, copied, std::string::npos);
  text = std::move(out);
}

void PrependNormalizer::normalize(std::string& text) const {
  if (!text.empty()) text.insert(0, prefix_);
}

void SequenceNormalizer::normalize(std::string& text) const {
  for (const auto& step : steps_) step->normalize(text);
}

bool SequenceNormalizer::leaves_alone(std::string_view text) const {
  for (const auto& step : steps_) {
    if (!step->leaves_alone(text)) return false;
  }
  return true;
}

}  // namespace engine::tokenizer
