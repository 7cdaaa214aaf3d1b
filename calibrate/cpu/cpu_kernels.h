#pragma once
/// The CPU backend's kernels, exposed so tests can check what they compute against naive
/// references. All fp32, single-threaded, row-major, on caller-owned memory; the attention
/// kernels allocate only block-sized tiles and one value per row. Defined in cpu_backend.cc, the
/// one file built with -march=native (calibrate/CMakeLists.txt), which is also why this header
/// takes raw pointers rather than Eigen types: Eigen stays inside that one translation unit (and
/// the test binary, which does not see Eigen's include path, can use it).

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

/// One attention head. Q, K, V, O, dO, dQ, dK, dV are seq x head_dim, row-major; lse holds seq
/// entries. The forward reads q, k, v and writes o and lse; the backward reads q, k, v, o, lse
/// and d_o and writes dq, dk and dv. Pointers a pass does not use may be null.
struct AttentionHead {
  int64_t seq = 0;
  int64_t head_dim = 0;
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  float* o = nullptr;
  float* lse = nullptr;  ///< log-sum-exp of each row's scaled, masked scores
  const float* d_o = nullptr;
  float* dq = nullptr;
  float* dk = nullptr;
  float* dv = nullptr;
};

/// Causal softmax(Q K^T / sqrt(head_dim)) V, flash-style: `block` x `block` tiles of the scores
/// with an online softmax (running max and sum), never the seq x seq matrix.
/// FLOPs (what a caller divides by): 2 GEMMs over the causal half, 4 * seq^2 * head_dim * 0.5.
void attention_forward(const AttentionHead& h, int64_t block);

/// The FlashAttention-2 backward: per key block, per query block at or below the diagonal,
/// recompute P = exp(S - lse), then dV += P^T dO, dP = dO V^T, dS = P * (dP - D) with
/// D = rowsum(dO * O), dQ += dS K / sqrt(d), dK += dS^T Q / sqrt(d). Only block-sized
/// temporaries. FLOPs: 5 GEMMs instead of the forward's 2, i.e. 2.5x the forward's count.
void attention_backward(const AttentionHead& h, int64_t block);

}  // namespace parallax::calibrate::cpu
