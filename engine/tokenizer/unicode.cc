#include "engine/tokenizer/unicode.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>
#include <span>
#include <vector>

namespace engine::tokenizer::unicode {

char32_t next_char(std::string_view text, std::size_t& pos) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(pos);
  const std::size_t length = char_length(lead);
  char32_t c;
  switch (length) {
    case 1: c = lead; break;
    case 2: c = (char32_t{lead} & 0x1F) << 6 | (byte(pos + 1) & 0x3F); break;
    case 3: c = (char32_t{lead} & 0x0F) << 12 | (byte(pos + 1) & 0x3F) << 6 | (byte(pos + 2) & 0x3F); break;
    default:
      c = (char32_t{lead} & 0x07) << 18 | (byte(pos + 1) & 0x3F) << 12 | (byte(pos + 2) & 0x3F) << 6 |
          (byte(pos + 3) & 0x3F);
      break;
  }
  pos += length;
  return c;
}

namespace {

// The length of the well-formed character starting at `pos` (Unicode table 3-7), 0 when the bytes there
// cannot start one, or -(bytes that are a valid but incomplete prefix) when the text ends inside it.
// `bad_at` receives the length of the maximal invalid subpart when the result is 0.
int classify(std::string_view bytes, std::size_t pos, std::size_t& bad_at) {
  const auto at = [&](std::size_t i) { return static_cast<unsigned char>(bytes[i]); };
  const unsigned char lead = at(pos);
  bad_at = 1;
  if (lead < 0x80) return 1;
  std::size_t length;
  unsigned char low = 0x80, high = 0xBF;  // the range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;  // no surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;  // nothing past U+10FFFF
  } else {
    return 0;
  }
  for (std::size_t i = 1; i < length; ++i) {
    if (pos + i >= bytes.size()) return -static_cast<int>(i);
    const unsigned char b = at(pos + i);
    const bool ok = i == 1 ? (b >= low && b <= high) : (b >= 0x80 && b <= 0xBF);
    if (!ok) {
      bad_at = i;
      return 0;
    }
  }
  return static_cast<int>(length);
}

}  // namespace

bool is_valid_utf8(std::string_view text) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    // ASCII runs are the common case: test eight bytes at a time.
    while (pos + 8 <= text.size()) {
      std::uint64_t word;
      std::memcpy(&word, text.data() + pos, 8);
      if (word & 0x8080808080808080ull) break;
      pos += 8;
    }
    if (pos >= text.size()) break;
    std::size_t bad_at;
    const int length = classify(text, pos, bad_at);
    if (length <= 0) return false;
    pos += static_cast<std::size_t>(length);
  }
  return true;
}

std::size_t append_utf8_lossy(std::string_view bytes, std::string& out, bool final) {
  std::size_t pos = 0;
  while (pos < bytes.size()) {
    std::size_t bad_at;
    const int length = classify(bytes, pos, bad_at);
    if (length > 0) {
      out.append(bytes.substr(pos, static_cast<std::size_t>(length)));
      pos += static_cast<std::size_t>(length);
    } else if (length < 0) {
      // The text ends inside a character: wait for the rest unless this is the end of the stream.
      if (!final) return pos;
      append_utf8(out, kReplacement);
      pos = bytes.size();
    } else {
      append_utf8(out, kReplacement);
      pos += bad_at;
    }
  }
  return pos;
}

