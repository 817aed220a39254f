#include "tests/interop/tokenizer_corpus.h"

#include <array>
#include <cstdio>
#include <functional>
#include <random>
#include <string_view>
#include <utility>

#include "engine/tokenizer/unicode.h"

namespace testing_support {

namespace {

using engine::tokenizer::unicode::append_utf8;

std::string utf8(std::initializer_list<char32_t> chars) {
  std::string out;
  for (const char32_t c : chars) append_utf8(out, c);
  return out;
}

struct Range {
  char32_t first, last;
};

// A script: code point ranges to draw letters from, and optional marks to sprinkle after them.
struct Script {
  std::vector<Range> letters;
  std::vector<Range> marks;
};

const std::vector<Script>& scripts() {
  static const std::vector<Script> all = {
      {{{'a', 'z'}, {'A', 'Z'}, {0xC0, 0xD6}, {0xD8, 0xF6}, {0xF8, 0x17F}}, {{0x300, 0x36F}}},  // Latin, accents
      {{{0x410, 0x44F}, {0x401, 0x401}, {0x451, 0x451}}, {}},                                   // Cyrillic
      {{{0x391, 0x3A1}, {0x3A3, 0x3A9}, {0x3AC, 0x3CE}}, {{0x301, 0x301}, {0x308, 0x308}}},     // Greek
      {{{0x621, 0x64A}}, {{0x64B, 0x652}}},                                                     // Arabic
      {{{0x5D0, 0x5EA}}, {{0x5B0, 0x5BC}}},                                                     // Hebrew
      {{{0x905, 0x939}}, {{0x93E, 0x94D}}},                                                     // Devanagari
      {{{0xE01, 0xE30}, {0xE40, 0xE46}}, {{0xE31, 0xE31}, {0xE34, 0xE3A}, {0xE47, 0xE4E}}},     // Thai
      {{{0x4E00, 0x9FA5}}, {}},                                                                 // CJK
      {{{0xAC00, 0xD7A3}}, {}},                                                                 // Hangul syllables
      {{{0x1100, 0x1112}, {0x1161, 0x1175}, {0x11A8, 0x11C2}}, {}},                             // conjoining jamo
      {{{0x3041, 0x3096}, {0x30A1, 0x30FA}, {0x30FC, 0x30FC}}, {{0x3099, 0x309A}}},             // kana
      {{{0xFF21, 0xFF3A}, {0xFF41, 0xFF5A}, {0xFF66, 0xFF9D}}, {}},                             // fullwidth, halfwidth
      {{{0x1D400, 0x1D454}, {0x1D538, 0x1D539}}, {}},                                           // math alphanumerics
      // Letters and digits Unicode 15 and 16 added (CJK Ext. H and I, Kawi, Nag Mundari, Garay, Sunuwar,
      // Todhri, Kirat Rai, Egyptian Ext.-A), which Debian 12's PCRE2 tables predate.
      {{{0x31350, 0x323AF},
        {0x2EBF0, 0x2EE5D},
        {0x11F04, 0x11F10},
        {0x11F50, 0x11F59},
        {0x1E4D0, 0x1E4EB},
        {0x1E4F0, 0x1E4F9},
        {0x10D50, 0x10D65},
        {0x10D40, 0x10D49},
        {0x11BC0, 0x11BE0},
        {0x11BF0, 0x11BF9},
        {0x105C0, 0x105F3},
        {0x16D43, 0x16D6A},
        {0x16D70, 0x16D79},
        {0x13460, 0x143FA},
        {0x1CCF0, 0x1CCF9}},
       {}},
  };
  return all;
}

const std::vector<std::string>& words() {
  static const std::vector<std::string> all = {
      "the",    "quick",    "brown",   "fox",        "jumps",      "over",
      "lazy",   "dog",      "Hello",   "world",      "tokenizer",  "internationalization",
      "café",   "naïve",    "résumé",  "Straße",     "Ærøskøbing", "Ελλάδα",
      "Москва", "東京",     "서울",    "ありがとう", "مرحبا",      "שלום",
      "नमस्ते",   "สวัสดี",     "Ünïcödé", "façade",     "jalapeño",   "coöperate",
      "São",    "Paulo",    "Zürich",  "I",          "a",          "an",
      "OpenAI", "GPT",      "LLaMA",   "Qwen",       "HTTP",       "JSON",
      "iPhone", "McDonald", "O'Neil",
  };
  return all;
}

const std::vector<std::string>& emoji() {
  static const std::vector<std::string> all = {
      utf8({0x1F600}),
      utf8({0x1F602}),
      utf8({0x2764, 0xFE0F}),
      utf8({0x1F44D}),
      utf8({0x1F44D, 0x1F3FD}),
      utf8({0x1F44B, 0x1F3FF}),
      utf8({0x1F468, 0x200D, 0x1F469, 0x200D, 0x1F467, 0x200D, 0x1F466}),
      utf8({0x1F469, 0x1F3FD, 0x200D, 0x1F4BB}),
      utf8({0x1F3F3, 0xFE0F, 0x200D, 0x1F308}),
      utf8({0x1F9D1, 0x200D, 0x1F91D, 0x200D, 0x1F9D1}),
      utf8({0x1F1EF, 0x1F1F5}),
      utf8({0x1F1FA, 0x1F1F8}),
      utf8({'1', 0xFE0F, 0x20E3}),
      utf8({0x1F525}),
      utf8({0x1F680}),
      utf8({0x2728}),
      utf8({0x1F914}),
      utf8({0x1F937, 0x1F3FB, 0x200D, 0x2642, 0xFE0F}),
      utf8({0x1F43B, 0x200D, 0x2744, 0xFE0F}),
      utf8({0x263A}),
      utf8({0x263A, 0xFE0E}),
      utf8({0x1F3F4, 0xE0067, 0xE0062, 0xE0065, 0xE006E, 0xE0067, 0xE007F}),
  };
  return all;
}

const std::vector<std::string>& spaces() {
  static const std::vector<std::string> all = {
      " ",
      " ",
      " ",
      "\t",
      "\n",
      "\r\n",
      "\r",
      "\n\n",
      "\x0B",
      "\x0C",
      utf8({0xA0}),
      utf8({0x2003}),
      utf8({0x2009}),
      utf8({0x3000}),
      utf8({0x202F}),
      utf8({0x205F}),
      utf8({0x1680}),
      utf8({0x85}),
      utf8({0x2028}),
      utf8({0x2029}),
      utf8({0x200B}),
      utf8({0xFEFF}),
  };
  return all;
}

const std::vector<std::string>& special_texts() {
  static const std::vector<std::string> all = {
      "<|endoftext|>",
      "<|im_start|>",
      "<|im_end|>",
      "<|object_ref_start|>",
      "<|object_ref_end|>",
      "<|box_start|>",
      "<|box_end|>",
      "<|quad_start|>",
      "<|quad_end|>",
      "<|vision_start|>",
      "<|vision_end|>",
      "<|vision_pad|>",
      "<|image_pad|>",
      "<|video_pad|>",
      "<tool_call>",
      "</tool_call>",
      "<|fim_prefix|>",
      "<|fim_middle|>",
      "<|fim_suffix|>",
      "<|fim_pad|>",
      "<|repo_name|>",
      "<|file_sep|>",
      "<tool_response>",
      "</tool_response>",
      "<think>",
      "</think>",
      // Other families' special tokens (Llama 2 / Gemma / Llama 3 / DeepSeek / gpt-oss), SentencePiece's
      // word mark and byte-token spellings typed as text.
      "<s>",
      "</s>",
      "<unk>",
      "<bos>",
      "<eos>",
      "<pad>",
      "<start_of_turn>",
      "<end_of_turn>",
      "<|begin_of_text|>",
      "<|eot_id|>",
      "<|start_header_id|>",
      "<|end_header_id|>",
      "<\xEF\xBD\x9C"
      "begin\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
      "<|start|>",
      "<|message|>",
      "<|channel|>",
      "<|end|>",
      "\xE2\x96\x81",
      "\xE2\x96\x81"
      "hello\xE2\x96\x81\xE2\x96\x81world",
      "<0x41>",
      "<0x0A><0xE3>",
      // Broken and look-alike forms that must be tokenized as text.
      "<|im_start",
      "<|im_start|",
      "im_start|>",
      "<|im_star t|>",
      "<|IM_START|>",
      "< |im_start|>",
      "<||>",
      "<|>",
      "<<|im_end|>>",
      "<|<|im_end|>|>",
      "<think",
      "think>",
      "</think",
      "<THINK>",
      "<|endoftext|",
      "|endoftext|>",
      "<|endoftext|><|endoftext|>",
      "<tool_call></tool_call>",
      "<｜im_start｜>",
      "<|im_start|>system\n",
  };
  return all;
}

const std::vector<std::string>& code() {
  static const std::vector<std::string> all = {
      "int main(int argc, char** argv) {\n    return 0;\n}\n",
      "def f(x):\n\treturn x ** 2  # square\n",
      "for (auto& [k, v] : map) { std::cout << k << \": \" << v << '\\n'; }",
      "{\"key\": [1, 2.5, -3e10, true, null], \"nested\": {\"a\": \"b\"}}",
      "<div class=\"x\">&nbsp;&lt;tag&gt;</div>",
      "SELECT * FROM users WHERE id = 42 AND name LIKE '%o''brien%';",
      "if x != nil && y >= 10 || !z { panic(\"boom\") }",
      "    indented    with    spaces\n        and more\n",
      "x=>x+1;let y=`template ${x}`;/* c */ // line",
      "$ ls -la | grep '^d' > out.txt 2>&1",
      "#include <vector>\n#define MAX(a,b) ((a)>(b)?(a):(b))\n",
      "https://example.com/path?q=a+b&x=%20#frag",
      "user@example.org",
      "C:\\Program Files\\app\\bin\\",
  };
  return all;
}

const std::vector<std::string>& unusual() {
  static const std::vector<std::string> all = {
      utf8({0x301}),
      utf8({0x301, 0x301, 0x301}),
      utf8({0x20DD}),
      utf8({0xE000}),
      utf8({0xF8FF}),
      utf8({0xFDD0}),
      utf8({0xFFFE}),
      utf8({0xFFFF}),
      utf8({0x1FFFE}),
      utf8({0x10FFFF}),
      utf8({0xFFFD}),
      utf8({0x202E}),
      utf8({0x200E}),
      utf8({0x200D}),
      utf8({0x200C}),
      utf8({0xFE0F}),
      utf8({0xE0041}),
      utf8({0x1F3FB}),
      utf8({0x0}),
      utf8({0x1}),
      utf8({0x1F}),
      utf8({0x7F}),
      utf8({0x80}),
      utf8({0x9F}),
      utf8({0x10000}),
      utf8({0x13000}),
      utf8({0x1D11E}),
      utf8({0x2FA1D}),
      utf8({0x20000}),
      utf8({0x212B}),
      utf8({0x2126}),
      utf8({0xFB01}),
      utf8({0x17F}),
      utf8({0x130}),
      utf8({0x3A3}),
      utf8({0x1E9E}),
      utf8({0xDF}),
      utf8({0x2163}),
      utf8({0xB2}),
      utf8({0xBD}),
      utf8({0x660, 0x661}),
      utf8({0xFF11, 0xFF12}),
      utf8({0x1100, 0x1161, 0x11A8}),
      utf8({'e', 0x301}),
      utf8({'A', 0x30A}),
      utf8({0x344}),
      utf8({'>', 0x338}),
      utf8({0x1E0A, 0x323}),
      utf8({0x115F, 0x1160}),
      utf8({0x3164}),
      utf8({0x2800}),
      utf8({0xAD}),
      utf8({0x34F}),
  };
  return all;
}

class Generator {
 public:
  explicit Generator(std::uint64_t seed) : rng_(seed) {}

