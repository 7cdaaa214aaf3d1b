#include "core/measured_run.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "tests/test_support.h"

namespace parallax {
namespace {

using testing::kPublicTrainingRuns;
using testing::mentions;
using testing::text;

// A record in the SCHEMA.md format with every unknown left null: Llama-3.1 8B, tp8 on 64 H100s.
Json Record() {
  return Json::parse(R"({
    "id": "test-llama8b-64", "source": "fixture",
    "model": {"name": "Llama 3.1 8B", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8,
              "head_dim": 128, "ffn_hidden": 14336, "ffn_act": "swiglu", "vocab": 128256,
              "tied_embeddings": false, "moe": null, "mla": null},
    "seq_len": 8192,
    "cluster": {"gpu": "h100-sxm-80gb", "num_gpus": 64, "gpus_per_node": 8},
    "parallel": {"tp": 8, "pp": 2, "dp": null, "cp": 1, "ep": 1, "etp": 1, "vpp": null,
                 "sequence_parallel": null, "fsdp": null, "distributed_optimizer": null},
    "batch": {"micro_batch": null, "global_batch": 64},
    "recompute": null,
    "precision": "bf16",
    "measured": {"tflops_per_gpu": null, "flops_basis": "model", "mfu": null,
                 "tokens_per_s_per_gpu": null, "step_time_s": 2.5, "attention_flops": null},
    "unknown": ["parallel.dp", "parallel.vpp", "batch.micro_batch", "recompute"]})");
}

MeasuredRun Parse(const Json& j) {
  auto r = measured_run_from_json(j, "runs.jsonl:1:");
  PX_CHECK(r.ok(), r.error_text());
  return r.value();
}

TEST(MeasuredRunPublic, EveryRecordParses) {
  std::ifstream in(kPublicTrainingRuns);
  ASSERT_TRUE(in) << "cannot open " << kPublicTrainingRuns;
  std::string line;
  std::set<std::string> ids;
  int records = 0;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = std::string("public-training.jsonl:") + std::to_string(n);
    auto j = parse_json(line, where);
    ASSERT_TRUE(j.ok()) << j.error_text();
    auto r = measured_run_from_json(j.value(), where + ":");
    ASSERT_TRUE(r.ok()) << r.error_text();
    EXPECT_TRUE(ids.insert(r->id).second) << "duplicate id " << r->id;
    EXPECT_GT(r->num_gpus, 0) << r->id;
    EXPECT_GT(r->seq_len, 0) << r->id;
    EXPECT_TRUE(r->step_time_s || r->tokens_per_s_per_gpu || r->tflops_per_gpu || r->mfu) << r->id;
    // The filled plan covers the record's GPUs.
    const ParallelPlan p = to_plan(r.value());
    EXPECT_EQ(p.gpus(), r->num_gpus) << r->id;
    ++records;
  }
  EXPECT_GE(records, 40);
}

TEST(MeasuredRunPublic, EveryFilledPlanIsValid) {
  auto profiles = builtin_profiles();
  ASSERT_TRUE(profiles.ok()) << profiles.error_text();
  std::ifstream in(kPublicTrainingRuns);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto j = parse_json(line, "line");
    ASSERT_TRUE(j.ok());
    auto r = measured_run_from_json(j.value(), "line:");
    ASSERT_TRUE(r.ok());
    auto hw = find_profile(profiles.value(), r->gpu, r->id);
    ASSERT_TRUE(hw.ok()) << hw.error_text();
    const Diagnostics d = validate_plan(r->model, Cluster{hw.value(), r->num_gpus}, to_plan(*r));
    EXPECT_TRUE(d.empty()) << r->id << ":\n" << text(d);
  }
}

