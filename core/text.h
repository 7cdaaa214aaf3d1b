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

/// `v` with `digits` decimals: format_fixed(2.345, 1) == "2.3".
inline std::string format_fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

/// A byte count in binary units: 16 B, 1.5 KiB, 256 MiB, 1 GiB (one decimal when not whole).
inline std::string format_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  return format_fixed(b, b == static_cast<double>(static_cast<long long>(b)) ? 0 : 1) + " " +
         units[u];
}

/// `s` padded with spaces on the right to `width` columns (never cut).
inline std::string pad_right(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

}  // namespace parallax
