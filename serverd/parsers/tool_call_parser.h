#pragma once

// Tool-call parsers: the model's generated text in, plain content and OpenAI-shaped tool calls out, as
// vLLM's `--tool-call-parser NAME` turns them out. One parser per choice, fed the text as it is decoded.
//
// Streaming contract. The API layer decodes tokens to text incrementally and feeds each text delta to
// feed(), then calls finish() once when the sequence ends; what the calls return, concatenated, is the
// same for every way the text is split into deltas (the tests check it at every byte). So a whole
// response is the same parser fed all the text at once and finished (parse_tool_calls below), and a
// stream never sends anything the whole response would not contain.
//
// To keep that promise a call is sent once its text is complete and known to be a valid call (at
// `</tool_call>`, at the `}` that closes it, at the `)` of a pythonic call, or at finish()): its header
// delta {index, id, name} and then its arguments in one fragment. Text that is not a valid call comes out
// as plain content, as vLLM does with it. Deltas fed in must end on UTF-8 character boundaries (the
// detokenizer's deltas do); what comes out then does too.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace serverd::parsers {

// One piece of a streamed tool call, shaped as OpenAI's `delta.tool_calls[]` entries: a call's first piece
// carries its id and function name (`{"index", "id", "type": "function", "function": {"name"}}`), the
// pieces after it carry argument text (`{"index", "function": {"arguments"}}`).
struct ToolCallDelta {
  int index = 0;          // the call's position among this choice's calls, from 0
  std::string id;         // set on the first piece only
  std::string name;       // set on the first piece only
  std::string arguments;  // a fragment of the arguments' JSON text (pieces after the first)

  bool starts_call() const { return !id.empty(); }
  bool operator==(const ToolCallDelta&) const = default;
};

// What one feed() or finish() produced: content text to send, and tool-call pieces in order.
struct ToolParserDelta {
  std::string content;
  std::vector<ToolCallDelta> tool_calls;

  bool empty() const { return content.empty() && tool_calls.empty(); }
  bool operator==(const ToolParserDelta&) const = default;
};

// 64 random bits per call. Call ids are drawn from it: tests inject a seeded source so ids are known.
using RandomBits = std::function<std::uint64_t()>;

struct ToolCallOptions {
  // The request's `parallel_tool_calls`: false keeps only the first call (vLLM drops the others; they are
  // neither content nor calls).
  bool parallel_tool_calls = true;
  // Where call ids come from; empty: a generator seeded from std::random_device.
  RandomBits random_bits;
};

class ToolCallParser {
 public:
  virtual ~ToolCallParser() = default;

  // The next text delta. Throws std::logic_error after finish().
  virtual ToolParserDelta feed(std::string_view text) = 0;
  // The end of the sequence: text held back until then is decided. Throws std::logic_error when called
  // twice.
  virtual ToolParserDelta finish() = 0;

  // The --tool-call-parser name.
  virtual std::string_view name() const = 0;
  // The strings this model family marks tool calls with (e.g. "<tool_call>"); empty when it has none.
  virtual std::span<const std::string_view> markers() const = 0;
  // True when the markers are special tokens that decoding must keep (vLLM sets skip_special_tokens to
  // false for this parser when a request has tools and tool_choice is not "none").
  virtual bool needs_special_tokens() const = 0;
};

// The --tool-call-parser names this server knows, in the order error messages list them.
std::span<const std::string_view> tool_call_parser_names();

// A parser for one choice. Throws std::invalid_argument naming `name` and the known names when `name` is
// not one of them.
std::unique_ptr<ToolCallParser> make_tool_call_parser(std::string_view name, ToolCallOptions options = {});

// A tool call of a whole response, as `message.tool_calls[]` gives it.
struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text, as OpenAI returns it

  bool operator==(const ToolCall&) const = default;
};

// A whole response: `message.content` and `message.tool_calls`.
struct ToolParserResult {
  // nullopt (JSON null) when the response made calls and has no other text, as vLLM returns it.
  std::optional<std::string> content;
  std::vector<ToolCall> calls;

  bool operator==(const ToolParserResult&) const = default;
};

// Gathers streamed deltas into the whole response they add up to.
class ToolCallCollector {
 public:
  // Throws std::logic_error on a piece that does not continue the calls so far (an index out of order).
  void add(const ToolParserDelta& delta);
  ToolParserResult result() const;

 private:
  std::string content_;
  std::vector<ToolCall> calls_;
};

// A whole (non-stream) response: `parser` fed all of `text`, then finished.
ToolParserResult parse_tool_calls(ToolCallParser& parser, std::string_view text);

}  // namespace serverd::parsers
