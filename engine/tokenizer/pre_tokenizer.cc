#include "engine/tokenizer/pre_tokenizer.h"

#include <algorithm>

namespace engine::tokenizer {

namespace {

struct Span {
  std::size_t start, end;
  bool is_match;
};

// The reference's Pattern::find_matches: the whole piece as contiguous spans, each flagged as a match or not.
void find_spans(const Regex& pattern, std::string_view text, bool invert, std::vector<Span>& spans) {
  spans.clear();
  std::size_t previous = 0;
  pattern.for_each_match(text, [&](std::size_t start, std::size_t end) {
    if (previous != start) spans.push_back({previous, start, invert});
    spans.push_back({start, end, !invert});
    previous = end;
  });
  if (previous != text.size()) spans.push_back({previous, text.size(), invert});
}

// Applies a SplitBehavior to the spans, as the reference's NormalizedString::split does.
void apply_behavior(SplitBehavior behavior, std::vector<Span>& spans) {
  std::vector<Span> out;
  out.reserve(spans.size());
  switch (behavior) {
    case SplitBehavior::Isolated: return;
    case SplitBehavior::Removed:
      for (const auto& span : spans) {
        if (!span.is_match) out.push_back(span);
      }
      break;
    case SplitBehavior::MergedWithPrevious: {
      bool previous_match = false;
      for (const auto& span : spans) {
        if (span.is_match && !previous_match && !out.empty()) {
          out.back().end = span.end;
        } else {
          out.push_back(span);
        }
        previous_match = span.is_match;
      }
      break;
    }
    case SplitBehavior::MergedWithNext: {
      bool previous_match = false;
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->is_match && !previous_match && !out.empty()) {
          out.back().start = it->start;
        } else {
          out.push_back(*it);
        }
        previous_match = it->is_match;
      }
      std::reverse(out.begin(), out.end());
      break;
    }
    case SplitBehavior::Contiguous: {
      bool previous_match = false;
      for (const auto& span : spans) {
        if (span.is_match == previous_match && !out.empty()) {
          out.back().end = span.end;
        } else {
          out.push_back(span);
        }
        previous_match = span.is_match;
      }
      break;
    }
  }
  spans = std::move(out);
}

}  // namespace

void SplitPreTokenizer::pre_tokenize(Pieces& pieces) const {
  thread_local std::vector<Span> spans;
  pieces.scratch.clear();
  for (const std::string_view piece : pieces.views) {
    find_spans(pattern_, piece, invert_, spans);
    apply_behavior(behavior_, spans);
    for (const auto& span : spans) {
      if (span.end > span.start) pieces.scratch.push_back(piece.substr(span.start, span.end - span.start));
    }
  }
  pieces.views.swap(pieces.scratch);
}

ByteLevelPreTokenizer::ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex)
    : add_prefix_space_(add_prefix_space) {
  if (use_regex) {
    split_ = std::make_unique<SplitPreTokenizer>(Regex::from_oniguruma(kGpt2Pattern), SplitBehavior::Isolated, false);
  }
}

void ByteLevelPreTokenizer::pre_tokenize(Pieces& pieces) const {
  if (add_prefix_space_) {
    for (auto& view : pieces.views) {
      if (!view.empty() && view.front() != ' ') {
        pieces.storage.push_back(" " + std::string(view));
        view = pieces.storage.back();
      }
    }
  }
  if (split_) split_->pre_tokenize(pieces);
}

MetaspacePreTokenizer::MetaspacePreTokenizer(std::string replacement, PrependScheme prepend, bool split)
    : replacement_(std::move(replacement)), prepend_(prepend) {
  if (split) {
    split_ = std::make_unique<SplitPreTokenizer>(Regex::literal(replacement_), SplitBehavior::MergedWithNext, false);
  }
}

void MetaspacePreTokenizer::pre_tokenize(Pieces& pieces) const {
  for (auto& view : pieces.views) {
    std::string text;
    text.reserve(view.size() + replacement_.size());
    const bool first = view.data() == pieces.origin;
    for (const char c : view) {
      if (c == ' ') {
        text += replacement_;
      } else {
        text += c;
      }
    }
    const bool prepend = prepend_ == PrependScheme::Always || (prepend_ == PrependScheme::First && first);
    if (prepend && !text.empty() && !text.starts_with(replacement_)) text.insert(0, replacement_);
    pieces.storage.push_back(std::move(text));
    view = pieces.storage.back();
    if (first) pieces.origin = view.data();
  }
  if (split_) split_->pre_tokenize(pieces);
}

std::unique_ptr<PreTokenizer> make_digits_pre_tokenizer(bool individual_digits) {
  // \p{N} matches one character at a time, so each digit is its own match and Contiguous joins runs.
  return std::make_unique<SplitPreTokenizer>(Regex::from_oniguruma(R"(\p{N})"),
                                             individual_digits ? SplitBehavior::Isolated : SplitBehavior::Contiguous,
                                             false);
}

void SequencePreTokenizer::pre_tokenize(Pieces& pieces) const {
  for (const auto& step : steps_) step->pre_tokenize(pieces);
}

}  // namespace engine::tokenizer
