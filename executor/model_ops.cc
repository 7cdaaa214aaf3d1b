// The transformer's operators, forward and backward (see model_ops.h for the formulas). Row-wise
// loops go through Eigen arrays: without -ffast-math the compiler will not vectorise a float sum
// or std::exp, and Eigen does both.

#include "executor/model_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace parallax::exec::ops {
namespace {

// Query rows per attention tile: the workspace is kQueryBlock x seq, and each block meets only
// the keys up to its last row, which skips most of the masked upper triangle.
constexpr int64_t kQueryBlock = 64;

template <typename T>
using RowArray = Eigen::Array<T, 1, Eigen::Dynamic>;

template <typename T>
Eigen::Map<const RowArray<T>> as_row(std::span<const T> v) {
  return Eigen::Map<const RowArray<T>>(v.data(), static_cast<Eigen::Index>(v.size()));
}

template <typename T>
Eigen::Map<RowArray<T>> as_row(std::span<T> v) {
  return Eigen::Map<RowArray<T>>(v.data(), static_cast<Eigen::Index>(v.size()));
}

void check_attention(const AttentionShape& s, int64_t q_rows, int64_t q_cols, int64_t kv_cols) {
  PX_CHECK(s.batch > 0 && s.seq > 0 && s.heads > 0 && s.kv_heads > 0 && s.head_dim > 0,
           "attention shape must be positive");
  PX_CHECK(s.heads % s.kv_heads == 0,
           "kv_heads=" << s.kv_heads << " must divide heads=" << s.heads);
  PX_CHECK(q_rows == s.batch * s.seq && q_cols == s.heads * s.head_dim &&
               kv_cols == s.kv_heads * s.head_dim,
           "attention operands do not match the shape");
  PX_CHECK(s.q_offset >= 0 && s.q_offset + s.seq <= s.keys(),
           "queries at " << s.q_offset << ".." << s.q_offset + s.seq << " beyond " << s.keys()
                         << " keys");
}

// Scaled causal scores of query rows [i0, i0 + p.rows()) against keys [0, p.cols()), turned into
// probabilities in place: exp(score - lse) on and below the diagonal, 0 above it. When
// `lse_out` is set the row log-sum-exps are computed and stored (stride `lse_stride`);
// otherwise they are read from `lse_in`.
template <typename T, typename Tile>
void causal_probabilities(Tile& p, int64_t i0, T scale, const T* lse_in, T* lse_out,
                          int64_t lse_stride) {
  const int64_t rows = p.rows(), cols = p.cols();
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t valid = i0 + r + 1;  // keys 0..i0+r are visible
    auto row = p.row(r).head(valid).array();
    row *= scale;
    if (lse_out != nullptr) {
      const T max = row.maxCoeff();
      row = (row - max).exp();
      const T sum = row.sum();
      row /= sum;
      lse_out[r * lse_stride] = max + std::log(sum);
    } else {
      row = (row - lse_in[r * lse_stride]).exp();
    }
    p.row(r).tail(cols - valid).setZero();
  }
}

}  // namespace

// ---- RMSNorm --------------------------------------------------------------------------------

template <typename T>
void rms_norm_forward(const ConstMatrixRef<T>& x, std::span<const T> w, T eps, MatrixRef<T> y,
                      std::span<T> rstd) {
  const int64_t n = x.rows(), h = x.cols();
  PX_CHECK(static_cast<int64_t>(w.size()) == h && y.rows() == n && y.cols() == h &&
               static_cast<int64_t>(rstd.size()) == n,
           "rms_norm_forward: operand sizes disagree");
  const auto wa = as_row(w);
  for (int64_t i = 0; i < n; ++i) {
    const T r = T(1) / std::sqrt(x.row(i).squaredNorm() / static_cast<T>(h) + eps);
    rstd[i] = r;
    y.row(i).array() = x.row(i).array() * r * wa;
  }
}

template <typename T>
void rms_norm_backward(const ConstMatrixRef<T>& x, std::span<const T> w, std::span<const T> rstd,
                       const ConstMatrixRef<T>& dy, MatrixRef<T> dx, std::span<T> dw) {
  const int64_t n = x.rows(), h = x.cols();
  PX_CHECK(static_cast<int64_t>(w.size()) == h && static_cast<int64_t>(dw.size()) == h &&
               static_cast<int64_t>(rstd.size()) == n && dy.rows() == n && dy.cols() == h &&
               dx.rows() == n && dx.cols() == h,
           "rms_norm_backward: operand sizes disagree");
  const auto wa = as_row(w);
  auto dwa = as_row(dw);
  for (int64_t i = 0; i < n; ++i) {
    const T r = rstd[i];
    const auto xi = x.row(i).array();
    const auto dyi = dy.row(i).array();
    // d/dx_k of x_j r w_j: r w_k [j = k] - x_j w_j r^3 x_k / h.
    const T dot = (dyi * wa * xi).sum();
    dx.row(i).array() += r * dyi * wa - xi * (r * r * r * dot / static_cast<T>(h));
    dwa += dyi * xi * r;
  }
}

