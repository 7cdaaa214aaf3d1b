// Launch emitters: the full text of representative plans is pinned in tests/golden/launch/ (and
// its key lines asserted here, so a regenerated golden cannot hide a wrong flag); each rule a
// framework enforces has a test that asserts its message.
//
// When an emitter changes on purpose, regenerate the pinned texts with
//
//   PARALLAX_UPDATE_GOLDEN=1 build/release/tests/parallax_tests --gtest_filter='Launch*'
//
// and review the diff before committing it.
#include "planner/launch/launch.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "core/json_io.h"
#include "core/model_zoo.h"
#include "tests/test_support.h"

namespace parallax {
namespace {

using testing::mentions;
using testing::text;

// ---- inputs -----------------------------------------------------------------------------------

HwProfile h100() {
  auto profiles = builtin_profiles();
  PX_CHECK(profiles.ok(), profiles.error_text());
  auto hw = find_profile(*profiles, "h100-sxm-80gb", "test");
  PX_CHECK(hw.ok(), hw.error_text());
  return *hw;
}

ModelSpec zoo(const std::string& name) {
  auto m = find_zoo_model(name, "test");
  PX_CHECK(m.ok(), m.error_text());
  return *m;
}

/// A request whose GPU count is the plan's.
LaunchRequest request(const std::string& model, const ParallelPlan& p) {
  return {zoo(model), Cluster{h100(), p.gpus()}, p};
}

/// Llama 3.1 70B on 64 H100: tp8 pp4 with 5 virtual stages per rank (4 layers each), dp2, sequence
/// parallel, selective recompute, distributed optimizer.
ParallelPlan llama70b_plan() {
  ParallelPlan p;
  p.tp = 8;
  p.pp = 4;
  p.vpp = 5;
  p.dp = 2;
  p.micro_batch = 1;
  p.global_batch = 128;  // 64 microbatches per rank, a multiple of pp
  p.seq_len = 8192;
  p.sequence_parallel = true;
  p.recompute = Recompute::kSelective;
  p.zero_stage = 1;
  p.schedule = ScheduleKind::kInterleaved1F1B;
  return p;
}

/// DeepSeek-V3 on 256 H100: tp2 (sp) dp128, experts over 64 ranks, full recompute, fp8.
ParallelPlan deepseek_plan() {
  ParallelPlan p;
  p.tp = 2;
  p.dp = 128;
  p.ep = 64;
  p.etp = 1;
  p.micro_batch = 1;
  p.global_batch = 1024;
  p.seq_len = 4096;
  p.sequence_parallel = true;
  p.recompute = Recompute::kFull;
  p.zero_stage = 1;
  p.precision = Precision::kFp8;
  return p;
}

/// Llama 3.1 8B on 8 H100 with FSDP and selective recompute.
ParallelPlan llama8b_fsdp_plan() {
  ParallelPlan p;
  p.dp = 8;
  p.micro_batch = 2;
  p.global_batch = 256;
  p.seq_len = 8192;
  p.fsdp = true;
  p.recompute = Recompute::kSelective;
  return p;
}

/// Llama 3.1 8B with plain data parallelism: the base that refusal tests change one field of.
ParallelPlan llama8b_plan(int dp = 8) {
  ParallelPlan p;
  p.dp = dp;
  p.micro_batch = 1;
  p.global_batch = 64;
  p.seq_len = 4096;
  return p;
}

// ---- golden texts -----------------------------------------------------------------------------

bool update_mode() {
  const char* v = std::getenv("PARALLAX_UPDATE_GOLDEN");
  return v != nullptr && std::string(v) == "1";
}

void expect_golden(const std::string& name, const std::string& actual) {
  const std::string path = std::string(PARALLAX_SOURCE_DIR "/tests/golden/launch/") + name;
  if (update_mode()) {
    std::ofstream(path, std::ios::binary) << actual;
    std::cout << "rewrote " << path << "\n";
    return;
  }
  const auto expected = testing::read_file(path);
  ASSERT_TRUE(expected.has_value()) << path << " is missing: run with PARALLAX_UPDATE_GOLDEN=1";
  EXPECT_EQ(actual, *expected) << "the emitted text differs from " << path
                               << "; if intended, rerun with PARALLAX_UPDATE_GOLDEN=1 and review "
                                  "the diff";
}

std::string emitted(LaunchTarget t, const LaunchRequest& r) {
  auto out = emit_launch(t, r);
  EXPECT_TRUE(out.ok()) << out.error_text();
  return out.ok() ? *out : std::string();
}

/// True when `s` has a line equal to `line`.
bool has_line(const std::string& s, const std::string& line) {
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find('\n', start);
    if (end == std::string::npos) end = s.size();
    if (s.compare(start, end - start, line) == 0) return true;
    start = end + 1;
  }
  return false;
}

bool contains(const std::string& s, const std::string& needle) {
  return s.find(needle) != std::string::npos;
}

/// check_launch refuses `r` for `t` with a diagnostic whose text contains `needle`.
void expect_refused(LaunchTarget t, const LaunchRequest& r, const std::string& needle) {
  const Diagnostics d = check_launch(t, r);
  EXPECT_TRUE(mentions(d, needle))
      << to_string(t) << " should refuse with \"" << needle << "\", got:\n"
      << text(d);
}

// ---- names ------------------------------------------------------------------------------------

TEST(LaunchTarget, NamesRoundTripAndUnknownIsRefused) {
  for (LaunchTarget t :
       {LaunchTarget::kMegatron, LaunchTarget::kDeepSpeed, LaunchTarget::kTorchTitan,
        LaunchTarget::kTorchrun, LaunchTarget::kSlurm}) {
    const auto back = parse_launch_target(to_string(t));
    ASSERT_TRUE(back.has_value()) << to_string(t);
    EXPECT_EQ(*back, t);
    EXPECT_TRUE(contains(launch_target_names(), to_string(t))) << to_string(t);
  }
  EXPECT_EQ(parse_launch_target("DeepSpeed"), LaunchTarget::kDeepSpeed);
  EXPECT_FALSE(parse_launch_target("nemo").has_value());
  EXPECT_FALSE(parse_launch_target("").has_value());
}

// ---- Megatron-LM ------------------------------------------------------------------------------

TEST(LaunchMegatron, Llama70bInterleavedMatchesGolden) {
  const std::string s = emitted(LaunchTarget::kMegatron, request("llama3.1-70b", llama70b_plan()));
  expect_golden("megatron_llama3.1-70b_interleaved.sh", s);
  for (const char* line :
       {"--num-layers 80 \\", "--num-query-groups 8 \\", "--ffn-hidden-size 28672 \\",
        "--tensor-model-parallel-size 8 \\", "--pipeline-model-parallel-size 4 \\",
        "--num-layers-per-virtual-pipeline-stage 4 \\", "--sequence-parallel \\",
        "--global-batch-size 128 \\", "--recompute-granularity selective \\",
        "--use-distributed-optimizer \\", "--overlap-param-gather \\", "--bf16 \\",
        "--attention-backend flash"})
    EXPECT_TRUE(has_line(s, line)) << line << "\n" << s;
  // head_dim 128 = hidden 8192 / 64 heads: no --kv-channels; selective recompute has no method.
  EXPECT_FALSE(contains(s, "--kv-channels")) << s;
  EXPECT_FALSE(contains(s, "--recompute-method")) << s;
  EXPECT_FALSE(contains(s, "--num-experts")) << s;
  EXPECT_TRUE(contains(s, "CUDA_DEVICE_MAX_CONNECTIONS=1")) << s;
}

TEST(LaunchMegatron, DeepSeekV3MoeMatchesGolden) {
  const std::string s = emitted(LaunchTarget::kMegatron, request("deepseek-v3", deepseek_plan()));
  expect_golden("megatron_deepseek-v3_moe.sh", s);
  for (const char* line : {"--multi-latent-attention \\",
                           "--q-lora-rank 1536 \\",
                           "--kv-lora-rank 512 \\",
                           "--qk-head-dim 128 \\",
                           "--qk-pos-emb-head-dim 64 \\",
                           "--v-head-dim 128 \\",
                           "--num-experts 256 \\",
                           "--moe-router-topk 8 \\",
                           "--moe-ffn-hidden-size 2048 \\",
                           "--moe-shared-expert-intermediate-size 2048 \\",
                           "--moe-layer-freq '([0]*3+[1]*58)' \\",
                           "--moe-grouped-gemm \\",
                           "--moe-token-dispatcher-type alltoall \\",
                           "--expert-model-parallel-size 64 \\",
                           "--expert-tensor-parallel-size 1 \\",
                           "--recompute-granularity full \\",
                           "--recompute-method uniform \\",
                           "--recompute-num-layers 1 \\",
                           "--fp8-format hybrid \\",
                           "--attention-backend fused"})
    EXPECT_TRUE(has_line(s, line)) << line << "\n" << s;
  // MLA has neither grouped-query flags nor --kv-channels.
  EXPECT_FALSE(contains(s, "--group-query-attention")) << s;
  EXPECT_FALSE(contains(s, "--kv-channels")) << s;
}

TEST(LaunchMegatron, HeadDimDifferentFromHiddenOverHeadsSetsKvChannels) {
  ParallelPlan p = llama8b_plan();
  const std::string s = emitted(LaunchTarget::kMegatron, request("qwen3-30b-a3b", p));
  // Qwen3-30B-A3B: hidden 2048 over 32 heads is 64, its heads are 128 wide.
  EXPECT_TRUE(has_line(s, "--kv-channels 128 \\")) << s;
  EXPECT_FALSE(contains(s, "--moe-layer-freq")) << s;  // every layer is MoE
}

TEST(LaunchMegatron, ZeroThreeRunsAsMegatronFsdp) {
  ParallelPlan p = llama8b_plan();
  p.zero_stage = 3;
  std::string s = emitted(LaunchTarget::kMegatron, request("llama3.1-8b", p));
  EXPECT_TRUE(has_line(s, "--use-megatron-fsdp \\")) << s;
  EXPECT_TRUE(has_line(s, "--data-parallel-sharding-strategy optim_grads_params \\")) << s;
  EXPECT_TRUE(has_line(s, "--ckpt-format fsdp_dtensor \\")) << s;
  EXPECT_FALSE(contains(s, "--use-distributed-optimizer")) << s;

  p.zero_stage = 2;
  s = emitted(LaunchTarget::kMegatron, request("llama3.1-8b", p));
  EXPECT_TRUE(has_line(s, "--data-parallel-sharding-strategy optim_grads \\")) << s;

  // Without sharding there is no parameter all-gather to overlap.
  p.zero_stage = 0;
  s = emitted(LaunchTarget::kMegatron, request("llama3.1-8b", p));
  EXPECT_FALSE(contains(s, "--overlap-param-gather")) << s;
  EXPECT_FALSE(contains(s, "--use-megatron-fsdp")) << s;
  EXPECT_TRUE(has_line(s, "--overlap-grad-reduce \\")) << s;
}

TEST(LaunchMegatron, RefusesPerOpSelectiveRecompute) {
  ParallelPlan p = llama8b_plan(4);
  p.recompute = Recompute::kSelectiveOp;
  expect_refused(LaunchTarget::kMegatron, request("llama3.1-8b", p),
                 "plan/parallel/recompute: Megatron-LM has no per-op selective checkpointing");
}

TEST(LaunchMegatron, RefusesZeroBubbleSchedule) {
  ParallelPlan p = llama8b_plan(4);
  p.pp = 2;
  p.schedule = ScheduleKind::kZeroBubbleH1;
  expect_refused(LaunchTarget::kMegatron, request("llama3.1-8b", p),
                 "plan/parallel/schedule: Megatron-LM has no zero-bubble");
}

TEST(LaunchMegatron, RefusesUnevenLayerSplit) {
  ParallelPlan p = deepseek_plan();
  p.pp = 4;
  p.dp = 32;
  p.global_batch = 512;
  expect_refused(LaunchTarget::kMegatron, request("deepseek-v3", p),
                 "splits layers=61 evenly over pp*vpp=4");
  expect_refused(LaunchTarget::kMegatron, request("deepseek-v3", p),
                 "--decoder-first-pipeline-num-layers");
}

TEST(LaunchMegatron, RefusesSequenceNotAMultipleOfTwiceCp) {
  ParallelPlan p = llama8b_plan(4);
  p.cp = 2;
  p.seq_len = 4098;  // divisible by cp=2, not by 2*cp=4
  expect_refused(LaunchTarget::kMegatron, request("llama3.1-8b", p),
                 "plan/seq_len: Megatron-LM needs seq=4098 to be a multiple of 2*cp=4");
}

TEST(LaunchMegatron, RefusesCpThatDoesNotDivideSequence) {
  ParallelPlan p = llama8b_plan(2);
  p.cp = 3;
  p.seq_len = 8192;
  expect_refused(LaunchTarget::kMegatron, request("llama3.1-8b", p), "cp=3 must divide seq=8192");
}

TEST(LaunchMegatron, RefusesTpCommOverlapWithoutSequenceParallel) {
  ParallelPlan p = llama8b_plan(1);
  p.tp = 8;
  p.overlap_tp_comm = true;
  expect_refused(LaunchTarget::kMegatron, request("llama3.1-8b", p),
                 "plan/parallel/sequence_parallel: Megatron-LM overlaps TP "
                 "communication");
}

TEST(LaunchMegatron, RefusesParamGatherOverlapWithoutGradReduceOverlap) {
  ParallelPlan p = llama8b_plan();
  p.zero_stage = 1;
  p.overlap_grad_reduce = false;
  expect_refused(LaunchTarget::kMegatron, request("llama3.1-8b", p),
                 "only together with --overlap-grad-reduce");
  p.overlap_param_gather = false;
  EXPECT_TRUE(check_launch(LaunchTarget::kMegatron, request("llama3.1-8b", p)).empty());
}

TEST(LaunchMegatron, RefusesInterleavedMicrobatchesNotAMultipleOfPp) {
  ParallelPlan p = llama70b_plan();
  p.global_batch = 132;  // 66 microbatches per rank, not a multiple of pp=4
  expect_refused(LaunchTarget::kMegatron, request("llama3.1-70b", p), "to be a multiple of pp=4");
}

TEST(LaunchMegatron, RefusesMoeTensorParallelWithoutSequenceParallel) {
  ParallelPlan p = llama8b_plan(4);
  p.tp = 2;
  expect_refused(LaunchTarget::kMegatron, request("mixtral-8x7b", p), "need sequence parallelism");
}

TEST(LaunchMegatron, RefusesExpertsThatDoNotFitTheDenseRanks) {
  ParallelPlan p = llama8b_plan(4);
  p.ep = 8;  // ep*etp = 8 does not divide dp*cp*tp = 4
  expect_refused(LaunchTarget::kMegatron, request("mixtral-8x7b", p),
                 "ep*etp=8 must divide dp*cp*tp=4");
}

// ---- DeepSpeed --------------------------------------------------------------------------------

TEST(LaunchDeepSpeed, Llama8bFsdpIsZeroThreeAndMatchesGolden) {
  const LaunchRequest r = request("llama3.1-8b", llama8b_fsdp_plan());
  const std::string s = emitted(LaunchTarget::kDeepSpeed, r);
  expect_golden("deepspeed_llama3.1-8b_fsdp.json", s);
  const auto j = nlohmann::json::parse(s);
  EXPECT_EQ(j["zero_optimization"]["stage"], 3);
  EXPECT_EQ(j["bf16"]["enabled"], true);
  EXPECT_EQ(j["zero_optimization"]["stage3_prefetch_bucket_size"], 50000000);
  const auto notes = launch_notes(LaunchTarget::kDeepSpeed, r);
  ASSERT_GE(notes.size(), 2u);
  EXPECT_TRUE(contains(notes[1], "fsdp is written as ZeRO stage 3")) << notes[1];
}

TEST(LaunchDeepSpeed, BatchParsesBackToDeepSpeedsArithmetic) {
  // DeepSpeed's _batch_assertion: train_batch_size = micro * accumulation * data-parallel world,
  // where the world is all GPUs over the pipeline stages.
  ParallelPlan pipelined = llama8b_plan(8);
  pipelined.pp = 2;
  pipelined.zero_stage = 1;
  ParallelPlan zero2 = llama8b_plan(8);
  zero2.micro_batch = 4;
  zero2.global_batch = 512;
  zero2.zero_stage = 2;
  for (const ParallelPlan& p : {pipelined, zero2, llama8b_fsdp_plan()}) {
    const LaunchRequest r = request("llama3.1-8b", p);
    const auto j = nlohmann::json::parse(emitted(LaunchTarget::kDeepSpeed, r));
    const int64_t world = r.cluster.num_gpus / p.pp;
    const int64_t micro = j["train_micro_batch_size_per_gpu"];
    const int64_t accumulation = j["gradient_accumulation_steps"];
    const int64_t batch = j["train_batch_size"];
    EXPECT_EQ(batch, micro * accumulation * world) << j.dump();
    EXPECT_EQ(batch, p.global_batch);
    EXPECT_EQ(micro, p.micro_batch);
  }
}

TEST(LaunchDeepSpeed, PipelineNoteSaysOneFOneBAndZeroAtMostOne) {
  ParallelPlan p = llama8b_plan(4);
  p.pp = 2;
  p.zero_stage = 1;
  const auto notes = launch_notes(LaunchTarget::kDeepSpeed, request("llama3.1-8b", p));
  std::string all;
  for (const auto& n : notes) all += n + "\n";
  EXPECT_TRUE(contains(all, "PipelineModule with num_stages=2")) << all;
  EXPECT_TRUE(contains(all, "runs 1F1B (TrainSchedule) and supports ZeRO stage <= 1")) << all;
}

TEST(LaunchDeepSpeed, RefusesTensorParallel) {
  ParallelPlan p = llama8b_plan(4);
  p.tp = 2;
  expect_refused(LaunchTarget::kDeepSpeed, request("llama3.1-8b", p),
                 "plan/parallel/tp: DeepSpeed has no Megatron-style tensor");
  expect_refused(LaunchTarget::kDeepSpeed, request("llama3.1-8b", p), "Megatron-DeepSpeed");
}

TEST(LaunchDeepSpeed, RefusesContextParallel) {
  ParallelPlan p = llama8b_plan(4);
  p.cp = 2;
  expect_refused(LaunchTarget::kDeepSpeed, request("llama3.1-8b", p),
                 "no ring or all-gather context parallelism");
}

TEST(LaunchDeepSpeed, RefusesExpertParallel) {
  ParallelPlan p = llama8b_plan(4);
  p.ep = 2;
  expect_refused(LaunchTarget::kDeepSpeed, request("mixtral-8x7b", p),
                 "expert parallelism from the model code");
}

TEST(LaunchDeepSpeed, RefusesFp8) {
  ParallelPlan p = llama8b_plan();
  p.precision = Precision::kFp8;
  expect_refused(LaunchTarget::kDeepSpeed, request("llama3.1-8b", p),
                 "plan/precision: the DeepSpeed config trains in bf16 or fp16");
}

TEST(LaunchDeepSpeed, RefusesZeroTwoOrFsdpWithPipeline) {
  ParallelPlan p = llama8b_plan(4);
  p.pp = 2;
  p.zero_stage = 2;
  expect_refused(LaunchTarget::kDeepSpeed, request("llama3.1-8b", p),
                 "plan/parallel/zero: DeepSpeed's pipeline engine supports ZeRO stage "
                 "<= 1, got zero=2 with pp=2");
  p.zero_stage = 0;
  p.fsdp = true;
  expect_refused(LaunchTarget::kDeepSpeed, request("llama3.1-8b", p),
                 "got fsdp (stage 3) with pp=2");
}

TEST(LaunchDeepSpeed, RefusesInterleavedSchedule) {
  ParallelPlan p = llama8b_plan(4);
  p.pp = 2;
  p.vpp = 2;
  p.schedule = ScheduleKind::kInterleaved1F1B;
  expect_refused(LaunchTarget::kDeepSpeed, request("llama3.1-8b", p),
                 "runs 1F1B only, got interleaved");
}

TEST(LaunchDeepSpeed, ReportsEveryProblemAndEmitRefusesWithThem) {
  ParallelPlan p = llama8b_plan(4);
  p.tp = 2;
  p.precision = Precision::kFp8;
  const LaunchRequest r = request("llama3.1-8b", p);
  expect_refused(LaunchTarget::kDeepSpeed, r, "plan/parallel/tp");
  expect_refused(LaunchTarget::kDeepSpeed, r, "plan/precision");
  const auto out = emit_launch(LaunchTarget::kDeepSpeed, r);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error_text(), text(check_launch(LaunchTarget::kDeepSpeed, r)));
}

