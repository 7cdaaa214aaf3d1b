#include "core/parallel_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/json_io.h"
#include "core/model_zoo.h"
#include "tests/test_support.h"

namespace parallax {
namespace {

using testing::mentions;
using testing::text;

ModelSpec Zoo(const std::string& name) {
  auto m = find_zoo_model(name, "test");
  PX_CHECK(m.ok(), m.error_text());
  return m.value();
}

Cluster MakeCluster(const std::string& gpu, int num_gpus) {
  auto profiles = builtin_profiles();
  PX_CHECK(profiles.ok(), profiles.error_text());
  auto hw = find_profile(profiles.value(), gpu, "test");
  PX_CHECK(hw.ok(), hw.error_text());
  return Cluster{hw.value(), num_gpus};
}

// Llama-3.1 70B on 64 H100s, tp8 dp8, the CLI's default: a plan with no problems.
ParallelPlan Tp8Dp8() {
  ParallelPlan p;
  p.tp = 8;
  p.dp = 8;
  p.micro_batch = 1;
  p.global_batch = 128;
  p.seq_len = 8192;
  p.sequence_parallel = true;
  p.zero_stage = 1;
  return p;
}

class ParallelPlanTest : public ::testing::Test {
 protected:
  ModelSpec llama70b_ = Zoo("llama3.1-70b");
  Cluster h100x64_ = MakeCluster("h100-sxm-80gb", 64);
};

TEST_F(ParallelPlanTest, MoeWithTensorParallelismNeedsSequenceParallelism) {
  const ModelSpec mixtral = Zoo("mixtral-8x7b");
  ParallelPlan p = Tp8Dp8();
  p.ep = 8;
  EXPECT_TRUE(validate_plan(mixtral, h100x64_, p).empty());
  p.sequence_parallel = false;
  EXPECT_TRUE(mentions(validate_plan(mixtral, h100x64_, p), "need sequence parallelism"));
}

// The MoE settings, each checked where Megatron-LM asserts it: a negative node limit or capacity,
// and EP overlap without expert parallelism, with the allgather dispatcher, with full recompute,
// or with pp > 1 outside the interleaved schedule (DualPipe overlaps by itself).
TEST_F(ParallelPlanTest, MoeSettingsAreCheckedWhereMegatronAssertsThem) {
  const ModelSpec mixtral = Zoo("mixtral-8x7b");
  ParallelPlan p = Tp8Dp8();
  p.ep = 8;
  p.moe_max_nodes = -1;
  p.moe_capacity_factor = -0.5;
  Diagnostics d = validate_plan(mixtral, h100x64_, p);
  EXPECT_TRUE(mentions(d, "--moe-max-nodes: moe_max_nodes=-1 must be >= 0")) << text(d);
  EXPECT_TRUE(mentions(d, "--moe-capacity-factor: moe_capacity_factor=-0.5 must be >= 0"))
      << text(d);
  p = Tp8Dp8();
  p.overlap_moe_comm = true;
  p.moe_dispatcher = MoeDispatcher::kAllGather;
  p.recompute = Recompute::kFull;
  d = validate_plan(mixtral, h100x64_, p);
  EXPECT_TRUE(mentions(d,
                       "--overlap-moe-comm: overlapping expert-parallel communication needs "
                       "ep > 1"))
      << text(d);
  EXPECT_TRUE(mentions(d, "needs the alltoall or flex dispatcher, got allgather")) << text(d);
  EXPECT_TRUE(mentions(d, "runs without full recompute")) << text(d);
  p = Tp8Dp8();
  p.ep = 8;
  p.overlap_moe_comm = true;
  EXPECT_TRUE(validate_plan(mixtral, h100x64_, p).empty());
  p.tp = 4;
  p.pp = 2;
  p.schedule = ScheduleKind::kDualPipe;
  d = validate_plan(mixtral, h100x64_, p);
  EXPECT_TRUE(mentions(d, "needs pp=1 or the interleaved schedule, got dualpipe with pp=2"))
      << text(d);
  EXPECT_TRUE(mentions(d, "DualPipe overlaps it by itself")) << text(d);
}

TEST_F(ParallelPlanTest, BaselineIsValid) {
  const Diagnostics d = validate_plan(llama70b_, h100x64_, Tp8Dp8());
  EXPECT_TRUE(d.empty()) << text(d);
}

TEST_F(ParallelPlanTest, TpMustDivideHeadsWithValidTpHint) {
  ParallelPlan p = Tp8Dp8();
  p.tp = 3;
  p.dp = 1;
  p.global_batch = 3;
  p.sequence_parallel = false;
  const Diagnostics d = validate_plan(llama70b_, MakeCluster("h100-sxm-80gb", 3), p);
  EXPECT_TRUE(mentions(d, "--tp: tp=3 must divide heads=64")) << text(d);
  EXPECT_TRUE(mentions(d, "hint: tp in {1,2,4,8,16,32,64}")) << text(d);
}

TEST_F(ParallelPlanTest, TpAndKvHeadsMustDivideOneAnother) {
  // 48 query heads, 8 KV heads: tp=6 divides the heads but neither divides the other.
  ModelSpec m = llama70b_;
  m.heads = 48;
  m.kv_heads = 8;
  ParallelPlan p = Tp8Dp8();
  p.tp = 6;
  p.dp = 1;
  p.global_batch = 4;
  p.sequence_parallel = false;
  const Diagnostics d = validate_plan(m, MakeCluster("h100-sxm-80gb", 6), p);
  ASSERT_EQ(d.size(), 1u) << text(d);
  EXPECT_TRUE(mentions(d, "--tp: tp=6 and kv_heads=8 must divide one another")) << text(d);

  // tp a multiple of kv_heads replicates KV heads: allowed.
  p.tp = 16;
  const Diagnostics ok = validate_plan(llama70b_, MakeCluster("h100-sxm-80gb", 16), p);
  EXPECT_FALSE(mentions(ok, "kv_heads")) << text(ok);
}

TEST_F(ParallelPlanTest, GpusMustEqualTheProductOfDegrees) {
  const Diagnostics d = validate_plan(llama70b_, MakeCluster("h100-sxm-80gb", 60), Tp8Dp8());
  ASSERT_EQ(d.size(), 1u) << text(d);
  EXPECT_TRUE(mentions(d, "--gpus: gpus=60 must equal tp*pp*dp*cp=8*1*8*1=64")) << text(d);
}

TEST_F(ParallelPlanTest, VirtualStagesCannotExceedLayers) {
  // Llama-3.1 8B has 32 layers; pp8 x vpp5 = 40 virtual stages.
  ParallelPlan p = Tp8Dp8();
  p.tp = 1;
  p.pp = 8;
  p.dp = 1;
  p.vpp = 5;
  p.schedule = ScheduleKind::kInterleaved1F1B;
  p.global_batch = 16;
  p.sequence_parallel = false;
  const Diagnostics d = validate_plan(Zoo("llama3.1-8b"), MakeCluster("h100-sxm-80gb", 8), p);
  ASSERT_EQ(d.size(), 1u) << text(d);
  EXPECT_TRUE(mentions(d, "--pp: pp*vpp=40 exceeds layers=32")) << text(d);
}

TEST_F(ParallelPlanTest, GlobalBatchMustBeAMultipleOfDpTimesMbs) {
  ParallelPlan p = Tp8Dp8();
  p.micro_batch = 2;
  p.global_batch = 100;
  const Diagnostics d = validate_plan(llama70b_, h100x64_, p);
  ASSERT_EQ(d.size(), 1u) << text(d);
  EXPECT_TRUE(mentions(d, "--gbs: gbs=100 must be a multiple of dp*mbs=16")) << text(d);
}

TEST_F(ParallelPlanTest, EpMustDivideExperts) {
  // Mixtral 8x7B: 8 experts. ep=3 with dp=3 so that only the expert count is wrong.
  ParallelPlan p;
  p.tp = 1;
  p.dp = 3;
  p.ep = 3;
  p.global_batch = 3;
  p.seq_len = 4096;
  const Diagnostics d = validate_plan(Zoo("mixtral-8x7b"), MakeCluster("h100-sxm-80gb", 3), p);
  ASSERT_EQ(d.size(), 1u) << text(d);
  EXPECT_TRUE(mentions(d, "--ep: ep=3 must divide experts=8")) << text(d);
  EXPECT_TRUE(mentions(d, "ep in {1,2,4,8}")) << text(d);
}

TEST_F(ParallelPlanTest, EpMustFitInsideDpCpTp) {
  ParallelPlan p;
  p.tp = 2;
  p.dp = 2;
  p.ep = 8;
  p.global_batch = 8;
  p.seq_len = 4096;
  const Diagnostics d = validate_plan(Zoo("mixtral-8x7b"), MakeCluster("h100-sxm-80gb", 4), p);
  EXPECT_TRUE(mentions(d, "--ep: ep*etp=8 must divide dp*cp*tp=4")) << text(d);
}

TEST_F(ParallelPlanTest, EpOnADenseModel) {
  ParallelPlan p = Tp8Dp8();
  p.ep = 2;
  p.etp = 2;
  const Diagnostics d = validate_plan(llama70b_, h100x64_, p);
  EXPECT_TRUE(mentions(d, "--ep: ep=2 needs a mixture-of-experts model")) << text(d);
  EXPECT_TRUE(mentions(d, "--etp: etp=2 needs a mixture-of-experts model")) << text(d);
}

TEST_F(ParallelPlanTest, CpMustDivideSeq) {
  ParallelPlan p = Tp8Dp8();
  p.cp = 4;
  p.dp = 2;
  p.seq_len = 8190;
  p.sequence_parallel = false;
  const Diagnostics d = validate_plan(llama70b_, h100x64_, p);
  ASSERT_EQ(d.size(), 1u) << text(d);
  EXPECT_TRUE(mentions(d, "--cp: cp=4 must divide seq=8190")) << text(d);
}

TEST_F(ParallelPlanTest, SequenceParallelNeedsSeqPerCpDivisibleByTp) {
  ParallelPlan p = Tp8Dp8();
  p.seq_len = 8196;  // 8196 / 8 is not whole
  const Diagnostics d = validate_plan(llama70b_, h100x64_, p);
  EXPECT_TRUE(mentions(d, "--sp: sequence parallel needs seq/cp=8196 divisible by tp=8"))
      << text(d);
}

TEST_F(ParallelPlanTest, Fp8OnAPartWithoutFp8) {
  ParallelPlan p = Tp8Dp8();
  p.precision = Precision::kFp8;
  const Diagnostics d = validate_plan(llama70b_, MakeCluster("a100-sxm-80gb", 64), p);
  ASSERT_EQ(d.size(), 1u) << text(d);
  EXPECT_TRUE(mentions(d, "--precision: fp8 is not supported by a100-sxm-80gb")) << text(d);
  EXPECT_TRUE(validate_plan(llama70b_, h100x64_, p).empty());
}

TEST_F(ParallelPlanTest, BlockScaledRecipesNeedBlackwell) {
  ParallelPlan p = Tp8Dp8();
  for (Precision prec : {Precision::kMxfp8, Precision::kNvfp4}) {
    p.precision = prec;
    const Diagnostics d = validate_plan(llama70b_, h100x64_, p);
    ASSERT_EQ(d.size(), 1u) << text(d);
    const std::string name = to_string(prec);
    EXPECT_TRUE(mentions(d, "--precision: " + name + " is not supported by h100-sxm-80gb"))
        << text(d);
    EXPECT_TRUE(mentions(d, "no block-scaled " + name + " GEMM")) << text(d);
    EXPECT_TRUE(validate_plan(llama70b_, MakeCluster("b200-sxm-180gb", 64), p).empty())
        << name << ": " << text(validate_plan(llama70b_, MakeCluster("b200-sxm-180gb", 64), p));
  }
}

TEST_F(ParallelPlanTest, Fp32PlansNeedAnFp32Peak) {
  ParallelPlan p = Tp8Dp8();
  p.precision = Precision::kFp32;
  const Diagnostics d = validate_plan(llama70b_, h100x64_, p);
  ASSERT_EQ(d.size(), 1u) << text(d);
  EXPECT_TRUE(mentions(d, "--precision: fp32 needs an fp32 peak, and h100-sxm-80gb gives none"))
      << text(d);
  Cluster cpu = h100x64_;
  cpu.hw.fp32_tflops = 60;
  EXPECT_TRUE(validate_plan(llama70b_, cpu, p).empty());
}

TEST_F(ParallelPlanTest, VppNeedsTheInterleavedSchedule) {
  ParallelPlan p = Tp8Dp8();
  p.pp = 2;
  p.dp = 4;
  p.vpp = 2;
  p.schedule = ScheduleKind::k1F1B;
  const Diagnostics d = validate_plan(llama70b_, h100x64_, p);
  ASSERT_EQ(d.size(), 1u) << text(d);
  EXPECT_TRUE(mentions(d, "--vpp: vpp=2 needs --schedule interleaved")) << text(d);

  p.schedule = ScheduleKind::kInterleaved1F1B;
  EXPECT_TRUE(validate_plan(llama70b_, h100x64_, p).empty())
      << text(validate_plan(llama70b_, h100x64_, p));
}

TEST_F(ParallelPlanTest, InterleavedNeedsVppAndMicrobatchesPerPp) {
  ParallelPlan p = Tp8Dp8();
  p.pp = 2;
  p.dp = 4;
  p.schedule = ScheduleKind::kInterleaved1F1B;
  EXPECT_TRUE(mentions(validate_plan(llama70b_, h100x64_, p), "needs --vpp >= 2"));
  p.vpp = 2;
  p.global_batch = 12;  // 3 microbatches per dp rank, pp=2
  const Diagnostics d = validate_plan(llama70b_, h100x64_, p);
  EXPECT_TRUE(mentions(d, "microbatches=3 to be a multiple of pp=2")) << text(d);
}

TEST_F(ParallelPlanTest, DegreesBelowOneAreReportedTogether) {
  ParallelPlan p = Tp8Dp8();
  p.tp = 0;
  p.pp = -1;
  p.micro_batch = 0;
  p.global_batch = 0;
  const Diagnostics d = validate_plan(llama70b_, h100x64_, p);
  EXPECT_TRUE(mentions(d, "--tp: tp must be >= 1, got 0")) << text(d);
  EXPECT_TRUE(mentions(d, "--pp: pp must be >= 1, got -1")) << text(d);
  EXPECT_TRUE(mentions(d, "--mbs: mbs must be >= 1, got 0")) << text(d);
  EXPECT_TRUE(mentions(d, "--gbs: gbs must be positive, got 0")) << text(d);
}

// 2^30 GPUs overflowed int in the planner, the rank map and the lowering (UBSan); such layouts
// are refused here, before anything multiplies degrees, with the limit named.
TEST_F(ParallelPlanTest, LayoutsBeyondTheLargestClusterAreRefused) {
  ParallelPlan p = Tp8Dp8();
  p.dp = 1 << 27;  // 8 * 2^27 = 2^30 ranks
  const Diagnostics d = validate_plan(llama70b_, MakeCluster("h100-sxm-80gb", 1 << 30), p);
  EXPECT_TRUE(mentions(d, "--gpus: gpus=1073741824 is beyond the largest cluster modelled"))
      << text(d);
  EXPECT_TRUE(mentions(d, "tp*pp*dp*cp=8*1*134217728*1 is beyond")) << text(d);
  EXPECT_TRUE(mentions(d, "at most 1048576 GPUs")) << text(d);

  // Degrees whose product overflows int are caught before it is formed.
  p = Tp8Dp8();
  p.cp = 1 << 30;
  p.dp = 1 << 30;
  p.ep = 1 << 30;
  p.etp = 1 << 30;
  const Diagnostics d2 = validate_plan(llama70b_, h100x64_, p);
  EXPECT_TRUE(mentions(d2, "tp*pp*dp*cp=8*1*1073741824*1073741824 is beyond")) << text(d2);
  EXPECT_TRUE(mentions(d2, "--ep: ep*etp=1073741824*1073741824 is beyond")) << text(d2);

  // The largest cluster itself is a valid size.
  p = Tp8Dp8();
  p.dp = kMaxGpus / 8;
  p.global_batch = kMaxGpus / 8;
  EXPECT_FALSE(mentions(validate_plan(llama70b_, MakeCluster("h100-sxm-80gb", kMaxGpus), p),
                        "beyond the largest cluster"));
}

TEST_F(ParallelPlanTest, SeveralProblemsAreAllReported) {
  ParallelPlan p = Tp8Dp8();
  p.tp = 3;                       // does not divide 64 heads (nor 8 kv heads)
  p.ep = 2;                       // dense model
  p.global_batch = 100;           // not a multiple of dp=8
  p.cp = 3;                       // does not divide seq=8192
  p.precision = Precision::kFp8;  // not on A100
  const Diagnostics d = validate_plan(llama70b_, MakeCluster("a100-sxm-80gb", 64), p);
  EXPECT_TRUE(mentions(d, "--gpus: gpus=64 must equal")) << text(d);
  EXPECT_TRUE(mentions(d, "tp=3 must divide heads=64")) << text(d);
  EXPECT_TRUE(mentions(d, "tp=3 and kv_heads=8 must divide one another")) << text(d);
  EXPECT_TRUE(mentions(d, "ep=2 needs a mixture-of-experts model")) << text(d);
  EXPECT_TRUE(mentions(d, "gbs=100 must be a multiple of dp*mbs=8")) << text(d);
  EXPECT_TRUE(mentions(d, "cp=3 must divide seq=8192")) << text(d);
  EXPECT_TRUE(mentions(d, "fp8 is not supported by a100-sxm-80gb")) << text(d);
  EXPECT_GE(d.size(), 7u) << text(d);
}

TEST_F(ParallelPlanTest, LocatorNamesTheFieldsInAFile) {
  ParallelPlan p = Tp8Dp8();
  p.ep = 2;
  p.global_batch = 100;
  const Diagnostics d = validate_plan(llama70b_, h100x64_, p, json_locator("s.json:"));
  EXPECT_TRUE(mentions(d, "s.json:/parallel/ep: ep=2")) << text(d);
  EXPECT_TRUE(mentions(d, "s.json:/batch/global_batch: gbs=100")) << text(d);
}

TEST_F(ParallelPlanTest, DefaultLocatorNamesFlags) {
  ParallelPlan p = Tp8Dp8();
  p.ep = 2;
  EXPECT_TRUE(mentions(validate_plan(llama70b_, h100x64_, p), "--ep: ep=2"));
}

// ---- layers_in_virtual_stage ------------------------------------------------------------------

TEST(ParallelPlanLayers, EvenSplit) {
  ModelSpec m;
  m.layers = 80;
  ParallelPlan p;
  p.pp = 4;
  p.vpp = 5;
  for (int s = 0; s < 20; ++s) {
    EXPECT_EQ(layers_in_virtual_stage(m, p, s), 4) << s;
    EXPECT_EQ(first_layer_of_virtual_stage(m, p, s), 4 * s) << s;
  }
}

TEST(ParallelPlanLayers, Llama405bOver16StagesSumsToTheLayerCount) {
  // 126 = 16 * 7 + 14: fourteen stages hold 8 layers and two hold 7; the last stage, which also
  // runs the output layer and the loss, is one of the two.
  ModelSpec m;
  m.layers = 126;
  ParallelPlan p;
  p.pp = 16;
  int total = 0, min_layers = 1 << 30, max_layers = 0;
  for (int s = 0; s < 16; ++s) {
    const int n = layers_in_virtual_stage(m, p, s);
    EXPECT_EQ(first_layer_of_virtual_stage(m, p, s), total) << s;
    total += n;
    min_layers = std::min(min_layers, n);
    max_layers = std::max(max_layers, n);
  }
  EXPECT_EQ(total, 126);
  EXPECT_EQ(min_layers, 7);
  EXPECT_EQ(max_layers, 8);
  EXPECT_EQ(layers_in_virtual_stage(m, p, 15), 7);
}

TEST(ParallelPlanLayers, EveryUnevenSplitSumsAndDiffersByAtMostOne) {
  for (int layers = 1; layers <= 130; ++layers) {
    for (int pp = 1; pp <= 16; ++pp) {
      for (int vpp = 1; vpp <= 4 && pp * vpp <= layers; ++vpp) {
        ModelSpec m;
        m.layers = layers;
        ParallelPlan p;
        p.pp = pp;
        p.vpp = vpp;
        int total = 0, lo = 1 << 30, hi = 0;
        for (int s = 0; s < pp * vpp; ++s) {
          const int n = layers_in_virtual_stage(m, p, s);
          ASSERT_GE(n, 1) << layers << " layers, pp" << pp << " vpp" << vpp << ", stage " << s;
          total += n;
          lo = std::min(lo, n);
          hi = std::max(hi, n);
        }
        ASSERT_EQ(total, layers) << "pp" << pp << " vpp" << vpp;
        ASSERT_LE(hi - lo, 1) << layers << " layers, pp" << pp << " vpp" << vpp;
      }
    }
  }
}

}  // namespace
}  // namespace parallax
