#include "executor/op_times.h"

#include <utility>

namespace parallax::exec {

namespace {

// The simulator's lowering names (simulator/lower.cc) by kind; the first is the kind's own name.
constexpr std::pair<std::string_view, OpKind> kNames[] = {
    {"embedding", OpKind::kEmbedding},
    {"norm", OpKind::kNorm},
    {"input_norm", OpKind::kNorm},
    {"post_attn_norm", OpKind::kNorm},
    {"final_norm", OpKind::kNorm},
    {"q_norm", OpKind::kNorm},
    {"kv_norm", OpKind::kNorm},
    {"qkv_proj", OpKind::kQkvProj},
    {"q_proj", OpKind::kQkvProj},
    {"q_down", OpKind::kQkvProj},
    {"q_up", OpKind::kQkvProj},
    {"kv_down", OpKind::kQkvProj},
    {"kv_up", OpKind::kQkvProj},
    {"rope", OpKind::kRope},
    {"attention", OpKind::kAttention},
    {"attn_scores", OpKind::kAttention},
    {"attn_softmax", OpKind::kAttention},
    {"attn_dropout", OpKind::kAttention},
    {"attn_context", OpKind::kAttention},
    {"out_proj", OpKind::kOutProj},
    {"mlp_gate_up", OpKind::kMlpGateUp},
    {"mlp_up", OpKind::kMlpGateUp},
    {"shared_gate_up", OpKind::kMlpGateUp},
    {"activation", OpKind::kActivation},
    {"swiglu", OpKind::kActivation},
    {"gelu", OpKind::kActivation},
    {"shared_act", OpKind::kActivation},
    {"mlp_down", OpKind::kMlpDown},
    {"shared_down", OpKind::kMlpDown},
    {"moe", OpKind::kMoe},
    {"router", OpKind::kMoe},
    {"router_topk", OpKind::kMoe},
    {"permute", OpKind::kMoe},
    {"unpermute", OpKind::kMoe},
    {"experts_gate_up", OpKind::kMoe},
    {"experts_up", OpKind::kMoe},
    {"experts_swiglu", OpKind::kMoe},
    {"experts_gelu", OpKind::kMoe},
    {"experts_down", OpKind::kMoe},
    {"logits", OpKind::kLogits},
    {"cross_entropy", OpKind::kCrossEntropy},
    {"optimizer", OpKind::kOptimizer},
    {"optimizer_step", OpKind::kOptimizer},
    {"communication", OpKind::kCommunication},
};

}  // namespace

std::string_view op_kind_name(OpKind k) {
  for (const auto& [name, kind] : kNames)
    if (kind == k) return name;
  return "?";
}

std::optional<OpKindPass> op_kind_of(std::string_view simulator_op) {
  const size_t dot = simulator_op.find('.');
  const std::string_view base = simulator_op.substr(0, dot);
  const std::string_view suffix =
      dot == std::string_view::npos ? std::string_view{} : simulator_op.substr(dot);
  for (const auto& [name, kind] : kNames)
    if (name == base) return OpKindPass{kind, !suffix.empty()};
  return std::nullopt;
}

double OpSeconds::total() const {
  double s = 0;
  for (int i = 0; i < kNumOpKinds; ++i) s += forward[i] + backward[i];
  return s;
}

double OpSeconds::compute() const {
  const auto c = static_cast<size_t>(OpKind::kCommunication);
  return total() - forward[c] - backward[c];
}

void OpClock::enable(bool on) {
  enabled_ = on;
  backward_ = false;
  current_ = nullptr;
  reset();
}

void OpClock::reset() { seconds_ = OpSeconds{}; }

void OpClock::add(OpKind k, bool backward, double s) {
  (backward ? seconds_.backward : seconds_.forward)[static_cast<size_t>(k)] += s;
}

void OpClock::add_routing(double busiest_over_mean) {
  seconds_.routing_sum += busiest_over_mean;
  ++seconds_.routing_layers;
}

}  // namespace parallax::exec
