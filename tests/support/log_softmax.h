#pragma once

// The float64 log-softmax of a row of logits, as the numerics tests compare log-probabilities.

#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

namespace testing_support {

inline std::vector<double> log_softmax(std::span<const double> row) {
  const double max = *std::max_element(row.begin(), row.end());
  double sum = 0;
  for (const double v : row) sum += std::exp(v - max);
  const double norm = max + std::log(sum);
  std::vector<double> out(row.size());
  for (std::size_t i = 0; i < row.size(); ++i) out[i] = row[i] - norm;
  return out;
}

}  // namespace testing_support
