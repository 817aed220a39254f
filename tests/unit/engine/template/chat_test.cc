// render_chat and chat_context: the variables transformers passes, with the test data templates.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/unit/engine/template/render_helpers.h"

namespace {

namespace tpl = template_test::tpl;

std::string data_template(const std::string& name) {
  std::ifstream in(std::filesystem::path(TEST_DATA_DIR) / "chat_templates" / name, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

tpl::RenderOptions pinned_clock() {
  tpl::RenderOptions options;
  options.now = [] {
    std::tm tm{};
    tm.tm_year = 2025 - 1900;
    tm.tm_mon = 2;
    tm.tm_mday = 5;
    return tm;
  };
  return options;
}

TEST(ChatContext, CarriesTransformersVariables) {
  tpl::ChatInputs inputs;
  inputs.messages_json = R"([{"role": "user", "content": "hi"}])";
  inputs.add_generation_prompt = true;
  inputs.bos_token = "<s>";
  inputs.extra_kwargs_json = R"({"enable_thinking": false, "bos_token": "<override>"})";
  const tpl::Value context = tpl::chat_context(inputs);
  const auto t = tpl::ChatTemplate::parse(
      "{{ messages | length }}|{{ tools is none }}|{{ documents is none }}|{{ add_generation_prompt }}|{{ bos_token }}|"
      "{{ eos_token }}|{{ enable_thinking }}");
  EXPECT_EQ(t.render(context), "1|True|True|True|<override>||False");
}

TEST(ChatContext, RefusesMalformedInputs) {
  tpl::ChatInputs inputs;
  inputs.messages_json = "{\"role\": \"user\"}";
  EXPECT_THROW(tpl::chat_context(inputs), std::invalid_argument);
  inputs.messages_json = "[";
  EXPECT_THROW(tpl::chat_context(inputs), std::invalid_argument);
  inputs.messages_json = "[]";
  inputs.tools_json = "{}";
  EXPECT_THROW(tpl::chat_context(inputs), std::invalid_argument);
  inputs.tools_json = "";
  inputs.extra_kwargs_json = "[1]";
  EXPECT_THROW(tpl::chat_context(inputs), std::invalid_argument);
}

TEST(ChatTemplates, Llama3StyleWithToolsAndClock) {
  const auto t = tpl::ChatTemplate::parse(data_template("llama3_tools.jinja"));
  tpl::ChatInputs inputs;
  inputs.messages_json = R"([{"role": "system", "content": "Be brief. "},
                             {"role": "user", "content": "Weather?"},
                             {"role": "assistant", "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}]},
                             {"role": "tool", "content": "{\"temp\": 3}"}])";
  inputs.tools_json =
      R"([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}])";
  inputs.add_generation_prompt = true;
  inputs.bos_token = "<|begin_of_text|>";
  EXPECT_EQ(
      tpl::render_chat(t, inputs, pinned_clock()),
      "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
      "Environment: ipython\nCutting Knowledge Date: December 2023\nToday Date: 05 Mar 2025\n\n"
      "Be brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n"
      "Given the following functions, please respond with a JSON for a function call with its proper arguments "
      "that best answers the given prompt.\n\n"
      "Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its value}."
      " Do not use variables.\n\n"
      "{\n    \"type\": \"function\",\n    \"function\": {\n        \"name\": \"get_weather\",\n"
      "        \"parameters\": {\n            \"type\": \"object\"\n        }\n    }\n}\n\n"
      "Weather?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
      "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}<|eot_id|>"
      "<|start_header_id|>ipython<|end_header_id|>\n\n{\"temp\": 3}<|eot_id|>"
      "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplates, Llama3StyleRefusesParallelToolCalls) {
  const auto t = tpl::ChatTemplate::parse(data_template("llama3_tools.jinja"));
  tpl::ChatInputs inputs;
  inputs.messages_json = R"([{"role": "user", "content": "x"},
                             {"role": "assistant", "tool_calls": [{"function": {"name": "a", "arguments": {}}},
                                                                  {"function": {"name": "b", "arguments": {}}}]}])";
  try {
    tpl::render_chat(t, inputs, pinned_clock());
    FAIL() << "expected raise_exception";
  } catch (const tpl::TemplateError& e) {
    EXPECT_EQ(e.kind(), tpl::TemplateError::Kind::kRaised);
    EXPECT_EQ(e.message(), "This model only supports single tool-calls at once!");
  }
}

TEST(ChatTemplates, Qwen25StyleToolsBlockAndUnknownRoles) {
  const auto t = tpl::ChatTemplate::parse(data_template("qwen25_tools.jinja"));
  tpl::ChatInputs inputs;
  inputs.messages_json = R"([{"role": "user", "content": "Hi"}])";
  inputs.tools_json = R"([{"type": "function", "function": {"name": "f"}}])";
  inputs.add_generation_prompt = true;
  EXPECT_EQ(
      tpl::render_chat(t, inputs),
      "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.\n\n# Tools\n\n"
      "You may call one or more functions to assist with the user query.\n\n"
      "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
      "{\"type\": \"function\", \"function\": {\"name\": \"f\"}}\n</tools>\n\n"
      "For each function call, return a json object with function name and arguments within <tool_call></tool_call> "
      "XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n"
      "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  inputs.tools_json = "";
  inputs.add_generation_prompt = false;
  EXPECT_EQ(tpl::render_chat(t, inputs),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n");
  inputs.messages_json = R"([{"role": "user", "content": "Hi"}, {"role": "narrator", "content": "?"}])";
  try {
    tpl::render_chat(t, inputs);
    FAIL() << "expected raise_exception";
  } catch (const tpl::TemplateError& e) {
    EXPECT_EQ(e.message(), "Unexpected message role: narrator");
  }
}

// gpt-oss's harmony format: the template's own system message (date, reasoning effort, channels), the
// caller's system message and tools as the developer message, a finished turn's reasoning dropped, and the
// last turn's analysis kept when no generation prompt follows.
TEST(ChatTemplates, HarmonyChannelsAndDeveloperMessage) {
  const auto t = tpl::ChatTemplate::parse(data_template("harmony.jinja"));
  tpl::ChatInputs inputs;
  inputs.messages_json = R"([{"role": "system", "content": "Be brief."},
                             {"role": "user", "content": "Hi"},
                             {"role": "assistant", "content": "Hello!", "reasoning_content": "Greet back."},
                             {"role": "user", "content": "2+2?"}])";
  inputs.add_generation_prompt = true;
  inputs.extra_kwargs_json = R"({"reasoning_effort": "high"})";
  EXPECT_EQ(tpl::render_chat(t, inputs, pinned_clock()),
            "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
            "Knowledge cutoff: 2024-06\nCurrent date: 2025-03-05\n\nReasoning: high\n\n"
            "# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|>"
            "<|start|>developer<|message|># Instructions\n\nBe brief.\n\n<|end|>"
            "<|start|>user<|message|>Hi<|end|>"
            "<|start|>assistant<|channel|>final<|message|>Hello!<|end|>"
            "<|start|>user<|message|>2+2?<|end|><|start|>assistant");

  inputs.messages_json = R"([{"role": "user", "content": "Hi"},
                             {"role": "assistant", "content": "Hello!", "thinking": "Greet back."}])";
  inputs.add_generation_prompt = false;
  inputs.extra_kwargs_json = "";
  EXPECT_THAT(tpl::render_chat(t, inputs, pinned_clock()),
              ::testing::EndsWith("Reasoning: medium\n\n# Valid channels: analysis, commentary, final. Channel must "
                                  "be included for every message.<|end|><|start|>user<|message|>Hi<|end|>"
                                  "<|start|>assistant<|channel|>analysis<|message|>Greet back.<|end|>"
                                  "<|start|>assistant<|channel|>final<|message|>Hello!<|return|>"));
}