// ---- rotary position embedding --------------------------------------------------------------

template <typename T>
RotaryTable<T>::RotaryTable(int64_t seq, int64_t head_dim, double theta, int64_t position0)
    : seq_(seq), half_(head_dim / 2) {
  PX_CHECK(seq > 0 && head_dim > 0 && head_dim % 2 == 0,
           "rotary embeddings need seq > 0 and an even head_dim, got seq=" << seq << " head_dim="
                                                                           << head_dim);
  cos_.resize(static_cast<size_t>(seq * half_));
  sin_.resize(cos_.size());
  for (int64_t p = 0; p < seq; ++p) {
    for (int64_t i = 0; i < half_; ++i) {
      const double freq = std::pow(theta, -2.0 * static_cast<double>(i) / head_dim);
      const double angle = static_cast<double>(position0 + p) * freq;
      cos_[p * half_ + i] = static_cast<T>(std::cos(angle));
      sin_[p * half_ + i] = static_cast<T>(std::sin(angle));
    }
  }
}

template <typename T>
void RotaryTable<T>::rotate(MatrixRef<T> x, int64_t heads, bool inverse) const {
  PX_CHECK(x.rows() % seq_ == 0 && x.cols() == heads * 2 * half_,
           "rotary: x is " << x.rows() << " x " << x.cols() << ", want a multiple of seq=" << seq_
                           << " rows and heads * head_dim=" << heads * 2 * half_ << " columns");
  const T sign = inverse ? T(-1) : T(1);
  RowArray<T> s(half_), a0(half_);  // reused: no allocation per row
  for (int64_t r = 0; r < x.rows(); ++r) {
    const int64_t pos = r % seq_;
    const Eigen::Map<const RowArray<T>> c(cos_.data() + pos * half_, half_);
    s = Eigen::Map<const RowArray<T>>(sin_.data() + pos * half_, half_) * sign;
    for (int64_t hd = 0; hd < heads; ++hd) {
      auto a = x.row(r).segment(hd * 2 * half_, half_).array();
      auto b = x.row(r).segment(hd * 2 * half_ + half_, half_).array();
      a0 = a;
      a = a0 * c - b * s;  // x * cos + rotate_half(x) * sin, rotate_half(a, b) = (-b, a)
      b = b * c + a0 * s;
    }
  }
}

// ---- causal grouped-query attention ---------------------------------------------------------

template <typename T>
void attention_forward(const AttentionShape& s, const ConstMatrixRef<T>& q,
                       const ConstMatrixRef<T>& k, const ConstMatrixRef<T>& v, MatrixRef<T> out,
                       std::span<T> lse) {
  check_attention(s, q.rows(), q.cols(), k.cols());
  const int64_t seq = s.seq, keys = s.keys(), d = s.head_dim, group = s.heads / s.kv_heads;
  PX_CHECK(k.rows() == s.batch * keys && v.rows() == k.rows() && v.cols() == k.cols() &&
               out.rows() == q.rows() && out.cols() == q.cols() &&
               static_cast<int64_t>(lse.size()) == q.rows() * s.heads,
           "attention_forward: operand sizes disagree");
  const T scale = T(1) / std::sqrt(static_cast<T>(d));
  RowMatrix<T> tile(std::min(kQueryBlock, seq), s.q_offset + seq);
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      const auto qh = q.block(b * seq, h * d, seq, d);
      const auto kh = k.block(b * keys, (h / group) * d, keys, d);
      const auto vh = v.block(b * keys, (h / group) * d, keys, d);
      for (int64_t i0 = 0; i0 < seq; i0 += kQueryBlock) {
        const int64_t rows = std::min(kQueryBlock, seq - i0), cols = s.q_offset + i0 + rows;
        auto p = tile.topLeftCorner(rows, cols);
        p.noalias() = qh.middleRows(i0, rows) * kh.topRows(cols).transpose();
        causal_probabilities<T>(p, s.q_offset + i0, scale, nullptr,
                                &lse[(b * seq + i0) * s.heads + h], s.heads);
        out.block(b * seq + i0, h * d, rows, d).noalias() = p * vh.topRows(cols);
      }
    }
  }
}

