// grammar-bench: structured-output speed on a real vocabulary. For a JSON-schema case (through the schema
// converter), a regex case and grammar cases it prints the compile time (conversion, parse, automaton, token
// mask cache) and the per-token mask time, median and p99, measured while walking a realistic output: the
// tokens of an example text, each mask filled and timed before its token is accepted. It then times the
// compilation of typical schemas alone, and with --model the decode rate of a model at batch 1 and 8 with
// and without a constraint (runs alternated, since a shared machine's speed drifts).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <iterator>
#include <span>
#include <stop_token>
#include <string>
#include <vector>

#include "base/flags.h"
#include "engine/grammar/compiled_grammar.h"
#include "engine/grammar/structured_output.h"
#include "engine/grammar/token_vocabulary.h"
#include "engine/runtime/engine.h"
#include "engine/tokenizer/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace grammar = engine::grammar;
using Kind = grammar::StructuredOutputSpec::Kind;

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

// A realistic response schema: formats, bounded strings, an enum, a nested object, a bounded array.
constexpr const char* kUserSchema = R"({
  "type": "object",
  "properties": {
    "id": {"type": "string", "format": "uuid"},
    "name": {"type": "string", "minLength": 1, "maxLength": 100},
    "email": {"type": "string", "format": "email"},
    "age": {"type": "integer", "minimum": 0, "maximum": 150},
    "role": {"enum": ["admin", "editor", "viewer"]},
    "address": {
      "type": "object",
      "properties": {
        "street": {"type": "string", "maxLength": 200},
        "city": {"type": "string"},
        "zip": {"type": "string", "pattern": "^[0-9]{5}$"}
      },
      "required": ["street", "city", "zip"],
      "additionalProperties": false
    },
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 20}, "maxItems": 10},
    "created": {"type": "string", "format": "date-time"},
    "active": {"type": "boolean"}
  },
  "required": ["id", "name", "email", "age", "role", "address", "tags", "created", "active"],
  "additionalProperties": false
})";
constexpr const char* kUserDocument =
    R"({"id": "8f14e45f-ceea-467f-a0e6-3f6b9b2c1d7e", "name": "Grace Brewster Hopper", "email": "grace.hopper@navy.mil", )"
    R"("age": 85, "role": "admin", "address": {"street": "1 Computer History Way", "city": "Arlington", "zip": "22201"}, )"
    R"("tags": ["compilers", "cobol", "navy"], "created": "1906-12-09T08:30:00Z", "active": false})";

constexpr const char* kContactRegex =
    R"([A-Z][a-z]+( [A-Z][a-z]+)*, \(\d{3}\) \d{3}-\d{4}, [a-z0-9._%+-]+@[a-z0-9-]+(\.[a-z0-9-]+)*\.(com|org|net|mil))";
constexpr const char* kContactText = "Grace Brewster Hopper, (703) 555-0142, grace.hopper@history.navy.mil";

// (A raw string with a delimiter: the grammar itself holds `)"`.)
constexpr const char* kArithmeticGrammar = R"gbnf(root   ::= expr
expr   ::= term (ws ("+" | "-") ws term)*
term   ::= factor (ws ("*" | "/") ws factor)*
factor ::= number | "(" ws expr ws ")" | "-" factor | name ("(" ws (expr (ws "," ws expr)*)? ws ")")?
number ::= [0-9]+ ("." [0-9]+)?
name   ::= [a-z] [a-z0-9_]*
ws     ::= " "?
)gbnf";
constexpr const char* kArithmeticText = "sqrt(3.25 * (x_1 + 42) - max(7, 2.5 / (1 + 1))) * -(12 - 4)";

struct Case {
  const char* name;
  Kind kind;
  std::string text;
  std::string example;  // empty: compile only
};

