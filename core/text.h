#pragma once
/// Small text helpers for the human-readable reports.

#include <cstdio>
#include <string>

namespace parallax {

/// One number through a printf format, e.g. format_number("%.3f", 1.5) == "1.500".
inline std::string format_number(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

/// `s` padded with spaces on the right to `width` columns (never cut).
inline std::string pad_right(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

}  // namespace parallax
