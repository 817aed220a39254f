// grammar-bench: structured-output speed on a real vocabulary. For each grammar it prints the compile time
// (parse, automaton, token mask cache) and the per-token mask time, median and p99, measured while walking
// a realistic output: the tokens of an example text, each mask filled and timed before its token is
// accepted.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include "base/flags.h"
#include "engine/grammar/compiled_grammar.h"
#include "engine/grammar/structured_output.h"
#include "engine/grammar/token_vocabulary.h"
#include "engine/tokenizer/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace grammar = engine::grammar;

constexpr const char* kJsonGrammar = R"(# JSON (RFC 8259) with bounded whitespace
root    ::= ws value ws
value   ::= object | array | string | number | "true" | "false" | "null"
object  ::= "{" ws ( member ( ws "," ws member )* )? ws "}"
member  ::= string ws ":" ws value
array   ::= "[" ws ( value ( ws "," ws value )* )? ws "]"
string  ::= "\"" ( [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\""
number  ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
ws      ::= [ \t\n]{0,16}
)";

constexpr const char* kJsonDocument = R"({
  "id": "chatcmpl-8a7f2c",
  "name": "Grace Hopper",
  "age": 85,
  "height_m": 1.68,
  "languages": ["COBOL", "FLOW-MATIC", "English"],
  "address": {"city": "Arlington", "state": "VA", "zip": "22201"},
  "active": false,
  "notes": "Pioneer of compilers \u2014 \"it's easier to ask forgiveness than permission\".",
  "scores": [98.5, -3, 1e-7, 0],
  "tags": [],
  "manager": null
})";

// What a JSON schema with fixed properties reduces to (an object with required keys in order).
constexpr const char* kSchemaGrammar =
    R"(root ::= "{" ws "\"name\"" ws ":" ws string ws "," ws "\"age\"" ws ":" ws integer ws "," ws "\"email\"" ws ":" ws string ws "," ws "\"tags\"" ws ":" ws "[" ws ( string ( ws "," ws string )* )? ws "]" ws "}"
string ::= "\"" ( [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\""
integer ::= "-"? ( "0" | [1-9] [0-9]{0,15} )
ws ::= [ \t\n]{0,16}
)";
constexpr const char* kSchemaDocument =
    R"({"name": "Ada Lovelace", "age": 36, "email": "ada@example.org", "tags": ["math", "poetry", "engines"]})";

constexpr const char* kSimpleGrammar = R"(root ::= "The answer is " ("yes" | "no") ", because " [a-z ,']+ "."
)";
constexpr const char* kSimpleText = "The answer is yes, because the sky is blue, the grass is green and it's late.";

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown CPU";
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw base::UsageError(path + ": cannot be read");
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto index = static_cast<std::size_t>(p * static_cast<double>(values.size() - 1) + 0.5);
  return values[std::min(index, values.size() - 1)];
}

void bench(const std::string& name, const std::shared_ptr<const grammar::TokenVocabulary>& vocabulary,
           const engine::tokenizer::Tokenizer& tokenizer, const std::string& gbnf, const std::string& text,
           std::uint64_t rounds) {
  grammar::GrammarCompiler compiler(vocabulary);
  grammar::StructuredOutputSpec spec;
  spec.kind = grammar::StructuredOutputSpec::Kind::Grammar;
  spec.text = gbnf;
  const auto start = Clock::now();
  const auto compiled = compiler.compile(spec);
  const double compile_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  const auto stats = compiled->masks().stats();

  const std::vector<std::int32_t> tokens = tokenizer.encode(text, false);
  std::vector<std::uint32_t> mask(engine::sampling::bitmask_words(vocabulary->token_bytes.size()));
  std::vector<double> mask_us, accept_us;
  for (std::uint64_t round = 0; round < rounds; ++round) {
    grammar::GrammarMatcher matcher(compiled);
    for (const std::int32_t token : tokens) {
      const auto t0 = Clock::now();
      matcher.fill_bitmask(mask);
      const auto t1 = Clock::now();
      if (!((mask[static_cast<std::size_t>(token) / 32] >> (token % 32)) & 1)) {
        throw std::runtime_error(name + ": the mask forbids token " + std::to_string(token) + " of the example");
      }
      if (!matcher.accept(token))
        throw std::runtime_error(name + ": the matcher refused token " + std::to_string(token));
      const auto t2 = Clock::now();
      mask_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      accept_us.push_back(std::chrono::duration<double, std::micro>(t2 - t1).count());
    }
    if (!matcher.can_terminate()) throw std::runtime_error(name + ": the example does not complete the grammar");
  }
  std::printf("%-8s compile %8.1f ms  states %6zu  cached positions %5zu  uncertain tokens %7zu  cache %6.1f MiB\n",
              name.c_str(), compile_ms, compiled->automaton().nodes.size(), stats.positions, stats.uncertain_tokens,
              static_cast<double>(stats.bytes) / (1 << 20));
  std::printf("%-8s %zu tokens x %llu rounds: mask median %.1f us, p99 %.1f us, max %.1f us; accept median %.2f us\n",
              name.c_str(), tokens.size(), static_cast<unsigned long long>(rounds), percentile(mask_us, 0.5),
              percentile(mask_us, 0.99), percentile(mask_us, 1.0), percentile(accept_us, 0.5));
}

}  // namespace