// What typical requests send, for compile time alone.
std::vector<Case> compile_cases() {
  std::string properties, required, enumeration;
  for (int i = 0; i < 40; ++i) {
    const std::string key = "field_" + std::to_string(i);
    const char* type = i % 4 == 0   ? R"({"type": "integer"})"
                       : i % 4 == 1 ? R"({"type": "string"})"
                       : i % 4 == 2 ? R"({"type": "boolean"})"
                                    : R"({"type": "number"})";
    properties += (i ? ", \"" : "\"") + key + "\": " + type;
    required += (i ? ", \"" : "\"") + key + "\"";
  }
  for (int i = 0; i < 50; ++i) enumeration += (i ? ", \"" : "\"") + std::string("label_") + std::to_string(i) + "\"";
  return {
      {"string maxLength 100", Kind::JsonSchema, R"({"type": "string", "maxLength": 100})", ""},
      {"string maxLength 1000", Kind::JsonSchema, R"({"type": "string", "maxLength": 1000})", ""},
      {"object, 2 strings maxLength 500", Kind::JsonSchema,
       R"({"type": "object", "properties": {"title": {"type": "string", "maxLength": 500}, "body": {"type": "string", "minLength": 10, "maxLength": 500}}, "required": ["title", "body"]})",
       ""},
      {"enum of 50 labels", Kind::JsonSchema, "{\"enum\": [" + enumeration + "]}", ""},
      {"40 required properties", Kind::JsonSchema,
       "{\"type\": \"object\", \"properties\": {" + properties + "}, \"required\": [" + required + "]}", ""},
      {"nested objects, 4 deep", Kind::JsonSchema,
       R"({"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"type": "object", "properties": {"c": {"type": "object", "properties": {"d": {"type": "integer"}}, "required": ["d"]}}, "required": ["c"]}}, "required": ["b"]}}, "required": ["a"]})",
       ""},
      {"recursive tree ($ref)", Kind::JsonSchema,
       R"({"$defs": {"node": {"type": "object", "properties": {"value": {"type": "integer"}, "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "required": ["value", "children"]}}, "$ref": "#/$defs/node"})",
       ""},
      {"user schema", Kind::JsonSchema, kUserSchema, ""},
      {"json_object", Kind::JsonObject, "", ""},
  };
}

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

grammar::StructuredOutputSpec spec_of(const Case& c) {
  grammar::StructuredOutputSpec spec;
  spec.kind = c.kind;
  spec.text = c.text;
  return spec;
}

// Compiles with a fresh compiler (its cache would answer a second time); returns the milliseconds.
// CPU time of the process (every thread), which a shared machine's other load does not inflate as it does
// wall time.
double process_cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}

struct CompileTime {
  double wall_ms = 0, cpu_ms = 0;  // medians over the compilations
  double min_wall_ms = 0;
  double complete_ms = -1;  // until the deferred copies are computed too (median), when waited for
  std::uint64_t compilations = 1;
};

// Compiles `compilations` times, each with a fresh compiler (its cache would answer a second time) and with
// the previous grammar (and its background completer) gone first; returns the last grammar.
std::shared_ptr<const grammar::CompiledGrammar> timed_compile(
    const std::shared_ptr<const grammar::TokenVocabulary>& vocabulary, const Case& c, std::uint64_t compilations,
    bool wait_for_deferred, CompileTime& time) {
  std::vector<double> wall, cpu, complete;
  std::shared_ptr<const grammar::CompiledGrammar> compiled;
  for (std::uint64_t i = 0; i < compilations; ++i) {
    compiled.reset();
    grammar::GrammarCompiler compiler(vocabulary);
    const double cpu_start = process_cpu_ms();
    const auto start = Clock::now();
    compiled = compiler.compile(spec_of(c));
    wall.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    cpu.push_back(process_cpu_ms() - cpu_start);
    // What the background completer has left to do (it and this call share each copy's walk); not before
    // the masks are measured, whose first round meets the completer as a generation would.
    if (wait_for_deferred) {
      compiled->masks().complete_deferred(std::stop_token{});
      complete.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    }
  }
  time.compilations = compilations;
  time.wall_ms = percentile(wall, 0.5);
  time.cpu_ms = percentile(cpu, 0.5);
  time.min_wall_ms = *std::min_element(wall.begin(), wall.end());
  time.complete_ms = complete.empty() ? -1 : percentile(complete, 0.5);
  return compiled;
}

std::string format_ms(double ms) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f ms", ms);
  return text;
}

void print_compiled(const Case& c, const grammar::CompiledGrammar& compiled, const CompileTime& time) {
  const auto stats = compiled.masks().stats();
  std::printf(
      "%-32s compile %6.1f ms (cpu %6.1f ms, min %6.1f ms of %llu)%s  states %6zu  positions %5zu (walked %5zu, "
      "deferred %4zu)  uncertain %7zu  cache %5.1f MiB\n",
      c.name, time.wall_ms, time.cpu_ms, time.min_wall_ms, static_cast<unsigned long long>(time.compilations),
      time.complete_ms < 0 ? "" : ("; deferred done at " + format_ms(time.complete_ms)).c_str(),
      compiled.automaton().nodes.size(), stats.positions, stats.walks, stats.deferred, stats.uncertain_tokens,
      static_cast<double>(stats.bytes) / (1 << 20));
}

