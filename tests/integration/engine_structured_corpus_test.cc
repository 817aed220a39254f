// Structured outputs are always valid, measured on noise: a tiny random-weight Qwen3 model (which emits
// noise unconstrained) generates through the engine's real sampling path (Engine::step_and_sample, one
// SequenceSampler holding a GrammarMatcher per sequence, dozens of sequences per step, prefills mixed
// with decodes) for every schema of the corpus, realistic regexes, choice lists and GBNF grammars, with
// seeded temperature sampling (and greedy for a subset; several sequences sharing one compiled grammar
// for others, as n > 1 does), each until its matcher terminates. Every output is then checked by judges
// independent of the grammar engine: ajv, JavaScript's RegExp and equality (tests/interop/
// structured_validate.mjs, one node run for all), and an Earley recognizer over the parsed grammar
// (tests/support/reference_recognizer.h) for grammars. A sequence that reaches max_tokens fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/grammar/gbnf_parser.h"
#include "engine/grammar/spec_to_gbnf.h"
#include "engine/grammar/structured_output.h"
#include "engine/grammar/token_vocabulary.h"
#include "engine/model_writer/model_writer.h"
#include "engine/runtime/engine.h"
#include "engine/tokenizer/unicode.h"
#include "tests/support/constrained_generation.h"
#include "tests/support/reference_recognizer.h"
#include "tests/support/schema_bounds.h"
#include "tests/support/schema_corpus.h"
#include "tests/support/structured_validation.h"
#include "tests/support/temp_dir.h"