  // Deterministic everywhere: mt19937_64's output is fixed by the standard; the reduction is ours.
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(rng_() % n); }
  bool chance(std::size_t percent) { return below(100) < percent; }
  template <typename T>
  const T& pick(const std::vector<T>& items) {
    return items[below(items.size())];
  }
  char32_t pick(const std::vector<Range>& ranges) {
    const Range& r = ranges[below(ranges.size())];
    return r.first + static_cast<char32_t>(below(r.last - r.first + 1));
  }

  std::string script_word() {
    const Script& script = pick(scripts());
    std::string out;
    const std::size_t length = 1 + below(chance(10) ? 40 : 10);
    for (std::size_t i = 0; i < length; ++i) {
      append_utf8(out, pick(script.letters));
      if (!script.marks.empty() && chance(20)) append_utf8(out, pick(script.marks));
    }
    return out;
  }

  std::string latin_word() {
    std::string word = pick(words());
    if (chance(15)) {
      for (auto& c : word) {
        if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
      }
    }
    return word;
  }

  std::string whitespace() {
    std::string out;
    const std::size_t length = 1 + below(chance(10) ? 30 : 4);
    for (std::size_t i = 0; i < length; ++i) out += pick(spaces());
    return out;
  }

  std::string number() {
    static const std::vector<std::string> formats = {"", ",", ".", " ", "e", "-", "/", ":"};
    std::string out = chance(20) ? "-" : "";
    const std::size_t length = 1 + below(chance(15) ? 60 : 8);
    for (std::size_t i = 0; i < length; ++i) {
      out += static_cast<char>('0' + below(10));
      if (chance(10)) out += pick(formats);
    }
    if (chance(10)) out += utf8({0x661, 0x662, 0x663});
    return out;
  }