void bench_masks(const Case& c, const std::shared_ptr<const grammar::TokenVocabulary>& vocabulary,
                 const engine::tokenizer::Tokenizer& tokenizer, std::uint64_t rounds, std::uint64_t compilations) {
  CompileTime compile_time;
  const auto compiled = timed_compile(vocabulary, c, compilations, false, compile_time);
  print_compiled(c, *compiled, compile_time);
  const std::vector<std::int32_t> tokens = tokenizer.encode(c.example, false);
  std::vector<std::uint32_t> mask(engine::sampling::bitmask_words(vocabulary->token_bytes.size()));
  std::vector<double> mask_us, accept_us;
  for (std::uint64_t round = 0; round < rounds; ++round) {
    grammar::GrammarMatcher matcher(compiled);
    for (const std::int32_t token : tokens) {
      const auto t0 = Clock::now();
      matcher.fill_bitmask(mask);
      const auto t1 = Clock::now();
      if (!((mask[static_cast<std::size_t>(token) / 32] >> (token % 32)) & 1)) {
        throw std::runtime_error(std::string(c.name) + ": the mask forbids token " + std::to_string(token) + " " +
                                 tokenizer.decode({&token, 1}) + " of the example");
      }
      if (!matcher.accept(token))
        throw std::runtime_error(std::string(c.name) + ": the matcher refused token " + std::to_string(token));
      const auto t2 = Clock::now();
      mask_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      accept_us.push_back(std::chrono::duration<double, std::micro>(t2 - t1).count());
    }
    if (!matcher.can_terminate())
      throw std::runtime_error(std::string(c.name) + ": the example does not complete the grammar");
  }
  // The first round alone too: it pays for the copies whose masks are computed at first use.
  std::vector<double> first_round(mask_us.begin(), mask_us.begin() + static_cast<std::ptrdiff_t>(tokens.size()));
  std::printf(
      "%-32s %zu tokens x %llu rounds: mask median %.1f us, p99 %.1f us, max %.1f us (first round: p99 %.1f us, "
      "max %.1f us); accept median %.2f us\n",
      c.name, tokens.size(), static_cast<unsigned long long>(rounds), percentile(mask_us, 0.5),
      percentile(mask_us, 0.99), percentile(mask_us, 1.0), percentile(first_round, 0.99), percentile(first_round, 1.0),
      percentile(accept_us, 0.5));
}

