#include "executor/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <string>

#include "core/rank_map.h"
#include "core/units.h"

namespace parallax::exec {
namespace {

Diagnostics check_options(const ModelShape& shape, const TokenSource& data, const TrainOptions& o,
                          int world) {
  Diagnostics d;
  if (o.tp < 1 || world % o.tp != 0) {
    d.push_back(
        {"--tp",
         "tp=" + std::to_string(o.tp) + " must divide the " + std::to_string(world) + " ranks",
         "ranks = tp * dp"});
    return d;
  }
  const int dp = world / o.tp;
  if (shape.kv_heads % o.tp != 0 || shape.ffn_hidden % o.tp != 0)
    d.push_back({"--tp",
                 "tp=" + std::to_string(o.tp) +
                     " must divide kv_heads=" + std::to_string(shape.kv_heads) +
                     " and ffn_hidden=" + std::to_string(shape.ffn_hidden),
                 "each tensor-parallel rank holds whole KV heads and an equal MLP share"});
  if (o.steps < 1)
    d.push_back({"--steps", "must be at least 1, got " + std::to_string(o.steps), ""});
  if (o.seq < 1) d.push_back({"--seq", "must be at least 1, got " + std::to_string(o.seq), ""});
  if (o.micro_batch < 1)
    d.push_back({"--mbs", "must be at least 1, got " + std::to_string(o.micro_batch), ""});
  if (o.global_batch < 1 ||
      o.global_batch % (static_cast<int64_t>(dp) * std::max<int64_t>(1, o.micro_batch)) != 0)
    d.push_back({"--gbs",
                 "global batch " + std::to_string(o.global_batch) +
                     " must be a positive multiple of dp * mbs = " + std::to_string(dp) + " * " +
                     std::to_string(o.micro_batch),
                 "every rank runs whole microbatches"});
  if (data.vocab() > shape.vocab)
    d.push_back({"--data",
                 "the data's vocabulary (" + std::to_string(data.vocab()) +
                     ") is larger than the model's (" + std::to_string(shape.vocab) + ")",
                 "byte-level text needs vocab >= 256"});
  return d;
}

std::vector<uint8_t> decay_mask(const Transformer<float>& model) {
  std::vector<uint8_t> mask(static_cast<size_t>(model.num_params()), 1);
  for (const TensorSlot& s : model.layout()) {
    const bool norm = s.name.size() >= 4 && s.name.compare(s.name.size() - 4, 4, "norm") == 0;
    if (norm) std::fill(mask.begin() + s.offset, mask.begin() + s.offset + s.size(), 0);
  }
  return mask;
}

/// 1 where a parameter is replicated over the tensor-parallel group (counted once in the norm).
std::vector<uint8_t> replicated_mask(const Transformer<float>& model) {
  std::vector<uint8_t> mask(static_cast<size_t>(model.num_params()), 0);
  for (const TensorSlot& s : model.layout())
    if (s.replicated) std::fill(mask.begin() + s.offset, mask.begin() + s.offset + s.size(), 1);
  return mask;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

double peak_resident_gib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) * 1024.0 / kGiB;  // kB
  }
  return 0;
}