// ---- TorchTitan -------------------------------------------------------------------------------

TEST(LaunchTorchTitan, Llama8bFsdpMatchesGolden) {
  ParallelPlan p = llama8b_fsdp_plan();
  p.recompute = Recompute::kSelectiveOp;  // as TorchTitan runs it
  p.attention = AttentionImpl::kFlash2;
  p.eager = true;  // TorchTitan's default: no torch.compile
  const std::string s = emitted(LaunchTarget::kTorchTitan, request("llama3.1-8b", p));
  expect_golden("torchtitan_llama3.1-8b_fsdp.toml", s);
  for (const char* line :
       {"[training]", "local_batch_size = 2", "global_batch_size = 256", "seq_len = 8192",
        "[parallelism]", "data_parallel_replicate_degree = 1", "data_parallel_shard_degree = 8",
        "tensor_parallel_degree = 1", "pipeline_parallel_degree = 1", "[activation_checkpoint]",
        "mode = \"selective\"", "selective_ac_option = \"op\""})
    EXPECT_TRUE(has_line(s, line)) << line << "\n" << s;
  EXPECT_FALSE(contains(s, "[compile]")) << s;
}

// The simulated fused elementwise ops are torch.compile's: a fused plan compiles, an eager one
// does not unless Float8 needs it, and then says so.
TEST(LaunchTorchTitan, CompilesUnlessThePlanIsEager) {
  ParallelPlan p = llama8b_fsdp_plan();
  p.recompute = Recompute::kSelectiveOp;
  p.attention = AttentionImpl::kFlash2;
  const std::string fused = emitted(LaunchTarget::kTorchTitan, request("llama3.1-8b", p));
  EXPECT_TRUE(has_line(fused, "[compile]")) << fused;
  EXPECT_TRUE(has_line(fused, "enable = true")) << fused;
  p.eager = true;
  const std::string eager = emitted(LaunchTarget::kTorchTitan, request("llama3.1-8b", p));
  EXPECT_FALSE(contains(eager, "[compile]")) << eager;
  EXPECT_FALSE(contains(eager, "--eager 0")) << eager;
  p.precision = Precision::kFp8;
  const std::string fp8 = emitted(LaunchTarget::kTorchTitan, request("llama3.1-8b", p));
  EXPECT_TRUE(has_line(fp8, "[compile]")) << fp8;
  EXPECT_TRUE(contains(fp8, "--eager 0")) << fp8;
}