namespace {

struct CodeRange {
  char32_t first, last;
};

bool in_ranges(std::span<const CodeRange> ranges, char32_t c) {
  const auto it = std::upper_bound(ranges.begin(), ranges.end(), c,
                                   [](char32_t value, const CodeRange& range) { return value < range.first; });
  return it != ranges.begin() && c <= std::prev(it)->last;
}

// The reference normalizes with the unicode-normalization-alignments crate, whose tables are older
// (Unicode 10 era) than utf8proc's. It does not know the combining classes of these marks, nor the one
// canonical composition (U+11935 U+11930 = U+11938) added since, so it treats them as plain starters:
// text is normalized on either side of them and they stay as they are. Found by comparing the two on
// every code point and on mark sequences; the conformance test checks this again.
constexpr CodeRange kCanonicalUnknown[] = {
    {0x7FD, 0x7FD},     {0x898, 0x89F},     {0x8CA, 0x8D3},     {0x9FE, 0x9FE},     {0xC3C, 0xC3C},
    {0xD3B, 0xD3C},     {0xEBA, 0xEBA},     {0x1715, 0x1715},   {0x1ABF, 0x1ACE},   {0x1DF6, 0x1DFA},
    {0xA82C, 0xA82C},   {0x10D24, 0x10D27}, {0x10EAB, 0x10EAC}, {0x10EFD, 0x10EFF}, {0x10F46, 0x10F50},
    {0x10F82, 0x10F85}, {0x11070, 0x11070}, {0x1133B, 0x1133B}, {0x1145E, 0x1145E}, {0x11839, 0x1183A},
    {0x11930, 0x11930}, {0x11938, 0x11938}, {0x1193D, 0x1193E}, {0x11943, 0x11943}, {0x119E0, 0x119E0},
    {0x11A34, 0x11A34}, {0x11A47, 0x11A47}, {0x11A99, 0x11A99}, {0x11D42, 0x11D42}, {0x11D44, 0x11D45},
    {0x11D97, 0x11D97}, {0x11F41, 0x11F42}, {0x16FF0, 0x16FF1}, {0x1E08F, 0x1E08F}, {0x1E130, 0x1E136},
    {0x1E2AE, 0x1E2AE}, {0x1E2EC, 0x1E2EF}, {0x1E4EC, 0x1E4EF}};
// Compatibility decompositions added since (NFKC and NFKD only).
constexpr CodeRange kCompatibilityUnknown[] = {
    {0x32FF, 0x32FF},   {0xA7F2, 0xA7F4},   {0xAB69, 0xAB69},   {0x10781, 0x10785}, {0x10787, 0x107B0},
    {0x107B2, 0x107BA}, {0x11938, 0x11938}, {0x1E030, 0x1E06D}, {0x1F16C, 0x1F16C}, {0x1FBF0, 0x1FBF9}};
// Marks the reference's StripAccents keeps because its table predates them.
constexpr CodeRange kMarksUnknown[] = {
    {0x7FD, 0x7FD},     {0x898, 0x89F},     {0x8CA, 0x8D3},     {0x9FE, 0x9FE},     {0xAFA, 0xAFF},
    {0xB55, 0xB55},     {0xC04, 0xC04},     {0xC3C, 0xC3C},     {0xCF3, 0xCF3},     {0xD00, 0xD00},
    {0xD3B, 0xD3C},     {0xD81, 0xD81},     {0xEBA, 0xEBA},     {0xECE, 0xECE},     {0x1715, 0x1715},
    {0x180F, 0x180F},   {0x1ABF, 0x1ACE},   {0x1CF7, 0x1CF7},   {0x1DF6, 0x1DFA},   {0xA82C, 0xA82C},
    {0xA8FF, 0xA8FF},   {0x10D24, 0x10D27}, {0x10EAB, 0x10EAC}, {0x10EFD, 0x10EFF}, {0x10F46, 0x10F50},
    {0x10F82, 0x10F85}, {0x11070, 0x11070}, {0x11073, 0x11074}, {0x110C2, 0x110C2}, {0x11145, 0x11146},
    {0x111C9, 0x111C9}, {0x111CE, 0x111CF}, {0x11241, 0x11241}, {0x1133B, 0x1133B}, {0x1145E, 0x1145E},
    {0x1182C, 0x1183A}, {0x11930, 0x11935}, {0x11937, 0x11938}, {0x1193B, 0x1193E}, {0x11940, 0x11940},
    {0x11942, 0x11943}, {0x119D1, 0x119D7}, {0x119DA, 0x119E0}, {0x119E4, 0x119E4}, {0x11A01, 0x11A0A},
    {0x11A33, 0x11A39}, {0x11A3B, 0x11A3E}, {0x11A47, 0x11A47}, {0x11A51, 0x11A5B}, {0x11A8A, 0x11A99},
    {0x11D31, 0x11D36}, {0x11D3A, 0x11D3A}, {0x11D3C, 0x11D3D}, {0x11D3F, 0x11D45}, {0x11D47, 0x11D47},
    {0x11D8A, 0x11D8E}, {0x11D90, 0x11D91}, {0x11D93, 0x11D97}, {0x11EF3, 0x11EF6}, {0x11F00, 0x11F01},
    {0x11F03, 0x11F03}, {0x11F34, 0x11F3A}, {0x11F3E, 0x11F42}, {0x13440, 0x13440}, {0x13447, 0x13455},
    {0x16F4F, 0x16F4F}, {0x16F7F, 0x16F87}, {0x16FE4, 0x16FE4}, {0x16FF0, 0x16FF1}, {0x1CF00, 0x1CF2D},
    {0x1CF30, 0x1CF46}, {0x1E08F, 0x1E08F}, {0x1E130, 0x1E136}, {0x1E2AE, 0x1E2AE}, {0x1E2EC, 0x1E2EF},
    {0x1E4EC, 0x1E4EF}};

int form_options(NormalForm form) {
  switch (form) {
    case NormalForm::NFC: return UTF8PROC_STABLE | UTF8PROC_COMPOSE;
    case NormalForm::NFD: return UTF8PROC_STABLE | UTF8PROC_DECOMPOSE;
    case NormalForm::NFKC: return UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
    case NormalForm::NFKD: return UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
  }
  return UTF8PROC_STABLE;
}

// The characters a normalization form leaves alone whatever surrounds them: combining class 0, already in
// the form on their own, and never the second half of a canonical composition. Text made only of these
// is in the form (the quick check that lets CJK, emoji and most scripts skip utf8proc). Built once per
// form from utf8proc's own tables, so it agrees with the normalization it stands in for.
class InertCharacters {
 public:
  explicit InertCharacters(NormalForm form) : bits_(kSize / 64) {
    const bool compose = form == NormalForm::NFC || form == NormalForm::NFKC;
    const bool compat = form == NormalForm::NFKC || form == NormalForm::NFKD;
    std::vector<bool> second(kSize);
    std::vector<bool> decomposes(kSize);
    utf8proc_int32_t buffer[32];
    for (utf8proc_int32_t c = 0; c < static_cast<utf8proc_int32_t>(kSize); ++c) {
      if (c >= 0xD800 && c <= 0xDFFF) continue;
      int boundclass = 0;
      // Every character after the first in a canonical decomposition may compose onto what precedes it.
      const auto canonical = utf8proc_decompose_char(c, buffer, 32, UTF8PROC_DECOMPOSE, &boundclass);
      if (canonical > 1 || (canonical == 1 && buffer[0] != c)) {
        for (utf8proc_ssize_t i = 1; i < canonical && i < 32; ++i) second[static_cast<std::size_t>(buffer[i])] = true;
        if (canonical > 0 && utf8proc_get_property(buffer[0])->combining_class != 0)
          second[static_cast<std::size_t>(c)] = true;
      }
      const auto own =
          compat ? utf8proc_decompose_char(
                       c, buffer, 32, static_cast<utf8proc_option_t>(UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT), &boundclass)
                 : canonical;
      decomposes[static_cast<std::size_t>(c)] = own > 1 || (own == 1 && buffer[0] != c);
    }
    for (std::size_t c = 0; c < kSize; ++c) {
      if ((c >= 0xD800 && c <= 0xDFFF) || second[c]) continue;
      const auto cp = static_cast<utf8proc_int32_t>(c);
      if (utf8proc_get_property(cp)->combining_class != 0) continue;
      if (decomposes[c]) {
        if (!compose) continue;
        // A precomposed character is inert when the form keeps it as it is (not a singleton or exclusion).
        utf8proc_uint8_t encoded[4];
        const auto length = utf8proc_encode_char(cp, encoded);
        utf8proc_uint8_t* result = nullptr;
        const auto mapped = utf8proc_map(encoded, length, &result, static_cast<utf8proc_option_t>(form_options(form)));
        const bool same = mapped == length && std::memcmp(result, encoded, static_cast<std::size_t>(length)) == 0;
        std::free(result);
        if (!same) continue;
      }
      bits_[c / 64] |= std::uint64_t{1} << (c % 64);
    }
  }

