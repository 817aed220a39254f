#pragma once

// One choice of a response as its tokens arrive: incremental detokenization, the stop token left out of the
// text, stop strings (held back while undecided), the finish reason and stop_reason, and the log-probability
// records for the response. Not thread-safe; one per generated sequence.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "serverd/api/generator.h"
#include "serverd/api/stop_strings.h"

namespace serverd::api {

struct ChoiceConfig {
  bool skip_special_tokens = true;
  bool include_stop_str_in_output = false;
  std::size_t min_tokens = 0;  // stop strings count only from this many tokens on
  bool ignore_eos = false;
  std::vector<std::int32_t> eos_token_ids;
  std::vector<std::int32_t> stop_token_ids;
  bool keep_logprobs = false;
};

struct LogprobRecord {
  std::int32_t token = 0;
  float logprob = 0.0f;
  std::vector<engine::sampling::TokenLogprob> top;
  bool scored = true;  // false: the prompt's first token, which nothing predicts (its logprob and top are null)
};

// vLLM's stop_reason: the stop string, the stop token id, or null (EOS, length, abort).
using StopReason = std::variant<std::monostate, std::int32_t, std::string>;

class ChoiceOutput {
 public:
  ChoiceOutput(const engine::tokenizer::Tokenizer& tokenizer, std::shared_ptr<const StopStrings> stops,
               std::shared_ptr<const ChoiceConfig> config);

  // Takes the sequence's next tokens. Returns true when a stop string ended the choice within them: the
  // caller then cancels the generation. Tokens after the end are ignored.
  bool add_tokens(std::span<const GeneratedToken> tokens);

  // The generator's end of the sequence; ignored when a stop string ended the choice first.
  void finish(FinishReason reason, std::optional<std::int32_t> stop_token);

  bool finished() const { return finish_reason_.has_value(); }

  // Text that may be sent now and was not taken before (all of the rest once finished).
  std::string take_text();
  // Log-probability records not taken before.
  std::vector<LogprobRecord> take_logprobs();
  bool has_new_logprobs() const { return logprobs_taken_ < logprobs_.size(); }

  const std::string& text() const { return text_; }
  const std::vector<LogprobRecord>& logprobs() const { return logprobs_; }
  std::size_t token_count() const { return tokens_; }
  // "stop", "length" or "abort"; empty until finished.
  std::string_view finish_reason() const;
  const StopReason& stop_reason() const { return stop_reason_; }

 private:
  bool is_stop_candidate(std::int32_t token) const;
  bool is_eos(std::int32_t token) const;
  bool commit(std::int32_t token);
  bool check_stop_strings();

  engine::tokenizer::IncrementalDecoder decoder_;
  std::shared_ptr<const StopStrings> stops_;
  std::shared_ptr<const ChoiceConfig> config_;
  std::string text_;
  std::size_t sent_ = 0;     // bytes of text_ taken by take_text()
  std::size_t checked_ = 0;  // bytes of text_ looked at for stop strings
  // A token that would end the sequence if the generator says so next; its text waits until then.
  std::optional<std::int32_t> held_;
  std::size_t tokens_ = 0;
  std::vector<LogprobRecord> logprobs_;
  std::size_t logprobs_taken_ = 0;
  std::optional<std::string> finish_reason_;
  StopReason stop_reason_;
};

}  // namespace serverd::api
