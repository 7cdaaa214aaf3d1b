// What the loaders refuse that they used to accept or crash on: sizes beyond any model or
// cluster, a plan file of another format, mistyped tables, a record's typos.
#include <gtest/gtest.h>

#include <string>

#include "core/json_io.h"
#include "core/measured_run.h"
#include "tests/test_support.h"

namespace parallax {
namespace {

using testing::mentions;

Json TinyModel() {
  return Json{{"name", "tiny"}, {"layers", 4},       {"hidden", 256}, {"heads", 8},
              {"kv_heads", 4},  {"ffn_hidden", 688}, {"vocab", 256}};
}

TEST(InputBounds, ModelSizesBeyondAnyModelAreRefusedWithTheField) {
  for (const auto& [field, value] : {std::pair<const char*, int64_t>{"layers", 2147483647},
                                     {"hidden", 1 << 30},
                                     {"vocab", 2147483647},
                                     {"heads", 100000}}) {
    Json j = TinyModel();
    j[field] = value;
    auto m = model_from_json(j, "m.json:");
    ASSERT_FALSE(m.ok()) << field;
    EXPECT_TRUE(mentions(m, std::string("m.json:/") + field)) << m.error_text();
    EXPECT_TRUE(mentions(m, "larger than any model")) << m.error_text();
  }
}

TEST(InputBounds, ModelNameWithControlCharactersIsRefused) {
  Json j = TinyModel();
  j["name"] = "evil\x1b[2J";
  auto m = model_from_json(j, "m.json:");
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(mentions(m, "m.json:/name")) << m.error_text();
}

TEST(InputBounds, ScenarioGpuCountMustBePositive) {
  for (int gpus : {0, -8}) {
    Json j = {{"cluster", {{"gpu", "h100-sxm-80gb"}, {"num_gpus", gpus}}}};
    auto s = scenario_from_json(j, "s.json:", ParallelPlan{});
    ASSERT_FALSE(s.ok()) << gpus;
    EXPECT_TRUE(mentions(s, "s.json:/cluster/num_gpus")) << s.error_text();
  }
}

TEST(InputBounds, PlanFileOfAnotherFormatIsRefused) {
  auto s = scenario_from_json(Json{{"format", "parallax-plan/99"}}, "p.json:", ParallelPlan{});
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(mentions(s, "p.json:/format")) << s.error_text();
  EXPECT_TRUE(mentions(s, "unknown format 'parallax-plan/99'")) << s.error_text();
  auto ok = scenario_from_json(Json{{"format", kPlanFileFormat}}, "p.json:", ParallelPlan{});
  EXPECT_TRUE(ok.ok()) << ok.error_text();
  auto typed = scenario_from_json(Json{{"format", 1}}, "p.json:", ParallelPlan{});
  EXPECT_TRUE(mentions(typed, "p.json:/format")) << typed.error_text();
}

TEST(InputBounds, PlanBoundsStopAbsurdBatchesBeforeTheScheduleIsBuilt) {
  ModelSpec m = model_from_json(TinyModel(), "m:").value();
  Cluster c;
  c.num_gpus = 1;
  ParallelPlan p;
  p.tp = p.pp = p.dp = p.cp = 1;
  p.micro_batch = 1;
  p.seq_len = 256;
  p.global_batch = 2147483647;
  EXPECT_TRUE(mentions(validate_plan(m, c, p), "beyond any training run"));
  p.global_batch = kMaxGlobalBatch;  // within the batch bound, but 16M micro-batches
  EXPECT_TRUE(mentions(validate_plan(m, c, p), "micro-batches per pipeline step"));
  p.global_batch = 8;
  p.dp = 1 << 20;
  p.tp = 1 << 20;  // each degree in bounds; their product 2^40 is not, and must not wrap
  EXPECT_TRUE(mentions(validate_plan(m, c, p), "beyond the largest cluster modelled"));
}

TEST(InputBounds, ProfileTableOfTheWrongTypeIsReportedNotThrown) {
  Json j = Json::parse(R"({"name": "x", "measured_tables": {"gemm": "fast",
                           "collectives": {"op": "all_reduce"}}})");
  auto p = profile_from_json(j, "p.json:");
  ASSERT_FALSE(p.ok());
  EXPECT_TRUE(mentions(p, "p.json:/measured_tables/gemm")) << p.error_text();
  EXPECT_TRUE(mentions(p, "p.json:/measured_tables/collectives")) << p.error_text();
}

TEST(InputBounds, ProfileTableRowWithAnUnknownPrecisionOrLinkIsRefused) {
  Json j = Json::parse(R"({"name": "x", "measured_tables": {
      "gemm": [{"m": 8, "n": 8, "k": 8, "precision": "int4", "tflops": 1}],
      "collectives": [{"op": "all_reduce", "link": "ib", "group_size": 8, "bytes": 1,
                       "busbw_gbps": 1}]}})");
  auto p = profile_from_json(j, "p.json:");
  ASSERT_FALSE(p.ok());
  EXPECT_TRUE(mentions(p, "p.json:/measured_tables/gemm/0/precision")) << p.error_text();
  EXPECT_TRUE(mentions(p, "p.json:/measured_tables/collectives/0/link")) << p.error_text();
}