// A plan simulated with Megatron's selective recompute or the fastest fused attention still
// launches, with notes that TorchTitan runs per-op checkpointing and SDPA instead.
TEST(LaunchTorchTitan, NotesWhereTheRunDiffersFromTheSimulatedPlan) {
  ParallelPlan p = llama8b_fsdp_plan();
  p.recompute = Recompute::kSelective;
  p.attention = AttentionImpl::kFlash;
  const std::string s = emitted(LaunchTarget::kTorchTitan, request("llama3.1-8b", p));
  EXPECT_TRUE(has_line(s, "selective_ac_option = \"op\"")) << s;
  EXPECT_TRUE(contains(s, "--recompute selective-op")) << s;
  EXPECT_TRUE(contains(s, "--attention flash2")) << s;
  p.recompute = Recompute::kSelectiveOp;
  p.attention = AttentionImpl::kFlash2;
  const std::string t = emitted(LaunchTarget::kTorchTitan, request("llama3.1-8b", p));
  EXPECT_FALSE(contains(t, "--recompute selective-op")) << t;
  EXPECT_FALSE(contains(t, "--attention flash2")) << t;
}

TEST(LaunchTorchTitan, PipelineStagesFollowThePlansSplitAndSchedule) {
  ParallelPlan p = llama70b_plan();
  p.zero_stage = 0;
  p.fsdp = true;
  p.precision = Precision::kFp8;
  const std::string s = emitted(LaunchTarget::kTorchTitan, request("llama3.1-70b", p));
  EXPECT_TRUE(has_line(s, "pipeline_parallel_schedule = \"Interleaved1F1B\"")) << s;
  EXPECT_TRUE(has_line(s, "pipeline_parallel_microbatch_size = 1")) << s;
  // Every microbatch of a step goes in one local batch: 128 / dp 2.
  EXPECT_TRUE(has_line(s, "local_batch_size = 64")) << s;
  EXPECT_TRUE(has_line(s,
                       "  [\"tok_embeddings\", \"layers.0\", \"layers.1\", \"layers.2\", "
                       "\"layers.3\"],"))
      << s;
  EXPECT_TRUE(has_line(s,
                       "  [\"layers.76\", \"layers.77\", \"layers.78\", \"layers.79\", "
                       "\"norm\", \"output\"],"))
      << s;
  EXPECT_TRUE(has_line(s, "converters = [\"quantize.linear.float8\"]")) << s;
  EXPECT_TRUE(has_line(s, "enable_fsdp_float8_all_gather = true")) << s;
  EXPECT_TRUE(has_line(s, "enable = true")) << "fp8 compiles\n" << s;
}