Result<TrainResult> train(const ModelShape& shape, const TokenSource& data, const TrainOptions& o,
                          ProcessGroup& group,
                          const std::function<void(const StepRecord&)>& on_step) {
  if (Diagnostics d = check_options(shape, data, o, group.size()); !d.empty()) return d;
  // Coordinates and groups from the one rank map (tp fastest, then dp).
  ParallelPlan layout;
  layout.tp = o.tp;
  layout.dp = group.size() / o.tp;
  const RankMap ranks(layout, o.tp);
  const RankCoords me = ranks.coords(group.rank());
  const int dp = layout.dp, rank = me.dp;
  auto tp_split = group.split(/*color=*/me.dp, /*key=*/me.tp);
  if (!tp_split) return tp_split.errors();
  auto dp_split = group.split(/*color=*/me.tp, /*key=*/me.dp);
  if (!dp_split) return dp_split.errors();
  ProcessGroup& tp_group = **tp_split;
  ProcessGroup& dp_group = **dp_split;
#if defined(__GLIBC__)
  // Each step allocates the same activation buffers again; keep freed memory in the heap instead
  // of returning it to the kernel, so that steps do not pay page faults for fresh zeroed pages
  // (as frameworks' caching allocators avoid them).
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
  Diagnostics comm_errors;  // the first failure of a tensor-parallel all-reduce
  TensorParallel<float> tp{o.tp, me.tp, [&](std::span<float> x) {
                             if (!comm_errors.empty()) return;
                             comm_errors = tp_group.all_reduce_sum(x);
                           }};
  const Transformer<float> model(shape, tp);
  const int64_t n = model.num_params();
  // The flat buffers are padded to a multiple of dp so that every rank owns an equal slice.
  const int64_t slice = o.shard_optimizer ? (n + dp - 1) / dp : n;
  const int64_t padded = o.shard_optimizer ? slice * dp : n;
  const int64_t first = o.shard_optimizer ? rank * slice : 0;
  const int64_t owned = std::clamp<int64_t>(n - first, 0, slice);  // real parameters in the slice
  std::vector<float> params(static_cast<size_t>(padded), 0.0f),
      grads(static_cast<size_t>(padded), 0.0f);
  std::vector<float> grad_slice(o.shard_optimizer ? static_cast<size_t>(slice) : 0);
  model.init(std::span<float>(params).first(static_cast<size_t>(n)), o.seed);  // same everywhere
  const std::vector<uint8_t> mask = decay_mask(model);
  const std::vector<uint8_t> replicated = replicated_mask(model);
  AdamW adam(o.adam, std::vector<uint8_t>(mask.begin() + first, mask.begin() + first + owned));

  const int64_t per_rank = o.global_batch / dp;
  const int64_t micro = per_rank / o.micro_batch;
  const int64_t len = o.seq + 1;
  const double step_tokens = static_cast<double>(o.global_batch) * o.seq;
  std::vector<int32_t> tokens(static_cast<size_t>(o.micro_batch * len));
  const auto model_params = std::span<float>(params).first(static_cast<size_t>(n));
  const auto model_grads = std::span<float>(grads).first(static_cast<size_t>(n));

  TrainResult result;
  result.params = n;
  for (int64_t step = 1; step <= o.steps; ++step) {
    group.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    std::fill(grads.begin(), grads.end(), 0.0f);
    double loss_sum = 0;
    for (int64_t mb = 0; mb < micro; ++mb) {
      // Sequence ids of this microbatch: the run's global order, split by rank.
      const int64_t seq0 = (step - 1) * o.global_batch + rank * per_rank + mb * o.micro_batch;
      for (int64_t b = 0; b < o.micro_batch; ++b)
        data.sequence(seq0 + b, std::span<int32_t>(tokens).subspan(b * len, len));
      loss_sum += model.loss_and_grad(model_params, tokens, o.micro_batch, o.seq,
                                      static_cast<float>(1.0 / step_tokens), model_grads);
      if (!comm_errors.empty()) return comm_errors;
    }
    // Every tensor-parallel rank computed the replica's loss; sum over the replicas.
    double loss = loss_sum;
    if (Diagnostics d = dp_group.all_reduce_sum(std::span<double>(&loss, 1)); !d.empty()) return d;
    // The gradient of this rank's slice, summed over the data-parallel replicas.
    std::span<float> g = grads;
    if (o.shard_optimizer) {
      if (Diagnostics d = dp_group.reduce_scatter_sum(grads, grad_slice); !d.empty()) return d;
      g = grad_slice;
    } else if (Diagnostics d = dp_group.all_reduce_sum(std::span<float>(grads)); !d.empty()) {
      return d;
    }
    // Squared norm of the whole gradient: the shards' parts summed over tp, replicated tensors
    // (identical on every tp rank) once.
    double sq[2] = {0, 0};  // sharded, replicated
    for (int64_t i = 0; i < owned; ++i)
      sq[replicated[static_cast<size_t>(first + i)]] += static_cast<double>(g[i]) * g[i];
    if (o.shard_optimizer) {
      if (Diagnostics d = dp_group.all_reduce_sum(std::span<double>(sq, 2)); !d.empty()) return d;
    }
    if (Diagnostics d = tp_group.all_reduce_sum(std::span<double>(sq, 1)); !d.empty()) return d;
    const double norm = std::sqrt(sq[0] + sq[1]);
    adam.step(std::span<float>(params).subspan(first, owned), g.first(owned), norm, step);
    if (o.shard_optimizer) {
      // Every replica's updated slice back into every replica's full copy of the shard.
      const std::vector<float> mine(params.begin() + first, params.begin() + first + slice);
      if (Diagnostics d = dp_group.all_gather(mine, params); !d.empty()) return d;
    }
    const double local_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    StepRecord r;
    r.step = step;
    r.loss = loss / step_tokens;
    r.grad_norm = norm;
    r.time_s = group.max(local_s);
    r.tokens_per_s = step_tokens / r.time_s;
    r.peak_memory_gib = group.max(peak_resident_gib());
    result.steps.push_back(r);
    if (on_step) on_step(r);
  }
  std::vector<double> times;
  for (size_t i = result.steps.size() > 1 ? 1 : 0; i < result.steps.size(); ++i)
    times.push_back(result.steps[i].time_s);
  result.median_step_time_s = median(times);
  result.tokens_per_s = result.median_step_time_s > 0 ? step_tokens / result.median_step_time_s : 0;
  result.peak_memory_gib = result.steps.back().peak_memory_gib;
  return result;
}

}  // namespace parallax::exec
