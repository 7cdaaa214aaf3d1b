#include "planner/replan.h"

#include <gtest/gtest.h>

#include "core/model_zoo.h"

namespace parallax {
namespace {

HwProfile h100() {
  return find_profile(builtin_profiles().value(), "h100-sxm-80gb", "test").value();
}

/// Llama 3.1 70B on 64 H100, 128 sequences of 8K; the source gives tp=8, not pp.
MeasuredRun partial_record() {
  MeasuredRun r;
  r.id = "partial";
  r.where = "test.jsonl:1:";
  r.model = find_zoo_model("llama3.1-70b", "test").value();
  r.seq_len = 8192;
  r.gpu = "h100-sxm-80gb";
  r.num_gpus = 64;
  r.tp = 8;
  r.pp = std::nullopt;
  r.global_batch = 128;
  r.stack.framework = "megatron-lm";
  return r;
}

TEST(Replan, CompletionKeepsEveryKnownField) {
  const MeasuredRun r = partial_record();
  ASSERT_EQ(unknown_degrees(r), std::vector<std::string>{"pp"});
  auto p = complete_layout(r, h100());
  ASSERT_TRUE(p.ok()) << p.error_text();
  EXPECT_EQ(p->tp, 8);
  EXPECT_EQ(p->cp, 1);
  EXPECT_EQ(p->ep, 1);
  EXPECT_EQ(p->tp * p->pp * p->dp, 64);
  EXPECT_EQ(p->global_batch, 128);
  // The stack is pinned as the fill rule reads it, not searched: TP overlap off.
  EXPECT_FALSE(p->overlap_tp_comm);
}

TEST(Replan, CompletionPinsAKnownDpAndMicroBatch) {
  MeasuredRun r = partial_record();
  r.tp = std::nullopt;
  r.dp = 4;
  r.micro_batch = 2;
  auto p = complete_layout(r, h100());
  ASSERT_TRUE(p.ok()) << p.error_text();
  EXPECT_EQ(p->dp, 4);
  EXPECT_EQ(p->micro_batch, 2);
  EXPECT_EQ(p->tp * p->pp, 16);
}

TEST(Replan, NoConsistentLayoutIsALocatedError) {
  MeasuredRun r = partial_record();
  r.dp = 64;  // tp=8 x dp=64 needs 512 GPUs
  auto p = complete_layout(r, h100());
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error_text().find("test.jsonl:1:/parallel"), std::string::npos) << p.error_text();
}

TEST(Replan, FrameworkFollowsTheRecordsStack) {
  MeasuredRun r = partial_record();
  EXPECT_EQ(record_framework(r), LaunchTarget::kMegatron);
  r.stack.framework = "torchtitan";
  EXPECT_EQ(record_framework(r), LaunchTarget::kTorchTitan);
  r.stack.framework = "deepspeed";
  EXPECT_EQ(record_framework(r), LaunchTarget::kDeepSpeed);
  r.stack.framework = "nanotron";
  EXPECT_FALSE(record_framework(r).has_value());
  r.stack.framework.clear();
  r.fsdp = true;
  EXPECT_EQ(record_framework(r), LaunchTarget::kTorchTitan);
}

}  // namespace
}  // namespace parallax
