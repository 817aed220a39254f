#pragma once

// The Responses API's output for one generation: the text through the request's parsers (ChoiceParser:
// reasoning, then tool calls) into output items, streamed as vLLM's event sequence (response.created,
// response.in_progress, then per item output_item.added, its content events, output_item.done, and
// response.completed), each event numbered by sequence_number, or written whole from the same items.

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "serverd/api/output_formatter.h"
#include "serverd/api/responses_api.h"
#include "serverd/parsers/choice_parser.h"

namespace serverd::api {

class ResponsesFormatter final : public OutputFormatter {
 public:
  // `echo.request` is set to the formatter's own copy of `request`.
  ResponsesFormatter(ResponsesRequest request, ResponseEcho echo, std::unique_ptr<parsers::ChoiceParser> parser);

  std::string begin() override;
  std::string feed(std::string_view text, std::size_t tokens) override;
  std::string finish(const ChoiceOutput& out, std::size_t prompt_tokens) override;
  std::string whole(const ChoiceOutput& out, std::size_t prompt_tokens) const override;
  std::string_view stream_end() const override { return {}; }

  const std::vector<OutputItem>& items() const { return items_; }

 private:
  std::string event(std::string_view type, std::string body_fields);
  std::string item_event(std::string_view type, const OutputItem& item, bool done);
  std::string apply(const parsers::ChoiceDelta& delta);
  std::string open(OutputItem::Kind kind, std::string call_id = {}, std::string name = {});
  std::string close();
  std::string text_delta(OutputItem::Kind kind, std::string_view text);
  std::uint64_t item_index() const;

  const ResponsesRequest request_;
  ResponseEcho echo_;
  std::unique_ptr<parsers::ChoiceParser> parser_;
  std::vector<OutputItem> items_;
  bool open_ = false;  // items_.back() is still receiving text
  std::uint64_t sequence_ = 0;
  std::size_t next_item_ = 0;
};

}  // namespace serverd::api
