#pragma once

// --tool-call-parser openai (gpt-oss): calls are harmony messages addressed to `functions.NAME`, on the
// commentary channel, their text the arguments:
//   <|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Tokyo"}<|call|>
// (the recipient may instead follow the role: `<|start|>assistant to=functions.f<|channel|>commentary json`).
// As vLLM's parser reads them:
// - a message to `functions.NAME` is a call to NAME once it ends (at `<|call|>`, an end-of-sequence token, so
//   usually at the end of the sequence); arguments whose content type is JSON or unnamed are written again as
//   Python's json.dumps writes them (", " and ": ", non-ASCII escaped), and passed on as written when they
//   are not JSON;
// - `final` and `commentary` messages without a recipient (preambles) are content, and so is text outside
//   any message; vLLM's whole responses keep only the final message when both are there, but a stream
//   cannot take back a preamble it has sent, so here both are content, in order, whole or streamed;
// - `analysis` messages are reasoning, never content: the reasoning parser openai_gptoss passes them on as
//   reasoning; without it they are dropped, as vLLM drops them from content; messages to other recipients
//   (the built-in `browser.*` and `python` tools, which this server does not run) are dropped too.
// Headers and end markers never reach content. The markers are special tokens, so decoding keeps them.

#include <string>

#include "serverd/parsers/harmony_reader.h"
#include "serverd/parsers/tool_call_parser_base.h"

namespace serverd::parsers {

class OpenAiToolParser final : public ToolCallParserBase, private HarmonyReader::Handler {
 public:
  explicit OpenAiToolParser(ToolCallOptions options);

  std::string_view name() const override { return "openai"; }
  std::span<const std::string_view> markers() const override;
  bool needs_special_tokens() const override { return true; }

 private:
  void consume(std::string_view text, ToolParserDelta& out) override;
  void end(ToolParserDelta& out) override;

  void on_text(std::string_view text, const HarmonyHeader* header) override;
  void on_begin(const HarmonyHeader& header) override;
  void on_end(const HarmonyHeader& header, std::string_view marker) override;

  HarmonyReader reader_;
  ToolParserDelta* out_ = nullptr;  // where the reader's findings go during consume() and end()
  bool in_call_ = false;            // the message being read is a call
  std::string arguments_;           // the call's text so far
};

}  // namespace serverd::parsers
