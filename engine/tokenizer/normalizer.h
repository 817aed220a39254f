#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tokenizer/regex.h"
#include "engine/tokenizer/unicode.h"

namespace engine::tokenizer {

// A normalizer of the reference pipeline. It rewrites one piece of text (the text between added tokens)
// in place; offsets are not tracked because the engine only needs ids.
class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void normalize(std::string& text) const = 0;
  // True when normalize() would certainly leave `text` as it is, so the caller can skip copying it.
  virtual bool leaves_alone(std::string_view /*text*/) const { return false; }
};

class UnicodeNormalizer final : public Normalizer {
 public:
  explicit UnicodeNormalizer(unicode::NormalForm form) : form_(form) {}
  void normalize(std::string& text) const override;
  bool leaves_alone(std::string_view text) const override { return unicode::quick_check(text, form_); }

 private:
  unicode::NormalForm form_;
};

class LowercaseNormalizer final : public Normalizer {
 public:
  void normalize(std::string& text) const override;
};

// Removes whitespace on the left and/or right.
class StripNormalizer final : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string& text) const override;

 private:
  bool left_, right_;
};

// Removes combining marks (general category M), as the reference's StripAccents (meant to follow NFD).
class StripAccentsNormalizer final : public Normalizer {
 public:
  void normalize(std::string& text) const override;
};

// Replaces every match of a pattern (a literal or an Oniguruma regex) with `content`.
class ReplaceNormalizer final : public Normalizer {
 public:
  ReplaceNormalizer(Regex pattern, std::string content) : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void normalize(std::string& text) const override;

 private:
  Regex pattern_;
  std::string content_;
};

// Puts `prefix` in front of non-empty text.
class PrependNormalizer final : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  void normalize(std::string& text) const override;

 private:
  std::string prefix_;
};

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> steps) : steps_(std::move(steps)) {}
  void normalize(std::string& text) const override;
  bool leaves_alone(std::string_view text) const override;

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

}  // namespace engine::tokenizer
