#include "engine/grammar/json_schema_numbers.h"

#include <cmath>
#include <cstdio>
#include <string_view>
#include <vector>

#include "engine/grammar/structured_output.h"

namespace engine::grammar {
namespace {

std::string join_alternatives(const std::vector<std::string>& alternatives) {
  if (alternatives.size() == 1) return alternatives.front();
  std::string out = "(";
  for (std::size_t i = 0; i < alternatives.size(); ++i) out += (i ? " | " : "") + alternatives[i];
  return out + ")";
}

std::string digit_class(char lo, char hi) {
  if (lo == hi) return std::string("\"") + lo + "\"";
  return std::string("[") + lo + (hi > lo + 1 ? "-" : "") + hi + "]";
}

std::string any_digits(std::size_t count) {
  if (count == 0) return "";
  return count == 1 ? "[0-9]" : "[0-9]{" + std::to_string(count) + "}";
}

std::string sequence(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return a + " " + b;
}

bool all_of(std::string_view digits, char c) {
  return digits.find_first_not_of(c) == std::string_view::npos;
}

// Digit strings of one length n, from lo to hi (lo <= hi, both n digits).
std::string same_length_range(std::string_view lo, std::string_view hi) {
  if (lo.size() == 1) return digit_class(lo[0], hi[0]);
  const std::string_view lo_rest = lo.substr(1);
  const std::string_view hi_rest = hi.substr(1);
  if (lo[0] == hi[0]) return sequence(digit_class(lo[0], lo[0]), same_length_range(lo_rest, hi_rest));
  if (all_of(lo_rest, '0') && all_of(hi_rest, '9'))
    return sequence(digit_class(lo[0], hi[0]), any_digits(lo_rest.size()));
  std::vector<std::string> alternatives;
  char first = lo[0];
  char last = hi[0];
  if (!all_of(lo_rest, '0')) {
    alternatives.push_back(
        sequence(digit_class(lo[0], lo[0]), same_length_range(lo_rest, std::string(lo_rest.size(), '9'))));
    ++first;
  }
  std::string high_part;
  if (!all_of(hi_rest, '9')) {
    high_part = sequence(digit_class(hi[0], hi[0]), same_length_range(std::string(hi_rest.size(), '0'), hi_rest));
    --last;
  }
  if (first <= last) alternatives.push_back(sequence(digit_class(first, last), any_digits(lo_rest.size())));
  if (!high_part.empty()) alternatives.push_back(high_part);
  return join_alternatives(alternatives);
}

// No upper end, for natural_range (bounds stay below 2^53, far from it).
constexpr std::uint64_t kNoUpper = ~std::uint64_t{0};

// Whole numbers from lo to hi (kNoUpper: no upper end) written without leading zeros; lo <= hi.
std::string natural_range(std::uint64_t lo, std::uint64_t hi) {
  const std::string a = std::to_string(lo);
  if (hi != kNoUpper && std::to_string(hi).size() == a.size()) return same_length_range(a, std::to_string(hi));
  std::vector<std::string> alternatives{same_length_range(a, std::string(a.size(), '9'))};
  if (hi == kNoUpper) {
    alternatives.push_back("[1-9] [0-9]{" + std::to_string(a.size()) + ",}");
    return join_alternatives(alternatives);
  }
  const std::string b = std::to_string(hi);
  for (std::size_t length = a.size() + 1; length < b.size(); ++length) {
    alternatives.push_back(sequence("[1-9]", any_digits(length - 1)));
  }
  alternatives.push_back(same_length_range("1" + std::string(b.size() - 1, '0'), b));
  return join_alternatives(alternatives);
}

std::string format_bound(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.17g", value);
  return buffer;
}

void check_magnitude(const NumericBounds& bounds, const std::string& where) {
  for (const auto& bound : {bounds.lower, bounds.upper}) {
    if (bound && !(std::fabs(bound->value) <= static_cast<double>(kMaxExactBound))) {
      throw GrammarError("schema at " + where + ": the bound " + format_bound(bound->value) +
                         " is beyond ±2^53, past which this server cannot write exact digit ranges");
    }
  }
}

[[noreturn]] void unsatisfiable(const NumericBounds& bounds, const std::string& where) {
  throw GrammarError("schema at " + where + ": no value satisfies the bounds (lower " +
                     (bounds.lower ? format_bound(bounds.lower->value) + (bounds.lower->exclusive ? ", exclusive" : "")
                                   : std::string("none")) +
                     ", upper " +
                     (bounds.upper ? format_bound(bounds.upper->value) + (bounds.upper->exclusive ? ", exclusive" : "")
                                   : std::string("none")) +
                     ")");
}

// An integer range [lo, hi] (either end open when nullopt) split into its negative and non-negative
// parts; empty when lo > hi.
std::vector<std::string> integer_parts(std::optional<std::int64_t> lo, std::optional<std::int64_t> hi) {
  std::vector<std::string> parts;
  if (lo && hi && *lo > *hi) return parts;
  if (!lo || *lo < 0) {  // negative values: "-" then a magnitude in [max(1, -hi), -lo]
    const std::int64_t magnitude_lo = hi && *hi < 0 ? -*hi : 1;
    const std::uint64_t magnitude_hi = lo ? static_cast<std::uint64_t>(-*lo) : kNoUpper;
    parts.push_back("\"-\" " + natural_range(static_cast<std::uint64_t>(magnitude_lo), magnitude_hi));
  }
  if (!hi || *hi >= 0) {
    const std::uint64_t from = lo && *lo > 0 ? static_cast<std::uint64_t>(*lo) : 0;
    parts.push_back(natural_range(from, hi ? static_cast<std::uint64_t>(*hi) : kNoUpper));
  }
  return parts;
}

// Magnitudes m >= 0 with lower <= m (or <) and m <= upper (or <), the bounds whole numbers >= 0: an
// integer part, then either a zero fraction (m is that integer) or a non-zero one (m lies strictly
// between it and the next).
std::vector<std::string> magnitude_parts(NumericBound lower, std::optional<NumericBound> upper) {
  const auto lo = static_cast<std::uint64_t>(lower.value);
  std::vector<std::string> parts;
  const std::uint64_t exact_lo = lower.exclusive ? lo + 1 : lo;
  std::uint64_t exact_hi = kNoUpper;
  std::uint64_t fraction_hi = kNoUpper;
  bool fraction_possible = true;
  bool exact_possible = true;
  if (upper) {
    const auto hi = static_cast<std::uint64_t>(upper->value);
    if (upper->exclusive && hi == 0) return parts;
    exact_hi = upper->exclusive ? hi - 1 : hi;
    exact_possible = exact_lo <= exact_hi;
    fraction_possible = hi >= 1 && lo <= hi - 1;
    if (fraction_possible) fraction_hi = hi - 1;
  }
  if (exact_possible) parts.push_back(sequence(natural_range(exact_lo, exact_hi), "(\".\" \"0\"+)?"));
  if (fraction_possible) parts.push_back(sequence(natural_range(lo, fraction_hi), "\".\" \"0\"* [1-9] [0-9]*"));
  return parts;
}

}  // namespace

std::string any_integer_expression() {
  return "\"-\"? (\"0\" | [1-9] [0-9]*)";
}

std::string any_number_expression() {
  return "\"-\"? (\"0\" | [1-9] [0-9]*) (\".\" [0-9]+)? ([eE] [-+]? [0-9]+)?";
}

std::string integer_expression(const NumericBounds& bounds, const std::string& where) {
  if (!bounds.lower && !bounds.upper) return any_integer_expression();
  check_magnitude(bounds, where);
  std::optional<std::int64_t> lo;
  std::optional<std::int64_t> hi;
  if (bounds.lower) {
    const double v = bounds.lower->value;
    lo = static_cast<std::int64_t>(bounds.lower->exclusive ? std::floor(v) + 1 : std::ceil(v));
  }
  if (bounds.upper) {
    const double v = bounds.upper->value;
    hi = static_cast<std::int64_t>(bounds.upper->exclusive ? std::ceil(v) - 1 : std::floor(v));
  }
  const std::vector<std::string> parts = integer_parts(lo, hi);
  if (parts.empty()) unsatisfiable(bounds, where);
  return join_alternatives(parts);
}

std::string number_expression(const NumericBounds& bounds, const std::string& where) {
  if (!bounds.lower && !bounds.upper) return any_number_expression();
  check_magnitude(bounds, where);
  for (const auto& bound : {bounds.lower, bounds.upper}) {
    if (bound && bound->value != std::floor(bound->value)) {
      throw GrammarError("schema at " + where + ": the number bound " + format_bound(bound->value) +
                         " is fractional; this server expresses number bounds only as whole numbers "
                         "(use a whole-number bound, or type integer)");
    }
  }
  std::vector<std::string> parts;
  // x >= 0 within the bounds.
  const bool upper_allows_nonnegative =
      !bounds.upper || bounds.upper->value > 0 || (bounds.upper->value == 0 && !bounds.upper->exclusive);
  if (upper_allows_nonnegative) {
    NumericBound lower{0, false};
    if (bounds.lower && bounds.lower->value >= 0) lower = *bounds.lower;
    for (std::string& part : magnitude_parts(lower, bounds.upper)) parts.push_back(std::move(part));
  }
  // x < 0: its magnitude m = -x is above max(0, -upper) and below -lower.
  if (!bounds.lower || bounds.lower->value < 0) {
    NumericBound magnitude_lower{0, true};
    if (bounds.upper && bounds.upper->value < 0) magnitude_lower = {-bounds.upper->value, bounds.upper->exclusive};
    std::optional<NumericBound> magnitude_upper;
    if (bounds.lower) magnitude_upper = NumericBound{-bounds.lower->value, bounds.lower->exclusive};
    for (const std::string& part : magnitude_parts(magnitude_lower, magnitude_upper)) {
      parts.push_back("\"-\" " + (part.find(" | ") != std::string::npos ? "(" + part + ")" : part));
    }
  }
  if (parts.empty()) unsatisfiable(bounds, where);
  return join_alternatives(parts);
}

}  // namespace engine::grammar
