// FormatG: a double as printf's "%.<precision>g" writes it ("0.9733",
// "3.1e-10", "inf"), without printf.
//
// Why: explanations and decision records carry numbers on every query, and
// snprintf's format parsing cost more than the rest of building them.
// std::to_chars with chars_format::general is specified to give exactly
// printf's %g output for the same precision, so the text is unchanged.
//
// Thread-safety: pure functions.
#pragma once

#include <charconv>
#include <string>
#include <string_view>

namespace somm {

// Appends `value` as "%.<precision>g" would print it.
inline void AppendG(std::string* out, double value, int precision = 6) {
  char buf[64];
  const auto printed = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::general,
                                     precision);
  out->append(buf, printed.ptr);
}

inline std::string FormatG(double value, int precision = 6) {
  std::string s;
  AppendG(&s, value, precision);
  return s;
}

}  // namespace somm
