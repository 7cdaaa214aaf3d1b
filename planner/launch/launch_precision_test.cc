// The block-scaled recipes (MXFP8, NVFP4) as each framework takes them: Megatron-LM's flags,
// TorchTitan's converters, and the refusals of the targets that have none.

#include <gtest/gtest.h>

#include <string>

#include "core/json_io.h"
#include "core/model_zoo.h"
#include "planner/launch/launch.h"
#include "tests/test_support.h"

namespace parallax {
namespace {

using testing::mentions;

LaunchRequest request(const std::string& model, Precision prec) {
  auto m = find_zoo_model(model, "test");
  PX_CHECK(m.ok(), m.error_text());
  auto hw = find_profile(builtin_profiles().value(), "b200-sxm-180gb", "test");
  PX_CHECK(hw.ok(), hw.error_text());
  ParallelPlan p;
  p.dp = 8;
  p.micro_batch = 1;
  p.global_batch = 64;
  p.seq_len = 4096;
  p.fsdp = true;
  p.precision = prec;
  return {*m, Cluster{*hw, p.gpus()}, p};
}

std::string emitted(LaunchTarget t, const LaunchRequest& r) {
  auto s = emit_launch(t, r);
  EXPECT_TRUE(s.ok()) << s.error_text();
  return s.ok() ? *s : "";
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(LaunchPrecision, MegatronTakesTheMxfp8Recipe) {
  LaunchRequest r = request("llama3.1-8b", Precision::kMxfp8);
  r.plan.fsdp = false;
  r.plan.zero_stage = 1;
  const std::string s = emitted(LaunchTarget::kMegatron, r);
  EXPECT_TRUE(contains(s, "--fp8-format e4m3")) << s;
  EXPECT_TRUE(contains(s, "--fp8-recipe mxfp8")) << s;
  EXPECT_FALSE(contains(s, "--fp8-amax-history-len")) << "delayed scaling's\n" << s;
  EXPECT_FALSE(contains(s, "--fp4")) << s;
}

// The layers the simulation keeps in bf16 are the ones Megatron keeps: one at each end.
TEST(LaunchPrecision, MegatronTakesTheNvfp4RecipeWithItsBf16Layers) {
  LaunchRequest r = request("llama3.1-8b", Precision::kNvfp4);
  r.plan.fsdp = false;
  r.plan.zero_stage = 1;
  const std::string s = emitted(LaunchTarget::kMegatron, r);
  for (const char* flag : {"--fp4-format e2m1", "--fp4-recipe nvfp4", "--first-last-layers-bf16",
                           "--num-layers-at-start-in-bf16 1", "--num-layers-at-end-in-bf16 1"})
    EXPECT_TRUE(contains(s, flag)) << flag << "\n" << s;
  EXPECT_FALSE(contains(s, "--fp8-format")) << "Megatron refuses fp4 with fp8\n" << s;
}

TEST(LaunchPrecision, TorchTitanRunsMxfp8ThroughItsMxConverterUnderCompile) {
  LaunchRequest r = request("llama3.1-8b", Precision::kMxfp8);
  r.plan.eager = true;
  const std::string s = emitted(LaunchTarget::kTorchTitan, r);
  EXPECT_TRUE(contains(s, "converters = [\"quantize.linear.mx\"]")) << s;
  EXPECT_TRUE(contains(s, "[quantize.linear.mx]\nrecipe_name = \"mxfp8_cublas\"")) << s;
  EXPECT_TRUE(contains(s, "filter_fqns = [\"output\"]")) << s;
  EXPECT_TRUE(contains(s, "[compile]\nenable = true")) << s;
  EXPECT_TRUE(contains(s, "--eager 0")) << s;
}

TEST(LaunchPrecision, TorchTitan022HasNoNvfp4) {
  const Diagnostics d =
      check_launch(LaunchTarget::kTorchTitan, request("llama3.1-8b", Precision::kNvfp4));
  EXPECT_TRUE(mentions(d, "plan/precision: TorchTitan 0.2.2 has no NVFP4 training converter"))
      << testing::text(d);
  EXPECT_TRUE(mentions(d, "--torchtitan-version main")) << testing::text(d);
}

// TorchTitan main: NVFP4 on the decoder layers but the first and last (fqns match substrings,
// so each carries its trailing dot); the LM head stays in bf16.
TEST(LaunchPrecision, TorchTitanMainConvertsTheMiddleLayersToNvfp4) {
  const std::string s =
      emitted(LaunchTarget::kTorchTitanMain, request("llama3.1-8b", Precision::kNvfp4));
  EXPECT_TRUE(contains(s, "import Float8LinearConverter, NVFP4LinearConverter")) << s;
  EXPECT_TRUE(contains(s,
                       "converters=[NVFP4LinearConverter.Config(fqns=[f\"layers.{i}.\" for i "
                       "in range(1, 31)], model_compile_enabled=True)]"))
      << s;
  const std::string mx =
      emitted(LaunchTarget::kTorchTitanMain, request("llama3.1-8b", Precision::kMxfp8));
  EXPECT_TRUE(contains(mx, "MXFP8LinearConverter.Config(fqns=[\"layers\"]")) << mx;
  EXPECT_FALSE(contains(mx, "MXFP8GroupedExpertsConverter.Config")) << "a dense model\n" << mx;
}

TEST(LaunchPrecision, TorchTitanMainHasNoNvfp4Experts) {
  const LaunchRequest r = request("qwen3-30b-a3b", Precision::kNvfp4);
  const Diagnostics d = check_launch(LaunchTarget::kTorchTitanMain, r);
  EXPECT_TRUE(mentions(d, "no NVFP4 converter for its grouped MoE experts")) << testing::text(d);
}

TEST(LaunchPrecision, DeepSpeedRefusesBlockScaledRecipes) {
  for (Precision prec : {Precision::kMxfp8, Precision::kNvfp4}) {
    const Diagnostics d = check_launch(LaunchTarget::kDeepSpeed, request("llama3.1-8b", prec));
    EXPECT_TRUE(mentions(d, std::string("plan/precision: the DeepSpeed config trains in bf16 or "
                                        "fp16, not ") +
                                to_string(prec)))
        << testing::text(d);
  }
}

}  // namespace
}  // namespace parallax