TEST(LaunchTorchTitan, UnevenSplitNamesEveryLayerOnceInOrder) {
  ParallelPlan p;
  p.pp = 4;
  p.dp = 16;
  p.ep = 16;
  p.fsdp = true;
  p.micro_batch = 1;
  p.global_batch = 256;
  p.seq_len = 4096;
  LaunchRequest r = request("deepseek-v3", p);
  r.model.mtp_layers = 0;  // TorchTitan's DeepSeek-V3 has no multi-token-prediction module
  const std::string s = emitted(LaunchTarget::kTorchTitan, r);
  std::vector<int> layers;
  const std::regex layer("\"layers\\.([0-9]+)\"");
  for (std::sregex_iterator it(s.begin(), s.end(), layer), end; it != end; ++it)
    layers.push_back(std::stoi((*it)[1]));
  ASSERT_EQ(layers.size(), 61u) << s;
  for (int i = 0; i < 61; ++i) EXPECT_EQ(layers[i], i);
  EXPECT_TRUE(has_line(s, "pipeline_parallel_schedule = \"1F1B\"")) << s;
  EXPECT_TRUE(has_line(s, "expert_parallel_degree = 16")) << s;
}

TEST(LaunchTorchTitan, ContextParallelRingRotatesWithAllToAll) {
  ParallelPlan p = llama8b_plan(4);
  p.cp = 2;
  p.fsdp = true;
  std::string s = emitted(LaunchTarget::kTorchTitan, request("llama3.1-8b", p));
  EXPECT_TRUE(has_line(s, "context_parallel_rotate_method = \"alltoall\"")) << s;
  p.cp_comm = CpComm::kAllGather;
  s = emitted(LaunchTarget::kTorchTitan, request("llama3.1-8b", p));
  EXPECT_TRUE(has_line(s, "context_parallel_rotate_method = \"allgather\"")) << s;
}