template <typename T>
void attention_backward(const AttentionShape& s, const ConstMatrixRef<T>& q,
                        const ConstMatrixRef<T>& k, const ConstMatrixRef<T>& v,
                        const ConstMatrixRef<T>& out, std::span<const T> lse,
                        const ConstMatrixRef<T>& dout, MatrixRef<T> dq, MatrixRef<T> dk,
                        MatrixRef<T> dv) {
  check_attention(s, q.rows(), q.cols(), k.cols());
  const int64_t seq = s.seq, keys = s.keys(), d = s.head_dim, group = s.heads / s.kv_heads;
  PX_CHECK(k.rows() == s.batch * keys && v.rows() == k.rows() && v.cols() == k.cols() &&
               out.rows() == q.rows() && out.cols() == q.cols() && dout.rows() == q.rows() &&
               dout.cols() == q.cols() && dq.rows() == q.rows() && dq.cols() == q.cols() &&
               dk.rows() == k.rows() && dk.cols() == k.cols() && dv.rows() == v.rows() &&
               dv.cols() == v.cols() && static_cast<int64_t>(lse.size()) == q.rows() * s.heads,
           "attention_backward: operand sizes disagree");
  const T scale = T(1) / std::sqrt(static_cast<T>(d));
  const int64_t block = std::min(kQueryBlock, seq);
  RowMatrix<T> p_tile(block, s.q_offset + seq), dp_tile(block, s.q_offset + seq);
  Eigen::Matrix<T, Eigen::Dynamic, 1> delta(seq);
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t kv_col = (h / group) * d;
      const auto qh = q.block(b * seq, h * d, seq, d);
      const auto kh = k.block(b * keys, kv_col, keys, d);
      const auto vh = v.block(b * keys, kv_col, keys, d);
      const auto doh = dout.block(b * seq, h * d, seq, d);
      auto dqh = dq.block(b * seq, h * d, seq, d);
      auto dkh = dk.block(b * keys, kv_col, keys, d);
      auto dvh = dv.block(b * keys, kv_col, keys, d);
      // rowsum(dout * out) = rowsum(dp * p): the softmax backward's subtracted term.
      delta = (doh.array() * out.block(b * seq, h * d, seq, d).array()).rowwise().sum().matrix();
      for (int64_t i0 = 0; i0 < seq; i0 += kQueryBlock) {
        const int64_t rows = std::min(kQueryBlock, seq - i0), cols = s.q_offset + i0 + rows;
        auto p = p_tile.topLeftCorner(rows, cols);
        auto ds = dp_tile.topLeftCorner(rows, cols);
        const auto q_blk = qh.middleRows(i0, rows);
        const auto do_blk = doh.middleRows(i0, rows);
        p.noalias() = q_blk * kh.topRows(cols).transpose();
        causal_probabilities<T>(p, s.q_offset + i0, scale, &lse[(b * seq + i0) * s.heads + h],
                                nullptr, s.heads);
        dvh.topRows(cols).noalias() += p.transpose() * do_blk;
        ds.noalias() = do_blk * vh.topRows(cols).transpose();
        ds.array() = p.array() * (ds.array().colwise() - delta.segment(i0, rows).array());
        dqh.middleRows(i0, rows).noalias() += scale * (ds * kh.topRows(cols));
        dkh.topRows(cols).noalias() += scale * (ds.transpose() * q_blk);
      }
    }
  }
}

// ---- SwiGLU ---------------------------------------------------------------------------------

template <typename T>
void swiglu_forward(const ConstMatrixRef<T>& gate, const ConstMatrixRef<T>& up, MatrixRef<T> out) {
  PX_CHECK(up.rows() == gate.rows() && up.cols() == gate.cols() && out.rows() == gate.rows() &&
               out.cols() == gate.cols(),
           "swiglu_forward: operand sizes disagree");
  for (int64_t i = 0; i < gate.rows(); ++i) {
    const auto g = gate.row(i).array();
    out.row(i).array() = g / (T(1) + (-g).exp()) * up.row(i).array();
  }
}

template <typename T>
void swiglu_backward(const ConstMatrixRef<T>& gate, const ConstMatrixRef<T>& up,
                     const ConstMatrixRef<T>& dout, MatrixRef<T> dgate, MatrixRef<T> dup) {
  PX_CHECK(up.rows() == gate.rows() && up.cols() == gate.cols() && dout.rows() == gate.rows() &&
               dout.cols() == gate.cols() && dgate.rows() == gate.rows() &&
               dgate.cols() == gate.cols() && dup.rows() == gate.rows() &&
               dup.cols() == gate.cols(),
           "swiglu_backward: operand sizes disagree");
  RowArray<T> sig(gate.cols());
  for (int64_t i = 0; i < gate.rows(); ++i) {
    const auto g = gate.row(i).array();
    const auto dy = dout.row(i).array();
    sig = (T(1) + (-g).exp()).inverse();
    dup.row(i).array() += dy * g * sig;
    dgate.row(i).array() += dy * up.row(i).array() * sig * (T(1) + g * (T(1) - sig));
  }
}

