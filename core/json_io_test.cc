#include "core/json_io.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "tests/test_support.h"

namespace parallax {
namespace {

using testing::mentions;
using testing::text;

// A complete, valid model in our format (Llama-3.1 8B).
Json LlamaModel() {
  return Json::parse(R"({"name": "llama-test", "layers": 32, "hidden": 4096, "heads": 32,
                         "kv_heads": 8, "head_dim": 128, "ffn_hidden": 14336,
                         "ffn_act": "swiglu", "vocab": 128256, "tied_embeddings": false,
                         "moe": null, "mla": null})");
}

// ---- parse_json -------------------------------------------------------------------------------

TEST(JsonIoParse, AcceptsValidText) {
  auto j = parse_json(R"({"a": [1, 2, 3]})", "ok.json");
  ASSERT_TRUE(j.ok()) << j.error_text();
  EXPECT_EQ(j->at("a").size(), 3u);
}

TEST(JsonIoParse, SyntaxErrorNamesFileLineAndColumn) {
  // Line 3 is `  "b": ]`: the stray ']' is its 8th character.
  auto j = parse_json("{\n  \"a\": 1,\n  \"b\": ]\n}\n", "f.json");
  ASSERT_FALSE(j.ok());
  ASSERT_EQ(j.errors().size(), 1u);
  EXPECT_EQ(j.errors()[0].where, "f.json:3:8") << j.error_text();
  EXPECT_NE(j.error_text().find("malformed JSON"), std::string::npos) << j.error_text();
  EXPECT_NE(j.error_text().find("syntax error"), std::string::npos) << j.error_text();
}

TEST(JsonIoParse, ErrorAtTheStartOfALineIsColumnOne) {
  // A trailing comma: the error is the ']' that opens line 2.
  auto j = parse_json("[1,\n]", "f.json");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.errors()[0].where, "f.json:2:1") << j.error_text();
}

TEST(JsonIoParse, TruncatedTextIsReportedNotThrown) {
  auto j = parse_json("[1, 2", "t.json");
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.error_text().find("t.json:1:"), std::string::npos) << j.error_text();
  auto empty = parse_json("", "e.json");
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.error_text().find("e.json:1:"), std::string::npos) << empty.error_text();
}

// ---- model_from_json --------------------------------------------------------------------------

TEST(JsonIoModel, ReadsEveryField) {
  auto m = model_from_json(LlamaModel(), "m.json:/model");
  ASSERT_TRUE(m.ok()) << m.error_text();
  EXPECT_EQ(m->name, "llama-test");
  EXPECT_EQ(m->layers, 32);
  EXPECT_EQ(m->hidden, 4096);
  EXPECT_EQ(m->heads, 32);
  EXPECT_EQ(m->kv_heads, 8);
  EXPECT_EQ(m->head_dim, 128);
  EXPECT_EQ(m->ffn_hidden, 14336);
  EXPECT_EQ(m->ffn_act, FfnAct::kSwiglu);
  EXPECT_EQ(m->vocab, 128256);
  EXPECT_FALSE(m->tied_embeddings);
  EXPECT_FALSE(m->moe.has_value());
  EXPECT_FALSE(m->mla.has_value());
}

TEST(JsonIoModel, DefaultsKvHeadsAndHeadDimFromHeads) {
  Json j = LlamaModel();
  j.erase("kv_heads");
  j.erase("head_dim");
  auto m = model_from_json(j, "m.json:/model");
  ASSERT_TRUE(m.ok()) << m.error_text();
  EXPECT_EQ(m->kv_heads, 32);         // MHA when kv_heads is left out
  EXPECT_EQ(m->head_dim, 4096 / 32);  // hidden / heads
}