  bool contains(char32_t c) const { return c < kSize && ((bits_[c / 64] >> (c % 64)) & 1); }

 private:
  static constexpr std::size_t kSize = 0x110000;
  std::vector<std::uint64_t> bits_;
};

bool unknown_to_reference(char32_t c, NormalForm form) {
  if (in_ranges(kCanonicalUnknown, c)) return true;
  return (form == NormalForm::NFKC || form == NormalForm::NFKD) && in_ranges(kCompatibilityUnknown, c);
}

std::string utf8proc_normalize(std::string_view text, NormalForm form) {
  utf8proc_uint8_t* result = nullptr;
  const utf8proc_ssize_t length =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()), static_cast<utf8proc_ssize_t>(text.size()),
                   &result, static_cast<utf8proc_option_t>(form_options(form)));
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(result, &std::free);
  if (length < 0) return std::string(text);  // only on invalid UTF-8, which callers never pass
  return std::string(reinterpret_cast<const char*>(result), static_cast<std::size_t>(length));
}

const InertCharacters& inert_characters(NormalForm form) {
  static const InertCharacters nfc(NormalForm::NFC);
  switch (form) {
    case NormalForm::NFC: return nfc;
    case NormalForm::NFD: {
      static const InertCharacters nfd(NormalForm::NFD);
      return nfd;
    }
    case NormalForm::NFKC: {
      static const InertCharacters nfkc(NormalForm::NFKC);
      return nfkc;
    }
    case NormalForm::NFKD: break;
  }
  static const InertCharacters nfkd(NormalForm::NFKD);
  return nfkd;
}

}  // namespace

bool quick_check(std::string_view text, NormalForm form) {
  std::size_t pos = 0;
  while (pos < text.size() && static_cast<unsigned char>(text[pos]) < 0x80) ++pos;
  if (pos == text.size()) return true;
  const InertCharacters& inert = inert_characters(form);
  while (pos < text.size()) {
    if (static_cast<unsigned char>(text[pos]) < 0x80) {
      ++pos;
    } else if (!inert.contains(next_char(text, pos))) {
      return false;
    }
  }
  return true;
}