TEST(LaunchTorchTitan, RefusesOptimizerOrGradientSharding) {
  for (int zero : {1, 2}) {
    ParallelPlan p = llama8b_plan();
    p.zero_stage = zero;
    expect_refused(LaunchTarget::kTorchTitan, request("llama3.1-8b", p),
                   "plan/parallel/zero: TorchTitan shards data parallelism only with "
                   "FSDP2");
    expect_refused(LaunchTarget::kTorchTitan, request("llama3.1-8b", p),
                   "got zero=" + std::to_string(zero));
  }
}

TEST(LaunchTorchTitan, RefusesTensorParallelWithoutSequenceParallel) {
  ParallelPlan p = llama8b_plan(4);
  p.tp = 2;
  p.fsdp = true;
  expect_refused(LaunchTarget::kTorchTitan, request("llama3.1-8b", p),
                 "always runs sequence parallel");
}

TEST(LaunchTorchTitan, RefusesZeroBubbleH1) {
  ParallelPlan p = llama8b_plan(4);
  p.pp = 2;
  p.schedule = ScheduleKind::kZeroBubbleH1;
  expect_refused(LaunchTarget::kTorchTitan, request("llama3.1-8b", p),
                 "no single-stage zero-bubble (ZB-H1) schedule");
}

TEST(LaunchTorchTitan, RefusesExpertTensorParallelOtherThanOneOrTp) {
  ParallelPlan p = llama8b_plan(2);
  p.tp = 4;
  p.sequence_parallel = true;
  p.fsdp = true;
  p.ep = 2;
  p.etp = 2;
  expect_refused(LaunchTarget::kTorchTitan, request("qwen3-30b-a3b", p),
                 "expert tensor parallelism is 1 or tp=4, got etp=2");
}

