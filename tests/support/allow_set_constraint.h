#pragma once

// A test double for sampling::TokenConstraint: allows a fixed set of tokens (or, step by step, the sets of a
// script), records every token it accepts, and terminates after a given number of them. Tests share the
// accepted list through a shared_ptr, since the sampler owns the constraint.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <set>
#include <span>
#include <utility>
#include <vector>

#include "engine/sampling/token_constraint.h"

namespace testing_support {

class AllowSetConstraint final : public engine::sampling::TokenConstraint {
 public:
  // steps[i] is what the i-th token may be; past the last step, the last set stays.
  AllowSetConstraint(std::vector<std::set<std::int32_t>> steps, std::size_t terminate_after,
                     std::shared_ptr<std::vector<std::int32_t>> accepted)
      : steps_(std::move(steps)), terminate_after_(terminate_after), accepted_(std::move(accepted)) {}

  static std::unique_ptr<AllowSetConstraint> only(
      std::set<std::int32_t> allowed, std::shared_ptr<std::vector<std::int32_t>> accepted,
      std::size_t terminate_after = std::numeric_limits<std::size_t>::max()) {
    return std::make_unique<AllowSetConstraint>(std::vector<std::set<std::int32_t>>{std::move(allowed)},
                                                terminate_after, std::move(accepted));
  }

  void fill_bitmask(std::span<std::uint32_t> bitmask) override {
    for (auto& word : bitmask) word = 0;
    for (const std::int32_t t : current()) {
      const auto u = static_cast<std::size_t>(t);
      if (u / 32 < bitmask.size()) bitmask[u / 32] |= 1u << (u % 32);
    }
    ++fills_;
  }
  bool accept(std::int32_t token) override {
    if (is_terminated() || !current().contains(token)) return false;
    accepted_->push_back(token);
    return true;
  }
  bool is_terminated() const override { return accepted_->size() >= terminate_after_; }

  std::size_t fills() const { return fills_; }

 private:
  const std::set<std::int32_t>& current() const { return steps_[std::min(accepted_->size(), steps_.size() - 1)]; }

  std::vector<std::set<std::int32_t>> steps_;
  std::size_t terminate_after_;
  std::shared_ptr<std::vector<std::int32_t>> accepted_;
  std::size_t fills_ = 0;
};

}  // namespace testing_support