TEST(JsonIoModel, ReportsEveryMissingFieldAtOnceWithItsPath) {
  auto m = model_from_json(Json::object(), "m.json:/model");
  ASSERT_FALSE(m.ok());
  const std::string text = m.error_text();
  for (const char* field : {"layers", "hidden", "heads", "vocab", "ffn_hidden"}) {
    EXPECT_TRUE(mentions(m.errors(), std::string("m.json:/model/") + field + ": missing"))
        << field << " not reported in:\n"
        << text;
  }
  EXPECT_GE(m.errors().size(), 5u) << text;
}

TEST(JsonIoModel, MissingMoeFieldsCarryTheNestedPath) {
  Json j = LlamaModel();
  j["moe"] = {{"experts", 8}};
  auto m = model_from_json(j, "m.json:/model");
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(mentions(m.errors(), "m.json:/model/moe/top_k: missing")) << m.error_text();
  EXPECT_TRUE(mentions(m.errors(), "m.json:/model/moe/expert_ffn_hidden: missing"))
      << m.error_text();
}

TEST(JsonIoModel, WrongTypesSayWhatWasExpected) {
  Json j = LlamaModel();
  j["layers"] = "32";
  j["hidden"] = 4096.5;
  j["tied_embeddings"] = "no";
  j["name"] = 7;
  auto m = model_from_json(j, "m.json:/model");
  ASSERT_FALSE(m.ok());
  const std::string text = m.error_text();
  EXPECT_TRUE(mentions(m.errors(), "m.json:/model/layers: expected an integer, got \"32\""))
      << text;
  EXPECT_TRUE(mentions(m.errors(), "m.json:/model/hidden: expected an integer")) << text;
  EXPECT_TRUE(mentions(m.errors(), "m.json:/model/tied_embeddings: expected true or false"))
      << text;
  EXPECT_TRUE(mentions(m.errors(), "m.json:/model/name: expected a string")) << text;
}

TEST(JsonIoModel, IntegralFloatIsAcceptedAsInteger) {
  Json j = LlamaModel();
  j["layers"] = 32.0;
  auto m = model_from_json(j, "m.json:/model");
  ASSERT_TRUE(m.ok()) << m.error_text();
  EXPECT_EQ(m->layers, 32);
}

TEST(JsonIoModel, IntegerTooLargeForTheFieldIsAnError) {
  // 2^32 + 32 heads must not silently wrap to 32 heads when narrowed to an int.
  Json j = LlamaModel();
  j["heads"] = 4294967328LL;
  auto m = model_from_json(j, "m.json:/model");
  if (m.ok()) FAIL() << "heads=2^32+32 was accepted as heads=" << m->heads;
  EXPECT_TRUE(mentions(m.errors(), "m.json:/model/heads")) << m.error_text();
}

TEST(JsonIoModel, UnknownActivationListsTheValidOnes) {
  Json j = LlamaModel();
  j["ffn_act"] = "relu";
  auto m = model_from_json(j, "m.json:/model");
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(mentions(m.errors(), "m.json:/model/ffn_act: unknown activation 'relu'"))
      << m.error_text();
  EXPECT_TRUE(mentions(m.errors(), "gelu, swiglu")) << m.error_text();
}

TEST(JsonIoModel, NotAnObject) {
  auto m = model_from_json(Json::array(), "m.json:/model");
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(mentions(m.errors(), "m.json:/model: expected an object, got array"))
      << m.error_text();
}

TEST(JsonIoModel, RoundTripsThroughToJson) {
  auto m = model_from_json(LlamaModel(), "m.json:/model");
  ASSERT_TRUE(m.ok()) << m.error_text();
  auto again = model_from_json(to_json(m.value()), "again");
  ASSERT_TRUE(again.ok()) << again.error_text();
  EXPECT_EQ(to_json(again.value()), to_json(m.value()));
}

// ---- profile_from_json ------------------------------------------------------------------------