namespace {

using engine::grammar::StructuredOutputSpec;
using Kind = engine::grammar::StructuredOutputSpec::Kind;
using testing_support::ValidationCase;

// Realistic patterns: dates, times, emails, identifiers, phone numbers, codes, alternations, classes,
// counted repetitions, multi-byte classes, named groups, unbounded repetitions of few tokens.
const char* const kRegexes[] = {
    R"(\d{4}-\d{2}-\d{2})",
    R"((0[1-9]|1[0-2])/(0[1-9]|[12]\d|3[01])/\d{4})",
    R"(([01]\d|2[0-3]):[0-5]\d(:[0-5]\d)?)",
    R"([a-z0-9._%+-]{1,16}@[a-z0-9-]{1,12}(\.[a-z]{2,4}){1,2})",
    R"([A-Za-z_][A-Za-z0-9_]{0,15})",
    R"(\+1 \(\d{3}\) \d{3}-\d{4})",
    R"(\d{3}-\d{3}-\d{4})",
    R"(yes|no|maybe)",
    R"((cat|dog|bird)s?)",
    R"([A-Z]{3})",
    R"(-?\d{1,6}(\.\d{1,3})?)",
    R"(#[0-9a-fA-F]{6})",
    R"(((25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(25[0-5]|2[0-4]\d|1?\d?\d))",
    R"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})",
    R"(https?://[a-z]{1,10}\.(com|org|net)(/[a-z0-9]{1,8}){0,3})",
    R"([A-Z][a-z]{1,10} [A-Z][a-z]{1,10})",
    R"(\w{2,8})",
    R"([^\s]{1,10})",
    R"(\S{3,6})",
    R"((?:[A-Z]{2}\d{2} ?){2,3})",
    R"(v\d+\.\d+\.\d+)",
    R"([A-Z]{2}-\d{4}-[A-Z]{2})",
    R"((Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{1,2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4})",
    R"(\$\d{1,3}(,\d{3})*\.\d{2})",
    R"([a-z]{1,10}(-[a-z]{1,10}){0,3})",
    R"((\d{3}\.){2}\d{3}-\d{2})",
    R"([A-Z]{1,2}\d[A-Z\d]? \d[A-Z]{2})",
    R"(\d{5}(-\d{4})?)",
    R"(true|false)",
    R"(\((\d{1,2}),\s?(\d{1,2})\))",
    R"([à-ÿ]{1,4} [α-ω]{2,5})",
    R"((?P<year>\d{4})-(?P<month>0[1-9]|1[0-2]))",
    R"([A-Fa-f0-9]{2}(:[A-Fa-f0-9]{2}){5})",
    R"(.{1,12})",
    R"((a|ab)(c|bcd)d*)",
    R"(\d+)",
    R"([+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?)",
    R"([^,\n]{1,8}(,[^,\n]{1,8}){2})",
    R"([\u4e00-\u9fff]{1,3}|[😀-🙏]{1,2})",
    R"(\w{1,10}@\w{1,10}\.com)",
};

const std::vector<std::vector<std::string>> kChoices = {
    {"positive", "negative", "neutral"},
    {"yes", "no"},
    {"Paris", "London", "New York", "Tokyo"},
    {"a", "ab", "abc"},
    {"the", "there", "their", "them"},
    {"é", "ü", "日本", "😀"},
    {"He said \"hi\"", "back\\slash", "tab\there"},
    {"1", "10", "100"},
    {"red", "green", "blue", "yellow", "purple", "orange", "black", "white"},
    {" leading space", "trailing space "},
};

// GBNF grammars as vLLM's `grammar` and llama.cpp's --grammar take them.
const char* const kGrammars[] = {
    // Arithmetic with recursion through several rules.
    "root ::= expr\n"
    "expr ::= term ((\"+\" | \"-\") term){0,3}\n"
    "term ::= factor ((\"*\" | \"/\") factor){0,2}\n"
    "factor ::= [0-9]{1,3} | \"(\" expr \")\"\n",
    // key=value lines.
    "root ::= line{1,4}\n"
    "line ::= key \"=\" value \"\\n\"\n"
    "key ::= [a-z] [a-z0-9_]{0,7}\n"
    "value ::= [0-9]{1,4} | \"\\\"\" [a-z ]{0,10} \"\\\"\" | \"true\" | \"false\"\n",
    // A small SQL query.
    "root ::= \"SELECT \" cols \" FROM \" ident where? \";\"\n"
    "cols ::= \"*\" | ident (\", \" ident){0,3}\n"
    "where ::= \" WHERE \" ident (\" = \" | \" < \" | \" > \") ([0-9]{1,4} | \"'\" [a-z]{0,6} \"'\")\n"
    "ident ::= [a-z_] [a-z0-9_]{0,9}\n",
    // JSON with bounded strings, numbers and whitespace.
    "root ::= value\n"
    "value ::= object | array | string | number | \"true\" | \"false\" | \"null\"\n"
    "object ::= \"{\" ( string \":\" ws value (\",\" ws string \":\" ws value){0,3} )? \"}\"\n"
    "array ::= \"[\" ( value (\",\" ws value){0,3} )? \"]\"\n"
    "string ::= \"\\\"\" ( [^\"\\\\\\x00-\\x1F] | \"\\\\\" [\"\\\\nt] ){0,8} \"\\\"\"\n"
    "number ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,5} )\n"
    "ws ::= \" \"?\n",
    // A list of dates.
    "root ::= date (\", \" date){0,4}\n"
    "date ::= year \"-\" month \"-\" day\n"
    "year ::= (\"19\" | \"20\") [0-9] [0-9]\n"
    "month ::= \"0\" [1-9] | \"1\" [0-2]\n"
    "day ::= \"0\" [1-9] | [12] [0-9] | \"3\" [01]\n",
    // Nested boolean expressions with ambiguity (a term is also an expression).
    "root ::= bexpr\n"
    "bexpr ::= bterm (\" or \" bterm)*\n"
    "bterm ::= bfactor (\" and \" bfactor)*\n"
    "bfactor ::= \"not \" bfactor | \"(\" bexpr \")\" | \"true\" | \"false\" | [a-z]{1,3}\n",
    // Multi-byte characters that byte tokens split, and words.
    "root ::= word (\" \" word){0,5} [.!?]\n"
    "word ::= [a-zé-ü]{1,6} | [\\u4e00-\\u9fff]{1,2} | [\\U0001F600-\\U0001F64F]\n",
};

constexpr std::size_t kManyProperties = 16;
// The tiny model's logits spread over several units and it falls into loops ("0.8080808...", runs of
// tabs) that an unbounded number or whitespace follows for thousands of tokens; at OpenAI's highest
// temperature its choices among the allowed tokens are close to uniform, so every construct ends.
constexpr float kTemperature = 2.0f;

struct Case {
  std::string id;
  StructuredOutputSpec spec;
  std::string validation_schema;  // JSON kinds: what ajv checks the output against
  std::size_t n = 1;              // sequences sharing the case's compiled grammar
  bool greedy = false;
  // The schema lets the model write text no keyword bounds (names of additional properties, any value):
  // its sequences get a logit bias towards tokens holding a '"' (or '@'), so that strings close after tens of tokens
  // instead of hundreds. The bias comes before the mask, so the grammar still decides what is allowed.
  bool nudge_quotes = false;
};

StructuredOutputSpec spec_of(Kind kind, std::string text) {
  StructuredOutputSpec spec;
  spec.kind = kind;
  spec.text = std::move(text);
  return spec;
}

std::vector<Case> corpus_cases() {
  std::vector<testing_support::CorpusSchema> schemas = testing_support::hand_written_schemas(SCHEMA_CORPUS_DIR);
  for (auto& generated : testing_support::generated_schemas(17, 260)) schemas.push_back(std::move(generated));
  std::vector<Case> cases;
  for (std::size_t i = 0; i < schemas.size(); ++i) {
    // The bounded schema (tests/support/schema_bounds.h) is both what the engine is asked for and what
    // ajv checks: random weights would otherwise spend thousands of tokens inside one string.
    const std::string bounded = testing_support::bounded_for_random_weights(schemas[i].schema);
    Case c{schemas[i].id, spec_of(Kind::JsonSchema, bounded), bounded};
    c.nudge_quotes = testing_support::allows_unbounded_text(bounded);
    // Between any two tokens the default whitespace allows a newline and 20 tabs, which this model likes:
    // a schema of 20 to 60 properties would take thousands of tokens, so those get vLLM's
    // guided_whitespace_pattern of one optional space (the default stays tested by the others).
    if (testing_support::listed_properties(bounded) >= kManyProperties) c.spec.whitespace_pattern = "[ ]?";
    // n > 1 for every 23rd schema. Greedy decoding for the enums, the length-bounded strings and the generated
    // enums: outputs of finitely many tokens. Elsewhere (an unbounded number, a time's fraction) greedy
    // decoding of random weights repeats itself ("0.8484...") until max_tokens, by nature.
    if (i % 23 == 5) c.n = 4;
    const std::string& id = schemas[i].id;
    c.greedy = id.starts_with("enums.jsonl") ||
               (id.starts_with("strings.jsonl") && bounded.find("\"maxLength\"") != std::string::npos) ||
               (id.starts_with("generated:") && std::stoul(id.substr(10)) % 8 == 1);
    cases.push_back(std::move(c));
  }
  // json_object is any object: names and values are free.
  for (int i = 0; i < 2; ++i) {
    Case c{"json_object:" + std::to_string(i), spec_of(Kind::JsonObject, ""), R"({"type":"object"})", i == 0 ? 3u : 1u};
    c.nudge_quotes = true;
    cases.push_back(std::move(c));
  }
  for (std::size_t i = 0; i < std::size(kRegexes); ++i) {
    Case c{"regex:" + std::to_string(i), spec_of(Kind::Regex, kRegexes[i]), ""};
    c.n = i % 5 == 0 ? 3 : 1;
    c.greedy = i % 4 == 1;
    cases.push_back(std::move(c));
  }
  for (std::size_t i = 0; i < kChoices.size(); ++i) {
    Case c{"choice:" + std::to_string(i), spec_of(Kind::Choice, ""), ""};
    c.spec.choices = kChoices[i];
    c.n = 3;
    cases.push_back(c);
    c.id += ":greedy";
    c.n = 1;
    c.greedy = true;
    cases.push_back(std::move(c));
  }
  for (std::size_t i = 0; i < std::size(kGrammars); ++i) {
    cases.push_back({"grammar:" + std::to_string(i), spec_of(Kind::Grammar, kGrammars[i]), "", 4});
  }
  return cases;
}

using Clock = std::chrono::steady_clock;
double seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// Added to the logits of tokens holding a '"' or an '@' (an email's way out of its local part) where text
// is otherwise unbounded (Case::nudge_quotes).
constexpr float kQuoteBias = 5.0f;

struct KindCount {
  std::size_t outputs = 0;
  std::size_t tokens = 0;
};

TEST(EngineStructuredCorpus, EveryConstrainedOutputValidates) {
  const testing_support::TempDir dir;
  engine::tools::ModelWriterOptions writer;
  writer.out_dir = dir.path();
  writer.seed = 11;
  engine::tools::write_model(writer);
  engine::runtime::EngineOptions options;
  options.device = engine::runtime::Device::Cpu;
  options.threads = 2;
  options.max_model_len = 2048;
  options.kv_cache_bytes = std::size_t{1} << 30;  // every sequence at full length; touched only where written
  const auto engine = engine::runtime::Engine::load(dir.path(), options);
  const auto& tokenizer = engine->tokenizer();
  std::vector<std::int32_t> stops;
  for (const auto id : engine->config().eos_token_ids) stops.push_back(static_cast<std::int32_t>(id));
  if (const auto end = tokenizer.token_to_id("<|endoftext|>")) stops.push_back(*end);
  const auto vocabulary = std::make_shared<const engine::grammar::TokenVocabulary>(
      engine::grammar::vocabulary_from_tokenizer(tokenizer, engine->config().vocab_size, stops));
  engine::grammar::GrammarCompiler compiler(vocabulary);

  std::vector<std::pair<std::int32_t, float>> quote_bias;
  for (std::size_t id = 0; id < vocabulary->token_bytes.size(); ++id) {
    if (vocabulary->token_bytes[id].find_first_of("\"@") != std::string::npos) {
      quote_bias.emplace_back(static_cast<std::int32_t>(id), kQuoteBias);
    }
  }
  ASSERT_FALSE(quote_bias.empty());

  const auto compile_start = Clock::now();
  const std::vector<Case> cases = corpus_cases();
  const char* const kPrompts[] = {"Answer: ", "The result is", "{\"", "Reply in one word.", "\n"};
  std::vector<testing_support::ConstrainedRequest> requests;
  std::vector<std::size_t> case_of;  // request -> case
  for (std::size_t c = 0; c < cases.size(); ++c) {
    std::shared_ptr<const engine::grammar::CompiledGrammar> grammar;
    try {
      grammar = compiler.compile(cases[c].spec);
    } catch (const engine::grammar::GrammarError& e) {
      ADD_FAILURE() << cases[c].id << " does not compile: " << e.what();
      continue;
    }
    for (std::size_t k = 0; k < cases[c].n; ++k) {
      testing_support::ConstrainedRequest r;
      r.grammar = grammar;  // one compiled grammar for the case's n sequences
      r.params.temperature = cases[c].greedy ? 0.0f : kTemperature;
      r.params.seed = 1000 + requests.size();
      if (cases[c].nudge_quotes) r.params.logit_bias = quote_bias;
      r.prompt = tokenizer.encode(kPrompts[(c + k) % std::size(kPrompts)], false);
      requests.push_back(std::move(r));
      case_of.push_back(c);
    }
  }
  const auto generate_start = Clock::now();
  testing_support::GenerationLimits limits;
  limits.max_batch = 128;
  limits.max_tokens = 2000;  // the tiny model's 2048 positions, less the prompt
  const auto outputs = testing_support::generate_constrained(*engine, *vocabulary, requests, limits);

  const auto check_start = Clock::now();
  std::vector<ValidationCase> to_validate;
  std::map<std::string, KindCount> counts;
  std::size_t grammar_outputs = 0;
  for (std::size_t r = 0; r < outputs.size(); ++r) {
    const Case& c = cases[case_of[r]];
    const auto& out = outputs[r];
    const std::string id = c.id + "#" + std::to_string(r);
    const std::string kind(c.greedy ? std::string(engine::grammar::kind_name(c.spec.kind)) + " (greedy)"
                                    : engine::grammar::kind_name(c.spec.kind));
    counts[kind].outputs += 1;
    counts[kind].tokens += out.tokens.size();
    if (!out.terminated) {
      ADD_FAILURE() << id << (c.greedy ? " (greedy)" : "") << " reached max_tokens (" << limits.max_tokens
                    << ") before its grammar ended: " << testing::PrintToString(out.bytes.substr(0, 300));
      continue;
    }
    if (!engine::tokenizer::unicode::is_valid_utf8(out.bytes)) {
      ADD_FAILURE() << id << " is not valid UTF-8: " << testing::PrintToString(out.bytes);
      continue;
    }
    EXPECT_EQ(tokenizer.decode(out.tokens, /*skip_special_tokens=*/true), out.bytes) << id;
    switch (c.spec.kind) {
      case Kind::Grammar: {
        const grammar_test::ReferenceRecognizer recognizer(engine::grammar::parse_gbnf(c.spec.text));
        EXPECT_TRUE(recognizer.complete(out.bytes)) << id << " is not in its grammar: " << out.bytes;
        ++grammar_outputs;
        break;
      }
      case Kind::Regex: to_validate.push_back({id, ValidationCase::Kind::Regex, "", c.spec.text, {}, out.bytes}); break;
      case Kind::Choice:
        to_validate.push_back({id, ValidationCase::Kind::Choice, "", "", c.spec.choices, out.bytes});
        break;
      default: to_validate.push_back({id, ValidationCase::Kind::Json, c.validation_schema, "", {}, out.bytes}); break;
    }
  }
  for (const auto& [kind, count] : counts) {
    std::printf("%-20s %4zu outputs, %6.1f tokens on average\n", kind.c_str(), count.outputs,
                static_cast<double>(count.tokens) / static_cast<double>(count.outputs));
  }
  const auto report = testing_support::validate_structured(NODE_EXECUTABLE, STRUCTURED_VALIDATE_SCRIPT, to_validate);
  std::printf("validator: %s", report.output.c_str());
  EXPECT_EQ(report.status, 0) << report.output;
  std::printf("%zu cases compiled in %.1f s, %zu sequences generated in %.1f s, checked in %.1f s\n", cases.size(),
              seconds(generate_start - compile_start), requests.size(), seconds(check_start - generate_start),
              seconds(Clock::now() - check_start));
  EXPECT_EQ(to_validate.size() + grammar_outputs, outputs.size());
  EXPECT_GE(outputs.size(), 371u + 30u);
}

}  // namespace