Json Record() {
  return Json::parse(R"({"id": "r1", "model": {"name": "m", "layers": 4, "hidden": 256,
      "heads": 8, "ffn_hidden": 688, "vocab": 256}, "seq_len": 256,
      "cluster": {"gpu": "h100-sxm-80gb", "num_gpus": 8}, "batch": {"global_batch": 8},
      "measured": {"step_time_s": 1.0}})");
}

TEST(InputBounds, RecordWithAnUnknownKeyIsRefused) {
  Json j = Record();
  j["measurd"] = Json::object();
  auto r = measured_run_from_json(j, "v.jsonl:3:");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(mentions(r, "v.jsonl:3:/measurd")) << r.error_text();
  EXPECT_TRUE(mentions(r, "measured")) << "the hint names the nearest key: " << r.error_text();
}

TEST(InputBounds, RecordMfuAboveOneIsRefused) {
  Json j = Record();
  j["measured"] = {{"mfu", 3.5}};
  auto r = measured_run_from_json(j, "v.jsonl:1:");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(mentions(r, "v.jsonl:1:/measured/mfu")) << r.error_text();
  EXPECT_TRUE(mentions(r, "above 1")) << r.error_text();
  j["measured"] = {{"mfu", 0.45}};
  EXPECT_TRUE(measured_run_from_json(j, "v.jsonl:1:").ok());
}

TEST(InputBounds, RecordStackAndSweepAreReadAndTheStackChoosesTheKernels) {
  Json j = Record();
  j["stack"] = {{"framework", "torchtitan"}, {"version", "v0.2.2"}, {"kernels", nullptr}};
  j["sweep"] = "tt-8b";
  j["source_locator"] = "Table 3, row 2";
  j["pipeline_split"] = {{"first_stage_layers", 3}, {"embedding_as_layer", true}};
  auto r = measured_run_from_json(j, "v.jsonl:1:");
  ASSERT_TRUE(r.ok()) << r.error_text();
  EXPECT_EQ(r->stack.framework, "torchtitan");
  EXPECT_EQ(r->sweep, "tt-8b");
  ASSERT_TRUE(r->pipeline_split.has_value());
  EXPECT_EQ(r->pipeline_split->first_stage_layers, 3);
  // Not sharded with FSDP, but the stack says TorchTitan: PyTorch's kernels, no dropout.
  EXPECT_EQ(record_stack(r.value()).framework, "torchtitan");
  EXPECT_EQ(to_plan(r.value()).attention, AttentionImpl::kFlash2);
  EXPECT_EQ(to_model(r.value()).dropout, 0.0);
  // Megatron-LM with FSDP sharding still runs Megatron's kernels.
  j["stack"] = {{"framework", "megatron-lm"}};
  j["parallel"] = {{"fsdp", true}};
  auto m = measured_run_from_json(j, "v.jsonl:1:");
  ASSERT_TRUE(m.ok()) << m.error_text();
  EXPECT_EQ(record_stack(m.value()).framework, "megatron-lm");
  EXPECT_EQ(to_plan(m.value()).attention, AttentionImpl::kFlash);
  EXPECT_EQ(to_model(m.value()).dropout, 0.1);
  // Frameworks beyond Megatron and PyTorch's own: their own kernels, not the sharding's guess.
  j["stack"] = {{"framework", "maxtext"}};
  auto x = measured_run_from_json(j, "v.jsonl:1:");
  ASSERT_TRUE(x.ok()) << x.error_text();
  EXPECT_EQ(to_plan(x.value()).attention, AttentionImpl::kFlash);
  EXPECT_FALSE(to_plan(x.value()).eager);
  EXPECT_FALSE(to_plan(x.value()).pp_scatter_gather);
  EXPECT_EQ(to_model(x.value()).dropout, 0.0);
  // What the record says of its kernels overrides the framework's defaults.
  j["stack"] = {{"framework", "torchtitan"}, {"attention", "unfused"}, {"compiled", true}};
  auto k = measured_run_from_json(j, "v.jsonl:1:");
  ASSERT_TRUE(k.ok()) << k.error_text();
  EXPECT_EQ(to_plan(k.value()).attention, AttentionImpl::kUnfused);
  EXPECT_FALSE(to_plan(k.value()).eager);
  j["stack"] = {{"framework", "other"}, {"attention", "flash1"}};
  auto f1 = measured_run_from_json(j, "v.jsonl:1:");
  ASSERT_TRUE(f1.ok()) << f1.error_text();
  EXPECT_EQ(to_plan(f1.value()).attention, AttentionImpl::kFlash1);
  j["stack"] = {{"framework", "other"}, {"attention", "flash7"}};
  EXPECT_TRUE(mentions(measured_run_from_json(j, "v.jsonl:1:"), "v.jsonl:1:/stack/attention"));
  j["stack"] = {{"framework", "jax"}};
  auto bad = measured_run_from_json(j, "v.jsonl:1:");
  EXPECT_TRUE(mentions(bad, "v.jsonl:1:/stack/framework")) << bad.error_text();
}

}  // namespace
}  // namespace parallax