TEST(MeasuredRun, ReadsTheRecordedFields) {
  const MeasuredRun r = Parse(Record());
  EXPECT_EQ(r.id, "test-llama8b-64");
  EXPECT_EQ(r.model.layers, 32);
  EXPECT_EQ(r.model.kv_heads, 8);
  EXPECT_EQ(r.seq_len, 8192);
  EXPECT_EQ(r.gpu, "h100-sxm-80gb");
  EXPECT_EQ(r.num_gpus, 64);
  EXPECT_EQ(r.tp, 8);
  EXPECT_EQ(r.pp, 2);
  EXPECT_FALSE(r.dp.has_value());  // null: derived by to_plan
  EXPECT_FALSE(r.vpp.has_value());
  EXPECT_FALSE(r.micro_batch.has_value());
  EXPECT_FALSE(r.sequence_parallel.has_value());
  EXPECT_FALSE(r.recompute.has_value());
  EXPECT_EQ(r.global_batch, 64);
  ASSERT_TRUE(r.step_time_s.has_value());
  EXPECT_DOUBLE_EQ(*r.step_time_s, 2.5);
  EXPECT_FALSE(r.tflops_per_gpu.has_value());
  EXPECT_EQ(r.flops_basis, FlopsBasis::kModel);
  EXPECT_FALSE(r.attention_flops.has_value());
}

TEST(MeasuredRun, ToPlanFillsUnknownsByTheDocumentedRule) {
  const ParallelPlan p = to_plan(Parse(Record()));
  // kFillRule: micro_batch=1; vpp=1 (1F1B); recompute=none; sequence_parallel=(tp>1);
  // distributed_optimizer=false; fsdp=false; grad-reduce and param-gather overlap on, TP off.
  EXPECT_EQ(p.micro_batch, 1);
  EXPECT_EQ(p.vpp, 1);
  EXPECT_EQ(p.schedule, ScheduleKind::k1F1B);
  EXPECT_EQ(p.recompute, Recompute::kNone);
  EXPECT_TRUE(p.sequence_parallel);  // tp=8 > 1
  EXPECT_EQ(p.zero_stage, 0);
  EXPECT_FALSE(p.fsdp);
  EXPECT_TRUE(p.overlap_grad_reduce);
  EXPECT_TRUE(p.overlap_param_gather);
  EXPECT_FALSE(p.overlap_tp_comm);
  // dp unknown: num_gpus / (tp * pp * cp) = 64 / 16.
  EXPECT_EQ(p.dp, 4);
  EXPECT_EQ(p.tp, 8);
  EXPECT_EQ(p.pp, 2);
  EXPECT_EQ(p.global_batch, 64);
  EXPECT_EQ(p.seq_len, 8192);
  EXPECT_EQ(p.precision, Precision::kBf16);

  Json j = Record();
  j["parallel"]["tp"] = 1;
  j["parallel"]["pp"] = 1;
  EXPECT_FALSE(to_plan(Parse(j)).sequence_parallel);  // tp=1: no SP
}

TEST(MeasuredRun, FillRuleTextNamesEveryDefault) {
  const std::string rule = kFillRule;
  for (const char* s : {"micro_batch=1", "vpp=1", "recompute=none", "sequence_parallel=(tp>1)",
                        "distributed_optimizer=false", "fsdp=false", "'full'"})
    EXPECT_NE(rule.find(s), std::string::npos) << s;
}

TEST(MeasuredRun, ToPlanKeepsWhatTheRecordSays) {
  Json j = Record();
  j["parallel"]["dp"] = 4;
  j["parallel"]["vpp"] = 4;
  j["parallel"]["sequence_parallel"] = false;
  j["parallel"]["fsdp"] = true;
  j["parallel"]["distributed_optimizer"] = true;
  j["batch"]["micro_batch"] = 2;
  j["recompute"] = "selective";
  j["precision"] = "fp8";
  const ParallelPlan p = to_plan(Parse(j));
  EXPECT_EQ(p.dp, 4);
  EXPECT_EQ(p.vpp, 4);
  EXPECT_EQ(p.schedule, ScheduleKind::kInterleaved1F1B);
  EXPECT_FALSE(p.sequence_parallel);
  EXPECT_TRUE(p.fsdp);
  EXPECT_EQ(p.zero_stage, 1);
  EXPECT_EQ(p.micro_batch, 2);
  EXPECT_EQ(p.recompute, Recompute::kSelectiveOp);  // FSDP: PyTorch's stack (fill rule)
  EXPECT_EQ(p.precision, Precision::kFp8);
}