TEST(LaunchTorchTitan, RefusesExpertsWithoutShardedRanksToBorrow) {
  ParallelPlan p = llama8b_plan(4);  // replicated (DDP): no FSDP ranks for the experts
  p.ep = 2;
  expect_refused(LaunchTarget::kTorchTitan, request("qwen3-30b-a3b", p),
                 "plan/parallel/ep: TorchTitan lays ep=2 over the FSDP-shard x cp x tp");
  p.fsdp = true;
  EXPECT_TRUE(check_launch(LaunchTarget::kTorchTitan, request("qwen3-30b-a3b", p)).empty());
}

// ---- torchrun and Slurm -----------------------------------------------------------------------

TEST(LaunchSlurm, MultiNodeMatchesGolden) {
  const std::string s = emitted(LaunchTarget::kSlurm, request("llama3.1-70b", llama70b_plan()));
  expect_golden("slurm_llama3.1-70b.sbatch", s);
  for (const char* line :
       {"#!/bin/bash", "#SBATCH --nodes=8", "#SBATCH --ntasks-per-node=1",
        "#SBATCH --gpus-per-node=8", "#SBATCH --exclusive", "export CUDA_DEVICE_MAX_CONNECTIONS=1",
        "srun torchrun \\", "  --nnodes \"$SLURM_NNODES\" \\", "  --nproc-per-node 8 \\",
        "  --rdzv-endpoint \"$MASTER_ADDR:$MASTER_PORT\" \\", "  pretrain_gpt.py \\",
        "  --num-layers-per-virtual-pipeline-stage 4 \\"})
    EXPECT_TRUE(has_line(s, line)) << line << "\n" << s;
  // The #SBATCH directives come before any command.
  EXPECT_LT(s.find("#SBATCH --exclusive"), s.find("set -euo pipefail")) << s;
}