// A minimal valid profile: plain numbers, with two given as {"value", "source"}.
Json MinimalProfile() {
  return Json::parse(R"({
    "name": "test-gpu", "description": "a test part",
    "bf16_tflops": {"value": 1000, "source": "datasheet p. 3"},
    "sm_count": 100,
    "gemm_efficiency": {"value": 0.8, "source": "gemm sweep"},
    "attention_fwd_efficiency": 0.6, "attention_bwd_efficiency": 0.5,
    "hbm_gib": 80, "hbm_bw_gbps": 3000, "hbm_efficiency": 0.9,
    "gpus_per_node": 8, "scale_up_domain": 8,
    "scale_up_bw_gbps": 450, "scale_up_efficiency": 0.8,
    "scale_out_bw_gbps": 50, "scale_out_efficiency": 0.8})");
}

TEST(JsonIoProfile, AcceptsValueSourceObjectsAndKeepsTheSources) {
  auto p = profile_from_json(MinimalProfile(), "p.json:");
  ASSERT_TRUE(p.ok()) << p.error_text();
  EXPECT_EQ(p->name, "test-gpu");
  EXPECT_DOUBLE_EQ(p->bf16_tflops, 1000);
  EXPECT_DOUBLE_EQ(p->gemm_efficiency, 0.8);
  EXPECT_EQ(p->sm_count, 100);
  EXPECT_DOUBLE_EQ(p->hbm_gib, 80);
  ASSERT_EQ(p->sources.size(), 2u);
  EXPECT_EQ(p->sources.at("bf16_tflops"), "datasheet p. 3");
  EXPECT_EQ(p->sources.at("gemm_efficiency"), "gemm sweep");
  EXPECT_DOUBLE_EQ(p->fp8_tflops, 0);  // optional, left out: no fp8
}

TEST(JsonIoProfile, RejectsEfficiencyAboveOne) {
  Json j = MinimalProfile();
  j["gemm_efficiency"] = {{"value", 1.2}, {"source", "typo"}};
  j["hbm_efficiency"] = 1.5;
  auto p = profile_from_json(j, "p.json:");
  ASSERT_FALSE(p.ok());
  EXPECT_TRUE(mentions(p.errors(), "p.json:/gemm_efficiency: gemm_efficiency must be in (0, 1]"))
      << p.error_text();
  EXPECT_TRUE(mentions(p.errors(), "p.json:/hbm_efficiency")) << p.error_text();
}

TEST(JsonIoProfile, ReportsEveryMissingRequiredNumber) {
  Json j = MinimalProfile();
  j.erase("bf16_tflops");
  j.erase("hbm_gib");
  j.erase("scale_up_domain");
  auto p = profile_from_json(j, "p.json:");
  ASSERT_FALSE(p.ok());
  for (const char* f : {"bf16_tflops", "hbm_gib", "scale_up_domain"})
    EXPECT_TRUE(mentions(p.errors(), std::string("p.json:/") + f + ": missing")) << f << "\n"
                                                                                 << p.error_text();
}

TEST(JsonIoProfile, WrongTypeInsideValueObject) {
  Json j = MinimalProfile();
  j["bf16_tflops"] = {{"value", "lots"}, {"source", "x"}};
  auto p = profile_from_json(j, "p.json:");
  ASSERT_FALSE(p.ok());
  EXPECT_TRUE(mentions(p.errors(), "p.json:/bf16_tflops: expected a number")) << p.error_text();
}

TEST(JsonIoProfile, EveryBuiltinProfileLoads) {
  auto profiles = builtin_profiles();
  ASSERT_TRUE(profiles.ok()) << profiles.error_text();
  // One profile per hw_profiles/*.json, named after its file.
  std::set<std::string> stems;
  for (const auto& e : std::filesystem::directory_iterator(PARALLAX_SOURCE_DIR "/hw_profiles"))
    if (e.path().extension() == ".json") stems.insert(e.path().stem().string());
  std::set<std::string> names;
  for (const auto& p : profiles.value()) names.insert(p.name);
  EXPECT_EQ(names, stems);
  for (const auto& p : profiles.value()) {
    EXPECT_TRUE(validate_profile(p, p.name).empty()) << p.name;
    EXPECT_FALSE(p.sources.empty()) << p.name << " has no sources";
  }
}