// The software stack follows the record's sharding: Megatron's selective recompute and the best
// fused attention unless the run was sharded with PyTorch FSDP, whose stack (TorchTitan) runs
// SDPA, per-op selective checkpointing and one microbatch per pipeline stage by default.
TEST(MeasuredRun, FsdpRecordsRunPyTorchsStack) {
  Json j = Record();
  j["parallel"]["dp"] = 4;
  j["recompute"] = "selective";
  const ParallelPlan megatron = to_plan(Parse(j));
  EXPECT_EQ(megatron.recompute, Recompute::kSelective);
  EXPECT_EQ(megatron.attention, AttentionImpl::kFlash);
  EXPECT_EQ(megatron.micro_batch, 1);
  EXPECT_FALSE(megatron.eager);

  j["parallel"]["fsdp"] = true;
  const ParallelPlan torch = to_plan(Parse(j));
  EXPECT_EQ(torch.recompute, Recompute::kSelectiveOp);
  EXPECT_EQ(torch.attention, AttentionImpl::kFlash2);
  EXPECT_EQ(torch.micro_batch, 8);  // 64 sequences / dp 4 = 16 a pipeline, over pp=2 stages
  EXPECT_TRUE(torch.eager);         // TorchTitan leaves torch.compile off by default
  EXPECT_EQ(torch.cp_comm, CpComm::kAllGather);  // its default rotate method
  EXPECT_EQ(megatron.cp_comm, CpComm::kRing);
  EXPECT_TRUE(megatron.pp_scatter_gather);  // Megatron-LM's default; PyTorch sends whole tensors
  EXPECT_FALSE(torch.pp_scatter_gather);
  j["precision"] = "fp8";  // ... but Float8 training runs compiled
  EXPECT_FALSE(to_plan(Parse(j)).eager);
  j["precision"] = "bf16";

  j["batch"]["micro_batch"] = 2;  // a given micro batch is kept
  EXPECT_EQ(to_plan(Parse(j)).micro_batch, 2);
  j["batch"]["micro_batch"] = nullptr;
  j["batch"]["global_batch"] = 12;  // 3 a pipeline: no whole split over 2 stages
  EXPECT_EQ(to_plan(Parse(j)).micro_batch, 1);
  j["recompute"] = "full";
  EXPECT_EQ(to_plan(Parse(j)).recompute, Recompute::kFull);
}

// A record does not give dropout: Megatron's default of 0.1 on its stack, none on PyTorch's
// (FSDP) stack; a model that names its dropout keeps it.
TEST(MeasuredRun, DropoutIsTheStacksDefaultUnlessGiven) {
  Json j = Record();
  EXPECT_DOUBLE_EQ(to_model(Parse(j)).dropout, 0.1);
  j["parallel"]["fsdp"] = true;
  EXPECT_DOUBLE_EQ(to_model(Parse(j)).dropout, 0.0);
  j["model"]["dropout"] = 0.05;
  EXPECT_DOUBLE_EQ(to_model(Parse(j)).dropout, 0.05);
  j["parallel"]["fsdp"] = false;
  j["model"]["dropout"] = 0.0;
  EXPECT_DOUBLE_EQ(to_model(Parse(j)).dropout, 0.0);
}