TEST(LaunchTorchrun, CountsNodesFromTheProfile) {
  const std::string s = emitted(LaunchTarget::kTorchrun, request("llama3.1-70b", llama70b_plan()));
  EXPECT_TRUE(has_line(s, "  --nnodes 8 \\")) << s;
  EXPECT_TRUE(has_line(s, "  --nproc-per-node 8 \\")) << s;
  EXPECT_TRUE(has_line(s, "  --rdzv-backend c10d \\")) << s;
  EXPECT_TRUE(has_line(s, "  --attention-backend flash")) << "last line, no continuation\n" << s;
}

TEST(LaunchTorchrun, OnePartialNode) {
  ParallelPlan p = llama8b_plan(4);
  std::string s = emitted(LaunchTarget::kTorchrun, request("llama3.1-8b", p));
  EXPECT_TRUE(has_line(s, "  --nnodes 1 \\")) << s;
  EXPECT_TRUE(has_line(s, "  --nproc-per-node 4 \\")) << s;
  s = emitted(LaunchTarget::kSlurm, request("llama3.1-8b", p));
  EXPECT_TRUE(has_line(s, "#SBATCH --gpus-per-node=4")) << s;
  EXPECT_FALSE(contains(s, "--exclusive")) << s;
}

TEST(LaunchTorchrun, RefusesGpusThatDoNotFillWholeNodes) {
  ParallelPlan p = llama8b_plan(12);
  p.global_batch = 96;
  for (LaunchTarget t : {LaunchTarget::kTorchrun, LaunchTarget::kSlurm}) {
    expect_refused(t, request("llama3.1-8b", p),
                   "plan/cluster/num_gpus: gpus=12 must fill whole nodes of 8 GPUs");
    expect_refused(t, request("llama3.1-8b", p), "use 8 or 16 GPUs");
  }
  // Megatron itself does not care about nodes.
  EXPECT_TRUE(check_launch(LaunchTarget::kMegatron, request("llama3.1-8b", p)).empty());
}

TEST(LaunchTorchrun, RefusesAProfileWithoutGpusPerNode) {
  LaunchRequest r = request("llama3.1-8b", llama8b_plan());
  r.cluster.hw.gpus_per_node = 0;
  expect_refused(LaunchTarget::kTorchrun, r,
                 "cluster/hw/gpus_per_node: the profile h100-sxm-80gb has no GPU count");
}

TEST(LaunchTorchrun, InheritsMegatronsRules) {
  ParallelPlan p = llama8b_plan(4);
  p.pp = 2;
  p.schedule = ScheduleKind::kZeroBubbleH1;
  expect_refused(LaunchTarget::kTorchrun, request("llama3.1-8b", p),
                 "Megatron-LM has no zero-bubble");
}

TEST(LaunchCheck, InvalidPlanIsRefusedForEveryTarget) {
  ParallelPlan p = llama8b_plan();
  p.global_batch = 60;  // not a multiple of dp*mbs = 8
  for (LaunchTarget t :
       {LaunchTarget::kMegatron, LaunchTarget::kDeepSpeed, LaunchTarget::kTorchTitan,
        LaunchTarget::kTorchrun, LaunchTarget::kSlurm}) {
    expect_refused(t, request("llama3.1-8b", p),
                   "plan/batch/global_batch: gbs=60 must be a multiple of dp*mbs=8");
  }
}