// Training holds a part at its power cap: every compute efficiency says whether it is the rate
// sustained there (a power-capped measurement, or a burst one scaled by a clock or sustained-
// over-burst ratio measured under load) or a burst figure kept for want of one
// (hw_profiles/README.md).
TEST(JsonIoProfile, EveryComputeEfficiencySaysSustainedOrBurst) {
  auto profiles = builtin_profiles();
  ASSERT_TRUE(profiles.ok()) << profiles.error_text();
  for (const auto& p : profiles.value()) {
    for (const auto& [field, v] :
         {std::pair{"gemm_efficiency", p.gemm_efficiency},
          {"fp8_gemm_efficiency", p.fp8_gemm_efficiency},
          {"mxfp8_gemm_efficiency", p.mxfp8_gemm_efficiency},
          {"nvfp4_gemm_efficiency", p.nvfp4_gemm_efficiency},
          {"attention_fwd_efficiency", p.attention_fwd_efficiency},
          {"attention_bwd_efficiency", p.attention_bwd_efficiency},
          {"fa2_attention_fwd_efficiency", p.fa2_attention_fwd_efficiency},
          {"fa2_attention_bwd_efficiency", p.fa2_attention_bwd_efficiency}}) {
      if (v <= 0) continue;
      const auto it = p.sources.find(field);
      ASSERT_NE(it, p.sources.end()) << p.name << "/" << field;
      const bool labelled = it->second.find("sustained") != std::string::npos ||
                            it->second.find("burst") != std::string::npos;
      EXPECT_TRUE(labelled) << p.name << "/" << field << ": " << it->second;
    }
  }
}

TEST(JsonIoProfile, EveryBuiltinProfileRoundTripsUnchanged) {
  auto profiles = builtin_profiles();
  ASSERT_TRUE(profiles.ok()) << profiles.error_text();
  for (const auto& p : profiles.value()) {
    const Json j = to_json(p);
    auto q = profile_from_json(j, p.name + ":");
    ASSERT_TRUE(q.ok()) << p.name << ": " << q.error_text();
    EXPECT_EQ(q->name, p.name);
    EXPECT_EQ(q->description, p.description);
    EXPECT_EQ(q->measured, p.measured);
    EXPECT_EQ(q->sources, p.sources) << p.name;
    EXPECT_EQ(q->bf16_tflops, p.bf16_tflops) << p.name;
    EXPECT_EQ(q->fp8_tflops, p.fp8_tflops) << p.name;
    EXPECT_EQ(q->sm_count, p.sm_count) << p.name;
    EXPECT_EQ(q->scale_up_domain, p.scale_up_domain) << p.name;
    EXPECT_EQ(q->gemm_samples.size(), p.gemm_samples.size()) << p.name;
    EXPECT_EQ(q->collective_samples.size(), p.collective_samples.size()) << p.name;
    // Every number and source written by to_json comes back identical.
    EXPECT_EQ(to_json(q.value()), j) << p.name;
  }
}

TEST(JsonIoProfile, FindProfileSuggestsTheNearestName) {
  auto profiles = builtin_profiles();
  ASSERT_TRUE(profiles.ok()) << profiles.error_text();
  auto p = find_profile(profiles.value(), "h100-sxm-80g", "--cluster");
  ASSERT_FALSE(p.ok());
  EXPECT_TRUE(mentions(p.errors(), "--cluster: unknown hardware profile 'h100-sxm-80g'"))
      << p.error_text();
  EXPECT_TRUE(mentions(p.errors(), "did you mean 'h100-sxm-80gb'")) << p.error_text();
  EXPECT_TRUE(mentions(p.errors(), "a100-sxm-40gb")) << "valid names not listed";
}

// ---- scenario_from_json -----------------------------------------------------------------------