bool normalize(std::string_view text, NormalForm form, std::string& out) {
  if (quick_check(text, form)) return false;
  // Characters the reference's tables do not know split the text; each stretch is normalized alone.
  std::string result;
  std::size_t stretch = 0, pos = 0;
  bool split = false;
  while (pos < text.size()) {
    const std::size_t start = pos;
    if (static_cast<unsigned char>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    if (!unknown_to_reference(next_char(text, pos), form)) continue;
    result += utf8proc_normalize(text.substr(stretch, start - stretch), form);
    result.append(text, start, pos - start);
    stretch = pos;
    split = true;
  }
  if (!split) {
    out = utf8proc_normalize(text, form);
  } else {
    result += utf8proc_normalize(text.substr(stretch), form);
    out = std::move(result);
  }
  return true;
}

namespace {

// Lowercase mappings Unicode 16 and 17 added, which utf8proc 2.8 (Unicode 15) lacks and the reference
// (Rust's char::to_lowercase) has. Found by comparing the two on every code point.
char32_t newer_lowercase(char32_t c) {
  switch (c) {
    case 0x1C89: return 0x1C8A;
    case 0xA7CB: return 0x0264;
    case 0xA7CC: return 0xA7CD;
    case 0xA7CE: return 0xA7CF;
    case 0xA7D2: return 0xA7D3;
    case 0xA7D4: return 0xA7D5;
    case 0xA7DA: return 0xA7DB;
    case 0xA7DC: return 0x019B;
    default: break;
  }
  if (c >= 0x10D50 && c <= 0x10D65) return c + 0x20;  // Garay
  if (c >= 0x16EA0 && c <= 0x16EB8) return c + 0x1B;  // Beria Erfe
  return c;
}

}  // namespace

std::string to_lowercase(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  std::size_t pos = 0;
  while (pos < text.size()) {
    const unsigned char lead = static_cast<unsigned char>(text[pos]);
    if (lead < 0x80) {
      out.push_back(lead >= 'A' && lead <= 'Z' ? static_cast<char>(lead + ('a' - 'A')) : static_cast<char>(lead));
      ++pos;
      continue;
    }
    const char32_t c = next_char(text, pos);
    if (c == 0x130) {  // İ: the one unconditional multi-character lowercase mapping
      out += "i\xCC\x87";
      continue;
    }
    const auto lower = static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c)));
    append_utf8(out, lower != c ? lower : newer_lowercase(c));
  }
  return out;
}

bool is_white_space(char32_t c) {
  if (c <= 0x20) return c == 0x20 || (c >= 0x09 && c <= 0x0D);
  if (c < 0x85) return false;
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_mark(char32_t c) {
  // Two Vedic signs were marks in the reference's (older) tables and are letters now.
  if (c == 0x1CF2 || c == 0x1CF3) return true;
  const auto category = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  const bool mark =
      category == UTF8PROC_CATEGORY_MN || category == UTF8PROC_CATEGORY_MC || category == UTF8PROC_CATEGORY_ME;
  return mark && !in_ranges(kMarksUnknown, c);
}

std::optional<std::uint8_t> ByteLevelAlphabet::char_to_byte(char32_t c) const {
  if (c >= char_to_byte_.size() || char_to_byte_[c] < 0) return std::nullopt;
  return static_cast<std::uint8_t>(char_to_byte_[c]);
}

const ByteLevelAlphabet& byte_level_alphabet() {
  static const ByteLevelAlphabet alphabet = [] {
    ByteLevelAlphabet a;
    a.char_to_byte_.fill(-1);
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const char32_t c = printable ? static_cast<char32_t>(b) : next++;
      a.byte_to_char[b] = c;
      append_utf8(a.byte_to_utf8[b], c);
      a.char_to_byte_[c] = static_cast<std::int16_t>(b);
    }
    return a;
  }();
  return alphabet;
}

std::string bytes_to_byte_level(std::string_view bytes) {
  const auto& alphabet = byte_level_alphabet();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char b : bytes) out += alphabet.byte_to_utf8[static_cast<unsigned char>(b)];
  return out;
}

std::optional<std::string> byte_level_to_bytes(std::string_view text) {
  const auto& alphabet = byte_level_alphabet();
  std::string out;
  out.reserve(text.size());
  std::size_t pos = 0;
  while (pos < text.size()) {
    const auto byte = alphabet.char_to_byte(next_char(text, pos));
    if (!byte) return std::nullopt;
    out.push_back(static_cast<char>(*byte));
  }
  return out;
}

}  // namespace engine::tokenizer::unicode
