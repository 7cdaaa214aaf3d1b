#pragma once
/// Unit constants. Quantities carry their unit in the variable name (`_s`, `_bytes`, `_gbps` for
/// GB/s = 1e9 bytes/s, `_tflops` for 1e12 FLOP/s, `_gib` for 2^30 bytes).

#include <cstdint>

namespace parallax {

inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
inline constexpr double kMiB = 1024.0 * 1024.0;
inline constexpr double kGB = 1e9;
inline constexpr double kTera = 1e12;
inline constexpr double kUs = 1e-6;  ///< one microsecond in seconds
inline constexpr double kMs = 1e-3;

inline constexpr double kBf16Bytes = 2.0;  ///< bytes per bf16 element
inline constexpr double kFp32Bytes = 4.0;  ///< bytes per fp32 element

/// Integer division rounding up.
constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace parallax
