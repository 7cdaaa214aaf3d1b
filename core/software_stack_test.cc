#include "core/software_stack.h"

#include <gtest/gtest.h>

#include <string>

#include "core/measured_run.h"

namespace parallax {
namespace {

// Every framework a record may name but `other` has a built-in profile.
TEST(SoftwareStack, EveryNamedFrameworkHasAProfile) {
  const std::string names = std::string(", ") + kRecordFrameworks + ",";
  int found = 0;
  for (size_t start = 2; start < names.size();) {
    const size_t end = names.find(',', start);
    const std::string f = names.substr(start, end - start);
    start = end + 2;
    if (f == "other") {
      EXPECT_EQ(find_stack_kernels(f), nullptr);
      continue;
    }
    const StackKernels* s = find_stack_kernels(f);
    ASSERT_NE(s, nullptr) << f;
    EXPECT_EQ(s->framework, f);
    EXPECT_FALSE(s->description.empty()) << f;
    ++found;
  }
  EXPECT_EQ(found, 10);
  EXPECT_EQ(builtin_stacks().size(), 10u);
  EXPECT_EQ(find_stack_kernels(""), nullptr);
}

// Megatron's family shares Megatron-LM's kernels; PyTorch's own stacks do not split sends.
TEST(SoftwareStack, FamiliesShareTheirKernels) {
  for (const char* f : {"nemo", "megatron-deepspeed"}) {
    const StackKernels* s = find_stack_kernels(f);
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->attention, megatron_stack().attention) << f;
    EXPECT_TRUE(s->pp_scatter_gather) << f;
    EXPECT_EQ(s->default_dropout, 0.1) << f;
    EXPECT_EQ(s->launch_target, "megatron") << f;
  }
  for (const char* f : {"torchtitan", "fsdp", "deepspeed", "nanotron", "maxtext"}) {
    const StackKernels* s = find_stack_kernels(f);
    ASSERT_NE(s, nullptr);
    EXPECT_FALSE(s->pp_scatter_gather) << f;
    EXPECT_EQ(s->default_dropout, 0.0) << f;
  }
  EXPECT_EQ(pytorch_fsdp_stack().attention, AttentionImpl::kFlash2);
}

TEST(SoftwareStack, ApplyStackSetsKernelsForThePrecision) {
  ParallelPlan p;
  p.recompute = Recompute::kSelective;
  const ParallelPlan bf16 = apply_stack(pytorch_fsdp_stack(), p);
  EXPECT_TRUE(bf16.eager);
  EXPECT_EQ(bf16.recompute, Recompute::kSelectiveOp);
  EXPECT_EQ(bf16.cp_comm, CpComm::kAllGather);
  p.precision = Precision::kFp8;
  EXPECT_FALSE(apply_stack(pytorch_fsdp_stack(), p).eager);  // torchao Float8 runs compiled
  const ParallelPlan meg = apply_stack(megatron_stack(), p);
  EXPECT_EQ(meg.recompute, Recompute::kSelective);
  EXPECT_TRUE(meg.pp_scatter_gather);
}

// Every value of a profile needs its source; a bad value is located.
TEST(SoftwareStack, ProfilesAreReadStrictly) {
  Json j = Json::parse(R"({"name": "x", "framework": "x", "attention": {"value": "flash"},
      "eager": false, "fp8_compiled": true, "selective_recompute": "per-op",
      "pp_scatter_gather": false, "cp_comm": "ring", "microbatch_per_stage": false,
      "dropout": 0, "overlap_grad_reduce": true, "overlap_param_gather": true,
      "overlap_tp_comm": false})");
  EXPECT_TRUE(stack_from_json(j, "s.json:").ok());
  j["attention"] = "flash9";
  auto bad = stack_from_json(j, "s.json:");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error_text().find("s.json:/attention"), std::string::npos) << bad.error_text();
  j["attention"] = "flash";
  j["warp_speed"] = true;
  EXPECT_FALSE(stack_from_json(j, "s.json:").ok());
}

}  // namespace
}  // namespace parallax
