#include "serverd/api/choice_output.h"

#include <algorithm>

namespace serverd::api {

namespace {
bool contains(const std::vector<std::int32_t>& ids, std::int32_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}
}  // namespace

ChoiceOutput::ChoiceOutput(const engine::tokenizer::Tokenizer& tokenizer, std::shared_ptr<const StopStrings> stops,
                           std::shared_ptr<const ChoiceConfig> config)
    : decoder_(tokenizer, config->skip_special_tokens), stops_(std::move(stops)), config_(std::move(config)) {}

bool ChoiceOutput::is_eos(std::int32_t token) const {
  return !config_->ignore_eos && contains(config_->eos_token_ids, token);
}

bool ChoiceOutput::is_stop_candidate(std::int32_t token) const {
  return is_eos(token) || contains(config_->stop_token_ids, token);
}

bool ChoiceOutput::add_tokens(std::span<const GeneratedToken> tokens) {
  for (const GeneratedToken& generated : tokens) {
    if (finished()) break;
    const auto& sampled = generated.sampled;
    ++tokens_;
    if (config_->keep_logprobs) logprobs_.push_back({sampled.token, sampled.logprob, sampled.top});
    if (held_) {
      // Another token came, so the held one did not end the sequence.
      const std::int32_t previous = *held_;
      held_.reset();
      if (commit(previous)) return true;
    }
    if (is_stop_candidate(sampled.token)) {
      held_ = sampled.token;
    } else if (commit(sampled.token)) {
      return true;
    }
  }
  return false;
}

void ChoiceOutput::finish(FinishReason reason, std::optional<std::int32_t> stop_token) {
  if (finished()) return;
  if (held_) {
    const std::int32_t last = *held_;
    held_.reset();
    const bool is_the_stop = reason == FinishReason::Stop && stop_token == last;
    if ((!is_the_stop || config_->include_stop_str_in_output) && commit(last)) return;
  }
  text_ += decoder_.flush();
  if (check_stop_strings()) return;
  switch (reason) {
    case FinishReason::Stop:
      finish_reason_ = "stop";
      if (stop_token && !is_eos(*stop_token)) stop_reason_ = *stop_token;
      break;
    case FinishReason::Length: finish_reason_ = "length"; break;
    case FinishReason::Abort: finish_reason_ = "abort"; break;
  }
}

bool ChoiceOutput::commit(std::int32_t token) {
  text_ += decoder_.push(token);
  return check_stop_strings();
}

bool ChoiceOutput::check_stop_strings() {
  const std::size_t from = checked_;
  checked_ = text_.size();
  if (stops_->empty() || tokens_ < config_->min_tokens) return false;
  const auto match = stops_->find(text_, from);
  if (!match) return false;
  const std::string& stop = (*stops_)[match->index];
  text_.resize(match->position + (config_->include_stop_str_in_output ? stop.size() : 0));
  checked_ = text_.size();
  finish_reason_ = "stop";
  stop_reason_ = stop;
  return true;
}

std::string ChoiceOutput::take_text() {
  std::size_t end = text_.size();
  if (!finished()) end -= stops_->held_back(text_);
  if (end <= sent_) return {};
  std::string out = text_.substr(sent_, end - sent_);
  sent_ = end;
  return out;
}

std::vector<LogprobRecord> ChoiceOutput::take_logprobs() {
  std::vector<LogprobRecord> out(logprobs_.begin() + static_cast<std::ptrdiff_t>(logprobs_taken_), logprobs_.end());
  logprobs_taken_ = logprobs_.size();
  return out;
}

std::string_view ChoiceOutput::finish_reason() const {
  return finish_reason_ ? std::string_view(*finish_reason_) : std::string_view();
}

}  // namespace serverd::api