// Decodes `steps` tokens for each of `batch` sequences through the engine's sampling path (temperature 1,
// seeded), each sequence constrained by `compiled` when it is given (a matcher that terminates starts over:
// the measurement is of masks on a running sequence, not of what it says). Returns tokens per second.
double decode_rate(engine::runtime::Engine& engine, std::size_t batch, std::size_t steps,
                   const std::shared_ptr<const grammar::CompiledGrammar>& compiled) {
  namespace runtime = engine::runtime;
  namespace sampling = engine::sampling;
  const std::vector<std::int32_t> prompt = engine.tokenizer().encode("Reply with the user record as JSON:", false);
  std::vector<runtime::SequenceCache> caches(batch);
  std::vector<std::unique_ptr<sampling::SequenceSampler>> samplers;
  std::vector<sampling::SequenceSampler*> sampler_ptrs;
  std::vector<runtime::StepInput> inputs;
  std::vector<std::int32_t> next(batch);
  const auto constraint = [&]() -> std::unique_ptr<sampling::TokenConstraint> {
    if (!compiled) return nullptr;
    return std::make_unique<grammar::GrammarMatcher>(compiled);
  };
  for (std::size_t b = 0; b < batch; ++b) {
    if (!engine.reserve(caches[b], prompt.size() + steps + 2)) throw std::runtime_error("KV cache too small");
    sampling::SamplingParams params;
    params.seed = 1000 + b;
    samplers.push_back(std::make_unique<sampling::SequenceSampler>(params, prompt, constraint()));
    sampler_ptrs.push_back(samplers.back().get());
    inputs.push_back({&caches[b], prompt});
  }
  std::vector<sampling::SampledToken> out;
  engine.step_and_sample(inputs, sampler_ptrs, out);  // the prefill, not timed
  const auto advance = [&] {
    for (std::size_t b = 0; b < batch; ++b) {
      next[b] = out[b].token;
      inputs[b] = {&caches[b], {&next[b], 1}};
      if (samplers[b]->constraint_terminated()) samplers[b]->set_constraint(constraint());
    }
  };
  advance();
  const auto start = Clock::now();
  for (std::size_t s = 0; s < steps; ++s) {
    engine.step_and_sample(inputs, sampler_ptrs, out);
    advance();
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  for (auto& cache : caches) engine.release(cache);
  return static_cast<double>(batch * steps) / elapsed;
}

void bench_decode(const std::string& model, std::uint64_t steps, std::uint64_t repeats) {
  engine::runtime::EngineOptions options;
  options.max_model_len = steps + 64;
  auto engine = engine::runtime::Engine::load(model, options);
  const auto& tokenizer = engine->tokenizer();
  std::vector<std::int32_t> stops;
  if (const auto end = tokenizer.token_to_id("<|im_end|>")) stops.push_back(*end);
  if (const auto end = tokenizer.token_to_id("<|endoftext|>")) stops.push_back(*end);
  auto vocabulary = std::make_shared<const grammar::TokenVocabulary>(
      grammar::vocabulary_from_tokenizer(tokenizer, engine->config().vocab_size, stops));
  grammar::GrammarCompiler compiler(vocabulary);
  grammar::StructuredOutputSpec spec;
  spec.kind = Kind::JsonSchema;
  spec.text = kUserSchema;
  const auto compiled = compiler.compile(spec);
  std::printf("-- decode: %s on %s, %llu steps per run, runs alternated x%llu, constrained by the user schema\n",
              model.c_str(), std::string(engine->device_name()).c_str(), static_cast<unsigned long long>(steps),
              static_cast<unsigned long long>(repeats));
  for (const std::size_t batch : {std::size_t{1}, std::size_t{8}}) {
    std::vector<double> free_rates, constrained_rates;
    decode_rate(*engine, batch, 4, nullptr);  // warm up
    for (std::uint64_t r = 0; r < repeats; ++r) {
      free_rates.push_back(decode_rate(*engine, batch, steps, nullptr));
      constrained_rates.push_back(decode_rate(*engine, batch, steps, compiled));
    }
    const double free_rate = percentile(free_rates, 0.5), constrained_rate = percentile(constrained_rates, 0.5);
    std::printf("decode batch %zu: %.2f tokens/s unconstrained, %.2f constrained (medians); ratio %.3f (", batch,
                free_rate, constrained_rate, constrained_rate / free_rate);
    for (std::uint64_t r = 0; r < repeats; ++r)
      std::printf("%s%.3f", r ? " " : "", constrained_rates[r] / free_rates[r]);
    std::printf(" per pair)\n");
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string tokenizer_path, model;
  std::uint64_t rounds = 20, compilations = 5, logits_width = 0, steps = 32, repeats = 3;
  std::string grammar_path, text_path, only;
  base::FlagParser flags(
      "usage: grammar-bench --tokenizer tokenizer.json [--logits-width N] [--rounds N] [--compiles N]\n"
      "                     [--grammar FILE --text FILE]\n"
      "                     [--model DIR [--steps N] [--repeats N]]");
  flags.add_string("tokenizer", "PATH", "the tokenizer.json whose vocabulary the masks cover", &tokenizer_path);
  flags.add_uint("logits-width", "N", "the model's logits (default: the tokenizer's size; Qwen3: 151936)",
                 &logits_width, 0, 1u << 24);
  flags.add_string("grammar", "PATH", "a GBNF file to measure instead of the built-in cases", &grammar_path);
  flags.add_string("text", "PATH", "with --grammar: the example output it walks", &text_path);
  flags.add_string("only", "TEXT", "run only the built-in cases whose name contains TEXT", &only);
  flags.add_uint("rounds", "N", "times each example is walked (default 20)", &rounds, 1, 100000);
  flags.add_uint("compiles", "N", "fresh compilations timed per case; the median is printed (default 5)", &compilations,
                 1, 1000);
  flags.add_string("model", "PATH", "also measure decode with and without a constraint on this model", &model);
  flags.add_uint("steps", "N", "with --model: decode steps per run (default 32)", &steps, 1, 100000);
  flags.add_uint("repeats", "N", "with --model: alternated pairs of runs per batch size (default 3)", &repeats, 1, 100);
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
      bench_masks({"file", Kind::Grammar, read_file(grammar_path), read_file(text_path)}, vocabulary, tokenizer, rounds,
                  compilations);
      return 0;
    }
    const auto selected = [&](const Case& c) {
      return only.empty() || std::string_view(c.name).find(only) != std::string_view::npos;
    };
    std::printf("-- per-token masks while walking an example output\n");
    const Case mask_cases[] = {
        {"json schema (user record)", Kind::JsonSchema, kUserSchema, kUserDocument},
        {"regex (contact line)", Kind::Regex, kContactRegex, kContactText},
        {"grammar (arithmetic)", Kind::Grammar, kArithmeticGrammar, kArithmeticText},
        {"grammar (JSON)", Kind::Grammar, kJsonGrammar, kJsonDocument},
    };
    for (const Case& c : mask_cases) {
      if (selected(c)) bench_masks(c, vocabulary, tokenizer, rounds, compilations);
    }
    std::printf("-- compile time of typical schemas\n");
    for (const Case& c : compile_cases()) {
      if (!selected(c)) continue;
      CompileTime time;
      const auto compiled = timed_compile(vocabulary, c, compilations, true, time);
      print_compiled(c, *compiled, time);
    }
    if (!model.empty()) bench_decode(model, steps, repeats);
    return 0;
  } catch (const base::UsageError& e) {
    std::cerr << "grammar-bench: " << e.what() << "\n" << flags.help();
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "grammar-bench: " << e.what() << "\n";
    return 1;
  }
}
