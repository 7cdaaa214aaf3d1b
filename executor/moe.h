#pragma once
/// The routed-expert half of a mixture-of-experts MLP (the shared experts are a dense SwiGLU MLP
/// beside it, run by the model): a linear router, softmax over the experts, the top-k experts
/// of each token with their probabilities renormalised to sum to one (Mixtral's and Qwen3-MoE's
/// norm_topk_prob), one SwiGLU MLP per expert, and the Switch Transformer load-balancing loss
/// coeff * E * sum_e f_e P_e (f_e: the fraction of routed slots that chose e, P_e: the mean
/// router probability of e, both over the microbatch's tokens). Experts may be spread over an
/// expert-parallel group: tokens are dispatched to their experts' ranks and combined back with
/// all-to-alls, as Megatron's MoE token dispatcher does.

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "executor/model_ops.h"

namespace parallax::exec {

/// A read-only and a writable view of a block of the flat parameter (gradient) buffer.
template <typename T>
using ConstMatrixMap = Eigen::Map<const ops::RowMatrix<T>>;
template <typename T>
using MatrixMap = Eigen::Map<ops::RowMatrix<T>>;

/// Router and expert weights of one layer on this rank (views into the parameter or gradient
/// buffer): router [hidden x experts]; the local experts' gate and up projections stacked
/// [local * hidden x width] (local expert l's block is rows l * hidden..) and down projections
/// [local * width x hidden] (rows l * width..).
template <typename Matrix>
struct MoeWeights {
  Matrix router, gate, up, down;
};

/// What the backward needs from the forward, per layer and microbatch. A routed slot is
/// (token t, choice j), numbered t * top_k + j.
template <typename T>
struct MoeActs {
  ops::RowMatrix<T> probs;      ///< tokens x experts, the router's softmax
  std::vector<int32_t> expert;  ///< tokens x top_k chosen experts, most probable first
  ops::RowMatrix<T> gates;      ///< tokens x top_k renormalised probabilities
  ops::RowMatrix<T> y;          ///< slots x hidden: each slot's expert output (ungated)
  std::vector<int64_t> order;   ///< slots sorted by expert (stable): the dispatch order
  std::vector<int64_t> send_rows, recv_rows;  ///< rows sent to / received from each ep rank
  std::vector<int64_t> recv;                  ///< rows each ep rank sent to each local expert
  std::vector<int64_t> expert_rows;  ///< local + 1 offsets of each local expert's rows in x
  /// Received row i (source-major) is row perm[i] of the received rows in expert-major order.
  std::vector<int64_t> perm;
  /// Under MoeConfig::gather_tensor: the received rows of each tensor-parallel rank, and where
  /// each gathered row (rank-major) goes in x; empty otherwise.
  std::vector<int64_t> tensor_rows, tensor_perm;
  /// The rows this rank's experts run on, expert-major: those it received (under gather_tensor,
  /// those of every rank of the tensor group).
  ops::RowMatrix<T> x;
  ops::RowMatrix<T> gate, up;    ///< x's expert projections, before SwiGLU
  std::vector<double> fraction;  ///< f_e over the microbatch
  double aux = 0;                ///< the load-balancing loss of this layer and microbatch
};

/// Routing hyper-parameters and the layer's place.
struct MoeConfig {
  int64_t experts = 0, top_k = 0, width = 0, hidden = 0;
  double aux_coeff = 0;
  /// Tokens of the microbatch over every context-parallel rank (the f_e, P_e denominators).
  int64_t tokens = 0;
  /// Split experts (ep.tensor > 1) whose tensor-parallel ranks route different rows (sequence
  /// parallelism): the experts' rows are gathered over the tensor group and their outputs
  /// reduce-scattered back, so outputs, gate gradients and input gradients come out whole.
  /// Otherwise, with split experts, every rank of the group routes the same rows and the caller
  /// sums out and dxn over the group.
  bool gather_tensor = false;
};

/// out = sum over each token's top-k experts of gate * expert(xn) (assigned), xn being this
/// rank's tokens x hidden. Top-k ties go to the lower expert index. `stats` sums the router
/// statistics (2 * experts values: slot counts and probability sums) in place over the
/// context-parallel group; empty without context parallelism. Sets a.aux.
template <typename T>
void moe_forward(const MoeConfig& c, const ExpertParallel<T>& ep,
                 const std::function<void(std::span<T>)>& stats, const ops::ConstMatrixRef<T>& xn,
                 const MoeWeights<ConstMatrixMap<T>>& w, MoeActs<T>& a, ops::MatrixRef<T> out);

/// Given dout = d(objective)/d(out): g += the weights' gradients, dxn = d(objective)/d(xn)
/// (assigned), where the objective counts the load-balancing loss as aux_weight * a.aux. The
/// gradient of aux reaches the router through P_e only (f_e counts choices, a step function):
/// d aux / d probs[t, e] = coeff * E * f_e / N. Every ep rank must call it (the all-to-alls),
/// and under c.gather_tensor every rank of the tensor group (the gathers).
template <typename T>
void moe_backward(const MoeConfig& c, const ExpertParallel<T>& ep, const ops::ConstMatrixRef<T>& xn,
                  const ops::ConstMatrixRef<T>& dout, T aux_weight,
                  const MoeWeights<ConstMatrixMap<T>>& w, MoeWeights<MatrixMap<T>> g,
                  const MoeActs<T>& a, ops::MatrixRef<T> dxn);

/// The routing of one forward pass (Transformer::loss's), for tests and diagnostics.
struct Routing {
  std::vector<int32_t> experts;  ///< (MoE layer, token, choice) order, as MoeActs::expert
  /// The smallest ln(p_k / p_(k+1)) over tokens and MoE layers: how far the top-k choice is
  /// from a tie (infinity when top_k == experts or the model has no MoE layer).
  double margin = 0;
};

/// Defined in model.cc. Arguments as in Transformer::loss.
template <typename T>
Routing routing(const Transformer<T>& model, std::span<const T> params,
                std::span<const int32_t> tokens, int64_t batch, int64_t seq);

}  // namespace parallax::exec
