// The MoE settings of a plan in the launch files: Megatron-LM's flags (core_v0.15
// megatron/training/arguments.py and transformer_config.py), and the targets that refuse them.
#include <gtest/gtest.h>

#include <string>

#include "core/json_io.h"
#include "core/model_zoo.h"
#include "planner/launch/launch.h"

namespace parallax {
namespace {

HwProfile h800() { return find_profile(builtin_profiles().value(), "h800-sxm-80gb", "t").value(); }

/// DeepSeek-V3-like on 256 H800: EP 64 over 8 nodes, PP 4, and a model without router groups
/// unless `groups`.
LaunchRequest request(bool groups = false) {
  ModelSpec m = find_zoo_model("deepseek-v3", "t").value();
  if (!groups) m.moe->router.groups = m.moe->router.group_topk = 0;
  ParallelPlan p;
  p.pp = 4;
  p.dp = 64;
  p.ep = 64;
  p.micro_batch = 1;
  p.global_batch = 512;
  p.seq_len = 4096;
  p.zero_stage = 1;
  p.precision = Precision::kBf16;
  // 61 layers over 4 stages do not split evenly; Megatron's rule is not what is tested here.
  m.layers = 60;
  return {m, Cluster{h800(), p.gpus()}, p};
}

std::string args(const LaunchRequest& r) {
  auto s = emit_launch(LaunchTarget::kMegatron, r);
  EXPECT_TRUE(s.ok()) << s.error_text();
  return s.ok() ? s.value() : "";
}

bool has(const std::string& text, const std::string& line) {
  return text.find(line) != std::string::npos;
}

TEST(MoeLaunch, MegatronFlagsFollowThePlansDispatcher) {
  LaunchRequest r = request();
  std::string s = args(r);
  for (const char* f : {"--moe-grouped-gemm", "--moe-router-fusion", "--moe-permute-fusion",
                        "--moe-token-dispatcher-type alltoall", "--mtp-num-layers 1"})
    EXPECT_TRUE(has(s, f)) << f << "\n" << s;
  EXPECT_FALSE(has(s, "--moe-enable-deepep"));
  EXPECT_FALSE(has(s, "--moe-expert-capacity-factor"));
  r.plan.moe_dispatcher = MoeDispatcher::kFlex;
  s = args(r);
  EXPECT_TRUE(has(s, "--moe-token-dispatcher-type flex")) << s;
  EXPECT_TRUE(has(s, "--moe-enable-deepep")) << s;
  r.plan.moe_dispatcher = MoeDispatcher::kAllGather;
  EXPECT_TRUE(has(args(r), "--moe-token-dispatcher-type allgather"));
}

// Node-limited routing as Megatron runs it: one router group per node of the EP group (8 here),
// a token in the top moe_max_nodes; a model with its own groups keeps them.
TEST(MoeLaunch, NodeLimitedRoutingBecomesOneRouterGroupPerNode) {
  LaunchRequest r = request();
  r.plan.moe_max_nodes = 4;
  r.plan.moe_capacity_factor = 1.25;
  r.plan.moe_dispatcher = MoeDispatcher::kFlex;
  const std::string s = args(r);
  EXPECT_TRUE(has(s, "--moe-router-num-groups 8")) << s;
  EXPECT_TRUE(has(s, "--moe-router-group-topk 4")) << s;
  EXPECT_TRUE(has(s, "--moe-expert-capacity-factor 1.25")) << s;
  LaunchRequest own = request(/*groups=*/true);
  EXPECT_TRUE(has(args(own), "--moe-router-num-groups 8"));
  own.plan.moe_max_nodes = 4;
  const auto refused = emit_launch(LaunchTarget::kMegatron, own);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(has(refused.error_text(), "plan/moe/max_nodes: the model already routes by its own"))
      << refused.error_text();
}

// --overlap-moe-expert-parallel-comm with the interleaved schedule (Megatron's assert), fp8 too:
// its bf16-or-fp16 assert is on the model's dtype, which fp8 recipes keep at --bf16.
TEST(MoeLaunch, ExpertParallelOverlapNeedsInterleaving) {
  LaunchRequest r = request();
  r.plan.overlap_moe_comm = true;
  auto plain = emit_launch(LaunchTarget::kMegatron, r);
  ASSERT_FALSE(plain.ok());
  EXPECT_TRUE(has(plain.error_text(),
                  "plan/overlap/moe_comm: overlapping expert-parallel "
                  "communication needs pp=1 or the interleaved schedule"))
      << plain.error_text();
  r.plan.schedule = ScheduleKind::kInterleaved1F1B;
  r.plan.vpp = 3;
  EXPECT_TRUE(has(args(r), "--overlap-moe-expert-parallel-comm"));
  r.plan.precision = Precision::kFp8;
  const std::string fp8 = args(r);
  EXPECT_TRUE(has(fp8, "--overlap-moe-expert-parallel-comm")) << fp8;
  EXPECT_TRUE(has(fp8, "--bf16")) << fp8;
}

// No target runs DualPipe; TorchTitan runs neither the allgather dispatcher nor multi-token
// prediction, and DeepEP as its expert_parallel_comm_backend.
TEST(MoeLaunch, TargetsRefuseWhatTheyDoNotRun) {
  LaunchRequest r = request();
  r.plan.schedule = ScheduleKind::kDualPipe;
  for (LaunchTarget t : {LaunchTarget::kMegatron, LaunchTarget::kTorchTitan}) {
    const auto s = emit_launch(t, r);
    ASSERT_FALSE(s.ok());
    EXPECT_TRUE(has(s.error_text(), "plan/parallel/schedule: ")) << s.error_text();
    EXPECT_TRUE(has(s.error_text(), "has no DualPipe schedule")) << s.error_text();
  }
  r = request();
  r.plan.moe_dispatcher = MoeDispatcher::kAllGather;
  const auto titan = emit_launch(LaunchTarget::kTorchTitan, r);
  ASSERT_FALSE(titan.ok());
  EXPECT_TRUE(
      has(titan.error_text(), "model/mtp_layers: TorchTitan has no multi-token-prediction module"))
      << titan.error_text();
  EXPECT_TRUE(
      has(titan.error_text(), "plan/moe/dispatcher: TorchTitan has no all-gather token dispatcher"))
      << titan.error_text();
  // TorchTitan v0.2.2 runs DeepEP as its expert-parallel backend; main has no such key.
  r.model.mtp_layers = 0;
  r.plan.moe_dispatcher = MoeDispatcher::kFlex;
  r.plan.fsdp = true;
  auto deepep = emit_launch(LaunchTarget::kTorchTitan, r);
  ASSERT_TRUE(deepep.ok()) << deepep.error_text();
  EXPECT_TRUE(has(deepep.value(), "expert_parallel_comm_backend = \"deepep\"")) << deepep.value();
  EXPECT_FALSE(emit_launch(LaunchTarget::kTorchTitanMain, r).ok());
}

}  // namespace
}  // namespace parallax
