#pragma once
/// The training loop: AdamW over a ProcessGroup of tp x dp x pp ranks, laid out as core's RankMap
/// lays them (tp fastest, pp slowest). Pipeline ranks run their model chunks in the order of the
/// simulator's schedule generator (1F1B or interleaved), sending activations and gradients
/// between stages. The tp ranks of a data-parallel replica each hold a tensor-parallel
/// shard of the model (Megatron's column/row-parallel blocks) and see the same data; replica d
/// runs its gbs/dp sequences of each step in microbatches; gradients and losses are summed over
/// the replicas, and every rank applies the same update to its shard (or, with a sharded
/// optimizer, to its slice of it). The same seed and data give the same losses under any tp, dp
/// and either optimizer (up to the order of float sums).

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/parallel_plan.h"
#include "core/result.h"
#include "executor/data.h"
#include "executor/model.h"
#include "executor/op_times.h"
#include "executor/optimizer.h"
#include "executor/process_group.h"

namespace parallax::exec {

struct TrainOptions {
  int64_t steps = 10;
  int64_t seq = 0;           ///< tokens per sequence
  int64_t micro_batch = 1;   ///< sequences per microbatch on one rank
  int64_t global_batch = 0;  ///< sequences per step over all ranks
  uint64_t seed = 1234;      ///< initialisation (data has its own seed in its TokenSource)
  int tp = 1;                ///< tensor-parallel degree
  /// Megatron's sequence parallelism within the tensor-parallel group (tp > 1, dense models):
  /// norms, residual stream and pipeline messages split by rows (TensorParallel in model.h).
  bool sequence_parallel = false;
  int pp = 1;   ///< pipeline stages; dp = group size / (tp * cp * pp)
  int cp = 1;   ///< context-parallel ranks, each with seq / cp positions
  int ep = 1;   ///< expert-parallel ranks (MoE), folded over the dp x cp ranks
  int etp = 1;  ///< expert tensor parallelism: 1, or tp (each expert split over the tp ranks)
  int vpp = 1;  ///< model chunks per pipeline rank (interleaved schedule)
  ScheduleKind schedule = ScheduleKind::k1F1B;  ///< 1F1B or interleaved 1F1B
  /// ZeRO-1 (distributed optimizer): each rank keeps 1/dp of the AdamW state and updates that
  /// slice of the parameters; gradients are reduce-scattered and parameters all-gathered
  /// instead of one all-reduce.
  bool shard_optimizer = false;
  /// ZeRO-2: each backward's gradient is reduce-scattered at once and the full buffer released.
  bool shard_gradients = false;
  /// ZeRO-3 / FSDP: parameters sharded at rest, gathered before each forward and backward of a
  /// microbatch and released after it (one gathering unit per rank: its pipeline chunks).
  bool shard_parameters = false;
  AdamWConfig adam;
  /// Checkpoints: every `save_every` steps (0: never) each rank writes its shard of the
  /// parameters and AdamW moments under checkpoint_dir, and rank 0 the manifest that completes
  /// the step (executor/checkpoint.h). `resume` starts from the newest complete checkpoint there,
  /// whatever layout wrote it, and continues to `steps`.
  std::string checkpoint_dir;
  int64_t save_every = 0;
  bool resume = false;
  /// After each checkpoint completes, rank 0 deletes the oldest complete checkpoints beyond the
  /// newest `keep_last` (by step), never the one just written (executor/checkpoint_retention.h);
  /// 0 keeps them all.
  int64_t keep_last = 0;
  /// Write the shards on a thread that overlaps the next step (the state is copied first); the
  /// step's checkpoint completes (manifest) at the end of that next step.
  bool async_save = false;
  /// Describes the data (recorded in checkpoints; a resume with other data is refused).
  std::string data_name;
  /// Time each step's operators (executor/op_times.h) into StepRecord::ops.
  bool op_times = false;
};

struct StepRecord {
  int64_t step = 0;            ///< 1-based
  double loss = 0;             ///< mean next-token cross-entropy of the step's global batch (nats)
  double grad_norm = 0;        ///< before clipping
  double time_s = 0;           ///< the slowest rank's wall time of the step
  double tokens_per_s = 0;     ///< global batch tokens / time_s
  double peak_memory_gib = 0;  ///< the largest peak resident set over the ranks so far
  OpSeconds ops;               ///< this rank's time by operator (with TrainOptions::op_times)
  /// With op_times, pp = 1 and ep = 1 (every rank the same work): the least and most operator
  /// time over the ranks, and the rank with the most; else 0.
  double ops_min_s = 0, ops_max_s = 0;
  int slowest_rank = 0;
};

/// The first step whose loss or gradient norm was not finite (NaN or infinite).
struct NonFinite {
  int64_t step = 0;
  std::string quantity;  ///< "loss" or "gradient norm"
  double value = 0;
};

struct TrainResult {
  std::vector<StepRecord> steps;  ///< the steps this run executed (after a resume, from there)
  /// Set when training stopped early at a non-finite loss or gradient norm, before that step's
  /// update (every rank at the same step): a failed run, whose steps before it are in `steps`
  /// and whose checkpoints before it are complete and finite.
  std::optional<NonFinite> stopped;
  std::vector<int64_t> removed;    ///< steps of older checkpoints deleted (TrainOptions::keep_last)
  std::vector<std::string> notes;  ///< rank 0: what could not be deleted, and why
  int64_t resumed_from = 0;        ///< the checkpoint's step, 0 when starting fresh
  std::vector<int64_t> saved;      ///< steps checkpointed
  double save_time_s = 0;          ///< time spent saving, not counted in step times
  int64_t params = 0;
  double median_step_time_s = 0;  ///< over the steps after the first (warm-up)
  /// The step after the first whose time is closest to the median (its `ops` describe a typical
  /// step); 0 without steps.
  int64_t median_step = 0;
  double tokens_per_s = 0;     ///< at the median step time
  double peak_memory_gib = 0;  ///< the largest peak resident set over the ranks
};

/// Every problem of the options for this model on `world` ranks (train checks them again; a
/// command line checks them before it launches anything): degrees dividing the ranks, heads,
/// layers, sequence, experts and batch; what is not executed yet; with `data`, a vocabulary
/// the model can embed.
Diagnostics check_training(const ModelShape& shape, const TrainOptions& options, int world,
                           const TokenSource* data = nullptr);

/// Validates the options against the group (tp dividing the group size, kv_heads and ffn_hidden;
/// gbs divisible by dp * micro_batch, ...), then trains.
/// `on_step` (may be empty) sees each step as it ends, on every rank. Every step checks the
/// loss and gradient norm (sums over the job, agreed by every rank) before the update; at the
/// first that is not finite the run stops with TrainResult::stopped set. A checkpoint whose
/// state holds a non-finite value is never completed (an error).
Result<TrainResult> train(const ModelShape& shape, const TokenSource& data, const TrainOptions& opt,
                          ProcessGroup& group,
                          const std::function<void(const StepRecord&)>& on_step = {});

/// The same loop on one GPU (executor/cuda): the CPU trainer's data order, loss and step
/// records, one rank, no parallelism, ZeRO or checkpoints yet (refused with the reason). It
/// stops at the first non-finite loss or gradient norm too (TrainResult::stopped), after that
/// step's update: the device step applies it. Peak
/// memory is the device memory the trainer allocated. Fails with a diagnostic in a build
/// without CUDA or on a machine without a GPU.
Result<TrainResult> train_on_gpu(const ModelShape& shape, const TokenSource& data,
                                 const TrainOptions& opt,
                                 const std::function<void(const StepRecord&)>& on_step = {});

/// Fills a result's median step time (over the steps after the first, a warm-up), the step
/// closest to it, tokens/s at it, and peak memory, from its steps.
void summarise_steps(TrainResult* r, double step_tokens);

/// The plan as the CPU executor runs it, for the simulator's prediction: fp32, and no
/// communication overlapped with compute (every collective runs on the rank's one thread after
/// the work it depends on: the gradient reduction follows the backward, ZeRO-3 gathers precede
/// each unit's pass, tensor-parallel reductions follow their GEMMs).
ParallelPlan as_executed(ParallelPlan plan);

/// Peak resident memory of this process so far (VmHWM), in GiB; 0 where unknown.
double peak_resident_gib();

}  // namespace parallax::exec
