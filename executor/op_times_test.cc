#include "executor/op_times.h"

#include <gtest/gtest.h>

#include <thread>

namespace parallax::exec {
namespace {

TEST(ExecOpTimes, SimulatorOpNamesMapOntoTheExecutorsKindsAndPasses) {
  struct Case {
    const char* name;
    OpKind kind;
    bool backward;
  };
  for (const Case& c :
       {Case{"input_norm", OpKind::kNorm, false}, Case{"post_attn_norm.bwd", OpKind::kNorm, true},
        Case{"qkv_proj", OpKind::kQkvProj, false}, Case{"qkv_proj.dgrad", OpKind::kQkvProj, true},
        Case{"kv_up.wgrad", OpKind::kQkvProj, true}, Case{"attn_scores", OpKind::kAttention, false},
        Case{"attention.bwd", OpKind::kAttention, true},
        // Recomputation runs inside the executor's backward pass.
        Case{"attn_scores.recompute", OpKind::kAttention, true},
        Case{"mlp_gate_up.wgrad", OpKind::kMlpGateUp, true},
        Case{"shared_down", OpKind::kMlpDown, false}, Case{"swiglu.bwd", OpKind::kActivation, true},
        Case{"experts_down.recompute", OpKind::kMoe, true},
        Case{"logits.dgrad", OpKind::kLogits, true},
        Case{"cross_entropy", OpKind::kCrossEntropy, false},
        Case{"optimizer", OpKind::kOptimizer, false}}) {
    const auto k = op_kind_of(c.name);
    ASSERT_TRUE(k.has_value()) << c.name;
    EXPECT_EQ(k->kind, c.kind) << c.name;
    EXPECT_EQ(k->backward, c.backward) << c.name;
  }
  // Communication and the residual add (fused into a GEMM by the executor) have no kind.
  for (const char* name : {"tp_comm", "dp_comm", "pp_comm.bwd", "cp_kv_ring", "ep_dispatch",
                           "residual_add", "bubble", "qkv", "attention_x"})
    EXPECT_FALSE(op_kind_of(name).has_value()) << name;
  EXPECT_EQ(op_kind_name(OpKind::kMlpGateUp), "mlp_gate_up");
  EXPECT_EQ(op_kind_name(OpKind::kOptimizer), "optimizer");
}

TEST(ExecOpTimes, ScopesCountOnlyWhileTheClockIsOn) {
  OpClock::enable(false);
  { const OpScope s(OpKind::kAttention, false); }
  EXPECT_EQ(OpClock::seconds().total(), 0.0);
  OpClock::enable(true);
  {
    const OpScope s(OpKind::kAttention, true);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  { const OpScope s(OpKind::kNorm, false); }
  const OpSeconds t = OpClock::seconds();
  EXPECT_GE(t.backward[static_cast<size_t>(OpKind::kAttention)], 0.004);
  EXPECT_EQ(t.forward[static_cast<size_t>(OpKind::kAttention)], 0.0);
  EXPECT_GE(t.forward[static_cast<size_t>(OpKind::kNorm)], 0.0);
  EXPECT_DOUBLE_EQ(t.total(), t.backward[static_cast<size_t>(OpKind::kAttention)] +
                                  t.forward[static_cast<size_t>(OpKind::kNorm)]);
  // Enabling again starts from zero.
  OpClock::enable(false);
  EXPECT_EQ(OpClock::seconds().total(), 0.0);
}

// A scope nested in another (a collective inside the MoE block) counts only in its own kind;
// communication takes the pass the model is in.
TEST(ExecOpTimes, NestedScopesCountOnceInTheInnermostKind) {
  OpClock::enable(true);
  OpClock::set_backward(true);
  {
    const OpScope moe(OpKind::kMoe, true);
    std::this_thread::sleep_for(std::chrono::milliseconds(4));
    {
      const OpScope comm(OpKind::kCommunication);
      std::this_thread::sleep_for(std::chrono::milliseconds(8));
    }
  }
  const OpSeconds t = OpClock::seconds();
  const double moe = t.backward[static_cast<size_t>(OpKind::kMoe)];
  const double comm = t.backward[static_cast<size_t>(OpKind::kCommunication)];
  EXPECT_GE(comm, 0.008);
  EXPECT_GE(moe, 0.004);
  EXPECT_LT(moe, 0.008);  // the 8 ms inside the collective are not the MoE block's
  EXPECT_EQ(t.forward[static_cast<size_t>(OpKind::kCommunication)], 0.0);
  EXPECT_DOUBLE_EQ(t.compute(), moe);
  OpClock::set_backward(false);
  OpClock::enable(false);
}

}  // namespace
}  // namespace parallax::exec