  std::string punctuation() {
    static const std::vector<std::string> marks = {".",
                                                   ",",
                                                   "!",
                                                   "?",
                                                   ";",
                                                   ":",
                                                   "-",
                                                   "--",
                                                   "...",
                                                   "(",
                                                   ")",
                                                   "[",
                                                   "]",
                                                   "{",
                                                   "}",
                                                   "\"",
                                                   "'",
                                                   "`",
                                                   "~",
                                                   "@",
                                                   "#",
                                                   "$",
                                                   "%",
                                                   "^",
                                                   "&",
                                                   "*",
                                                   "_",
                                                   "+",
                                                   "=",
                                                   "|",
                                                   "\\",
                                                   "/",
                                                   "<",
                                                   ">",
                                                   utf8({0x3002}),
                                                   utf8({0x3001}),
                                                   utf8({0x300C}),
                                                   utf8({0x300D}),
                                                   utf8({0x2026}),
                                                   utf8({0x2014}),
                                                   utf8({0x2013}),
                                                   utf8({0x2018}),
                                                   utf8({0x2019}),
                                                   utf8({0x201C}),
                                                   utf8({0x201D}),
                                                   utf8({0xAB}),
                                                   utf8({0xBB}),
                                                   utf8({0xBF}),
                                                   utf8({0xA1}),
                                                   utf8({0x20AC}),
                                                   utf8({0xA3}),
                                                   utf8({0xFF01}),
                                                   utf8({0x061F}),
                                                   utf8({0x0964})};
    std::string out;
    const std::size_t length = 1 + below(chance(10) ? 20 : 4);
    for (std::size_t i = 0; i < length; ++i) out += pick(marks);
    return out;
  }

