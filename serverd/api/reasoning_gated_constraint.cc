#include "serverd/api/reasoning_gated_constraint.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace serverd::api {

ReasoningGatedConstraint::ReasoningGatedConstraint(std::unique_ptr<engine::sampling::TokenConstraint> inner,
                                                   std::vector<std::int32_t> reasoning_end)
    : inner_(std::move(inner)), reasoning_end_(std::move(reasoning_end)) {
  if (reasoning_end_.empty()) throw std::invalid_argument("a reasoning gate needs the reasoning's end tokens");
}

void ReasoningGatedConstraint::fill_bitmask(std::span<std::uint32_t> bitmask) {
  if (reasoning_ended()) {
    inner_->fill_bitmask(bitmask);
    return;
  }
  std::fill(bitmask.begin(), bitmask.end(), ~0u);
}

bool ReasoningGatedConstraint::accept(std::int32_t token) {
  if (reasoning_ended()) return inner_->accept(token);
  // The closing tag is short and has no repeated prefix in the models served (one added token, or a few
  // distinct ones), so a mismatch restarts the match at this token.
  if (token == reasoning_end_[matched_]) {
    ++matched_;
  } else {
    matched_ = token == reasoning_end_.front() ? 1 : 0;
  }
  return true;
}

bool ReasoningGatedConstraint::is_terminated() const {
  return reasoning_ended() && inner_->is_terminated();
}

}  // namespace serverd::api
