// The simulator's view of a plan as the CPU executor runs it: fp32, nothing overlapped, context
// parallelism by all-gather.
#include <gtest/gtest.h>

#include "core/json_io.h"
#include "core/model_zoo.h"
#include "executor/trainer.h"
#include "simulator/simulate.h"

namespace parallax::exec {
namespace {

TEST(AsExecuted, RunsInFp32WithNothingOverlapped) {
  ParallelPlan p;
  p.precision = Precision::kBf16;
  p.overlap_grad_reduce = p.overlap_param_gather = p.overlap_tp_comm = true;
  p.cp_comm = CpComm::kRing;
  const ParallelPlan e = as_executed(p);
  EXPECT_EQ(e.precision, Precision::kFp32);
  EXPECT_FALSE(e.async_tp_grad);
  EXPECT_FALSE(e.overlap_grad_reduce);
  EXPECT_FALSE(e.overlap_param_gather);
  EXPECT_FALSE(e.overlap_tp_comm);
  // The executor's context parallelism gathers K and V (model_ops.h), no ring.
  EXPECT_EQ(e.cp_comm, CpComm::kAllGather);
}

// Data parallel: the gradient reduction the default plan hides behind the backward is all
// exposed as the executor runs it (after the backward), and the step grows by it. (The H100
// profile has no fp32 peak: both in bf16.)
TEST(AsExecuted, TheGradientReductionIsExposed) {
  const ModelSpec m = find_zoo_model("llama3.1-8b", "t").value();
  const Cluster c{find_profile(builtin_profiles().value(), "h100-sxm-80gb", "t").value(), 16};
  ParallelPlan p;
  p.tp = 8;
  p.dp = 2;
  p.micro_batch = 1;
  p.global_batch = 16;
  p.seq_len = 4096;
  ParallelPlan e = as_executed(p);
  e.precision = p.precision;
  auto overlapped = simulate(m, c, p);
  auto executed = simulate(m, c, e);
  ASSERT_TRUE(overlapped.ok()) << overlapped.error_text();
  ASSERT_TRUE(executed.ok()) << executed.error_text();
  const auto dp = static_cast<size_t>(CostCategory::kDpComm);
  EXPECT_GT(executed->breakdown_s[dp], overlapped->breakdown_s[dp]);
  EXPECT_GT(executed->step_time_s, overlapped->step_time_s);
}

// Tensor parallel: the input gradient's all-reduce, which Megatron runs beside the weight-gradient
// GEMM, blocks in the executor: backward's exposed TP communication is all of it.
TEST(AsExecuted, TheInputGradientAllReduceBlocks) {
  const ModelSpec m = find_zoo_model("llama3.1-8b", "t").value();
  const Cluster c{find_profile(builtin_profiles().value(), "h100-sxm-80gb", "t").value(), 2};
  ParallelPlan p;
  p.tp = 2;
  p.micro_batch = 1;
  p.global_batch = 1;
  p.seq_len = 4096;
  p.sequence_parallel = false;
  ParallelPlan blocking = p;
  blocking.async_tp_grad = false;
  auto async = simulate(m, c, p);
  auto blocked = simulate(m, c, blocking);
  ASSERT_TRUE(async.ok()) << async.error_text();
  ASSERT_TRUE(blocked.ok()) << blocked.error_text();
  const auto tp = static_cast<size_t>(CostCategory::kTpComm);
  EXPECT_GT(blocked->breakdown_s[tp], async->breakdown_s[tp]);
  EXPECT_GT(blocked->step_time_s, async->step_time_s);
}

}  // namespace
}  // namespace parallax::exec
