// A replayed tool-call history as clients send it (an assistant message with content null and tool_calls
// whose arguments are JSON text, then the tool's answer) through the request parser and the real Qwen3 chat
// template, a Llama 3.1 style one and a Mistral style one: the template gets "" for null content and the
// arguments as a JSON value, as vLLM gives them.
#include "serverd/api/prompts.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "serverd/api/json_io.h"
#include "serverd/api/protocol.h"
#include "tests/support/serverd/test_model.h"

namespace serverd::api {
namespace {

std::string data_template(const std::string& name) {
  std::ifstream in(std::filesystem::path(TEST_DATA_DIR) / "chat_templates" / name, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

constexpr std::string_view kTool =
    R"({"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}})";

// The history with `arguments` (a JSON value, written as is into the request).
std::string history(std::string_view arguments) {
  return std::string(R"({"tools": [)") + std::string(kTool) + R"(], "tool_choice": "none", "messages": [
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": null, "tool_calls": [
        {"id": "chatcmpl-tool-1", "type": "function", "function": {"name": "get_weather", "arguments": )" +
         std::string(arguments) + R"(}}]},
      {"role": "tool", "tool_call_id": "chatcmpl-tool-1", "content": "18C"}]})";
}

std::string render(const std::string& template_name, const std::string& body) {
  serverd_test::TestModel model;
  const auto chat_template = engine::template_::ChatTemplate::parse(data_template(template_name));
  ModelInfo info = model.info(4096);
  info.chat_template = &chat_template;
  rapidjson::Document document;
  parse_request_body(body, document);
  const ChatRequest request = parse_chat_request(document, ParseLimits{});
  ChatPromptInputs inputs;
  inputs.messages = &request.messages;
  inputs.tools_json = request.tools_json;
  inputs.add_generation_prompt = request.add_generation_prompt;
  return build_chat_prompt(inputs, info, ChatSettings{}).text;
}

std::string qwen3_turns(std::string_view arguments) {
  return "<|im_start|>user\nWeather in Paris?<|im_end|>\n"
         "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": " +
         std::string(arguments) +
         "}\n</tool_call><|im_end|>\n"
         "<|im_start|>user\n<tool_response>\n18C\n</tool_response><|im_end|>\n"
         "<|im_start|>assistant\n";
}

TEST(ToolHistory, Qwen3TemplateGetsTheArgumentsAsAValueAndNullContentAsEmpty) {
  const std::string prompt = render("qwen3.jinja", history(R"("{\"city\":\"Paris\"}")"));
  // The tools reach the template with tool_choice "none", as in vLLM.
  const std::string system =
      "<|im_start|>system\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
      "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n" +
      std::string(kTool) +
      "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
      "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
      "<args-json-object>}\n</tool_call><|im_end|>\n";
  // The JSON text was parsed: the template wrote it again with tojson's spacing.
  EXPECT_EQ(prompt, system + qwen3_turns(R"({"city": "Paris"})"));
}

TEST(ToolHistory, ArgumentsThatAreNotJsonBecomeAnEmptyObject) {
  EXPECT_NE(render("qwen3.jinja", history(R"("city=Paris")")).find(qwen3_turns("{}")), std::string::npos);
  EXPECT_NE(render("qwen3.jinja", history("null")).find(qwen3_turns("{}")), std::string::npos);
  // An object is kept as it is.
  EXPECT_NE(render("qwen3.jinja", history(R"({"city": "Paris"})")).find(qwen3_turns(R"({"city": "Paris"})")),
            std::string::npos);
}

TEST(ToolHistory, Llama31StyleTemplateGetsTheCallAsParameters) {
  const std::string prompt = render("llama3_tools.jinja", history(R"("{\"city\":\"Paris\"}")"));
  EXPECT_NE(prompt.find("<|start_header_id|>assistant<|end_header_id|>\n\n"
                        "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}<|eot_id|>"
                        "<|start_header_id|>ipython<|end_header_id|>\n\n18C<|eot_id|>"),
            std::string::npos)
      << prompt;
}

// Mistral's templates take the calls with their 9-character ids and the tool's answer by call id.
TEST(ToolHistory, MistralStyleTemplateGetsTheCallsAndResultsByTheirIds) {
  const std::string body = std::string(R"({"tools": [)") + std::string(kTool) + R"(], "messages": [
      {"role": "user", "content": "Weather in Paris and Rome?"},
      {"role": "assistant", "content": null, "tool_calls": [
        {"id": "a1B2c3D4e", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
        {"id": "f5G6h7I8j", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Rome\"}"}}]},
      {"role": "tool", "tool_call_id": "a1B2c3D4e", "content": "18C"},
      {"role": "tool", "tool_call_id": "f5G6h7I8j", "content": "21C"}]})";
  const std::string prompt = render("mistral_tools.jinja", body);
  EXPECT_NE(prompt.find(std::string("[AVAILABLE_TOOLS] [") + std::string(kTool) +
                        "][/AVAILABLE_TOOLS][INST] Weather in Paris and Rome?[/INST][TOOL_CALLS] ["
                        R"({"name": "get_weather", "arguments": {"city": "Paris"}, "id": "a1B2c3D4e"}, )"
                        R"({"name": "get_weather", "arguments": {"city": "Rome"}, "id": "f5G6h7I8j"}])"),
            std::string::npos)
      << prompt;
  EXPECT_NE(prompt.find(R"([TOOL_RESULTS] {"content": "18C", "call_id": "a1B2c3D4e"}[/TOOL_RESULTS])"
                        R"([TOOL_RESULTS] {"content": "21C", "call_id": "f5G6h7I8j"}[/TOOL_RESULTS])"),
            std::string::npos)
      << prompt;
}

}  // namespace
}  // namespace serverd::api