// The model's numerics go into Megatron's arguments: Qwen3's QK norm and rotary base.
TEST(LaunchMegatron, ModelNumericsBuildTheSameModel) {
  LaunchRequest r;
  r.model = find_zoo_model("qwen3-30b-a3b", "t").value();
  r.cluster = {h100(), 64};
  r.plan.tp = 1;
  r.plan.dp = 64;
  r.plan.ep = 8;
  r.plan.global_batch = 256;
  r.plan.seq_len = 4096;
  auto t = emit_launch(LaunchTarget::kMegatron, r);
  ASSERT_TRUE(t.ok()) << t.error_text();
  for (const char* line :
       {"--qk-layernorm \\\n", "--rotary-base 1000000 \\\n", "--norm-epsilon 1e-06 \\\n"})
    EXPECT_NE(t->find(line), std::string::npos) << line << *t;
  // Qwen3's router renormalises its top-8 weights: no pre-softmax flag.
  EXPECT_EQ(t->find("--moe-router-pre-softmax"), std::string::npos) << *t;
}

// TorchTitan's own limits: no Mixtral model, no CP for its DeepSeek-V3, DDP only alone.
TEST(LaunchTorchTitan, RefusesModelsAndLayoutsItHasNot) {
  LaunchRequest r;
  r.model = find_zoo_model("mixtral-8x7b", "t").value();
  r.cluster = {h100(), 64};
  r.plan.dp = 64;
  r.plan.fsdp = true;
  r.plan.global_batch = 256;
  r.plan.seq_len = 4096;
  EXPECT_TRUE(mentions(check_launch(LaunchTarget::kTorchTitan, r),
                       "TorchTitan has no MoE model of this architecture"));
  r.model = find_zoo_model("deepseek-v3", "t").value();
  r.plan.dp = 32;
  r.plan.cp = 2;
  EXPECT_TRUE(mentions(check_launch(LaunchTarget::kTorchTitan, r),
                       "runs FlexAttention, which its context parallelism does not support"));
  r.model = find_zoo_model("llama3.1-8b", "t").value();
  r.plan.cp = 1;
  r.plan.tp = 2;
  r.plan.sequence_parallel = true;
  r.plan.fsdp = false;
  EXPECT_TRUE(mentions(check_launch(LaunchTarget::kTorchTitan, r),
                       "DDP has not supported > 1D parallelism"));
  r.plan.fsdp = true;
  EXPECT_TRUE(check_launch(LaunchTarget::kTorchTitan, r).empty());
}

// TorchTitan main: a Python module deriving the plan from the model's registry function, with
// main's names (lm_head, token-based batches, SelectiveAC) and its own refusals.
TEST(LaunchTorchTitanMain, WritesAConfigModuleAndRefusesWhatMainCannotRun) {
  LaunchRequest r;
  r.model = find_zoo_model("llama3.1-8b", "t").value();
  r.cluster = {h100(), 16};
  r.plan.tp = 2;
  r.plan.pp = 2;
  r.plan.dp = 4;
  r.plan.fsdp = true;
  r.plan.sequence_parallel = true;
  r.plan.micro_batch = 2;
  r.plan.global_batch = 64;
  r.plan.seq_len = 4096;
  r.plan.recompute = Recompute::kSelectiveOp;
  auto t = emit_launch(LaunchTarget::kTorchTitanMain, r);
  ASSERT_TRUE(t.ok()) << t.error_text();
  for (const char* line :
       {"from torchtitan.models.llama3.config_registry import llama3_8b\n",
        "    config = llama3_8b()\n",
        "    config.model_spec = model_registry(\"8B\", attn_backend=\"flex_flash\", "
        "converters=None)\n",
        "    config.training.num_tokens_per_microbatch_per_dp_rank = 8192\n",
        "    config.training.num_tokens_per_train_step = 262144\n",
        "        data_parallel_shard_degree=4,\n", "        num_pp_microbatches=8,\n",
        "\"layers.31\", \"norm\", \"lm_head\"],\n",
        "    config.activation_checkpoint = SelectiveAC.Config()\n",
        "        enable_async_tensor_parallel=False,\n"})
    EXPECT_NE(t->find(line), std::string::npos) << line << *t;
  // Main allows DDP beside TP and PP, which v0.2.2 refuses.
  r.plan.fsdp = false;
  EXPECT_TRUE(check_launch(LaunchTarget::kTorchTitanMain, r).empty());
  EXPECT_FALSE(check_launch(LaunchTarget::kTorchTitan, r).empty());
  r.model = find_zoo_model("mixtral-8x7b", "t").value();
  EXPECT_TRUE(mentions(check_launch(LaunchTarget::kTorchTitanMain, r),
                       "TorchTitan main has no model definition"));
}

}  // namespace
}  // namespace parallax
