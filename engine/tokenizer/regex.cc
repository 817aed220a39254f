#include "engine/tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cctype>
#include <new>
#include <optional>
#include <stdexcept>

#include "engine/tokenizer/unicode.h"

namespace engine::tokenizer {

namespace {

// Oniguruma's classes, spelled for PCRE2. Bare sets go inside [...]; the *_CLASS forms stand alone.
constexpr std::string_view kSpaceSet = "\\p{White_Space}";
constexpr std::string_view kNotSpaceSet = "\\P{White_Space}";
constexpr std::string_view kHexSet = "0-9a-fA-F";
// Word characters inside a class ([\w], [[:word:]]).
constexpr std::string_view kWordSet = "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}";
// A bare \w (and \b) also takes the Latin-1 digits-like ¹ ² ³ ¼ ½ ¾, an Oniguruma quirk the reference shows.
constexpr std::string_view kBareWordSet = "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{B2}\\x{B3}\\x{B9}\\x{BC}-\\x{BE}";

// Oniguruma's POSIX brackets on Unicode text, as sets; the ones missing here are refused.
struct PosixClass {
  std::string_view name;
  std::string_view members;
};
constexpr PosixClass kPosixClasses[] = {
    {"alpha", "\\p{Alphabetic}"},  {"alnum", "\\p{Alphabetic}\\p{Nd}"},
    {"digit", "\\p{Nd}"},          {"lower", "\\p{Lowercase}"},
    {"upper", "\\p{Uppercase}"},   {"punct", "\\p{P}\\p{S}"},  // Oniguruma counts symbols as punctuation
    {"space", "\\p{White_Space}"}, {"blank", "\\p{Zs}\\t"},
    {"xdigit", kHexSet},           {"word", kWordSet},
    {"ascii", "\\x00-\\x7F"},
};

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  if (pcre2_get_error_message(code, buffer, sizeof buffer) < 0) return "PCRE2 error " + std::to_string(code);
  return reinterpret_cast<const char*>(buffer);
}

bool is_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

class Translator {
 public:
  explicit Translator(std::string_view pattern) : p_(pattern) {}

  std::string run() {
    while (i_ < p_.size()) {
      const char c = p_[i_];
      if (c == '\\') {
        escape(false);
      } else if (c == '[') {
        char_class();
      } else if (c == '(' && p_.substr(i_, 2) == "(?") {
        group_options();
      } else if (c == '{') {
        interval();
      } else {
        out_ += c;
        ++i_;
      }
    }
    return std::move(out_);
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::invalid_argument(what + " at offset " + std::to_string(i_) + " of the pattern");
  }

  // Translates the escape at i_ (a backslash); `in_class` when inside [...].
  void escape(bool in_class) {
    if (i_ + 1 >= p_.size()) fail("trailing backslash");
    const char e = p_[i_ + 1];
    const auto set = [&](std::string_view members, bool negated) {
      if (in_class) {
        if (negated) fail(std::string("\\") + e + " inside a character class is not supported");
        out_ += members;
      } else {
        out_ += negated ? "[^" : "[";
        out_ += members;
        out_ += ']';
      }
      i_ += 2;
    };
    switch (e) {
      case 's': return set(kSpaceSet, false);
      case 'S': return set(kNotSpaceSet, false);
      case 'h': return set(kHexSet, false);
      case 'H': return set(kHexSet, true);
      case 'w': return set(in_class ? kWordSet : kBareWordSet, false);
      case 'W': return set(kBareWordSet, true);
      case 'b':
      case 'B': {
        if (in_class) {  // \b in a class is a backspace in both dialects
          out_ += "\\b";
          i_ += 2;
          return;
        }
        // A boundary by Oniguruma's word characters, not PCRE2's.
        const std::string w = "[" + std::string(kBareWordSet) + "]";
        out_ += e == 'b' ? "(?:(?<=" + w + ")(?!" + w + ")|(?<!" + w + ")(?=" + w + "))"
                         : "(?:(?<=" + w + ")(?=" + w + ")|(?<!" + w + ")(?!" + w + "))";
        i_ += 2;
        return;
      }
      case 'u': {  // \uHHHH
        if (i_ + 6 > p_.size() || !is_hex(p_[i_ + 2]) || !is_hex(p_[i_ + 3]) || !is_hex(p_[i_ + 4]) ||
            !is_hex(p_[i_ + 5])) {
          fail("\\u needs four hex digits");
        }
        out_ += "\\x{" + std::string(p_.substr(i_ + 2, 4)) + "}";
        i_ += 6;
        return;
      }
      case 'O': fail("\\O is not supported");
      case 'p':
      case 'P':
      case 'x':
      case 'k':
      case 'g': {
        // Escapes with a braced or bracketed argument are the same in both dialects; copy them whole.
        out_ += p_.substr(i_, 2);
        i_ += 2;
        if (i_ < p_.size() && (p_[i_] == '{' || p_[i_] == '<' || p_[i_] == '\'')) {
          const char close = p_[i_] == '{' ? '}' : p_[i_] == '<' ? '>' : '\'';
          const auto end = p_.find(close, i_);
          if (end == std::string_view::npos) fail("unterminated escape argument");
          out_ += p_.substr(i_, end + 1 - i_);
          i_ = end + 1;
        }
        return;
      }
      default: {
        // Everything else (\d \n \t \A \z \1 \. ...) means the same; copy the whole character escaped.
        const std::size_t length = unicode::char_length(static_cast<unsigned char>(e));
        out_ += p_.substr(i_, 1 + length);
        i_ += 1 + length;
        return;
      }
    }
  }

