#include "executor/moe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <iomanip>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace parallax::exec {
namespace {

using ops::RowMatrix;

// One routed-experts layer on one rank: 7 tokens of hidden 8, 4 experts of width 6, top-2.
struct Layer {
  MoeConfig config{
      .experts = 4, .top_k = 2, .width = 6, .hidden = 8, .aux_coeff = 0.1, .tokens = 7};
  RowMatrix<double> xn, router, gate, up, down;

  explicit Layer(uint64_t seed) {
    std::mt19937_64 rng(seed);
    auto fill = [&](RowMatrix<double>& m, int64_t rows, int64_t cols, double scale) {
      m.resize(rows, cols);
      for (int64_t i = 0; i < m.size(); ++i)
        m.data()[i] = scale * (2 * static_cast<double>(rng() >> 11) * 0x1.0p-53 - 1);
    };
    const int64_t n = config.tokens, h = config.hidden, e = config.experts, w = config.width;
    fill(xn, n, h, 1.0);
    fill(router, h, e, 1.0);
    fill(gate, e * h, w, std::sqrt(3.0 / h));
    fill(up, e * h, w, std::sqrt(3.0 / h));
    fill(down, w, e * h, std::sqrt(3.0 / w));  // width x (experts * hidden)
  }
  MoeWeights<ConstMatrixMap<double>> weights() const {
    auto map = [](const RowMatrix<double>& m) {
      return ConstMatrixMap<double>(m.data(), m.rows(), m.cols());
    };
    return {map(router), map(gate), map(up), map(down)};
  }
  // Runs the forward on one rank; returns out.
  RowMatrix<double> forward(MoeActs<double>& a) const {
    RowMatrix<double> out(xn.rows(), config.hidden);
    moe_forward<double>(config, ExpertParallel<double>{}, {}, xn, weights(), a, out);
    return out;
  }
};

double silu(double g) { return g / (1 + std::exp(-g)); }

// The layer written token by token, as the literature states it.
TEST(MoeLayer, MatchesAPerTokenReference) {
  const Layer layer(1);
  MoeActs<double> a;
  const RowMatrix<double> out = layer.forward(a);
  const MoeConfig& c = layer.config;
  std::vector<double> count(c.experts, 0), prob_sum(c.experts, 0);
  for (int64_t t = 0; t < c.tokens; ++t) {
    const Eigen::RowVectorXd z = layer.xn.row(t) * layer.router;
    const Eigen::RowVectorXd p =
        (z.array() - z.maxCoeff()).exp() / (z.array() - z.maxCoeff()).exp().sum();
    std::vector<int> idx(c.experts);
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [&](int i, int j) { return p(i) > p(j); });
    double chosen = 0;
    for (int j = 0; j < c.top_k; ++j) chosen += p(idx[j]);
    Eigen::RowVectorXd want = Eigen::RowVectorXd::Zero(c.hidden);
    for (int j = 0; j < c.top_k; ++j) {
      const int e = idx[j];
      EXPECT_EQ(a.expert[t * c.top_k + j], e) << "token " << t;
      const double g = p(e) / chosen;
      EXPECT_NEAR(a.gates(t, j), g, 1e-15);
      const Eigen::RowVectorXd hg = layer.xn.row(t) * layer.gate.middleRows(e * c.hidden, c.hidden);
      const Eigen::RowVectorXd hu = layer.xn.row(t) * layer.up.middleRows(e * c.hidden, c.hidden);
      Eigen::RowVectorXd act(c.width);
      for (int64_t i = 0; i < c.width; ++i) act(i) = silu(hg(i)) * hu(i);
      want += g * act * layer.down.middleCols(e * c.hidden, c.hidden);
      count[e] += 1;
    }
    for (int64_t e = 0; e < c.experts; ++e) prob_sum[e] += p(e);
    for (int64_t i = 0; i < c.hidden; ++i) EXPECT_NEAR(out(t, i), want(i), 1e-14) << "token " << t;
  }
  // aux = coeff E sum_e f_e P_e, f_e = count_e / (N k), P_e = prob_sum_e / N.
  double dot = 0;
  for (int64_t e = 0; e < c.experts; ++e)
    dot += count[e] / (c.tokens * c.top_k) * prob_sum[e] / c.tokens;
  EXPECT_NEAR(a.aux, c.aux_coeff * c.experts * dot, 1e-15);
}