TEST(JsonIoScenario, MapsEveryField) {
  const Json j = Json::parse(R"({
    "model": "llama3.1-70b",
    "cluster": {"gpu": "h200-sxm-141gb", "num_gpus": 512},
    "parallel": {"tp": 4, "pp": 8, "dp": 4, "cp": 4, "ep": 1, "etp": 1, "vpp": 3,
                 "sequence_parallel": true, "fsdp": true, "zero": 2,
                 "schedule": "interleaved", "cp_comm": "allgather", "pp_scatter_gather": true},
    "batch": {"micro_batch": 2, "global_batch": 256},
    "seq_len": 32768,
    "recompute": "selective",
    "precision": "fp8",
    "attention": "unfused",
    "eager": true,
    "moe_imbalance": 1.25,
    "overlap": {"grad_reduce": false, "param_gather": false, "tp_comm": true}})");
  auto s = scenario_from_json(j, "s.json:", ParallelPlan{});
  ASSERT_TRUE(s.ok()) << s.error_text();
  EXPECT_EQ(s->model_name.value_or(""), "llama3.1-70b");
  EXPECT_FALSE(s->model.has_value());
  EXPECT_EQ(s->gpu.value_or(""), "h200-sxm-141gb");
  EXPECT_EQ(s->num_gpus.value_or(0), 512);
  EXPECT_TRUE(s->dp_given);
  const ParallelPlan& p = s->plan;
  EXPECT_EQ(p.tp, 4);
  EXPECT_EQ(p.pp, 8);
  EXPECT_EQ(p.dp, 4);
  EXPECT_EQ(p.cp, 4);
  EXPECT_EQ(p.vpp, 3);
  EXPECT_TRUE(p.sequence_parallel);
  EXPECT_TRUE(p.fsdp);
  EXPECT_EQ(p.zero_stage, 2);
  EXPECT_EQ(p.schedule, ScheduleKind::kInterleaved1F1B);
  EXPECT_EQ(p.micro_batch, 2);
  EXPECT_EQ(p.global_batch, 256);
  EXPECT_EQ(p.seq_len, 32768);
  EXPECT_EQ(p.recompute, Recompute::kSelective);
  EXPECT_EQ(p.precision, Precision::kFp8);
  EXPECT_FALSE(p.overlap_grad_reduce);
  EXPECT_FALSE(p.overlap_param_gather);
  EXPECT_TRUE(p.overlap_tp_comm);
  EXPECT_EQ(p.cp_comm, CpComm::kAllGather);
  EXPECT_TRUE(p.pp_scatter_gather);
  EXPECT_EQ(p.attention, AttentionImpl::kUnfused);
  EXPECT_TRUE(p.eager);
  EXPECT_DOUBLE_EQ(p.moe_imbalance, 1.25);
  // plan_to_json writes back what was read.
  const Json back = plan_to_json(p);
  EXPECT_EQ(back["parallel"]["schedule"], "interleaved");
  EXPECT_EQ(back["batch"]["global_batch"], 256);
  EXPECT_EQ(back["recompute"], "selective");
  EXPECT_EQ(back["precision"], "fp8");
  EXPECT_EQ(back["eager"], true);
  EXPECT_EQ(back["parallel"]["pp_scatter_gather"], true);
  EXPECT_DOUBLE_EQ(back["moe_imbalance"].get<double>(), 1.25);
}