// A run published before FlashAttention (arXiv 2205.14135) computed attention unfused; the
// publication is known by its arXiv identifier, which orders by submission month.
TEST(MeasuredRun, RunsPublishedBeforeFlashAttentionRanUnfusedAttention) {
  EXPECT_DOUBLE_EQ(arxiv_number("https://arxiv.org/abs/2104.04473").value(), 2104.04473);
  EXPECT_DOUBLE_EQ(arxiv_number("https://arxiv.org/pdf/2205.05198v2").value(), 2205.05198);
  EXPECT_DOUBLE_EQ(arxiv_number("arxiv.org/abs/1909.0805").value(), 1909.00805);
  for (const char* not_arxiv :
       {"", "https://github.com/NVIDIA/Megatron-LM", "https://arxiv.org/abs/hep-th/9901001",
        "https://arxiv.org/abs/2104", "https://arxiv.org/abs/2104.044731"})
    EXPECT_FALSE(arxiv_number(not_arxiv).has_value()) << not_arxiv;

  Json j = Record();
  j["source_url"] = "https://arxiv.org/abs/2104.04473";
  EXPECT_EQ(to_plan(Parse(j)).attention, AttentionImpl::kUnfused);
  j["source_url"] = "https://arxiv.org/abs/2205.05198";  // May 2022, before FlashAttention
  EXPECT_EQ(to_plan(Parse(j)).attention, AttentionImpl::kUnfused);
  j["source_url"] = "https://arxiv.org/abs/2205.14135";  // FlashAttention itself
  EXPECT_EQ(to_plan(Parse(j)).attention, AttentionImpl::kFlash);
  j["source_url"] = "https://arxiv.org/abs/2407.21783";
  EXPECT_EQ(to_plan(Parse(j)).attention, AttentionImpl::kFlash);
  j["source_url"] = "https://github.com/pytorch/torchtitan";
  EXPECT_EQ(to_plan(Parse(j)).attention, AttentionImpl::kFlash);
  j.erase("source_url");
  EXPECT_EQ(to_plan(Parse(j)).attention, AttentionImpl::kFlash);
}

TEST(MeasuredRun, FillRuleTextNamesTheSoftwareStack) {
  const std::string rule = kFillRule;
  for (const char* s :
       {"fsdp=true", "FlashAttention-2", "per-op selective", "(pp*vpp)", "before FlashAttention",
        "unfused", "core/software_stack.cc", "completed by the planner's search"})
    EXPECT_NE(rule.find(s), std::string::npos) << s;
}

TEST(MeasuredRun, ToPlanNeverReadsTheMeasurement) {
  const Json base = Record();
  const Json plan = plan_to_json(to_plan(Parse(base)));

  Json other_value = base;
  other_value["measured"]["step_time_s"] = 250.0;
  EXPECT_EQ(plan_to_json(to_plan(Parse(other_value))), plan);

  Json other_metric = base;
  other_metric["measured"] = {{"tflops_per_gpu", 400},
                              {"flops_basis", "hardware"},
                              {"attention_flops", "causal"},
                              {"mfu", 0.4}};
  EXPECT_EQ(plan_to_json(to_plan(Parse(other_metric))), plan);
}

TEST(MeasuredRun, MalformedRecordsGiveFieldPaths) {
  Json j = Record();
  j["model"].erase("heads");
  j["parallel"]["tp"] = "8";
  j["cluster"].erase("gpu");
  j["batch"].erase("global_batch");
  j["seq_len"] = -1.5;
  auto r = measured_run_from_json(j, "runs.jsonl:7:");
  ASSERT_FALSE(r.ok());
  const Diagnostics& d = r.errors();
  EXPECT_TRUE(mentions(d, "runs.jsonl:7:/model/heads: missing")) << text(d);
  EXPECT_TRUE(mentions(d, "runs.jsonl:7:/parallel/tp: expected an integer, got \"8\"")) << text(d);
  EXPECT_TRUE(mentions(d, "runs.jsonl:7:/cluster/gpu: missing")) << text(d);
  EXPECT_TRUE(mentions(d, "runs.jsonl:7:/batch/global_batch: missing")) << text(d);
  EXPECT_TRUE(mentions(d, "runs.jsonl:7:/seq_len: expected an integer")) << text(d);
}

