// check_training (executor/trainer.h): every problem of a run's options for a model on a number
// of ranks, apart from the training loop that relies on them.
#include <algorithm>
#include <cmath>
#include <string>

#include "executor/trainer.h"

namespace parallax::exec {

Diagnostics check_training(const ModelShape& shape, const TrainOptions& o, int world,
                           const TokenSource* data) {
  Diagnostics d;
  if (data != nullptr && data->vocab() > shape.vocab)
    d.push_back({"--data",
                 "the data's vocabulary (" + std::to_string(data->vocab()) +
                     ") is larger than the model's (" + std::to_string(shape.vocab) + ")",
                 "byte-level text needs vocab >= 256"});
  if (o.tp < 1 || o.pp < 1 || o.cp < 1 || o.vpp < 1 || world % (o.tp * o.pp * o.cp) != 0) {
    d.push_back({"--tp",
                 "tp=" + std::to_string(o.tp) + " times pp=" + std::to_string(o.pp) + " times cp=" +
                     std::to_string(o.cp) + " must divide the " + std::to_string(world) + " ranks",
                 "ranks = tp * cp * dp * pp"});
    return d;
  }
  const int dp = world / (o.tp * o.pp * o.cp);
  if (o.cp > 1 && o.seq % (2 * o.cp) != 0)
    d.push_back({"--cp",
                 "2 * cp = " + std::to_string(2 * o.cp) + " must divide the sequence length " +
                     std::to_string(o.seq),
                 "each context-parallel rank holds two equal chunks of every sequence"});
  const int64_t stages = static_cast<int64_t>(o.pp) * o.vpp;
  if (shape.layers % stages != 0)
    d.push_back({o.vpp > 1 ? "--vpp" : "--pp",
                 std::to_string(shape.layers) + " layers do not split evenly into pp * vpp = " +
                     std::to_string(stages) + " stages",
                 "a pp (and vpp) whose product divides the layers"});
  if (o.schedule == ScheduleKind::kZeroBubbleH1)
    d.push_back(
        {"--schedule", "the zero-bubble schedule is not executed yet", "1f1b or interleaved"});
  if (o.schedule == ScheduleKind::kDualPipe)
    d.push_back({"--schedule", "the DualPipe schedule is not executed yet", "1f1b or interleaved"});
  if (o.ep < 1 || (dp * o.cp) % o.ep != 0)
    d.push_back(
        {"--ep",
         "ep=" + std::to_string(o.ep) + " must divide dp * cp = " + std::to_string(dp * o.cp),
         "expert-parallel ranks are data-parallel ranks that share the experts"});
  else if (o.ep > 1 && (shape.moe.experts == 0 || shape.moe.experts % o.ep != 0))
    d.push_back({"--ep",
                 "ep=" + std::to_string(o.ep) + " must divide the experts (" +
                     std::to_string(shape.moe.experts) + ")",
                 shape.moe.experts == 0 ? "expert parallelism needs a MoE model" : ""});
  if (o.shard_gradients && !o.shard_optimizer)
    d.push_back({"--zero", "sharded gradients need the sharded optimizer", ""});
  if (o.shard_gradients && shape.tied_embeddings && o.pp > 1)
    d.push_back({"--zero",
                 "ZeRO-2/3 with a tied embedding split across pipeline stages is not executed yet",
                 "--zero 1, or an untied model"});
  if (o.etp != 1 && o.etp != o.tp)
    d.push_back({"--etp",
                 "etp=" + std::to_string(o.etp) + " must be 1 or tp=" + std::to_string(o.tp),
                 "each expert whole on every tp rank (1) or split over the tp ranks (tp)"});
  else if (o.etp > 1 && (shape.moe.experts == 0 || shape.moe.expert_ffn_hidden % o.etp != 0))
    d.push_back({"--etp",
                 "etp=" + std::to_string(o.etp) + " splits the experts: it needs a MoE model " +
                     "whose expert width (" + std::to_string(shape.moe.expert_ffn_hidden) +
                     ") it divides",
                 "--etp 1"});
  if (o.vpp > 1 && o.pp == 1)
    d.push_back({"--vpp", "interleaving needs a pipeline (pp > 1)", "--vpp 1"});
  if (shape.kv_heads % o.tp != 0 || shape.ffn_hidden % o.tp != 0)
    d.push_back({"--tp",
                 "tp=" + std::to_string(o.tp) +
                     " must divide kv_heads=" + std::to_string(shape.kv_heads) +
                     " and ffn_hidden=" + std::to_string(shape.ffn_hidden),
                 "each tensor-parallel rank holds whole KV heads and an equal MLP share"});
  if (o.sequence_parallel && o.tp > 1) {
    if (o.cp >= 1 && o.seq % o.cp == 0 && (o.micro_batch * (o.seq / o.cp)) % o.tp != 0)
      d.push_back({"--sp",
                   "tp=" + std::to_string(o.tp) + " must divide a microbatch's " +
                       std::to_string(o.micro_batch * (o.seq / o.cp)) +
                       " tokens per rank (mbs * seq / cp)",
                   "a --seq or --mbs that tp divides"});
  }
  if (o.steps < 1)
    d.push_back({"--steps", "must be at least 1, got " + std::to_string(o.steps), ""});
  if (o.seq < 1) d.push_back({"--seq", "must be at least 1, got " + std::to_string(o.seq), ""});
  if (!std::isfinite(o.adam.lr) || o.adam.lr <= 0)
    d.push_back({"--lr", "must be a finite number above 0, got " + std::to_string(o.adam.lr), ""});
  if (o.adam.warmup_steps < 0 || o.save_every < 0 || o.keep_last < 0)
    d.push_back({o.adam.warmup_steps < 0 ? "--warmup"
                 : o.save_every < 0      ? "--save-every"
                                         : "--keep-last",
                 "must be 0 or more", ""});
  if (o.micro_batch < 1)
    d.push_back({"--mbs", "must be at least 1, got " + std::to_string(o.micro_batch), ""});
  if (o.global_batch < 1 ||
      o.global_batch % (static_cast<int64_t>(dp) * std::max<int64_t>(1, o.micro_batch)) != 0)
    d.push_back({"--gbs",
                 "global batch " + std::to_string(o.global_batch) +
                     " must be a positive multiple of dp * mbs = " + std::to_string(dp) + " * " +
                     std::to_string(o.micro_batch),
                 "every rank runs whole microbatches"});
  return d;
}

}  // namespace parallax::exec
