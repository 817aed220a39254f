#pragma once

// Feeding parsers the way the API layer will (text deltas, then finish) in every way a text can be split,
// for the property all parsers share: the stream adds up to the whole response.

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "base/splitmix64.h"
#include "serverd/parsers/call_ids.h"
#include "serverd/parsers/reasoning_parser.h"
#include "serverd/parsers/tool_call_parser.h"

namespace serverd::parsers::testing {

// Options whose call ids come from a seeded stream, so that two parsers made alike mint the same ids.
inline ToolCallOptions seeded_options(std::uint64_t seed = 7, bool parallel_tool_calls = true) {
  auto stream = std::make_shared<base::SplitMix64>(seed);
  ToolCallOptions options;
  options.parallel_tool_calls = parallel_tool_calls;
  options.random_bits = [stream] { return stream->next(); };
  return options;
}

// A whole response that made `calls` and wrote nothing else (content null, as vLLM returns it).
inline ToolParserResult calls_only(std::vector<ToolCall> calls) {
  return ToolParserResult{std::nullopt, std::move(calls)};
}

// `text` fed to a new parser `name` at once, then finished.
inline ToolParserResult whole_tool_calls(std::string_view name, std::string_view text,
                                         ToolCallOptions options = seeded_options()) {
  const auto parser = make_tool_call_parser(name, std::move(options));
  return parse_tool_calls(*parser, text);
}

// `text` fed to a new parser in the pieces `ends` cut it into (each a position where a piece ends), then
// finished. Checks on the way that every piece's deltas are well formed.
inline ToolParserResult streamed_tool_calls(std::string_view name, std::string_view text,
                                            const std::vector<std::size_t>& ends,
                                            ToolCallOptions options = seeded_options()) {
  const auto parser = make_tool_call_parser(name, std::move(options));
  ToolCallCollector collector;
  std::size_t from = 0;
  for (const std::size_t end : ends) {
    collector.add(parser->feed(text.substr(from, end - from)));
    from = end;
  }
  collector.add(parser->feed(text.substr(from)));
  collector.add(parser->finish());
  return collector.result();
}

// Split points: every single cut, every byte on its own, and seeded random cuts of 1 to 8 bytes.
inline std::vector<std::vector<std::size_t>> splits_of(std::string_view text, std::uint64_t seed = 11) {
  std::vector<std::vector<std::size_t>> splits;
  for (std::size_t cut = 0; cut <= text.size(); ++cut) splits.push_back({cut});
  std::vector<std::size_t> bytes;
  for (std::size_t at = 1; at < text.size(); ++at) bytes.push_back(at);
  splits.push_back(bytes);
  base::SplitMix64 random(seed);
  for (int round = 0; round < 40; ++round) {
    std::vector<std::size_t> ends;
    for (std::size_t at = 1 + random.next() % 8; at < text.size(); at += 1 + random.next() % 8) ends.push_back(at);
    splits.push_back(ends);
  }
  return splits;
}

// The property: for every split, the streamed output adds up to the whole response.
inline void expect_split_invariant(std::string_view parser, std::string_view text) {
  const ToolParserResult whole = whole_tool_calls(parser, text);
  for (const auto& ends : splits_of(text)) {
    const ToolParserResult streamed = streamed_tool_calls(parser, text, ends);
    if (streamed != whole) {
      std::string cuts;
      for (const std::size_t end : ends) cuts += std::to_string(end) + " ";
      ADD_FAILURE() << parser << " streamed differently when cut at [ " << cuts << "] in:\n" << text;
      return;
    }
  }
}

// The same for a reasoning parser.
inline ReasoningResult whole_reasoning(std::string_view name, std::string_view text, ReasoningOptions options = {}) {
  const auto parser = make_reasoning_parser(name, options);
  return parse_reasoning(*parser, text);
}

inline void expect_reasoning_split_invariant(std::string_view name, std::string_view text,
                                             ReasoningOptions options = {}) {
  const ReasoningResult whole = whole_reasoning(name, text, options);
  for (const auto& ends : splits_of(text)) {
    const auto parser = make_reasoning_parser(name, options);
    ReasoningCollector collector(*parser);
    std::size_t from = 0;
    for (const std::size_t end : ends) {
      collector.add(parser->feed(text.substr(from, end - from)));
      from = end;
    }
    collector.add(parser->feed(text.substr(from)));
    collector.add(parser->finish());
    if (collector.result() != whole) {
      std::string cuts;
      for (const std::size_t end : ends) cuts += std::to_string(end) + " ";
      ADD_FAILURE() << name << " streamed differently when cut at [ " << cuts << "] in:\n" << text;
      return;
    }
  }
}

// The ids a parser with seeded_options(seed) mints, in order.
inline std::vector<std::string> expected_ids(CallIdStyle style, int count, std::uint64_t seed = 7) {
  CallIds ids(style, seeded_options(seed).random_bits);
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i) out.push_back(ids.next());
  return out;
}

}  // namespace serverd::parsers::testing

namespace serverd::parsers {

// Readable failures: gtest prints these instead of their bytes.
inline void PrintTo(const ToolParserResult& result, std::ostream* os) {
  *os << "{content: " << (result.content ? ::testing::PrintToString(*result.content) : "null") << ", calls: [";
  for (const ToolCall& call : result.calls) {
    *os << "{" << call.id << ", " << ::testing::PrintToString(call.name) << ", "
        << ::testing::PrintToString(call.arguments) << "}";
  }
  *os << "]}";
}

inline void PrintTo(const ReasoningResult& result, std::ostream* os) {
  *os << "{reasoning: " << (result.reasoning ? ::testing::PrintToString(*result.reasoning) : "null")
      << ", content: " << (result.content ? ::testing::PrintToString(*result.content) : "null") << "}";
}

}  // namespace serverd::parsers