// ---- cross-entropy --------------------------------------------------------------------------

template <typename T>
double cross_entropy_forward(const ConstMatrixRef<T>& logits, std::span<const int32_t> targets,
                             std::span<double> row_losses) {
  const int64_t n = logits.rows(), vocab = logits.cols();
  PX_CHECK(static_cast<int64_t>(targets.size()) == n &&
               (row_losses.empty() || static_cast<int64_t>(row_losses.size()) == n),
           "cross_entropy_forward: " << targets.size() << " targets for " << n << " rows");
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t t = targets[i];
    PX_CHECK(t >= 0 && t < vocab, "target " << t << " outside [0, " << vocab << ")");
    const auto row = logits.row(i).array();
    const T max = row.maxCoeff();
    const double sum = static_cast<double>((row - max).exp().sum());
    const double loss = static_cast<double>(max) + std::log(sum) - static_cast<double>(row(t));
    if (!row_losses.empty()) row_losses[i] = loss;
    total += loss;
  }
  return total;
}

template <typename T>
double cross_entropy_backward(const ConstMatrixRef<T>& logits, std::span<const int32_t> targets,
                              T grad_scale, MatrixRef<T> dlogits) {
  const int64_t n = logits.rows(), vocab = logits.cols();
  PX_CHECK(
      static_cast<int64_t>(targets.size()) == n && dlogits.rows() == n && dlogits.cols() == vocab,
      "cross_entropy_backward: operand sizes disagree");
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t t = targets[i];
    PX_CHECK(t >= 0 && t < vocab, "target " << t << " outside [0, " << vocab << ")");
    const T max = logits.row(i).maxCoeff();
    const T target_logit = logits(i, t);  // read before dlogits may overwrite it
    auto g = dlogits.row(i).array();
    g = (logits.row(i).array() - max).exp();
    const T sum = g.sum();
    total += static_cast<double>(max) + std::log(static_cast<double>(sum)) -
             static_cast<double>(target_logit);
    g *= grad_scale / sum;
    dlogits(i, t) -= grad_scale;
  }
  return total;
}

// ---- instantiations -------------------------------------------------------------------------

#define PX_INSTANTIATE_OPS(T)                                                                      \
  template void rms_norm_forward<T>(const ConstMatrixRef<T>&, std::span<const T>, T, MatrixRef<T>, \
                                    std::span<T>);                                                 \
  template void rms_norm_backward<T>(const ConstMatrixRef<T>&, std::span<const T>,                 \
                                     std::span<const T>, const ConstMatrixRef<T>&, MatrixRef<T>,   \
                                     std::span<T>);                                                \
  template class RotaryTable<T>;                                                                   \
  template void attention_forward<T>(const AttentionShape&, const ConstMatrixRef<T>&,              \
                                     const ConstMatrixRef<T>&, const ConstMatrixRef<T>&,           \
                                     MatrixRef<T>, std::span<T>);                                  \
  template void attention_backward<T>(                                                             \
      const AttentionShape&, const ConstMatrixRef<T>&, const ConstMatrixRef<T>&,                   \
      const ConstMatrixRef<T>&, const ConstMatrixRef<T>&, std::span<const T>,                      \
      const ConstMatrixRef<T>&, MatrixRef<T>, MatrixRef<T>, MatrixRef<T>);                         \
  template void swiglu_forward<T>(const ConstMatrixRef<T>&, const ConstMatrixRef<T>&,              \
                                  MatrixRef<T>);                                                   \
  template void swiglu_backward<T>(const ConstMatrixRef<T>&, const ConstMatrixRef<T>&,             \
                                   const ConstMatrixRef<T>&, MatrixRef<T>, MatrixRef<T>);          \
  template double cross_entropy_forward<T>(const ConstMatrixRef<T>&, std::span<const int32_t>,     \
                                           std::span<double>);                                     \
  template double cross_entropy_backward<T>(const ConstMatrixRef<T>&, std::span<const int32_t>, T, \
                                            MatrixRef<T>);

PX_INSTANTIATE_OPS(float)
PX_INSTANTIATE_OPS(double)

#undef PX_INSTANTIATE_OPS

}  // namespace parallax::exec::ops
