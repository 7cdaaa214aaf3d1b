// Routed experts, forward and backward by hand: the router's softmax, top-k gating, the token
// dispatch over the expert-parallel group, the experts' SwiGLU MLPs and the load-balancing loss.

#include "executor/moe.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>
#include <utility>
#include <vector>

#include "executor/op_times.h"

namespace parallax::exec {
namespace {

using ops::RowMatrix;

/// Rows of `send`, grouped by destination rank (send_rows[r] rows for rank r), to their ranks;
/// returns recv_rows[r] rows from each rank r, in rank order. One rank keeps its rows.
template <typename T>
RowMatrix<T> all_to_all_rows(const ExpertParallel<T>& ep, RowMatrix<T> send,
                             const std::vector<int64_t>& send_rows,
                             const std::vector<int64_t>& recv_rows) {
  if (ep.size == 1) return send;
  const int64_t cols = send.cols();
  std::vector<int64_t> send_counts(send_rows.size()), recv_counts(recv_rows.size());
  int64_t total = 0;
  for (size_t r = 0; r < send_rows.size(); ++r) {
    send_counts[r] = send_rows[r] * cols;
    recv_counts[r] = recv_rows[r] * cols;
    total += recv_rows[r];
  }
  RowMatrix<T> recv(total, cols);
  ep.all_to_all(std::span<const T>(send.data(), static_cast<size_t>(send.size())), send_counts,
                std::span<T>(recv.data(), static_cast<size_t>(recv.size())), recv_counts);
  return recv;
}

/// m's row i moved to row perm[i]; and back (row i taken from row perm[i]).
template <typename T>
RowMatrix<T> permute_rows(const RowMatrix<T>& m, const std::vector<int64_t>& perm) {
  RowMatrix<T> out(m.rows(), m.cols());
  for (int64_t i = 0; i < m.rows(); ++i) out.row(perm[static_cast<size_t>(i)]) = m.row(i);
  return out;
}
template <typename T>
RowMatrix<T> unpermute_rows(const RowMatrix<T>& m, const std::vector<int64_t>& perm) {
  RowMatrix<T> out(m.rows(), m.cols());
  for (int64_t i = 0; i < m.rows(); ++i) out.row(i) = m.row(perm[static_cast<size_t>(i)]);
  return out;
}

/// Received rows (source-major: each source's rows grouped by local expert) in expert-major
/// order, row i going to perm[i]; and back. With one rank the two orders are the same.
template <typename T>
RowMatrix<T> to_expert_major(const ExpertParallel<T>& ep, RowMatrix<T> m,
                             const std::vector<int64_t>& perm) {
  if (ep.size == 1) return m;
  return permute_rows(m, perm);
}
template <typename T>
RowMatrix<T> to_source_major(const ExpertParallel<T>& ep, RowMatrix<T> m,
                             const std::vector<int64_t>& perm) {
  if (ep.size == 1) return m;
  return unpermute_rows(m, perm);
}

/// Rows that `ranks` sources send to `local` experts, counts[r * local + l] from source r to
/// expert l, laid out expert-major (each expert's rows from every source, in source order):
/// the rows from each source, the offsets of each expert's rows (local + 1), and where each
/// source-major row (each source's rows grouped by expert) goes.
void lay_out(const std::vector<int64_t>& counts, int64_t ranks, int64_t local,
             std::vector<int64_t>& source_rows, std::vector<int64_t>& expert_rows,
             std::vector<int64_t>& perm) {
  const auto at = [local](int64_t r, int64_t l) { return static_cast<size_t>(r * local + l); };
  source_rows.assign(static_cast<size_t>(ranks), 0);
  expert_rows.assign(static_cast<size_t>(local + 1), 0);
  for (int64_t r = 0; r < ranks; ++r) {
    for (int64_t l = 0; l < local; ++l) {
      source_rows[static_cast<size_t>(r)] += counts[at(r, l)];
      expert_rows[static_cast<size_t>(l + 1)] += counts[at(r, l)];
    }
  }
  for (int64_t l = 0; l < local; ++l)
    expert_rows[static_cast<size_t>(l + 1)] += expert_rows[static_cast<size_t>(l)];
  std::vector<int64_t> cursor(expert_rows.begin(), expert_rows.end() - 1);
  perm.clear();
  for (int64_t r = 0; r < ranks; ++r)
    for (int64_t l = 0; l < local; ++l)
      for (int64_t i = 0; i < counts[at(r, l)]; ++i)
        perm.push_back(cursor[static_cast<size_t>(l)]++);
}

// Split experts under sequence parallelism (MoeConfig::gather_tensor): the ranks of the tensor
// group hold different rows for the same experts, each rank a column block of their weights.

/// The values of each tensor rank's rows of `cols` columns (a.tensor_rows).
template <typename T>
std::vector<int64_t> tensor_counts(const MoeActs<T>& a, int64_t cols) {
  std::vector<int64_t> counts(a.tensor_rows.size());
  for (size_t r = 0; r < counts.size(); ++r) counts[r] = a.tensor_rows[r] * cols;
  return counts;
}

/// Every tensor rank's `m` (its received rows, expert-major), gathered in the experts' order
/// (expert-major over the group, a.tensor_perm).
template <typename T>
RowMatrix<T> gather_rows(const ExpertParallel<T>& ep, const MoeActs<T>& a, const RowMatrix<T>& m) {
  const std::vector<int64_t> counts = tensor_counts(a, m.cols());
  RowMatrix<T> all(std::accumulate(a.tensor_rows.begin(), a.tensor_rows.end(), int64_t{0}),
                   m.cols());
  ep.tensor_all_gather(std::span<const T>(m.data(), static_cast<size_t>(m.size())), counts,
                       std::span<T>(all.data(), static_cast<size_t>(all.size())));
  return permute_rows(all, a.tensor_perm);
}

/// The reverse of gather_rows: `m` (the group's rows in the experts' order) summed over the
/// group, this rank's `rows` of it.
template <typename T>
RowMatrix<T> scatter_rows(const ExpertParallel<T>& ep, const MoeActs<T>& a, const RowMatrix<T>& m,
                          int64_t rows) {
  const RowMatrix<T> all = unpermute_rows(m, a.tensor_perm);
  RowMatrix<T> mine(rows, m.cols());
  ep.tensor_reduce_scatter(std::span<const T>(all.data(), static_cast<size_t>(all.size())),
                           tensor_counts(a, m.cols()),
                           std::span<T>(mine.data(), static_cast<size_t>(mine.size())));
  return mine;
}

/// a.x, this rank's received rows, becomes the group's: the rows each rank holds for each local
/// expert exchanged, the gathered rows laid out (a.tensor_rows, a.tensor_perm, a.expert_rows).
template <typename T>
void gather_expert_rows(const ExpertParallel<T>& ep, int64_t local, MoeActs<T>& a) {
  std::vector<int64_t> mine(static_cast<size_t>(local)),
      all(static_cast<size_t>(local * ep.tensor));
  for (int64_t l = 0; l < local; ++l)
    mine[static_cast<size_t>(l)] =
        a.expert_rows[static_cast<size_t>(l + 1)] - a.expert_rows[static_cast<size_t>(l)];
  ep.tensor_all_gather_counts(mine, all);
  lay_out(all, ep.tensor, local, a.tensor_rows, a.expert_rows, a.tensor_perm);
  a.x = gather_rows(ep, a, a.x);
}

/// Rows this rank received from the ep group.
template <typename T>
int64_t received_rows(const MoeActs<T>& a) {
  return std::accumulate(a.recv_rows.begin(), a.recv_rows.end(), int64_t{0});
}

/// Softmax over the experts, top-k (ties to the lower index) and the renormalised gates.
template <typename T>
void route(const MoeConfig& c, const ops::ConstMatrixRef<T>& xn, const ConstMatrixMap<T>& router,
           MoeActs<T>& a) {
  const int64_t n = xn.rows(), e_count = c.experts, k = c.top_k;
  a.probs.noalias() = xn * router;  // logits, turned into probabilities row by row
  a.expert.assign(static_cast<size_t>(n * k), 0);
  a.gates.resize(n, k);
  std::vector<char> taken(static_cast<size_t>(e_count));
  for (int64_t t = 0; t < n; ++t) {
    auto p = a.probs.row(t);
    p.array() = (p.array() - p.maxCoeff()).exp();
    p /= p.sum();
    std::fill(taken.begin(), taken.end(), 0);
    T selected = 0;
    for (int64_t j = 0; j < k; ++j) {
      int64_t best = -1;
      for (int64_t e = 0; e < e_count; ++e)
        if (!taken[static_cast<size_t>(e)] && (best < 0 || p(e) > p(best))) best = e;
      taken[static_cast<size_t>(best)] = 1;
      a.expert[static_cast<size_t>(t * k + j)] = static_cast<int32_t>(best);
      a.gates(t, j) = p(best);
      selected += p(best);
    }
    a.gates.row(t) /= selected;
  }
}

/// f_e, P_e over the microbatch (summed over the context-parallel group) and the Switch loss
/// aux = coeff * E * sum_e f_e P_e.
template <typename T>
void balance(const MoeConfig& c, const std::function<void(std::span<T>)>& stats, MoeActs<T>& a) {
  const int64_t e_count = c.experts;
  std::vector<double> local(static_cast<size_t>(2 * e_count), 0.0);
  for (int32_t e : a.expert) local[static_cast<size_t>(e)] += 1;
  for (int64_t t = 0; t < a.probs.rows(); ++t)
    for (int64_t e = 0; e < e_count; ++e)
      local[static_cast<size_t>(e_count + e)] += static_cast<double>(a.probs(t, e));
  std::vector<T> sums(local.begin(), local.end());
  if (stats) stats(sums);
  const double n = static_cast<double>(c.tokens);
  a.fraction.resize(static_cast<size_t>(e_count));
  double dot = 0;
  for (int64_t e = 0; e < e_count; ++e) {
    const auto i = static_cast<size_t>(e);
    a.fraction[i] = static_cast<double>(sums[i]) / (n * static_cast<double>(c.top_k));
    dot += a.fraction[i] * static_cast<double>(sums[static_cast<size_t>(e_count) + i]) / n;
  }
  a.aux = c.aux_coeff * static_cast<double>(e_count) * dot;
}

/// Sorts the slots by expert, exchanges the counts, and lays out what this rank's experts
/// receive: a.order, send_rows, recv, recv_rows, expert_rows, perm.
template <typename T>
void plan_dispatch(const MoeConfig& c, const ExpertParallel<T>& ep, MoeActs<T>& a) {
  const int64_t e_count = c.experts, local = e_count / ep.size, slots = a.expert.size();
  const auto ranks = static_cast<size_t>(ep.size);
  std::vector<int64_t> counts(static_cast<size_t>(e_count), 0), start(counts.size(), 0);
  for (int32_t e : a.expert) ++counts[static_cast<size_t>(e)];
  for (size_t e = 1; e < counts.size(); ++e) start[e] = start[e - 1] + counts[e - 1];
  a.order.resize(static_cast<size_t>(slots));
  for (int64_t s = 0; s < slots; ++s)
    a.order[static_cast<size_t>(start[static_cast<size_t>(a.expert[s])]++)] = s;
  a.send_rows.assign(ranks, 0);
  for (int64_t e = 0; e < e_count; ++e)
    a.send_rows[static_cast<size_t>(e / local)] += counts[static_cast<size_t>(e)];
  // Rank r receives counts[r's experts] from every rank: recv is ep x local. Every rank's
  // counts go to every rank (ep x experts values), so each also sees the group's load.
  a.recv.resize(static_cast<size_t>(e_count));
  if (ep.size == 1) {
    a.recv = counts;
  } else {
    std::vector<int64_t> mine(ranks * counts.size()), all(mine.size());
    for (size_t r = 0; r < ranks; ++r)
      std::copy(counts.begin(), counts.end(), mine.begin() + r * counts.size());
    ep.all_to_all_counts(mine, all);
    std::vector<int64_t> load(ranks, 0);
    for (size_t s = 0; s < ranks; ++s)
      for (int64_t e = 0; e < e_count; ++e) {
        const int64_t n = all[s * counts.size() + static_cast<size_t>(e)];
        load[static_cast<size_t>(e / local)] += n;
        if (e / local == ep.rank)
          a.recv[s * static_cast<size_t>(local) + static_cast<size_t>(e % local)] = n;
      }
    const int64_t total = std::accumulate(load.begin(), load.end(), int64_t{0});
    if (total > 0 && OpClock::enabled() && !OpClock::in_backward())
      OpClock::add_routing(static_cast<double>(*std::max_element(load.begin(), load.end())) *
                           static_cast<double>(ranks) / static_cast<double>(total));
  }
  lay_out(a.recv, ep.size, local, a.recv_rows, a.expert_rows, a.perm);
}

}  // namespace

template <typename T>
void moe_forward(const MoeConfig& c, const ExpertParallel<T>& ep,
                 const std::function<void(std::span<T>)>& stats, const ops::ConstMatrixRef<T>& xn,
                 const MoeWeights<ConstMatrixMap<T>>& w, MoeActs<T>& a, ops::MatrixRef<T> out) {
  const int64_t n = xn.rows(), k = c.top_k, h = c.hidden, width = c.width;
  const int64_t local = c.experts / ep.size;
  route<T>(c, xn, w.router, a);
  balance<T>(c, stats, a);
  plan_dispatch<T>(c, ep, a);

  // Dispatch: each slot's token row, in expert order (hence rank order).
  RowMatrix<T> send(n * k, h);
  for (size_t i = 0; i < a.order.size(); ++i)
    send.row(static_cast<int64_t>(i)) = xn.row(a.order[i] / k);
  a.x = to_expert_major(ep, all_to_all_rows(ep, std::move(send), a.send_rows, a.recv_rows), a.perm);
  if (c.gather_tensor) gather_expert_rows(ep, local, a);  // Megatron's ETP all-gather

  // The local experts, each over its rows from every source.
  const int64_t rows_in = a.x.rows();
  a.gate.resize(rows_in, width);
  a.up.resize(rows_in, width);
  RowMatrix<T> act(rows_in, width), y(rows_in, h);
  for (int64_t l = 0; l < local; ++l) {
    const int64_t r0 = a.expert_rows[static_cast<size_t>(l)];
    const int64_t rows = a.expert_rows[static_cast<size_t>(l + 1)] - r0;
    if (rows == 0) continue;
    const auto x = a.x.middleRows(r0, rows);
    a.gate.middleRows(r0, rows).noalias() = x * w.gate.middleRows(l * h, h);
    a.up.middleRows(r0, rows).noalias() = x * w.up.middleRows(l * h, h);
  }
  ops::swiglu_forward<T>(a.gate, a.up, act);
  for (int64_t l = 0; l < local; ++l) {
    const int64_t r0 = a.expert_rows[static_cast<size_t>(l)];
    const int64_t rows = a.expert_rows[static_cast<size_t>(l + 1)] - r0;
    if (rows == 0) continue;
    y.middleRows(r0, rows).noalias() = act.middleRows(r0, rows) * w.down.middleCols(l * h, h);
  }

  // The partial outputs summed over the tensor group, each rank's rows back to it.
  if (c.gather_tensor) y = scatter_rows(ep, a, y, received_rows(a));
  // Combine: the outputs back to their tokens' ranks (the reverse exchange), then gated sums.
  const RowMatrix<T> back =
      all_to_all_rows(ep, to_source_major(ep, std::move(y), a.perm), a.recv_rows, a.send_rows);
  a.y.resize(n * k, h);
  for (size_t i = 0; i < a.order.size(); ++i)
    a.y.row(a.order[i]) = back.row(static_cast<int64_t>(i));
  for (int64_t t = 0; t < n; ++t) {
    out.row(t) = a.gates(t, 0) * a.y.row(t * k);
    for (int64_t j = 1; j < k; ++j) out.row(t) += a.gates(t, j) * a.y.row(t * k + j);
  }
}

template <typename T>
void moe_backward(const MoeConfig& c, const ExpertParallel<T>& ep, const ops::ConstMatrixRef<T>& xn,
                  const ops::ConstMatrixRef<T>& dout, T aux_weight,
                  const MoeWeights<ConstMatrixMap<T>>& w, MoeWeights<MatrixMap<T>> g,
                  const MoeActs<T>& a, ops::MatrixRef<T> dxn) {
  const int64_t n = xn.rows(), k = c.top_k, h = c.hidden, width = c.width;
  const int64_t e_count = c.experts, local = e_count / ep.size;

  // out[t] = sum_j gate_tj y_tj: d y_tj = gate_tj dout[t] (to the experts), d gate_tj = dout[t] .
  // y_tj.
  RowMatrix<T> send(n * k, h), d_gates(n, k);
  for (size_t i = 0; i < a.order.size(); ++i) {
    const int64_t slot = a.order[i];
    send.row(static_cast<int64_t>(i)) = a.gates(slot / k, slot % k) * dout.row(slot / k);
  }
  for (int64_t slot = 0; slot < n * k; ++slot)
    d_gates(slot / k, slot % k) = dout.row(slot / k).dot(a.y.row(slot));
  // Split experts give partial outputs, hence partial gate gradients: summed over the group
  // (gathered rows had their outputs summed in forward).
  const bool partial = ep.tensor > 1 && !c.gather_tensor;
  if (partial)
    ep.tensor_all_reduce(std::span<T>(d_gates.data(), static_cast<size_t>(d_gates.size())));
  RowMatrix<T> dy =
      to_expert_major(ep, all_to_all_rows(ep, std::move(send), a.send_rows, a.recv_rows), a.perm);
  if (c.gather_tensor) dy = gather_rows(ep, a, dy);  // the mirror of the outputs' scatter

  // The experts' backward, over the rows they received.
  const int64_t rows_in = a.x.rows();
  RowMatrix<T> act(rows_in, width), d_act(rows_in, width), d_gate(rows_in, width),
      d_up(rows_in, width), dx(rows_in, h);
  ops::swiglu_forward<T>(a.gate, a.up, act);  // recomputed rather than kept
  for (int64_t l = 0; l < local; ++l) {
    const int64_t r0 = a.expert_rows[static_cast<size_t>(l)];
    const int64_t rows = a.expert_rows[static_cast<size_t>(l + 1)] - r0;
    if (rows == 0) continue;
    g.down.middleCols(l * h, h).noalias() +=
        act.middleRows(r0, rows).transpose() * dy.middleRows(r0, rows);
    d_act.middleRows(r0, rows).noalias() =
        dy.middleRows(r0, rows) * w.down.middleCols(l * h, h).transpose();
  }
  d_gate.setZero();
  d_up.setZero();
  ops::swiglu_backward<T>(a.gate, a.up, d_act, d_gate, d_up);
  for (int64_t l = 0; l < local; ++l) {
    const int64_t r0 = a.expert_rows[static_cast<size_t>(l)];
    const int64_t rows = a.expert_rows[static_cast<size_t>(l + 1)] - r0;
    if (rows == 0) continue;
    const auto x = a.x.middleRows(r0, rows);
    const auto dg = d_gate.middleRows(r0, rows), du = d_up.middleRows(r0, rows);
    g.gate.middleRows(l * h, h).noalias() += x.transpose() * dg;
    g.up.middleRows(l * h, h).noalias() += x.transpose() * du;
    dx.middleRows(r0, rows).noalias() = dg * w.gate.middleRows(l * h, h).transpose();
    dx.middleRows(r0, rows).noalias() += du * w.up.middleRows(l * h, h).transpose();
  }
  if (c.gather_tensor) dx = scatter_rows(ep, a, dx, received_rows(a));  // the inputs' mirror
  const RowMatrix<T> back =
      all_to_all_rows(ep, to_source_major(ep, std::move(dx), a.perm), a.recv_rows, a.send_rows);

  // Gates, renormalisation, load-balancing loss and softmax, back to the router's logits:
  //   gate_j = p_j / s, s = sum of the chosen p:  dp_i += (dgate_i - sum_j dgate_j gate_j) / s;
  //   aux:  dp_e += aux_weight * coeff * E * f_e / N for every token;
  //   softmax:  dz_e = p_e (dp_e - sum_f dp_f p_f).
  std::vector<T> base(static_cast<size_t>(e_count));
  for (int64_t e = 0; e < e_count; ++e)
    base[static_cast<size_t>(e)] = static_cast<T>(
        static_cast<double>(aux_weight) * c.aux_coeff * static_cast<double>(e_count) *
        a.fraction[static_cast<size_t>(e)] / static_cast<double>(c.tokens));
  RowMatrix<T> dz(n, e_count);
  for (int64_t t = 0; t < n; ++t) {
    auto dp = dz.row(t);
    for (int64_t e = 0; e < e_count; ++e) dp(e) = base[static_cast<size_t>(e)];
    T selected = 0, weighted = 0;
    for (int64_t j = 0; j < k; ++j) {
      selected += a.probs(t, a.expert[static_cast<size_t>(t * k + j)]);
      weighted += d_gates(t, j) * a.gates(t, j);
    }
    for (int64_t j = 0; j < k; ++j)
      dp(a.expert[static_cast<size_t>(t * k + j)]) += (d_gates(t, j) - weighted) / selected;
    const T dot = dp.dot(a.probs.row(t));
    dp.array() = a.probs.row(t).array() * (dp.array() - dot);
  }
  g.router.noalias() += xn.transpose() * dz;
  dxn.noalias() = dz * w.router.transpose();
  // Under expert tensor parallelism the caller sums dxn over the group (the experts' part is
  // partial): each rank carries its share of the router's part, which every rank has whole.
  if (partial) dxn *= static_cast<T>(1.0 / ep.tensor);
  for (size_t i = 0; i < a.order.size(); ++i)
    dxn.row(a.order[i] / k) += back.row(static_cast<int64_t>(i));
}

#define PX_INSTANTIATE_MOE(T)                                                                    \
  template void moe_forward<T>(                                                                  \
      const MoeConfig&, const ExpertParallel<T>&, const std::function<void(std::span<T>)>&,      \
      const ops::ConstMatrixRef<T>&, const MoeWeights<ConstMatrixMap<T>>&, MoeActs<T>&,          \
      ops::MatrixRef<T>);                                                                        \
  template void moe_backward<T>(const MoeConfig&, const ExpertParallel<T>&,                      \
                                const ops::ConstMatrixRef<T>&, const ops::ConstMatrixRef<T>&, T, \
                                const MoeWeights<ConstMatrixMap<T>>&, MoeWeights<MatrixMap<T>>,  \
                                const MoeActs<T>&, ops::MatrixRef<T>);
PX_INSTANTIATE_MOE(float)
PX_INSTANTIATE_MOE(double)
#undef PX_INSTANTIATE_MOE

}  // namespace parallax::exec
