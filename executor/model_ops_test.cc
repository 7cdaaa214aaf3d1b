#include "executor/model_ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <span>
#include <vector>

namespace parallax::exec::ops {
namespace {

using Mat = RowMatrix<double>;

// Uniform in [-1, 1), from the generator's bits (the standard fixes mt19937_64's output).
Mat random_matrix(std::mt19937_64& rng, int64_t rows, int64_t cols) {
  Mat m(rows, cols);
  for (double& x : m.reshaped()) x = static_cast<double>(rng() >> 11) * 0x1.0p-52 - 1.0;
  return m;
}

// Five-point central difference, error O(h^4): with h = 1e-3 it is ~1e-12 here, far below the
// 1e-7 the checks allow, while round-off stays ~1e-13.
double numeric_derivative(double& x, const std::function<double()>& f) {
  constexpr double h = 1e-3;
  const double x0 = x;
  x = x0 + 2 * h;
  const double f2 = f();
  x = x0 + h;
  const double f1 = f();
  x = x0 - h;
  const double fm1 = f();
  x = x0 - 2 * h;
  const double fm2 = f();
  x = x0;
  return (-f2 + 8 * f1 - 8 * fm1 + fm2) / (12 * h);
}

// Largest |analytic - numeric| / max(|analytic|, |numeric|, 1e-4) over every stride-th entry of
// `x`. Below 1e-4 (exact zeros such as the gradient of the first query, whose softmax has one
// key) the comparison is absolute, where the quotient's round-off, ~1e-12, would otherwise rule.
double max_relative_error(Mat& x, const Mat& analytic, const std::function<double()>& f,
                          int64_t stride = 1) {
  double worst = 0;
  for (int64_t i = 0; i < x.size(); i += stride) {
    const double numeric = numeric_derivative(x.data()[i], f);
    const double a = analytic.data()[i];
    worst =
        std::max(worst, std::abs(a - numeric) / std::max({std::abs(a), std::abs(numeric), 1e-4}));
  }
  return worst;
}

double dot(const Mat& a, const Mat& b) { return (a.array() * b.array()).sum(); }

constexpr double kTolerance = 1e-7;

TEST(ModelOps, RmsNormMatchesFormulaAndFiniteDifferences) {
  std::mt19937_64 rng(1);
  Mat x = random_matrix(rng, 5, 8), w = random_matrix(rng, 1, 8), r = random_matrix(rng, 5, 8);
  w.array() += 1.5;
  const double eps = 1e-5;
  Mat y(5, 8);
  std::vector<double> rstd(5);
  auto f = [&] {
    rms_norm_forward<double>(x, {w.data(), 8}, eps, y, rstd);
    return dot(y, r);
  };
  f();
  // y = x / sqrt(mean(x^2) + eps) * w
  for (int64_t i = 0; i < 5; ++i) {
    const double norm = std::sqrt(x.row(i).squaredNorm() / 8 + eps);
    for (int64_t j = 0; j < 8; ++j) EXPECT_NEAR(y(i, j), x(i, j) / norm * w(0, j), 1e-14);
  }
  Mat dx = Mat::Zero(5, 8), dw = Mat::Zero(1, 8);
  rms_norm_backward<double>(x, {w.data(), 8}, rstd, r, dx, {dw.data(), 8});
  EXPECT_LT(max_relative_error(x, dx, f), kTolerance);
  EXPECT_LT(max_relative_error(w, dw, f), kTolerance);
}

TEST(ModelOps, RotaryFollowsTheRotateHalfConvention) {
  // Position 1, head_dim 4, theta 10000: the pair (x0, x2) turns by 1 rad, (x1, x3) by
  // 1 * 10000^(-2/4) = 0.01 rad; position 0 does not move.
  const RotaryTable<double> rope(2, 4, 10000.0);
  Mat x(2, 4);
  x << 1, 2, 3, 4, 1, 2, 3, 4;
  rope.rotate(x, 1, false);
  EXPECT_DOUBLE_EQ(x(0, 0), 1);
  EXPECT_DOUBLE_EQ(x(0, 3), 4);
  const double c1 = std::cos(1.0), s1 = std::sin(1.0), c2 = std::cos(0.01), s2 = std::sin(0.01);
  EXPECT_NEAR(x(1, 0), 1 * c1 - 3 * s1, 1e-15);
  EXPECT_NEAR(x(1, 1), 2 * c2 - 4 * s2, 1e-15);
  EXPECT_NEAR(x(1, 2), 3 * c1 + 1 * s1, 1e-15);
  EXPECT_NEAR(x(1, 3), 4 * c2 + 2 * s2, 1e-15);
  rope.rotate(x, 1, true);
  EXPECT_NEAR(x(1, 0), 1, 1e-15);
  EXPECT_NEAR(x(1, 3), 4, 1e-15);
}

TEST(ModelOps, RotaryBackwardMatchesFiniteDifferences) {
  std::mt19937_64 rng(2);
  const int64_t seq = 3, heads = 2, d = 6;
  const RotaryTable<double> rope(seq, d, 500.0);
  Mat x = random_matrix(rng, 2 * seq, heads * d), r = random_matrix(rng, 2 * seq, heads * d);
  auto f = [&] {
    Mat y = x;
    rope.rotate(y, heads, false);
    return dot(y, r);
  };
  Mat dx = r;
  rope.rotate(dx, heads, true);
  EXPECT_LT(max_relative_error(x, dx, f), kTolerance);
}

// softmax(q k^T / sqrt(d) + mask) v by definition, one (sequence, head, row) at a time.
Mat naive_attention(const AttentionShape& s, const Mat& q, const Mat& k, const Mat& v) {
  Mat out = Mat::Zero(q.rows(), q.cols());
  const int64_t d = s.head_dim, group = s.heads / s.kv_heads;
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t g = h / group;
      for (int64_t i = 0; i < s.seq; ++i) {
        std::vector<double> w(static_cast<size_t>(i + 1));
        double sum = 0;
        for (int64_t j = 0; j <= i; ++j) {
          const double score =
              q.row(b * s.seq + i).segment(h * d, d).dot(k.row(b * s.seq + j).segment(g * d, d)) /
              std::sqrt(static_cast<double>(d));
          w[j] = std::exp(score);
          sum += w[j];
        }
        for (int64_t j = 0; j <= i; ++j)
          out.row(b * s.seq + i).segment(h * d, d) +=
              w[j] / sum * v.row(b * s.seq + j).segment(g * d, d);
      }
    }
  }
  return out;
}