  // "{n,m}" and friends. Oniguruma reads {,n} as {0,n} (PCRE2 10.42 would take it literally), and in
  // Ruby syntax a + or ? after an interval repeats it again rather than making it possessive or lazy.
  void interval() {
    std::size_t j = i_ + 1;
    bool digits = false, comma = false;
    while (j < p_.size() && (std::isdigit(static_cast<unsigned char>(p_[j])) || (p_[j] == ',' && !comma))) {
      comma = comma || p_[j] == ',';
      digits = digits || p_[j] != ',';
      ++j;
    }
    if (j >= p_.size() || p_[j] != '}' || !digits) {  // not an interval: a literal brace
      out_ += "\\{";
      ++i_;
      return;
    }
    std::string body(p_.substr(i_ + 1, j - i_ - 1));
    if (body.front() == ',') body.insert(0, "0");
    if (j + 1 < p_.size() && (p_[j + 1] == '+' || (p_[j + 1] == '?' && !comma))) {
      fail("a quantifier after an interval ({n}? or {n,m}+) is not supported");
    }
    out_ += "{" + body + "}";
    i_ = j + 1;
  }

  void char_class() {
    out_ += '[';
    ++i_;
    if (i_ < p_.size() && p_[i_] == '^') {
      out_ += '^';
      ++i_;
    }
    if (i_ < p_.size() && p_[i_] == ']') {  // a leading ] is a literal
      out_ += "\\]";
      ++i_;
    }
    while (true) {
      if (i_ >= p_.size()) fail("unterminated character class");
      const char c = p_[i_];
      if (c == ']') {
        out_ += ']';
        ++i_;
        return;
      }
      if (c == '\\') {
        escape(true);
      } else if (c == '[') {
        // Only POSIX brackets ([:alpha:]) nest; they become Oniguruma's Unicode sets.
        const auto end = p_.find(":]", i_);
        if (p_.substr(i_, 2) != "[:" || end == std::string_view::npos)
          fail("nested character classes are not supported");
        const std::string_view name = p_.substr(i_ + 2, end - i_ - 2);
        bool known = false;
        for (const auto& posix : kPosixClasses) {
          if (posix.name == name) {
            out_ += posix.members;
            known = true;
          }
        }
        if (!known) fail("the POSIX bracket [:" + std::string(name) + ":] is not supported");
        i_ = end + 2;
      } else if (c == '&' && p_.substr(i_, 2) == "&&") {
        fail("character class intersection (&&) is not supported");
      } else {
        out_ += c;
        ++i_;
      }
    }
  }

  // "(?" starts a group kind or inline options; Oniguruma's (?m) is PCRE2's (?s).
  void group_options() {
    std::size_t j = i_ + 2;
    std::string flags;
    while (j < p_.size() && (p_[j] == 'i' || p_[j] == 'm' || p_[j] == 'x' || p_[j] == '-')) {
      flags += p_[j] == 'm' ? 's' : p_[j];
      ++j;
    }
    if (flags.empty() || j >= p_.size() || (p_[j] != ':' && p_[j] != ')')) {
      if (!flags.empty() || (j < p_.size() && std::isalpha(static_cast<unsigned char>(p_[j])) && p_[j] != 'P')) {
        fail("unsupported group options");
      }
      out_ += "(?";  // a group kind: (?: (?= (?! (?<= (?<! (?> (?<name> ...
      i_ += 2;
      return;
    }
    out_ += "(?" + flags;
    i_ = j;
  }

