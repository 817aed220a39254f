#pragma once

// JSON numbers within bounds, as GBNF expressions: integers exactly (digit-range alternatives, no leading
// zeros), and numbers with whole-number bounds exactly (an integer part within the bounds, then a fraction
// that is zero or not). A fractional bound on a number is refused: it would need digit ranges inside the
// fraction, which this server does not build.

#include <cstdint>
#include <optional>
#include <string>

namespace engine::grammar {

// The largest magnitude a bound may have: doubles hold every whole number up to 2^53 exactly.
inline constexpr std::int64_t kMaxExactBound = std::int64_t{1} << 53;

struct NumericBound {
  double value = 0;
  bool exclusive = false;
};

struct NumericBounds {
  std::optional<NumericBound> lower;
  std::optional<NumericBound> upper;
};

// `where` names the schema in errors ("#/properties/age"). Throw GrammarError for bounds no value meets,
// bounds past kMaxExactBound and (numbers) fractional bounds.
std::string integer_expression(const NumericBounds& bounds, const std::string& where);
std::string number_expression(const NumericBounds& bounds, const std::string& where);

// Unbounded JSON numbers as JSON writes them (exponents included for `number`).
std::string any_integer_expression();
std::string any_number_expression();

}  // namespace engine::grammar