struct AttentionCase {
  AttentionShape shape;
  Mat q, k, v;
};

AttentionCase attention_case(int64_t seq, uint64_t seed) {
  std::mt19937_64 rng(seed);
  AttentionCase c{{.batch = 2, .seq = seq, .heads = 4, .kv_heads = 2, .head_dim = 4}, {}, {}, {}};
  const int64_t n = c.shape.batch * seq;
  c.q = random_matrix(rng, n, 16) * 2.0;  // scores of order 1: the softmax is not flat
  c.k = random_matrix(rng, n, 8) * 2.0;
  c.v = random_matrix(rng, n, 8);
  return c;
}

TEST(ModelOps, AttentionMatchesDefinitionAcrossQueryBlocks) {
  // seq 150 spans three query blocks of 64, the last one partial.
  for (int64_t seq : {5, 150}) {
    AttentionCase c = attention_case(seq, 3);
    Mat out(c.q.rows(), c.q.cols());
    std::vector<double> lse(static_cast<size_t>(c.q.rows() * 4));
    attention_forward<double>(c.shape, c.q, c.k, c.v, out, lse);
    EXPECT_LT((out - naive_attention(c.shape, c.q, c.k, c.v)).cwiseAbs().maxCoeff(), 1e-13)
        << "seq " << seq;
  }
}

TEST(ModelOps, AttentionIsCausal) {
  AttentionCase c = attention_case(9, 4);
  Mat out(c.q.rows(), 16), out2(c.q.rows(), 16);
  std::vector<double> lse(static_cast<size_t>(c.q.rows() * 4));
  attention_forward<double>(c.shape, c.q, c.k, c.v, out, lse);
  c.k.row(6).setConstant(5.0);  // sequence 0, position 6
  c.v.row(6).setConstant(-3.0);
  attention_forward<double>(c.shape, c.q, c.k, c.v, out2, lse);
  EXPECT_EQ(out.topRows(6), out2.topRows(6));
  EXPECT_GT((out.row(6) - out2.row(6)).cwiseAbs().maxCoeff(), 1e-3);
  EXPECT_EQ(out.bottomRows(9), out2.bottomRows(9));  // sequence 1 never sees sequence 0
}