  std::string contraction() {
    static const std::vector<std::string> endings = {"s",  "t", "re", "ve", "m", "ll", "d",  "S",  "T",  "RE", "Ve",
                                                     "vE", "M", "LL", "lL", "D", "Ll", "rE", "st", "dd", "x"};
    static const std::vector<std::string> apostrophes = {"'", "'", "'", utf8({0x2019}), "`"};
    std::string out = chance(70) ? latin_word() : script_word();
    out += pick(apostrophes);
    out += chance(5) ? utf8({0x17F}) : pick(endings);
    if (chance(30)) out += pick(words());
    return out;
  }

  std::string fragment() {
    switch (below(12)) {
      case 0:
      case 1: return latin_word();
      case 2:
      case 3: return script_word();
      case 4: return emoji_sequence();
      case 5: return whitespace();
      case 6: return number();
      case 7: return pick(code());
      case 8: return punctuation();
      case 9: return contraction();
      case 10: return pick(special_texts());
      default: return pick(unusual());
    }
  }

  std::string emoji_sequence() {
    std::string out = pick(emoji());
    while (chance(30)) out += pick(emoji());
    return out;
  }

  std::string text() {
    std::string out;
    const std::size_t fragments = 1 + below(chance(5) ? 40 : 8);
    for (std::size_t i = 0; i < fragments; ++i) {
      out += fragment();
      if (chance(60)) out += chance(85) ? " " : pick(spaces());
    }
    return out;
  }