int main(int argc, char** argv) {
  std::string tokenizer_path;
  std::uint64_t rounds = 20;
  std::uint64_t logits_width = 0;
  std::string grammar_path, text_path;
  base::FlagParser flags(
      "usage: grammar-bench --tokenizer tokenizer.json [--logits-width N] [--rounds N] [--grammar FILE --text FILE]");
  flags.add_string("tokenizer", "PATH", "the tokenizer.json whose vocabulary the masks cover", &tokenizer_path);
  flags.add_uint("logits-width", "N", "the model's logits (default: the tokenizer's size; Qwen3: 151936)",
                 &logits_width, 0, 1u << 24);
  flags.add_string("grammar", "PATH", "a GBNF file to measure instead of the built-in grammars", &grammar_path);
  flags.add_string("text", "PATH", "with --grammar: the example output it walks", &text_path);
  flags.add_uint("rounds", "N", "times each example is walked (default 20)", &rounds, 1, 100000);
  try {
    if (!flags.parse(std::span<char* const>(argv + 1, static_cast<std::size_t>(argc - 1)))) {
      std::cout << flags.help();
      return 0;
    }
    if (tokenizer_path.empty()) throw base::UsageError("--tokenizer is required");
    const auto tokenizer = engine::tokenizer::Tokenizer::from_json_file(tokenizer_path);
    std::vector<std::int32_t> stops;
    if (const auto eos = tokenizer.eos_id()) stops.push_back(*eos);
    if (const auto end = tokenizer.token_to_id("<|im_end|>")) stops.push_back(*end);
    if (const auto end = tokenizer.token_to_id("<|endoftext|>")) stops.push_back(*end);
    const std::size_t width = logits_width != 0 ? logits_width : tokenizer.vocab_size();
    const auto start = Clock::now();
    auto vocabulary =
        std::make_shared<const grammar::TokenVocabulary>(grammar::vocabulary_from_tokenizer(tokenizer, width, stops));
    const double vocab_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    const auto sort_start = Clock::now();
    { grammar::GrammarCompiler warm(vocabulary); }
    const double sort_ms = std::chrono::duration<double, std::milli>(Clock::now() - sort_start).count();
    std::printf("CPU: %s\nvocabulary: %zu logits, %zu tokenizer ids; read %.1f ms, sorted with its trie %.1f ms\n",
                cpu_model().c_str(), width, tokenizer.vocab_size(), vocab_ms, sort_ms);
    if (!grammar_path.empty()) {
      if (text_path.empty()) throw base::UsageError("--grammar needs --text (the example output to walk)");
      bench("file", vocabulary, tokenizer, read_file(grammar_path), read_file(text_path), rounds);
      return 0;
    }
    bench("json", vocabulary, tokenizer, kJsonGrammar, kJsonDocument, rounds);
    bench("schema", vocabulary, tokenizer, kSchemaGrammar, kSchemaDocument, rounds);
    bench("simple", vocabulary, tokenizer, kSimpleGrammar, kSimpleText, rounds);
    return 0;
  } catch (const base::UsageError& e) {
    std::cerr << "grammar-bench: " << e.what() << "\n" << flags.help();
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "grammar-bench: " << e.what() << "\n";
    return 1;
  }
}
