#include "serverd/parsers/tool_call_parser_base.h"

#include <stdexcept>
#include <utility>

namespace serverd::parsers {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

ToolCallParserBase::ToolCallParserBase(CallIdStyle id_style, ToolCallOptions options)
    : ids_(id_style, std::move(options.random_bits)), parallel_tool_calls_(options.parallel_tool_calls) {}

ToolParserDelta ToolCallParserBase::feed(std::string_view text) {
  if (finished_) throw std::logic_error("tool-call parser '" + std::string(name()) + "' fed text after finish()");
  ToolParserDelta out;
  consume(text, out);
  return out;
}

ToolParserDelta ToolCallParserBase::finish() {
  if (finished_) throw std::logic_error("tool-call parser '" + std::string(name()) + "' finished twice");
  finished_ = true;
  ToolParserDelta out;
  end(out);
  return out;
}

void ToolCallParserBase::emit_call(RecognisedCall call, ToolParserDelta& out) {
  const int index = begin_call(std::move(call.name), out);
  call_arguments(index, call.arguments, out);
}

int ToolCallParserBase::begin_call(std::string name, ToolParserDelta& out) {
  const int index = calls_++;
  gap_text_ = false;
  if (index > 0 && !parallel_tool_calls_) return index;
  ToolCallDelta header;
  header.index = index;
  header.id = ids_.next();
  header.name = std::move(name);
  out.tool_calls.push_back(std::move(header));
  return index;
}

void ToolCallParserBase::call_arguments(int index, std::string_view text, ToolParserDelta& out) {
  if (index > 0 && !parallel_tool_calls_) return;
  ToolCallDelta arguments;
  arguments.index = index;
  arguments.arguments = std::string(text);
  out.tool_calls.push_back(std::move(arguments));
}

void ToolCallParserBase::outside(std::string_view text, ToolParserDelta& out, std::string_view separators) {
  if (made_calls() && !gap_text_) {
    std::size_t skip = 0;
    while (skip < text.size() && (is_space(text[skip]) || separators.find(text[skip]) != std::string_view::npos)) {
      ++skip;
    }
    text.remove_prefix(skip);
    if (text.empty()) return;
    gap_text_ = true;
  }
  out.content.append(text);
}

void ToolCallParserBase::unparsed(std::string_view text, ToolParserDelta& out) {
  if (text.empty()) return;
  gap_text_ = true;
  out.content.append(text);
}

}  // namespace serverd::parsers