TEST(ModelOps, AttentionBackwardWithGroupedQueriesMatchesFiniteDifferences) {
  for (int64_t seq : {5, 70}) {
    AttentionCase c = attention_case(seq, 5);
    std::mt19937_64 rng(6);
    const int64_t n = c.q.rows();
    const Mat r = random_matrix(rng, n, 16);
    Mat out(n, 16);
    std::vector<double> lse(static_cast<size_t>(n * 4));
    auto f = [&] {
      attention_forward<double>(c.shape, c.q, c.k, c.v, out, lse);
      return dot(out, r);
    };
    f();
    Mat dq = Mat::Zero(n, 16), dk = Mat::Zero(n, 8), dv = Mat::Zero(n, 8);
    attention_backward<double>(c.shape, c.q, c.k, c.v, out, lse, r, dq, dk, dv);
    const int64_t stride = seq > 64 ? 37 : 1;  // every head and column, a few hundred entries
    EXPECT_LT(max_relative_error(c.q, dq, f, stride), kTolerance) << "seq " << seq;
    EXPECT_LT(max_relative_error(c.k, dk, f, stride), kTolerance) << "seq " << seq;
    EXPECT_LT(max_relative_error(c.v, dv, f, stride), kTolerance) << "seq " << seq;
  }
}

TEST(ModelOps, SwigluMatchesFormulaAndFiniteDifferences) {
  std::mt19937_64 rng(7);
  Mat g = random_matrix(rng, 4, 6) * 4.0, u = random_matrix(rng, 4, 6),
      r = random_matrix(rng, 4, 6);
  Mat out(4, 6);
  auto f = [&] {
    swiglu_forward<double>(g, u, out);
    return dot(out, r);
  };
  f();
  EXPECT_NEAR(out(1, 2), g(1, 2) / (1 + std::exp(-g(1, 2))) * u(1, 2), 1e-15);
  Mat dg = Mat::Zero(4, 6), du = Mat::Zero(4, 6);
  swiglu_backward<double>(g, u, r, dg, du);
  EXPECT_LT(max_relative_error(g, dg, f), kTolerance);
  EXPECT_LT(max_relative_error(u, du, f), kTolerance);
}

TEST(ModelOps, CrossEntropyIsStableAndMatchesFiniteDifferences) {
  // Equal logits: every row costs ln(vocab) exactly.
  const std::vector<int32_t> targets = {0, 3, 6};
  EXPECT_NEAR(cross_entropy_forward<double>(Mat::Constant(3, 7, 2.5), targets), 3 * std::log(7.0),
              1e-13);
  // Logits of 1000 overflow exp() in a naive softmax; the loss of the top class is
  // log(1 + 6 e^-1000) = 0 and that of another class 1000.
  Mat big = Mat::Zero(2, 7);
  big.col(0).setConstant(1000);
  std::vector<double> rows(2);
  const std::vector<int32_t> t2 = {0, 1};
  EXPECT_NEAR(cross_entropy_forward<double>(big, t2, rows), 1000, 1e-9);
  EXPECT_NEAR(rows[0], 0, 1e-12);
  EXPECT_NEAR(rows[1], 1000, 1e-9);
  Mat dbig(2, 7);
  EXPECT_NEAR(cross_entropy_backward<double>(big, t2, 1.0, dbig), 1000, 1e-9);
  EXPECT_TRUE(dbig.allFinite());

  std::mt19937_64 rng(8);
  Mat z = random_matrix(rng, 3, 7) * 3.0;
  auto f = [&] { return cross_entropy_forward<double>(z, targets); };
  Mat dz(3, 7);
  const double scale = 0.25;
  EXPECT_NEAR(cross_entropy_backward<double>(z, targets, scale, dz), f(), 1e-13);
  const Mat analytic = dz / scale;
  EXPECT_LT(max_relative_error(z, analytic, f), kTolerance);
  Mat in_place = z;  // dlogits may share the logits' storage
  cross_entropy_backward<double>(in_place, targets, scale, in_place);
  EXPECT_EQ(in_place, dz);
}

}  // namespace
}  // namespace parallax::exec::ops