// The MoE settings and DualPipe read and written back; a dense plan's file carries none of them.
TEST(JsonIoScenario, MoeSettingsRoundTrip) {
  const Json j = Json::parse(R"({
    "parallel": {"pp": 4, "ep": 8, "schedule": "dualpipe"},
    "moe": {"dispatcher": "flex", "max_nodes": 4, "capacity_factor": 1.5},
    "overlap": {"moe_comm": true}})");
  auto s = scenario_from_json(j, "s.json:", ParallelPlan{});
  ASSERT_TRUE(s.ok()) << s.error_text();
  const ParallelPlan& p = s->plan;
  EXPECT_EQ(p.schedule, ScheduleKind::kDualPipe);
  EXPECT_EQ(p.moe_dispatcher, MoeDispatcher::kFlex);
  EXPECT_EQ(p.moe_max_nodes, 4);
  EXPECT_DOUBLE_EQ(p.moe_capacity_factor, 1.5);
  EXPECT_TRUE(p.overlap_moe_comm);
  auto back = scenario_from_json(plan_to_json(p), "back:", ParallelPlan{});
  ASSERT_TRUE(back.ok()) << back.error_text();
  EXPECT_EQ(back->plan, p);
  const Json dense = plan_to_json(ParallelPlan{});
  EXPECT_FALSE(dense.contains("moe"));
  EXPECT_FALSE(dense["overlap"].contains("moe_comm"));
  auto bad = scenario_from_json(Json::parse(R"({"moe": {"dispatcher": "nccl"}})"),
                                "s.json:", ParallelPlan{});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error_text().find("s.json:/moe/dispatcher: unknown dispatcher 'nccl'"),
            std::string::npos)
      << bad.error_text();
}

TEST(JsonIoScenario, FieldsLeftOutKeepTheDefaults) {
  ParallelPlan defaults;
  defaults.tp = 8;
  defaults.global_batch = 128;
  defaults.seq_len = 8192;
  defaults.recompute = Recompute::kFull;
  defaults.zero_stage = 1;
  auto s = scenario_from_json(Json::parse(R"({"parallel": {"pp": 2}})"), "s.json:", defaults);
  ASSERT_TRUE(s.ok()) << s.error_text();
  EXPECT_EQ(s->plan.tp, 8);
  EXPECT_EQ(s->plan.pp, 2);
  EXPECT_EQ(s->plan.global_batch, 128);
  EXPECT_EQ(s->plan.seq_len, 8192);
  EXPECT_EQ(s->plan.recompute, Recompute::kFull);
  EXPECT_EQ(s->plan.zero_stage, 1);
  EXPECT_FALSE(s->dp_given);
  EXPECT_FALSE(s->model_name.has_value());
  EXPECT_FALSE(s->gpu.has_value());
}

TEST(JsonIoScenario, DistributedOptimizerMeansAtLeastZeroOne) {
  auto s = scenario_from_json(Json::parse(R"({"parallel": {"distributed_optimizer": true}})"),
                              "s.json:", ParallelPlan{});
  ASSERT_TRUE(s.ok()) << s.error_text();
  EXPECT_EQ(s->plan.zero_stage, 1);
}

TEST(JsonIoScenario, InlineModelObject) {
  Json j = {{"model", LlamaModel()}};
  auto s = scenario_from_json(j, "s.json:", ParallelPlan{});
  ASSERT_TRUE(s.ok()) << s.error_text();
  ASSERT_TRUE(s->model.has_value());
  EXPECT_EQ(s->model->name, "llama-test");
  EXPECT_FALSE(s->model_name.has_value());

  j["model"].erase("layers");
  auto bad = scenario_from_json(j, "s.json:", ParallelPlan{});
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(mentions(bad.errors(), "s.json:/model/layers: missing")) << bad.error_text();
}

TEST(JsonIoScenario, UnknownNamesAreAllReportedWithTheValidList) {
  const Json j = Json::parse(R"({"parallel": {"schedule": "gpipe"}, "recompute": "partial",
                                 "precision": "fp4"})");
  auto s = scenario_from_json(j, "s.json:", ParallelPlan{});
  ASSERT_FALSE(s.ok());
  const Diagnostics& d = s.errors();
  EXPECT_EQ(d.size(), 3u) << text(d);
  EXPECT_TRUE(mentions(d, "s.json:/parallel/schedule: unknown schedule 'gpipe'")) << text(d);
  EXPECT_TRUE(mentions(d, "1f1b, interleaved, zb-h1")) << text(d);
  EXPECT_TRUE(mentions(d, "s.json:/recompute: unknown recompute")) << text(d);
  EXPECT_TRUE(mentions(d, "'partial'")) << text(d);
  EXPECT_TRUE(mentions(d, "none, selective, selective-op, full")) << text(d);
  EXPECT_TRUE(mentions(d, "s.json:/precision: unknown precision 'fp4'")) << text(d);
  EXPECT_TRUE(mentions(d, "bf16, fp16, fp8, mxfp8, nvfp4")) << text(d);
}

