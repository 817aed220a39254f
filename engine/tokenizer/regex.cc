#include "engine/tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <cctype>
#include <iterator>
#include <new>
#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

#include "engine/tokenizer/unicode.h"

namespace engine::tokenizer {

namespace {

// Oniguruma's classes as PCRE2 set items, to go inside [...].
constexpr std::string_view kSpaceSet = "\\p{White_Space}";
constexpr std::string_view kNotSpaceSet = "\\P{White_Space}";
constexpr std::string_view kHexSet = "0-9a-fA-F";
// Word characters inside a class ([\w], [[:word:]]).
constexpr std::string_view kWordSet = "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}";
// A bare \w (and \b) also takes the Latin-1 digits-like ¹ ² ³ ¼ ½ ¾, an Oniguruma quirk the reference shows.
constexpr std::string_view kBareWordSet = "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{B2}\\x{B3}\\x{B9}\\x{BC}-\\x{BE}";

// Characters that Unicode 15.0 to 16.0 added to a property, which Debian 12's PCRE2 (Unicode 14) does not
// know yet but the reference's Oniguruma does. Found by asking the reference (tokenizers 0.23) for every
// code point and comparing with PCRE2; the conformance test checks the union against it again.
struct PropertyAdditions {
  std::string_view property;
  std::string_view members;
};
constexpr PropertyAdditions kUnicode16Additions[] = {
    {"L",
     "\\x{1C89}-\\x{1C8A}\\x{A7CB}-\\x{A7CD}\\x{A7DA}-\\x{A7DC}\\x{105C0}-\\x{105F3}\\x{10D4A}-\\x{10D65}\\x{10D6F}-"
     "\\x{10D85}\\x{10EC2}-\\x{10EC4}\\x{1123F}-\\x{11240}\\x{11380}-\\x{11389}\\x{1138B}\\x{1138E}\\x{11390}-\\x{"
     "113B5}\\x{113B7}\\x{113D1}\\x{113D3}\\x{11BC0}-\\x{11BE0}\\x{11F02}\\x{11F04}-\\x{11F10}\\x{11F12}-\\x{11F33}\\x{"
     "1342F}\\x{13441}-\\x{13446}\\x{13460}-\\x{143FA}\\x{16100}-\\x{1611D}\\x{16D40}-\\x{16D6C}\\x{18CFF}\\x{1B132}"
     "\\x{1B155}\\x{1DF25}-\\x{1DF2A}\\x{1E030}-\\x{1E06D}\\x{1E4D0}-\\x{1E4EB}\\x{1E5D0}-\\x{1E5ED}\\x{1E5F0}\\x{"
     "2B739}\\x{2EBF0}-\\x{2EE5D}\\x{31350}-\\x{323AF}"},
    {"Lu", "\\x{1C89}\\x{A7CB}-\\x{A7CC}\\x{A7DA}\\x{A7DC}\\x{10D50}-\\x{10D65}"},
    {"Ll", "\\x{1C8A}\\x{A7CD}\\x{A7DB}\\x{10D70}-\\x{10D85}\\x{1DF25}-\\x{1DF2A}"},
    {"Lm", "\\x{10D4E}\\x{10D6F}\\x{16D40}-\\x{16D42}\\x{16D6B}-\\x{16D6C}\\x{1E030}-\\x{1E06D}\\x{1E4EB}"},
    {"Lo",
     "\\x{105C0}-\\x{105F3}\\x{10D4A}-\\x{10D4D}\\x{10D4F}\\x{10EC2}-\\x{10EC4}\\x{1123F}-\\x{11240}\\x{11380}-\\x{"
     "11389}\\x{1138B}\\x{1138E}\\x{11390}-\\x{113B5}\\x{113B7}\\x{113D1}\\x{113D3}\\x{11BC0}-\\x{11BE0}\\x{11F02}\\x{"
     "11F04}-\\x{11F10}\\x{11F12}-\\x{11F33}\\x{1342F}\\x{13441}-\\x{13446}\\x{13460}-\\x{143FA}\\x{16100}-\\x{1611D}"
     "\\x{16D43}-\\x{16D6A}\\x{18CFF}\\x{1B132}\\x{1B155}\\x{1E4D0}-\\x{1E4EA}\\x{1E5D0}-\\x{1E5ED}\\x{1E5F0}\\x{2B739}"
     "\\x{2EBF0}-\\x{2EE5D}\\x{31350}-\\x{323AF}"},
    {"N",
     "\\x{10D40}-\\x{10D49}\\x{116D0}-\\x{116E3}\\x{11BF0}-\\x{11BF9}\\x{11F50}-\\x{11F59}\\x{16130}-\\x{16139}\\x{"
     "16D70}-\\x{16D79}\\x{1CCF0}-\\x{1CCF9}\\x{1D2C0}-\\x{1D2D3}\\x{1E4F0}-\\x{1E4F9}\\x{1E5F1}-\\x{1E5FA}"},
    {"Nd",
     "\\x{10D40}-\\x{10D49}\\x{116D0}-\\x{116E3}\\x{11BF0}-\\x{11BF9}\\x{11F50}-\\x{11F59}\\x{16130}-\\x{16139}\\x{"
     "16D70}-\\x{16D79}\\x{1CCF0}-\\x{1CCF9}\\x{1E4F0}-\\x{1E4F9}\\x{1E5F1}-\\x{1E5FA}"},
    {"No", "\\x{1D2C0}-\\x{1D2D3}"},
    {"M",
     "\\x{897}\\x{CF3}\\x{ECE}\\x{10D69}-\\x{10D6D}\\x{10EFC}-\\x{10EFF}\\x{11241}\\x{113B8}-\\x{113C0}\\x{113C2}\\x{"
     "113C5}\\x{113C7}-\\x{113CA}\\x{113CC}-\\x{113D0}\\x{113D2}\\x{113E1}-\\x{113E2}\\x{11F00}-\\x{11F01}\\x{11F03}"
     "\\x{11F34}-\\x{11F3A}\\x{11F3E}-\\x{11F42}\\x{11F5A}\\x{13440}\\x{13447}-\\x{13455}\\x{1611E}-\\x{1612F}\\x{"
     "1E08F}\\x{1E4EC}-\\x{1E4EF}\\x{1E5EE}-\\x{1E5EF}"},
    {"Mn",
     "\\x{897}\\x{ECE}\\x{10D69}-\\x{10D6D}\\x{10EFC}-\\x{10EFF}\\x{11241}\\x{113BB}-\\x{113C0}\\x{113CE}\\x{113D0}\\x{"
     "113D2}\\x{113E1}-\\x{113E2}\\x{11F00}-\\x{11F01}\\x{11F36}-\\x{11F3A}\\x{11F40}\\x{11F42}\\x{11F5A}\\x{13440}\\x{"
     "13447}-\\x{13455}\\x{1611E}-\\x{16129}\\x{1612D}-\\x{1612F}\\x{1E08F}\\x{1E4EC}-\\x{1E4EF}\\x{1E5EE}-\\x{1E5EF}"},
    {"Mc",
     "\\x{CF3}\\x{113B8}-\\x{113BA}\\x{113C2}\\x{113C5}\\x{113C7}-\\x{113CA}\\x{113CC}-\\x{113CD}\\x{113CF}\\x{1171E}"
     "\\x{11F03}\\x{11F34}-\\x{11F35}\\x{11F3E}-\\x{11F3F}\\x{11F41}\\x{1612A}-\\x{1612C}"},
    {"P",
     "\\x{1B4E}-\\x{1B4F}\\x{1B7F}\\x{10D6E}\\x{113D4}-\\x{113D5}\\x{113D7}-\\x{113D8}\\x{11B00}-\\x{11B09}\\x{11BE1}"
     "\\x{11F43}-\\x{11F4F}\\x{16D6D}-\\x{16D6F}\\x{1E5FF}"},
    {"Pd", "\\x{10D6E}"},
    {"Po",
     "\\x{1B4E}-\\x{1B4F}\\x{1B7F}\\x{113D4}-\\x{113D5}\\x{113D7}-\\x{113D8}\\x{11B00}-\\x{11B09}\\x{11BE1}\\x{11F43}-"
     "\\x{11F4F}\\x{16D6D}-\\x{16D6F}\\x{1E5FF}"},
    {"S",
     "\\x{2427}-\\x{2429}\\x{2FFC}-\\x{2FFF}\\x{31E4}-\\x{31E5}\\x{31EF}\\x{10D8E}-\\x{10D8F}\\x{1CC00}-\\x{1CCEF}\\x{"
     "1CD00}-\\x{1CEB3}\\x{1F6DC}\\x{1F774}-\\x{1F776}\\x{1F77B}-\\x{1F77F}\\x{1F7D9}\\x{1F8B2}-\\x{1F8BB}\\x{1F8C0}-"
     "\\x{1F8C1}\\x{1FA75}-\\x{1FA77}\\x{1FA87}-\\x{1FA89}\\x{1FA8F}\\x{1FAAD}-\\x{1FAAF}\\x{1FABB}-\\x{1FABF}\\x{"
     "1FAC6}\\x{1FACE}-\\x{1FACF}\\x{1FADA}-\\x{1FADC}\\x{1FADF}\\x{1FAE8}-\\x{1FAE9}\\x{1FAF7}-\\x{1FAF8}\\x{1FBCB}-"
     "\\x{1FBEF}"},
    {"Sm", "\\x{10D8E}-\\x{10D8F}"},
    {"So",
     "\\x{2427}-\\x{2429}\\x{2FFC}-\\x{2FFF}\\x{31E4}-\\x{31E5}\\x{31EF}\\x{1CC00}-\\x{1CCEF}\\x{1CD00}-\\x{1CEB3}\\x{"
     "1F6DC}\\x{1F774}-\\x{1F776}\\x{1F77B}-\\x{1F77F}\\x{1F7D9}\\x{1F8B2}-\\x{1F8BB}\\x{1F8C0}-\\x{1F8C1}\\x{1FA75}-"
     "\\x{1FA77}\\x{1FA87}-\\x{1FA89}\\x{1FA8F}\\x{1FAAD}-\\x{1FAAF}\\x{1FABB}-\\x{1FABF}\\x{1FAC6}\\x{1FACE}-\\x{"
     "1FACF}\\x{1FADA}-\\x{1FADC}\\x{1FADF}\\x{1FAE8}-\\x{1FAE9}\\x{1FAF7}-\\x{1FAF8}\\x{1FBCB}-\\x{1FBEF}"},
    {"Cf", "\\x{13439}-\\x{1343F}"},
    {"Alphabetic",
     "\\x{363}-\\x{36F}\\x{897}\\x{C04}\\x{CF3}\\x{F82}-\\x{F83}\\x{1C89}-\\x{1C8A}\\x{1DD3}-\\x{1DE6}\\x{A7CB}-\\x{"
     "A7CD}\\x{A7DA}-\\x{A7DC}\\x{105C0}-\\x{105F3}\\x{10D4A}-\\x{10D65}\\x{10D69}\\x{10D6F}-\\x{10D85}\\x{10EC2}-\\x{"
     "10EC4}\\x{10EFC}\\x{11080}-\\x{11081}\\x{1123F}-\\x{11241}\\x{11380}-\\x{11389}\\x{1138B}\\x{1138E}\\x{11390}-"
     "\\x{113B5}\\x{113B7}-\\x{113C0}\\x{113C2}\\x{113C5}\\x{113C7}-\\x{113CA}\\x{113CC}-\\x{113CD}\\x{113D1}\\x{113D3}"
     "\\x{11BC0}-\\x{11BE0}\\x{11F00}-\\x{11F10}\\x{11F12}-\\x{11F3A}\\x{11F3E}-\\x{11F40}\\x{1342F}\\x{13441}-\\x{"
     "13446}\\x{13460}-\\x{143FA}\\x{16100}-\\x{1612E}\\x{16D40}-\\x{16D6C}\\x{18CFF}\\x{1B132}\\x{1B155}\\x{1DF25}-"
     "\\x{1DF2A}\\x{1E030}-\\x{1E06D}\\x{1E08F}\\x{1E4D0}-\\x{1E4EB}\\x{1E5D0}-\\x{1E5ED}\\x{1E5F0}\\x{2B739}\\x{2EBF0}"
     "-\\x{2EE5D}\\x{31350}-\\x{323AF}"},
    {"Lowercase",
     "\\x{10FC}\\x{1C8A}\\x{A7CD}\\x{A7DB}\\x{A7F2}-\\x{A7F4}\\x{AB69}\\x{10D70}-\\x{10D85}\\x{1DF25}-\\x{1DF2A}\\x{"
     "1E030}-\\x{1E06D}"},
    {"Uppercase", "\\x{1C89}\\x{A7CB}-\\x{A7CC}\\x{A7DA}\\x{A7DC}\\x{10D50}-\\x{10D65}"},
    // Scripts (the Script property) that tokenizer patterns name.
    {"sc:Han", "\\x{2B739}\\x{2EBF0}-\\x{2EE5D}\\x{31350}-\\x{323AF}"},
    {"sc:Hiragana", "\\x{1B132}"},
    {"sc:Katakana", "\\x{1B155}"},
    {"sc:Latin", "\\x{A7CB}-\\x{A7CD}\\x{A7DA}-\\x{A7DC}\\x{1DF25}-\\x{1DF2A}"},
    {"sc:Cyrillic", "\\x{1C89}-\\x{1C8A}\\x{1E030}-\\x{1E06D}\\x{1E08F}"},
    {"sc:Arabic", "\\x{897}\\x{10EC2}-\\x{10EC4}\\x{10EFC}-\\x{10EFF}"},
    {"sc:Devanagari", "\\x{11B00}-\\x{11B09}"},
};

// General categories and binary properties by their loose names (lowercase, no spaces, underscores or
// hyphens), as Oniguruma accepts them, with PCRE2's name. Other names are scripts.
struct PropertyName {
  std::string_view loose;
  std::string_view pcre2;
};
constexpr PropertyName kPropertyNames[] = {
    {"l", "L"},
    {"letter", "L"},
    {"lc", "L&"},
    {"casedletter", "L&"},
    {"lu", "Lu"},
    {"uppercaseletter", "Lu"},
    {"ll", "Ll"},
    {"lowercaseletter", "Ll"},
    {"lt", "Lt"},
    {"titlecaseletter", "Lt"},
    {"lm", "Lm"},
    {"modifierletter", "Lm"},
    {"lo", "Lo"},
    {"otherletter", "Lo"},
    {"m", "M"},
    {"mark", "M"},
    {"combiningmark", "M"},
    {"mn", "Mn"},
    {"nonspacingmark", "Mn"},
    {"mc", "Mc"},
    {"spacingmark", "Mc"},
    {"me", "Me"},
    {"enclosingmark", "Me"},
    {"n", "N"},
    {"number", "N"},
    {"nd", "Nd"},
    {"decimalnumber", "Nd"},
    {"nl", "Nl"},
    {"letternumber", "Nl"},
    {"no", "No"},
    {"othernumber", "No"},
    {"p", "P"},
    {"punctuation", "P"},
    {"pc", "Pc"},
    {"connectorpunctuation", "Pc"},
    {"pd", "Pd"},
    {"dashpunctuation", "Pd"},
    {"ps", "Ps"},
    {"openpunctuation", "Ps"},
    {"pe", "Pe"},
    {"closepunctuation", "Pe"},
    {"pi", "Pi"},
    {"initialpunctuation", "Pi"},
    {"pf", "Pf"},
    {"finalpunctuation", "Pf"},
    {"po", "Po"},
    {"otherpunctuation", "Po"},
    {"s", "S"},
    {"symbol", "S"},
    {"sm", "Sm"},
    {"mathsymbol", "Sm"},
    {"sc", "Sc"},
    {"currencysymbol", "Sc"},
    {"sk", "Sk"},
    {"modifiersymbol", "Sk"},
    {"so", "So"},
    {"othersymbol", "So"},
    {"z", "Z"},
    {"separator", "Z"},
    {"zs", "Zs"},
    {"spaceseparator", "Zs"},
    {"zl", "Zl"},
    {"lineseparator", "Zl"},
    {"zp", "Zp"},
    {"paragraphseparator", "Zp"},
    {"c", "C"},
    {"other", "C"},
    {"cc", "Cc"},
    {"control", "Cc"},
    {"cf", "Cf"},
    {"format", "Cf"},
    {"cn", "Cn"},
    {"unassigned", "Cn"},
    {"co", "Co"},
    {"privateuse", "Co"},
    {"cs", "Cs"},
    {"surrogate", "Cs"},
    {"any", "Any"},
    {"alphabetic", "Alphabetic"},
    {"alpha", "Alphabetic"},
    {"lowercase", "Lowercase"},
    {"lower", "Lowercase"},
    {"uppercase", "Uppercase"},
    {"upper", "Uppercase"},
    {"whitespace", "White_Space"},
    {"wspace", "White_Space"},
    {"space", "White_Space"},
    {"joincontrol", "Join_Control"},
    {"joinc", "Join_Control"},
};

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

// A set written with \\p{X} items, each followed by the characters Unicode 15 and 16 added to X (when
// `additions` is not null, which also collects what was added).
std::string with_additions(std::string_view set, std::vector<std::string_view>* additions) {
  if (additions == nullptr) return std::string(set);
  std::string out;
  std::size_t pos = 0;
  while (pos < set.size()) {
    const auto start = set.find("\\p{", pos);
    if (start == std::string_view::npos) {
      out += set.substr(pos);
      break;
    }
    const auto end = set.find('}', start);
    out += set.substr(pos, end + 1 - pos);
    const std::string_view name = set.substr(start + 3, end - start - 3);
    for (const auto& addition : kUnicode16Additions) {
      if (addition.property == name) {
        out += addition.members;
        additions->push_back(addition.members);
      }
    }
    pos = end + 1;
  }
  return out;
}

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
  // With `additions` null the translation leaves Unicode 15 and 16 additions out (a faster pattern for
  // text without such characters); otherwise it collects the sets of added characters it used.
  Translator(std::string_view pattern, std::vector<std::string_view>* additions) : p_(pattern), additions_(additions) {}

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
    const auto set = [&](std::string_view set_members, bool negated) {
      const std::string members = with_additions(set_members, additions_);
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
      case 'd': return set("\\p{Nd}", false);
      case 'D': return set("\\p{Nd}", true);
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
        const std::string w = "[" + with_additions(kBareWordSet, additions_) + "]";
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
      case 'P': return property(in_class);
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

  // \p{Name}, \P{Name}, \p{^Name}, \pL: general categories and binary properties with the characters
  // Unicode 15 and 16 added, scripts by Script (Oniguruma) rather than Script_Extensions (PCRE2's default).
  void property(bool in_class) {
    bool negated = p_[i_ + 1] == 'P';
    std::string name;
    if (i_ + 2 < p_.size() && p_[i_ + 2] == '{') {
      const auto end = p_.find('}', i_ + 3);
      if (end == std::string_view::npos) fail("unterminated \\p{...}");
      name = std::string(p_.substr(i_ + 3, end - i_ - 3));
      i_ = end + 1;
    } else if (i_ + 2 < p_.size()) {
      name = std::string(1, p_[i_ + 2]);
      i_ += 3;
    } else {
      fail("\\p needs a property name");
    }
    if (!name.empty() && name.front() == '^') {
      negated = !negated;
      name.erase(0, 1);
    }
    std::string loose;
    for (const char c : name) {
      if (c != ' ' && c != '_' && c != '-') loose += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    std::string members;
    std::string_view pcre2_name;
    for (const auto& candidate : kPropertyNames) {
      if (candidate.loose == loose) pcre2_name = candidate.pcre2;
    }
    if (pcre2_name.empty()) {
      members = "\\p{sc:" + name + "}";
      for (const auto& addition : kUnicode16Additions) {
        if (addition.property.substr(0, 3) != "sc:" || additions_ == nullptr) continue;
        std::string script;
        for (const char c : addition.property.substr(3))
          script += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (script == loose) {
          members += addition.members;
          additions_->push_back(addition.members);
        }
      }
    } else {
      members = with_additions("\\p{" + std::string(pcre2_name) + "}", additions_);
    }
    const bool single = members.find('\\', 1) == std::string::npos;  // one \p{...}, nothing added
    if (single) {
      if (negated) members[1] = 'P';
      out_ += members;
    } else if (in_class) {
      if (negated) fail("\\P{" + name + "} inside a character class is not supported");
      out_ += members;
    } else {
      out_ += (negated ? "[^" : "[") + members + "]";
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
            out_ += with_additions(posix.members, additions_);
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
  std::vector<std::string_view>* additions_;
  std::size_t i_ = 0;
  std::string out_;
};

// The code point ranges in sets of additions ("\\x{A}-\\x{B}\\x{C}..."), sorted and merged.
std::vector<std::pair<char32_t, char32_t>> addition_ranges(const std::vector<std::string_view>& sets) {
  std::vector<std::pair<char32_t, char32_t>> ranges;
  for (const std::string_view set : sets) {
    std::size_t pos = 0;
    const auto next = [&]() {
      const auto open = set.find('{', pos);
      const auto close = set.find('}', open);
      pos = close + 1;
      return static_cast<char32_t>(std::stoul(std::string(set.substr(open + 1, close - open - 1)), nullptr, 16));
    };
    while (set.find('{', pos) != std::string_view::npos) {
      const char32_t first = next();
      const char32_t last = pos < set.size() && set[pos] == '-' ? next() : first;
      ranges.emplace_back(first, last);
    }
  }
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<char32_t, char32_t>> merged;
  for (const auto& range : ranges) {
    if (!merged.empty() && range.first <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, range.second);
    } else {
      merged.push_back(range);
    }
  }
  return merged;
}

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
  std::vector<std::string_view> additions;
  return Translator(pattern, &additions).run();
}

Regex::Regex(std::string pattern, std::unique_ptr<Code> code) : pattern_(std::move(pattern)), code_(std::move(code)) {}
Regex::Regex(Regex&&) noexcept = default;
Regex& Regex::operator=(Regex&&) noexcept = default;
Regex::~Regex() = default;

Regex Regex::from_oniguruma(std::string_view pattern) {
  std::vector<std::string_view> additions;
  Regex regex = from_pcre2(Translator(pattern, &additions).run());
  if (!additions.empty()) {
    // PCRE2 tests long lists of ranges one by one; text without any added character (nearly all text)
    // runs the same pattern without them.
    regex.plain_ = std::make_unique<Regex>(from_pcre2(Translator(pattern, nullptr).run()));
    regex.added_ = addition_ranges(additions);
  }
  return regex;
}

bool Regex::has_added_characters(std::string_view text) const {
  std::size_t pos = 0;
  while (pos < text.size()) {
    if (static_cast<unsigned char>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    const char32_t c = unicode::next_char(text, pos);
    const auto it = std::upper_bound(added_.begin(), added_.end(), c,
                                     [](char32_t value, const auto& range) { return value < range.first; });
    if (it != added_.begin() && c <= std::prev(it)->second) return true;
  }
  return false;
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
  if (plain_ && !has_added_characters(text)) return plain_->for_each_match(text, on_match);
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
