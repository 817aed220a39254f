#pragma once

// What every tool-call parser shares: feed/finish guarded against use after the end, call indices and ids,
// parallel_tool_calls, and the rule for text outside calls.

#include <string>
#include <string_view>

#include "serverd/parsers/call_ids.h"
#include "serverd/parsers/tool_call_parser.h"

namespace serverd::parsers {

// A call read from the model's text: the function's name and its arguments as JSON text.
struct RecognisedCall {
  std::string name;
  std::string arguments;
};

class ToolCallParserBase : public ToolCallParser {
 public:
  ToolParserDelta feed(std::string_view text) final;
  ToolParserDelta finish() final;

 protected:
  ToolCallParserBase(CallIdStyle id_style, ToolCallOptions options);

  // The parser's own work on the next delta, and at the end.
  virtual void consume(std::string_view text, ToolParserDelta& out) = 0;
  virtual void end(ToolParserDelta& out) = 0;

  // A recognised call: its header and arguments pieces, unless parallel_tool_calls is false and a call
  // came before it (then nothing, as vLLM drops it).
  void emit_call(RecognisedCall call, ToolParserDelta& out);
  // A call whose arguments come in pieces: its header now (the same rule for parallel_tool_calls), then
  // call_arguments for each piece. Returns the call's index.
  int begin_call(std::string name, ToolParserDelta& out);
  void call_arguments(int index, std::string_view text, ToolParserDelta& out);
  // Text outside calls. Before the first call it is content as it is. After a call, the whitespace that
  // follows it is dropped (vLLM keeps no text around calls) and the rest of the text up to the next call
  // is content, from its first other byte on, so that nothing the model wrote after its calls is lost.
  // `separators` are the bytes dropped besides whitespace (";" between llama3_json calls).
  void outside(std::string_view text, ToolParserDelta& out, std::string_view separators = {});
  // Text that looked like a call and is not one: content as it is.
  void unparsed(std::string_view text, ToolParserDelta& out);
  bool made_calls() const { return calls_ > 0; }

 private:
  CallIds ids_;
  bool parallel_tool_calls_;
  int calls_ = 0;          // calls recognised, kept or not
  bool gap_text_ = false;  // the text since the last call has reached a byte that is not dropped
  bool finished_ = false;
};

// ASCII whitespace as Python's str.strip() and json.loads skip it.
bool is_space(char c);

}  // namespace serverd::parsers