// Tools: the routing line in the system message, a TypeScript namespace in the developer message, calls on
// the commentary channel with their reasoning kept while the turn is open, and results from functions.NAME.
TEST(ChatTemplates, HarmonyToolsAndCalls) {
  const auto t = tpl::ChatTemplate::parse(data_template("harmony.jinja"));
  tpl::ChatInputs inputs;
  inputs.messages_json = R"([{"role": "user", "content": "Weather?"},
                             {"role": "assistant", "content": null, "reasoning_content": "Need the tool.",
                              "tool_calls": [{"function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
                             {"role": "tool", "content": "{\"temp\": 3}"}])";
  inputs.tools_json = R"([{"type": "function", "function": {"name": "get_weather", "description": "Current weather",
      "parameters": {"type": "object", "required": ["city"], "properties": {
        "city": {"type": "string", "description": "City name"},
        "unit": {"type": "string", "enum": ["c", "f"], "default": "c"},
        "days": {"type": "array", "items": {"type": "integer"}}}}}}])";
  inputs.add_generation_prompt = true;
  EXPECT_EQ(
      tpl::render_chat(t, inputs, pinned_clock()),
      "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
      "Knowledge cutoff: 2024-06\nCurrent date: 2025-03-05\n\nReasoning: medium\n\n"
      "# Valid channels: analysis, commentary, final. Channel must be included for every message.\n"
      "Calls to these tools must go to the commentary channel: 'functions'.<|end|>"
      "<|start|>developer<|message|># Tools\n\n## functions\n\nnamespace functions {\n\n"
      "// Current weather\ntype get_weather = (_: {\n// City name\ncity: string,\n"
      "unit?: \"c\" | \"f\", // default: \"c\",\ndays?: number[],\n}) => any;\n\n"
      "} // namespace functions<|end|>"
      "<|start|>user<|message|>Weather?<|end|>"
      "<|start|>assistant<|channel|>analysis<|message|>Need the tool.<|end|>"
      "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": \"Oslo\"}<|call|>"
      "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>{\"temp\": 3}<|end|>"
      "<|start|>assistant");
}

TEST(ChatTemplates, StrftimeNowUsesTheInjectedClock) {
  EXPECT_EQ(template_test::render("{{ strftime_now('%Y-%m-%d %b %B') }}", "{}", pinned_clock()),
            "2025-03-05 Mar March");
  EXPECT_FALSE(template_test::render("{{ strftime_now('%Y') }}").empty());  // the system clock
}

}  // namespace