  std::string_view p_;
  std::size_t i_ = 0;
  std::string out_;
};

// Match data, match context and JIT stack for one thread, shared by every Regex that thread runs.
class ThreadMatchState {
 public:
  ThreadMatchState()
      : data_(pcre2_match_data_create(1, nullptr)),
        context_(pcre2_match_context_create(nullptr)),
        jit_stack_(pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr)) {
    if (data_ == nullptr || context_ == nullptr || jit_stack_ == nullptr) throw std::bad_alloc();
    pcre2_jit_stack_assign(context_, nullptr, jit_stack_);
  }
  ~ThreadMatchState() {
    pcre2_jit_stack_free(jit_stack_);
    pcre2_match_context_free(context_);
    pcre2_match_data_free(data_);
  }
  ThreadMatchState(const ThreadMatchState&) = delete;
  ThreadMatchState& operator=(const ThreadMatchState&) = delete;

  pcre2_match_data* data() const { return data_; }
  pcre2_match_context* context() const { return context_; }

 private:
  pcre2_match_data* data_;
  pcre2_match_context* context_;
  pcre2_jit_stack* jit_stack_;
};

ThreadMatchState& thread_state() {
  thread_local ThreadMatchState state;
  return state;
}

}  // namespace

struct Regex::Code {
  pcre2_code* code = nullptr;
  ~Code() { pcre2_code_free(code); }
};

std::string translate_oniguruma_pattern(std::string_view pattern) {
  return Translator(pattern).run();
}

Regex::Regex(std::string pattern, std::unique_ptr<Code> code) : pattern_(std::move(pattern)), code_(std::move(code)) {}
Regex::Regex(Regex&&) noexcept = default;
Regex& Regex::operator=(Regex&&) noexcept = default;
Regex::~Regex() = default;

Regex Regex::from_oniguruma(std::string_view pattern) {
  return from_pcre2(translate_oniguruma_pattern(pattern));
}

Regex Regex::from_pcre2(std::string_view pattern) {
  std::unique_ptr<pcre2_compile_context, decltype(&pcre2_compile_context_free)> context(
      pcre2_compile_context_create(nullptr), &pcre2_compile_context_free);
  if (!context) throw std::bad_alloc();
  // Oniguruma's newline is \n alone, for ^, $ and the dot; its ^ matches after a final \n too.
  pcre2_set_newline(context.get(), PCRE2_NEWLINE_LF);
  int error = 0;
  PCRE2_SIZE offset = 0;
  auto code = std::make_unique<Code>();
  code->code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                    PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE | PCRE2_ALT_CIRCUMFLEX, &error, &offset, context.get());
  if (code->code == nullptr) {
    throw std::invalid_argument(pcre2_message(error) + " at offset " + std::to_string(offset) + " of \"" +
                                std::string(pattern) + "\"");
  }
  // Without JIT (an unsupported CPU) the interpreter gives the same answers, only slower.
  pcre2_jit_compile(code->code, PCRE2_JIT_COMPLETE);
  return Regex(std::string(pattern), std::move(code));
}

Regex Regex::literal(std::string_view literal) {
  std::string pattern;
  for (const char c : literal) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x80 && !std::isalnum(u)) pattern += '\\';
    pattern += c;
  }
  return from_pcre2(pattern);
}

bool Regex::find(std::string_view text, std::size_t start, std::size_t& match_start, std::size_t& match_end,
                 bool anchored) const {
  auto& state = thread_state();
  // The caller validated the text once; PCRE2 would otherwise re-check all of it on every call.
  std::uint32_t options = PCRE2_NO_UTF_CHECK | (anchored ? PCRE2_ANCHORED : 0);
  int rc = pcre2_match(code_->code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), start, options,
                       state.data(), state.context());
  if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
    // Deep backtracking on a huge input: the interpreter keeps its backtracking on the heap.
    options |= PCRE2_NO_JIT;
    rc = pcre2_match(code_->code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), start, options, state.data(),
                     state.context());
  }
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) throw std::runtime_error("regex match failed: " + pcre2_message(rc) + " (pattern \"" + pattern_ + "\")");
  const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state.data());
  match_start = ovector[0];
  match_end = ovector[1];
  return true;
}

void Regex::for_each_match(std::string_view text, const std::function<void(std::size_t, std::size_t)>& on_match) const {
  std::size_t search_from = 0;
  std::optional<std::size_t> last_match_end;
  while (search_from <= text.size()) {
    std::size_t start, end;
    if (!find(text, search_from, start, end, false)) return;
    if (start == end && last_match_end == end) {
      // An empty match where the previous one ended: step over one character and look again.
      search_from +=
          search_from < text.size() ? unicode::char_length(static_cast<unsigned char>(text[search_from])) : 1;
      continue;
    }
    search_from = end;
    last_match_end = end;
    on_match(start, end);
  }
}

bool Regex::matches_at(std::string_view text, std::size_t pos) const {
  std::size_t start, end;
  return find(text, pos, start, end, true);
}

}  // namespace engine::tokenizer