 private:
  std::mt19937_64 rng_;
};

std::vector<std::string> hand_picked() {
  std::vector<std::string> all = {
      "",
      " ",
      "  ",
      "\t",
      "\n",
      "\r\n",
      "\n\n\n",
      " \n ",
      "   \t\t\n\r\n  ",
      utf8({0xA0, 0xA0, 0x3000}),
      "Hello world",
      "Hello  world",
      "Hello world ",
      " Hello world",
      "hello\nworld\n",
      "I'm you're we've they'll she'd it's can't",
      "I'M YOU'RE WE'VE THEY'LL SHE'D IT'S CAN'T",
      "'s 't 're 've 'm 'll 'd",
      "''s'''t",
      "'ſtop it'ſ",
      "don" + utf8({0x2019}) + "t",
      "1234567890",
      "3.14159265358979323846264338327950288419716939937510",
      "1,000,000.00",
      "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n",
      "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n",
      "<think>\n\n</think>\n\nThe answer is 42.",
      "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>",
      "<|endoftext|>",
      "<|endoftext|><|endoftext|><|im_start|>",
      " <|im_start|> ",
      "a<|im_end|>b",
      "<|im_end|>" + utf8({0x338}),
      "e<|im_end|>" + utf8({0x301}),
      "<|im_start|",
      "<|im_start|>>",
      "<<|im_start|>",
      "x" + std::string(5000, 'a'),
      std::string(3000, ' '),
      std::string(1000, '\n'),
      std::string(500, '!'),
      std::string(2000, '9'),
      "a" + std::string(1000, ' ') + "b",
      "\t\t\t\tif (x) {\n\t\t\t\t\treturn;\n\t\t\t\t}",
  };
  std::string cjk, thai, emoji_run, zalgo = "Z";
  for (int i = 0; i < 800; ++i) append_utf8(cjk, 0x4E00 + static_cast<char32_t>((i * 37) % 20000));
  for (int i = 0; i < 600; ++i) append_utf8(thai, 0xE01 + static_cast<char32_t>((i * 7) % 47));
  for (int i = 0; i < 200; ++i) emoji_run += emoji()[static_cast<std::size_t>(i) % emoji().size()];
  for (int i = 0; i < 100; ++i) append_utf8(zalgo, 0x300 + static_cast<char32_t>(i % 112));
  all.insert(all.end(), {cjk, thai, emoji_run, zalgo});
  for (const auto& text : special_texts()) all.push_back(text);
  for (const auto& text : unusual()) {
    all.push_back(text);
    all.push_back("a" + text + "b");
    all.push_back(" " + text + " ");
  }
  for (const auto& text : emoji()) all.push_back(text);
  for (const auto& text : spaces()) {
    all.push_back(text);
    all.push_back("x" + text + "y");
    all.push_back(text + text + "z");
  }
  for (const auto& text : code()) all.push_back(text);
  return all;
}

}  // namespace

std::vector<std::string> tokenizer_corpus(std::size_t generated, std::uint64_t seed) {
  std::vector<std::string> corpus = hand_picked();
  Generator generator(seed);
  for (std::size_t i = 0; i < generated; ++i) corpus.push_back(generator.text());
  return corpus;
}

std::string corpus_to_json(const std::vector<std::string>& corpus) {
  std::string json = "[";
  for (std::size_t i = 0; i < corpus.size(); ++i) {
    if (i > 0) json += ",\n";
    json += '"';
    for (const char c : corpus[i]) {
      const auto u = static_cast<unsigned char>(c);
      if (c == '"' || c == '\\') {
        json += '\\';
        json += c;
      } else if (u < 0x20 || u == 0x7F) {
        char escape[8];
        std::snprintf(escape, sizeof escape, "\\u%04x", u);
        json += escape;
      } else {
        json += c;  // UTF-8 passes through
      }
    }
    json += '"';
  }
  json += "]";
  return json;
}

}  // namespace testing_support