TEST(JsonIoScenario, BlockScaledPrecisionsParseAndPrint) {
  for (const char* name : {"mxfp8", "nvfp4"}) {
    auto s = scenario_from_json(Json{{"precision", name}}, "s.json:", ParallelPlan{});
    ASSERT_TRUE(s.ok()) << name << ": " << s.error_text();
    EXPECT_STREQ(to_string(s->plan.precision), name);
    EXPECT_TRUE(is_block_scaled(s->plan.precision)) << name;
  }
}

TEST(JsonIoScenario, WrongTypesCarryTheirPath) {
  const Json j = Json::parse(R"({"cluster": {"num_gpus": "64"}, "parallel": {"tp": 8.5},
                                 "batch": {"global_batch": [1]}, "seq_len": "8k"})");
  auto s = scenario_from_json(j, "s.json:", ParallelPlan{});
  ASSERT_FALSE(s.ok());
  const Diagnostics& d = s.errors();
  EXPECT_TRUE(mentions(d, "s.json:/cluster/num_gpus: expected an integer")) << text(d);
  EXPECT_TRUE(mentions(d, "s.json:/parallel/tp: expected an integer, got 8.5")) << text(d);
  EXPECT_TRUE(mentions(d, "s.json:/batch/global_batch: expected an integer")) << text(d);
  EXPECT_TRUE(mentions(d, "s.json:/seq_len: expected an integer")) << text(d);
}

TEST(JsonIoScenario, UnknownKeysAreReportedWithTheNearestName) {
  // A misspelt key must not silently fall back to the defaults.
  const Json j = Json::parse(R"({"paralel": {"tp": 8}, "parallel": {"tpp": 4}})");
  auto s = scenario_from_json(j, "s.json:", ParallelPlan{});
  ASSERT_FALSE(s.ok()) << "'paralel' and 'parallel/tpp' were silently ignored";
  const Diagnostics& d = s.errors();
  EXPECT_TRUE(mentions(d, "s.json:/paralel")) << text(d);
  EXPECT_TRUE(mentions(d, "'parallel'")) << text(d);
  EXPECT_TRUE(mentions(d, "s.json:/parallel/tpp")) << text(d);
}

TEST(JsonIoEnums, ParseAcceptedNamesAndRejectOthers) {
  EXPECT_EQ(parse_schedule("1f1b"), ScheduleKind::k1F1B);
  EXPECT_EQ(parse_schedule("interleaved"), ScheduleKind::kInterleaved1F1B);
  EXPECT_EQ(parse_schedule("zb-h1"), ScheduleKind::kZeroBubbleH1);
  EXPECT_FALSE(parse_schedule("gpipe").has_value());
  EXPECT_EQ(parse_recompute("full"), Recompute::kFull);
  EXPECT_FALSE(parse_recompute("FULL").has_value());
  EXPECT_EQ(parse_precision("fp16"), Precision::kBf16);  // same tensor-core rate
  EXPECT_EQ(parse_precision("fp8"), Precision::kFp8);
  EXPECT_EQ(parse_precision("fp32"), Precision::kFp32);  // measured tables of CPU parts
  EXPECT_FALSE(parse_precision("fp4").has_value());
  // Names written by to_string read back.
  for (auto k : {ScheduleKind::k1F1B, ScheduleKind::kInterleaved1F1B, ScheduleKind::kZeroBubbleH1})
    EXPECT_EQ(parse_schedule(to_string(k)), k);
  for (auto r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull})
    EXPECT_EQ(parse_recompute(to_string(r)), r);
}

}  // namespace
}  // namespace parallax