TEST(MeasuredRun, MissingBlocksAreNamed) {
  Json j = Record();
  j.erase("model");
  j.erase("cluster");
  j.erase("measured");
  j.erase("id");
  auto r = measured_run_from_json(j, "runs.jsonl:2:");
  ASSERT_FALSE(r.ok());
  const Diagnostics& d = r.errors();
  EXPECT_TRUE(mentions(d, "runs.jsonl:2:/id: missing")) << text(d);
  EXPECT_TRUE(mentions(d, "runs.jsonl:2:/model: missing")) << text(d);
  EXPECT_TRUE(mentions(d, "runs.jsonl:2:/cluster: missing")) << text(d);
  EXPECT_TRUE(mentions(d, "runs.jsonl:2:/measured: missing")) << text(d);
}

TEST(MeasuredRun, MeasurementMustExistAndBePositive) {
  Json none = Record();
  none["measured"]["step_time_s"] = nullptr;
  auto r = measured_run_from_json(none, "runs.jsonl:3:");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(mentions(r.errors(), "runs.jsonl:3:/measured: no measurement")) << r.error_text();

  Json negative = Record();
  negative["measured"]["step_time_s"] = -2.0;
  auto n = measured_run_from_json(negative, "runs.jsonl:4:");
  ASSERT_FALSE(n.ok());
  EXPECT_TRUE(
      mentions(n.errors(), "runs.jsonl:4:/measured/step_time_s: step_time_s must be positive"))
      << n.error_text();
}

TEST(MeasuredRun, UnknownNamesListTheValidOnes) {
  Json j = Record();
  j["recompute"] = "partial";
  j["precision"] = "int8";
  auto r = measured_run_from_json(j, "runs.jsonl:5:");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(mentions(r.errors(), "runs.jsonl:5:/recompute: unknown recompute")) << r.error_text();
  EXPECT_TRUE(mentions(r.errors(), "'partial'")) << r.error_text();
  EXPECT_TRUE(mentions(r.errors(), "none, selective, selective-op, full")) << r.error_text();
  EXPECT_TRUE(mentions(r.errors(), "runs.jsonl:5:/precision: unknown precision 'int8'"))
      << r.error_text();
}

TEST(MeasuredRun, BlockScaledRecordsParseAndUnknownOnesListThem) {
  Json j = Record();
  j["precision"] = "nvfp4";
  EXPECT_EQ(Parse(j).precision, Precision::kNvfp4);
  j["precision"] = "mxfp8";
  EXPECT_EQ(Parse(j).precision, Precision::kMxfp8);
  j["precision"] = "mxfp4";
  auto r = measured_run_from_json(j, "runs.jsonl:7:");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(mentions(r.errors(), "runs.jsonl:7:/precision: unknown precision 'mxfp4'"))
      << r.error_text();
  EXPECT_TRUE(mentions(r.errors(), "valid: bf16, fp16, fp8, mxfp8, nvfp4")) << r.error_text();
}

TEST(MeasuredRun, UnknownFlopConventionsAreRejected) {
  // A misspelt basis must not silently compare hardware FLOP/s as model FLOP/s.
  Json j = Record();
  j["measured"]["flops_basis"] = "hw";
  j["measured"]["attention_flops"] = "half";
  auto r = measured_run_from_json(j, "runs.jsonl:6:");
  ASSERT_FALSE(r.ok()) << "flops_basis 'hw' and attention_flops 'half' were accepted";
  EXPECT_TRUE(mentions(r.errors(), "runs.jsonl:6:/measured/flops_basis")) << r.error_text();
  EXPECT_TRUE(mentions(r.errors(), "runs.jsonl:6:/measured/attention_flops")) << r.error_text();
}

}  // namespace
}  // namespace parallax
