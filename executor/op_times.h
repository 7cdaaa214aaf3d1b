#pragma once
/// Where a rank's step time goes, operator by operator, in the simulator's terms: the executor
/// times its operators into these kinds, and op_kind_of maps the simulator's op names onto the
/// same kinds, so that `parallax execute --op-times` sets each measured time beside its
/// prediction. Off unless enabled; when off a scope costs one branch.
///
/// The clock is the process's (one rank per process) and not thread-safe: the training loop is
/// single-threaded. Each operator scope covers the arithmetic of one operator; the process
/// group's collectives, sends and receives time themselves as kCommunication (waiting for late
/// ranks included), and a scope nested in another counts only in its own kind. The step time
/// less all of them is copies and bookkeeping ("rest").

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

namespace parallax::exec {

enum class OpKind : int {
  kEmbedding,     ///< lookup and its gradient's scatter-add
  kNorm,          ///< every RMSNorm (recomputed ones in backward included)
  kQkvProj,       ///< the query, key and value projections (MLA's too)
  kRope,          ///< rotary embedding of q and k
  kAttention,     ///< the attention kernel (scores, softmax, context)
  kOutProj,       ///< the attention output projection
  kMlpGateUp,     ///< gate and up projections of a dense or shared-expert MLP
  kActivation,    ///< SwiGLU / GELU
  kMlpDown,       ///< down projection
  kMoe,           ///< router, permutation and the routed experts (their all-to-alls: communication)
  kLogits,        ///< the output layer
  kCrossEntropy,  ///< softmax cross-entropy
  kOptimizer,     ///< gradient norm and AdamW
  kCommunication,  ///< collectives, sends and receives, and the waits in them
};
inline constexpr int kNumOpKinds = static_cast<int>(OpKind::kCommunication) + 1;

/// "qkv_proj", "attention", ... (the simulator's name of the kind).
std::string_view op_kind_name(OpKind k);

/// The kind of a simulator op (lowering names such as "post_attn_norm", "mlp_gate_up.wgrad",
/// "attention.bwd", "experts_down.recompute") and whether it runs in backward (dgrad, wgrad,
/// bwd, and recompute, which the executor runs inside backward). nullopt for communication (its
/// kind follows the span's cost category, not its name) and for ops the executor fuses into
/// another (residual_add into the GEMM that accumulates).
struct OpKindPass {
  OpKind kind;
  bool backward = false;
};
std::optional<OpKindPass> op_kind_of(std::string_view simulator_op);

/// Seconds by kind and pass since the last reset, and the routing load of the MoE layers run.
struct OpSeconds {
  std::array<double, kNumOpKinds> forward{}, backward{};
  /// Over the MoE layers' forward passes under expert parallelism: the sum of the busiest
  /// expert-parallel rank's routed token copies over the group's mean, and how many were summed.
  double routing_sum = 0;
  int64_t routing_layers = 0;
  double total() const;
  /// total() less communication: the rank's own work.
  double compute() const;
};

/// The process's operator clock.
class OpClock {
 public:
  static void enable(bool on);
  static bool enabled() { return enabled_; }
  static void reset();
  static const OpSeconds& seconds() { return seconds_; }
  static void add(OpKind k, bool backward, double s);
  /// One MoE layer's forward routing: its busiest expert-parallel rank's copies over the mean.
  static void add_routing(double busiest_over_mean);
  /// The pass the model runs (set by its forward and backward), for scopes that do not know it
  /// (communication).
  static void set_backward(bool backward) {
    if (enabled_) backward_ = backward;  // untouched while off: tests run passes on threads
  }
  static bool in_backward() { return backward_; }

 private:
  friend class OpScope;
  static inline bool enabled_ = false, backward_ = false;
  static inline OpSeconds seconds_{};
  static inline class OpScope* current_ = nullptr;  ///< the innermost open scope
};

/// Times its lifetime, less the scopes nested in it, into `kind` when the clock is on.
class OpScope {
 public:
  OpScope(OpKind kind, bool backward) : kind_(kind), backward_(backward) {
    if (!OpClock::enabled()) return;
    on_ = true;
    parent_ = OpClock::current_;
    OpClock::current_ = this;
    t0_ = std::chrono::steady_clock::now();
  }
  /// A scope in the pass the model runs now.
  explicit OpScope(OpKind kind) : OpScope(kind, OpClock::in_backward()) {}
  ~OpScope() {
    if (!on_) return;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    OpClock::add(kind_, backward_, s - nested_s_);
    if (parent_ != nullptr) parent_->nested_s_ += s;
    OpClock::current_ = parent_;
  }
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  OpKind kind_;
  bool backward_, on_ = false;
  OpScope* parent_ = nullptr;
  double nested_s_ = 0;
  std::chrono::steady_clock::time_point t0_{};
};

}  // namespace parallax::exec
