#pragma once
/// The CPU backend's memory-bound kernels, exposed so tests can check what they compute against
/// naive references. All fp32, single-threaded, row-major, on caller-owned memory. Attention is
/// not here: the backend times the executor's kernel (executor/model_ops.h), the one CPU ranks
/// train with. Defined in cpu_backend.cc; the header takes raw pointers rather than Eigen types.

#include <cstdint>

namespace parallax::calibrate::cpu {

/// y[i] = x[i], n elements.
void copy_kernel(const float* x, float* y, int64_t n);
/// a[i] = b[i] + s * c[i] (STREAM triad), n elements.
void triad_kernel(const float* b, const float* c, float s, float* a, int64_t n);
/// Per row of a rows x cols x: y = x / sqrt(mean(x^2) + eps) * w, with w of cols elements.
void rmsnorm_kernel(const float* x, const float* w, float* y, int64_t rows, int64_t cols);
/// rmsnorm's eps.
inline constexpr float kRmsNormEps = 1e-6f;
/// y[i] = silu(g[i]) * u[i] = g[i] / (1 + exp(-g[i])) * u[i], n elements.
void swiglu_kernel(const float* g, const float* u, float* y, int64_t n);
/// Per row of a rows x cols x: y = exp(x - max(x)) / sum(exp(x - max(x))).
void softmax_kernel(const float* x, float* y, int64_t rows, int64_t cols);

}  // namespace parallax::calibrate::cpu
