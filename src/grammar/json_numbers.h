// JSON numbers with exact bounds: decimal ranges built digit by digit, so that every number the
// grammar allows lies within minimum/maximum (exclusive or not) and every such number of the
// allowed length is allowed. Plain decimal notation only (no exponent); integers carry at most
// 16 digits; other numbers at most 16 significant digits, or 15 when a bound is given, so that
// distinct decimals stay distinct doubles and an exclusive bound still holds after parsing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/status.h"
#include "grammar/grammar_ir.h"

namespace kipp::grammar {

struct Decimal {
  bool negative = false;
  std::string int_digits = "0";  // no leading zeros
  std::string frac_digits;       // no trailing zeros
};

// A finite double in plain decimal notation (its shortest round-trip digits).
Decimal decimal_from_double(double value);
Decimal decimal_from_integer(int64_t value);

struct NumberBound {
  Decimal value;
  bool exclusive = false;
};

// Errors name the keyword that cannot be met (e.g. a minimum above the largest number allowed).
Expected<uint32_t> integer_rule(GrammarBuilder& builder, const std::optional<NumberBound>& low,
                                const std::optional<NumberBound>& high);
Expected<uint32_t> number_rule(GrammarBuilder& builder, const std::optional<NumberBound>& low,
                               const std::optional<NumberBound>& high);

}  // namespace kipp::grammar