// Uniform routing (a zero router): every probability is 1/E, every top-k a tie, which goes to
// the lowest indices: each token takes experts 0 and 1 with gates 1/2, so f = (1/2, 1/2, 0, 0),
// P = 1/4 each, and aux = coeff * 4 * (1/2 * 1/4 + 1/2 * 1/4) = coeff.
TEST(MoeLayer, UniformRouterTiesToTheLowestExperts) {
  Layer layer(2);
  layer.router.setZero();
  MoeActs<double> a;
  layer.forward(a);
  for (int64_t t = 0; t < layer.config.tokens; ++t) {
    EXPECT_EQ(a.expert[2 * t], 0);
    EXPECT_EQ(a.expert[2 * t + 1], 1);
    EXPECT_EQ(a.gates(t, 0), 0.5);
    EXPECT_EQ(a.gates(t, 1), 0.5);
  }
  // Element by element: GCC 12.2 with AVX-512 miscompiles the literal {0.5, 0.5, 0, 0} as a
  // broadcast of 0.5 (seen at -O2 -march=native on an EPYC).
  ASSERT_EQ(a.fraction.size(), 4u);
  for (size_t e = 0; e < 4; ++e) EXPECT_EQ(a.fraction[e], e < 2 ? 0.5 : 0.0) << "expert " << e;
  EXPECT_DOUBLE_EQ(a.aux, layer.config.aux_coeff);
}

// d J / d(router, experts, xn) for J = sum(out * R) + aux_weight * aux, by moe_backward against
// five-point central differences over every entry. The random layer's routing is checked to be
// at least 0.05 (in ln p_k / p_(k+1)) from a tie, so no step of 2e-3 changes a choice; the
// choice is compared at every evaluation besides.
TEST(MoeLayer, GradientMatchesFiniteDifferences) {
  Layer layer(3);
  const MoeConfig& c = layer.config;
  const double aux_weight = 5.0;
  std::mt19937_64 rng(4);
  RowMatrix<double> r(c.tokens, c.hidden);
  for (int64_t i = 0; i < r.size(); ++i) r.data()[i] = static_cast<double>(rng() % 1000) / 500 - 1;
  MoeActs<double> a;
  layer.forward(a);
  for (int64_t t = 0; t < c.tokens; ++t) {
    std::vector<double> p(a.probs.row(t).data(), a.probs.row(t).data() + c.experts);
    std::sort(p.rbegin(), p.rend());
    ASSERT_GT(std::log(p[c.top_k - 1] / p[c.top_k]), 0.05) << "token " << t;
  }
  const std::vector<int32_t> routed = a.expert;

  RowMatrix<double> g_router = RowMatrix<double>::Zero(c.hidden, c.experts),
                    g_gate = RowMatrix<double>::Zero(layer.gate.rows(), c.width),
                    g_up = RowMatrix<double>::Zero(layer.up.rows(), c.width),
                    g_down = RowMatrix<double>::Zero(c.width, layer.down.cols()),
                    dxn(c.tokens, c.hidden);
  auto map = [](RowMatrix<double>& m) { return MatrixMap<double>(m.data(), m.rows(), m.cols()); };
  moe_backward<double>(c, ExpertParallel<double>{}, layer.xn, r, aux_weight, layer.weights(),
                       {map(g_router), map(g_gate), map(g_up), map(g_down)}, a, dxn);

  auto objective = [&] {
    MoeActs<double> b;
    const RowMatrix<double> out = layer.forward(b);
    EXPECT_EQ(b.expert, routed);
    return (out.array() * r.array()).sum() + aux_weight * b.aux;
  };
  double worst = 0;
  auto check = [&](RowMatrix<double>& x, const RowMatrix<double>& analytic, const char* name) {
    for (int64_t i = 0; i < x.size(); ++i) {
      const double h = 1e-3, x0 = x.data()[i];
      auto f = [&](double dx) {
        x.data()[i] = x0 + dx;
        return objective();
      };
      const double numeric = (-f(2 * h) + 8 * f(h) - 8 * f(-h) + f(-2 * h)) / (12 * h);
      x.data()[i] = x0;
      const double err = std::abs(analytic.data()[i] - numeric) /
                         std::max({std::abs(analytic.data()[i]), std::abs(numeric), 1e-4});
      EXPECT_LT(err, 1e-7) << name << " [" << i << "]: " << analytic.data()[i] << " vs " << numeric;
      worst = std::max(worst, err);
    }
  };
  check(layer.router, g_router, "router");
  check(layer.gate, g_gate, "gate");
  check(layer.up, g_up, "up");
  check(layer.down, g_down, "down");
  check(layer.xn, dxn, "xn");
  std::ostringstream os;
  os << std::scientific << std::setprecision(2) << worst;
  RecordProperty("max_relative_error", os.str());
}

}  // namespace
}  // namespace parallax::exec
