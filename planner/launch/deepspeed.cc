// DeepSpeed: a config JSON for a plan, and the rules of plain DeepSpeed (ZeRO and its pipeline
// engine, without Megatron-DeepSpeed).
//
// Keys and checks are those of deepspeed/runtime/config.py and deepspeed/runtime/zero/config.py
// (deepspeedai/DeepSpeed, 2025): _batch_assertion() requires
//   train_batch_size == train_micro_batch_size_per_gpu * gradient_accumulation_steps * world,
// where world is the data-parallel size (all GPUs, or the pipeline grid's data-parallel size);
// the pipeline engine (deepspeed/runtime/pipe/engine.py) asserts "ZeRO-2 and ZeRO-3 are
// incompatible with pipeline parallelism" and runs one schedule, TrainSchedule (1F1B).
// The ZeRO values written below are DeepSpeed's own defaults, spelled out so the file says what
// runs: buckets of 5e8 elements, a ZeRO-3 prefetch bucket of 5e7, persistence threshold 1e5.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "planner/launch/emitters.h"

namespace parallax::launch {
namespace {

using OrderedJson = nlohmann::ordered_json;

constexpr int64_t kBucketElements = 500000000;      // reduce/allgather_bucket_size default
constexpr int64_t kPrefetchElements = 50000000;     // stage3_prefetch_bucket_size default
constexpr int64_t kPersistenceThreshold = 100000;   // stage3_param_persistence_threshold
constexpr int64_t kMaxLiveParameters = 1000000000;  // stage3_max_live_parameters
constexpr int64_t kMaxReuseDistance = 1000000000;   // stage3_max_reuse_distance
constexpr double kGradientClipping = 1.0;           // as Megatron-LM and TorchTitan default

/// The ZeRO stage DeepSpeed runs: FSDP is DeepSpeed's stage 3.
int zero_stage(const ParallelPlan& p) { return p.fsdp ? 3 : p.zero_stage; }

/// DeepSpeed's data-parallel size: all GPUs over the pipeline stages (plain DeepSpeed has no TP).
int64_t deepspeed_dp(const LaunchRequest& r) { return r.cluster.num_gpus / r.plan.pp; }

OrderedJson zero_section(const ParallelPlan& p) {
  OrderedJson z;
  const int stage = zero_stage(p);
  z["stage"] = stage;
  if (stage == 0) return z;
  z["overlap_comm"] = p.overlap_grad_reduce;
  z["contiguous_gradients"] = true;
  z["reduce_scatter"] = true;
  z["reduce_bucket_size"] = kBucketElements;
  if (stage < 3) {
    z["allgather_bucket_size"] = kBucketElements;
    return z;
  }
  // A prefetch bucket of 0 fetches each parameter only when its module runs.
  z["stage3_prefetch_bucket_size"] = p.overlap_param_gather ? kPrefetchElements : 0;
  z["stage3_param_persistence_threshold"] = kPersistenceThreshold;
  z["stage3_max_live_parameters"] = kMaxLiveParameters;
  z["stage3_max_reuse_distance"] = kMaxReuseDistance;
  z["stage3_gather_16bit_weights_on_model_save"] = true;
  return z;
}

}  // namespace

void check_deepspeed(const LaunchRequest& r, RuleSink& sink) {
  const ParallelPlan& p = r.plan;
  if (p.tp > 1)
    sink.refuse(
        "tp", "DeepSpeed has no Megatron-style tensor parallelism, got tp=" + std::to_string(p.tp),
        "use Megatron-DeepSpeed (or --target megatron); DeepSpeed's AutoTP "
        "(tensor_parallel.autotp_size) shards Hugging Face models without sequence "
        "parallelism and is not emitted by parallax");
  if (p.cp > 1)
    sink.refuse(
        "cp",
        "DeepSpeed has no ring or all-gather context parallelism, got cp=" + std::to_string(p.cp),
        "DeepSpeed-Ulysses (sequence_parallel_size) splits attention heads with "
        "all-to-alls, a different scheme from the plan's");
  if (p.ep > 1)
    sink.refuse("ep",
                "DeepSpeed takes expert parallelism from the model code, not its config, "
                "got ep=" +
                    std::to_string(p.ep),
                "build the MoE layers with deepspeed.moe.layer.MoE(ep_size=...), or use "
                "--target megatron");
  if (p.precision == Precision::kFp8 || is_block_scaled(p.precision))
    sink.refuse(
        "precision",
        std::string("the DeepSpeed config trains in bf16 or fp16, not ") + to_string(p.precision),
        std::string(to_string(p.precision)) +
            " GEMMs need Transformer Engine in the model; use bf16 or --target megatron");
  if (p.schedule != ScheduleKind::k1F1B)
    sink.refuse(
        "schedule",
        std::string("DeepSpeed's pipeline engine runs 1F1B only, got ") + to_string(p.schedule),
        "use --schedule 1f1b (and vpp=1)");
  if (p.pp > 1 && zero_stage(p) >= 2)
    sink.refuse(
        "zero",
        "DeepSpeed's pipeline engine supports ZeRO stage <= 1, got " +
            std::string(p.fsdp ? "fsdp (stage 3)" : "zero=" + std::to_string(p.zero_stage)) +
            " with pp=" + std::to_string(p.pp),
        "ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism: use zero <= 1, "
        "or pp=1");
}

std::vector<std::string> deepspeed_notes(const LaunchRequest& r) {
  const ParallelPlan& p = r.plan;
  const int64_t dp = deepspeed_dp(r);
  const int64_t accumulation = p.global_batch / (dp * p.micro_batch);
  std::vector<std::string> notes = {
      "DeepSpeed checks train_batch_size = train_micro_batch_size_per_gpu * "
      "gradient_accumulation_steps * data-parallel size: " +
      std::to_string(p.global_batch) + " = " + std::to_string(p.micro_batch) + " * " +
      std::to_string(accumulation) + " * " + std::to_string(dp) + "."};
  if (p.fsdp)
    notes.push_back(
        "fsdp is written as ZeRO stage 3: parameters, gradients and optimizer state "
        "sharded over the " +
        std::to_string(dp) + " data-parallel ranks.");
  if (p.pp > 1)
    notes.push_back("pp=" + std::to_string(p.pp) +
                    ": build the model as a deepspeed.pipe.PipelineModule with num_stages=" +
                    std::to_string(p.pp) +
                    "; its engine runs 1F1B (TrainSchedule) and supports ZeRO stage <= 1.");
  if (p.recompute == Recompute::kFull)
    notes.push_back(
        "recompute=full is model code: checkpoint every layer (PipelineModule "
        "activation_checkpoint_interval=1, deepspeed.checkpointing.checkpoint or the "
        "model's gradient checkpointing).");
  else if (p.recompute == Recompute::kSelective)
    notes.push_back(
        "recompute=selective is model code: checkpoint the core attention of each "
        "layer; no DeepSpeed setting selects it.");
  else if (p.recompute == Recompute::kSelectiveOp)
    notes.push_back(
        "recompute=selective-op is model code: wrap each layer in torch.utils.checkpoint with "
        "a selective policy (torch.utils.checkpoint.create_selective_checkpoint_contexts) that "
        "saves every other matmul output and the attention output.");
  notes.push_back(
      "Optimizer, scheduler and data settings are not part of the plan: add your "
      "own.");
  return notes;
}

std::string emit_deepspeed(const LaunchRequest& r) {
  const ParallelPlan& p = r.plan;
  const int64_t dp = deepspeed_dp(r);
  OrderedJson j;
  j["train_batch_size"] = p.global_batch;
  j["train_micro_batch_size_per_gpu"] = p.micro_batch;
  j["gradient_accumulation_steps"] = p.global_batch / (dp * p.micro_batch);
  j["gradient_clipping"] = kGradientClipping;
  j["bf16"] = {{"enabled", true}};
  j["zero_optimization"] = zero_section(p);
  return j.dump(2) + "\n";
}

}  // namespace parallax::launch
