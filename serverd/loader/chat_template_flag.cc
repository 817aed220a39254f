#include "serverd/loader/chat_template_flag.h"

#include <charconv>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>

#include "base/flags.h"
#include "base/utf8.h"

namespace serverd {
namespace {

// `digits` hex digits at `at`, or nullopt when there are fewer.
std::optional<std::uint32_t> hex(std::string_view text, std::size_t at, std::size_t digits) {
  if (at + digits > text.size()) return std::nullopt;
  std::uint32_t value = 0;
  const auto [end, ec] = std::from_chars(text.data() + at, text.data() + at + digits, value, 16);
  if (ec != std::errc() || end != text.data() + at + digits) return std::nullopt;
  return value;
}

}  // namespace

std::string decode_escapes(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\\' || i + 1 == text.size()) {
      out += text[i];
      continue;
    }
    const char c = text[++i];
    switch (c) {
      case '\n': break;  // a backslash at the end of a line joins it to the next
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'v': out += '\v'; break;
      case 'x':
      case 'u':
      case 'U': {
        const std::size_t digits = c == 'x' ? 2 : c == 'u' ? 4 : 8;
        const auto cp = hex(text, i + 1, digits);
        if (!cp || *cp > 0x10FFFF)
          throw base::UsageError("--chat-template: a truncated \\" + std::string(1, c) + " escape");
        base::append_utf8(out, *cp);
        i += digits;
        break;
      }
      default:
        if (c >= '0' && c <= '7') {
          std::uint32_t value = static_cast<std::uint32_t>(c - '0');
          for (int k = 0; k < 2 && i + 1 < text.size() && text[i + 1] >= '0' && text[i + 1] <= '7'; ++k) {
            value = value * 8 + static_cast<std::uint32_t>(text[++i] - '0');
          }
          base::append_utf8(out, value);
        } else {
          out += '\\';
          out += c;
        }
    }
  }
  return out;
}

std::string read_chat_template_flag(std::string_view value) {
  const std::filesystem::path path{std::string(value)};
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec)) {
    std::ifstream in(path, std::ios::binary);
    std::string contents((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) throw base::UsageError("--chat-template " + std::string(value) + ": cannot read it");
    return contents;
  }
  if (value.find_first_of("{}\n") == std::string_view::npos) {
    throw base::UsageError("--chat-template " + std::string(value) +
                           ": no such file, and it does not look like a template (no {, } or newline); give a "
                           "template file or the template text itself");
  }
  return decode_escapes(value);
}

}  // namespace serverd
