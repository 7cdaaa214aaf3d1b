#include "executor/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <future>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <thread>
#include <utility>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <Eigen/Core>
#include <string>

#include "core/json_read.h"
#include "core/rank_map.h"
#include "core/units.h"
#include "executor/checkpoint.h"
#include "executor/checkpoint_retention.h"
#include "executor/train_state.h"
#include "executor/zero_units.h"
#include "simulator/schedules/pipeline_schedule.h"

namespace parallax::exec {
namespace {

/// A tensor's class for the gradient norm: 0 sharded over tp, 1 replicated over tp (counted
/// once), 3 and 4 the same for routed-expert tensors.
uint8_t norm_class_of(const TensorSlot& s) {
  return static_cast<uint8_t>((s.replicated ? 1 : 0) + (s.expert ? 3 : 0));
}

/// Sum of the squares, in double over blocks summed in float by Eigen (vectorised): the
/// gradient norm is a full pass over the gradient every step.
double squared_norm(std::span<const float> x) {
  constexpr size_t kBlock = 4096;
  double s = 0;
  for (size_t i = 0; i < x.size(); i += kBlock) {
    const size_t n = std::min(kBlock, x.size() - i);
    s +=
        Eigen::Map<const Eigen::VectorXf>(x.data() + i, static_cast<Eigen::Index>(n)).squaredNorm();
  }
  return s;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

ParallelPlan as_executed(ParallelPlan plan) {
  plan.precision = Precision::kFp32;
  plan.overlap_grad_reduce = false;
  plan.overlap_param_gather = false;
  plan.overlap_tp_comm = false;
  plan.async_tp_grad = false;  // the input gradient's all-reduce / reduce-scatter blocks
  // Context parallelism gathers K and V of the whole sequence before attention (and
  // reduce-scatters their gradients), blocking; no ring.
  plan.cp_comm = CpComm::kAllGather;
  return plan;
}

double peak_resident_gib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) * 1024.0 / kGiB;  // kB
  }
  return 0;
}

namespace {

/// Message tags of the pipeline: activations (0) and gradients (1) of a microbatch entering
/// virtual stage `vs`. Messages between two ranks with one tag arrive in the order sent, and
/// each stage sends its microbatches in order, so the tag need not be unique per microbatch.
int pipeline_tag(int64_t mb, int vs, int stages, int dir) {
  return static_cast<int>(((mb % 64) * stages + vs) * 2 + dir);
}

/// Fault injection for the fault tests: PARALLAX_FAULT=<what>:<where>:<step>:<rank> makes that
/// rank, at the start of that step ("step") or of its part of that step's checkpoint ("save"),
/// SIGKILL itself ("kill", as a crashed node stops), stop answering ("hang", as a stuck one) or
/// (at "step" only) find its part of the gradient's squared norm NaN ("nan", as an overflowed
/// gradient would make it): whether `what` is asked for here.
bool fault_is(const char* what, const char* where, int64_t step, int rank) {
  static const char* spec = std::getenv("PARALLAX_FAULT");
  return spec != nullptr && std::string(what) + ":" + where + ":" + std::to_string(step) + ":" +
                                    std::to_string(rank) ==
                                spec;
}
void inject_fault(const char* where, int64_t step, int rank) {
  if (fault_is("kill", where, step, rank)) std::raise(SIGKILL);
  if (fault_is("hang", where, step, rank))
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

/// The first of the step's loss and gradient norm (each a sum over the job) that is not finite,
/// as every rank of `group` agrees: one rank's verdict suffices to stop them all.
std::optional<NonFinite> non_finite(ProcessGroup& group, int64_t step, double loss, double norm) {
  std::optional<NonFinite> bad;
  if (!std::isfinite(loss))
    bad = NonFinite{step, "loss", loss};
  else if (!std::isfinite(norm))
    bad = NonFinite{step, "gradient norm", norm};
  if (group.max(bad ? 1.0 : 0.0) == 0) return std::nullopt;
  // A rank that saw finite values stops with its peers, reporting what they saw.
  if (!bad)
    bad = NonFinite{step, "loss or gradient norm (on another rank)",
                    std::numeric_limits<double>::quiet_NaN()};
  return bad;
}

}  // namespace

Result<TrainResult> train(const ModelShape& shape, const TokenSource& data, const TrainOptions& o,
                          ProcessGroup& group,
                          const std::function<void(const StepRecord&)>& on_step) {
  Diagnostics bad = check_training(shape, o, group.size(), &data);
  if (!bad.empty()) return bad;
  auto groups = split_groups(group, o.tp, o.cp, o.pp);
  if (!groups) return groups.errors();
  const RankCoords me = groups->me;
  const int dp = groups->dp, pp = o.pp, vpp = o.vpp, stages = pp * vpp;
  ProcessGroup& tp_group = *groups->tp;
  ProcessGroup& cp_group = *groups->cp;
  ProcessGroup& dp_group = *groups->data;
  ProcessGroup& pp_group = *groups->pp;
  const int data_rank = dp_group.rank(), data_size = dp_group.size();
  // Expert parallelism folds over the data group: ep consecutive data ranks share the experts of
  // each MoE layer; the ranks holding the same experts (edp) reduce the experts' gradients.
  auto ep_split = dp_group.split(data_rank / o.ep, data_rank % o.ep);
  if (!ep_split) return ep_split.errors();
  auto edp_split = dp_group.split(data_rank % o.ep, data_rank / o.ep);
  if (!edp_split) return edp_split.errors();
  ProcessGroup& ep_group = **ep_split;
  ProcessGroup& edp_group = **edp_split;
  const int edp_rank = edp_group.rank();
  const int64_t local_seq = o.seq / o.cp;  // this rank's positions of each sequence

  const int64_t per_rank = o.global_batch / dp;
  const int64_t micro = per_rank / o.micro_batch;
  auto schedule = build_pipeline_schedule(o.schedule, pp, vpp, static_cast<int>(micro));
  if (!schedule) return schedule.errors();
  const std::vector<PipelineOp>& ops = schedule.value()[static_cast<size_t>(me.pp)];
#if defined(__GLIBC__)
  // Each step allocates the same activation buffers again; keep freed memory in the heap instead
  // of returning it to the kernel, so that steps do not pay page faults for fresh zeroed pages
  // (as frameworks' caching allocators avoid them).
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
  Diagnostics comm_errors;  // the first failure of a collective inside the model
  const bool sp = o.sequence_parallel && o.tp > 1;
  TensorParallel<float> tp{o.tp,
                           me.tp,
                           [&](std::span<float> x) {
                             if (comm_errors.empty()) comm_errors = tp_group.all_reduce_sum(x);
                           },
                           sp,
                           [&](std::span<const float> x, std::span<float> out) {
                             if (comm_errors.empty()) comm_errors = tp_group.all_gather(x, out);
                           },
                           [&](std::span<const float> x, std::span<float> out) {
                             if (comm_errors.empty())
                               comm_errors = tp_group.reduce_scatter_sum(x, out);
                           }};
  ContextParallel<float> cp{o.cp, me.cp,
                            [&](std::span<const float> x, std::span<float> out) {
                              if (comm_errors.empty()) comm_errors = cp_group.all_gather(x, out);
                            },
                            [&](std::span<const float> x, std::span<float> out) {
                              if (comm_errors.empty())
                                comm_errors = cp_group.reduce_scatter_sum(x, out);
                            },
                            [&](std::span<float> x) {
                              if (comm_errors.empty()) comm_errors = cp_group.all_reduce_sum(x);
                            }};
  cp.balanced = true;  // Megatron's two-chunk split
  ExpertParallel<float> ep{
      o.ep,
      ep_group.rank(),
      [&](std::span<const float> send, std::span<const int64_t> sc, std::span<float> recv,
          std::span<const int64_t> rc) {
        if (comm_errors.empty()) comm_errors = ep_group.all_to_all(send, sc, recv, rc);
      },
      [&](std::span<const int64_t> send, std::span<int64_t> recv) {
        if (comm_errors.empty()) comm_errors = ep_group.all_to_all(send, recv);
      },
      o.etp,
      [&](std::span<float> x) {
        if (comm_errors.empty()) comm_errors = tp_group.all_reduce_sum(x);
      },
      [&](std::span<const float> x, std::span<const int64_t> counts, std::span<float> out) {
        if (comm_errors.empty()) comm_errors = tp_group.all_gather(x, counts, out);
      },
      [&](std::span<const float> x, std::span<const int64_t> counts, std::span<float> out) {
        if (comm_errors.empty()) comm_errors = tp_group.reduce_scatter_sum(x, counts, out);
      },
      [&](std::span<const int64_t> mine, std::span<int64_t> out) {
        // An all-gather of counts: the same values to every rank.
        std::vector<int64_t> send;
        for (int r = 0; r < o.tp; ++r) send.insert(send.end(), mine.begin(), mine.end());
        if (comm_errors.empty()) comm_errors = tp_group.all_to_all(send, out);
      }};
  // This rank's model chunks: chunk c is virtual stage c * pp + me.pp (Megatron's interleaving),
  // its parameters at offsets[c] of one flat buffer.
  const int64_t per_stage = shape.layers / stages;
  std::vector<Transformer<float>> chunks;
  std::vector<int64_t> offsets;
  int64_t n = 0;
  for (int c = 0; c < vpp; ++c) {
    const int vs = virtual_stage(me.pp, c, pp);
    chunks.emplace_back(shape, tp,
                        StageRange{vs * per_stage, (vs + 1) * per_stage, vs == 0, vs == stages - 1},
                        cp, ep);
    offsets.push_back(n);
    n += chunks.back().num_params();
  }
  // The distributed optimizer (and ZeRO-2/3) with expert parallelism (SplitShards): the dense
  // values shard over the data group, the routed experts' over the ranks holding the same
  // experts.
  std::optional<SplitShards> split;
  if (o.shard_optimizer && o.ep > 1) {
    std::vector<std::pair<int64_t, int64_t>> runs[2];  // dense, expert
    for (int c = 0; c < vpp; ++c)
      for (const TensorSlot& t : chunks[c].layout()) {
        auto& kind = runs[t.expert ? 1 : 0];
        const int64_t at = offsets[c] + t.offset;
        if (!kind.empty() && kind.back().first + kind.back().second == at)
          kind.back().second += t.size();
        else
          kind.emplace_back(at, t.size());
      }
    split.emplace(std::move(runs[0]), std::move(runs[1]), dp_group, edp_group);
  }
  // Otherwise the flat buffers are padded to a multiple of dp so that every rank owns an equal
  // slice.
  const bool dp_sharded = o.shard_optimizer && !split;
  const int64_t slice = split ? split->size() : dp_sharded ? (n + data_size - 1) / data_size : n;
  const int64_t padded = dp_sharded ? slice * data_size : n;
  const int64_t first = dp_sharded ? data_rank * slice : 0;
  const int64_t owned = std::clamp<int64_t>(n - first, 0, slice);  // real parameters in the slice
  // This rank's slice as runs of the flat buffers: one unless the slice is split.
  const std::vector<SliceRun> slice_runs =
      split ? split->runs() : std::vector<SliceRun>{{first, 0, owned}};
  // Calls f(a, b, flat) for the positions [a, b) of this rank's slice that hold flat values of
  // [x, y), position a holding flat value `flat`.
  auto in_slice = [&](int64_t x, int64_t y, const auto& f) {
    for (const SliceRun& r : slice_runs) {
      const int64_t a = std::max(r.flat, x), b = std::min(r.flat + r.length, y);
      if (a < b) f(r.at + (a - r.flat), r.at + (b - r.flat), a);
    }
  };
  // Lazily mapped: under ZeRO-2/3 only the units in use are resident.
  PageBuffer params(static_cast<size_t>(padded)), grads(static_cast<size_t>(padded));
  std::vector<float> grad_slice(o.shard_optimizer ? static_cast<size_t>(slice) : 0);
  // ZeRO-2/3 (zero_units.h): each unit's gradient is reduce-scattered into grad_slice as soon
  // as a backward finishes it; ZeRO-3/FSDP keeps only own_params at rest and gathers each unit
  // just before a pass reads it.
  std::vector<float> own_params(o.shard_parameters ? static_cast<size_t>(slice) : 0);
  // Per parameter of this rank's slice [first, first + owned): weight decay, and how it counts
  // in the gradient norm (0: this rank's own, 1: replicated over tp, counted by tp rank 0; 2:
  // the head stage's copy of a tied embedding, not counted; 3 and 4: as 0 and 1 for
  // routed-expert tensors, whose replicas are the ranks holding the same experts rather than
  // the whole data group).
  std::vector<uint8_t> mask(static_cast<size_t>(owned)), norm_class(static_cast<size_t>(owned));
  auto chunk_span = [&](PageBuffer& buf, int c) {
    return std::span<float>(buf).subspan(static_cast<size_t>(offsets[c]),
                                         static_cast<size_t>(chunks[c].num_params()));
  };
  const TensorSlot* tied_copy = nullptr;  // the head stage's embedding, when it is a copy
  int tied_chunk = -1;
  for (int c = 0; c < vpp; ++c) {
    const Transformer<float>& m = chunks[c];
    if (m.stage().head && !m.stage().embed && shape.tied_embeddings) {
      tied_copy = &m.layout().front();
      tied_chunk = c;
    }
    for (const TensorSlot& t : m.layout()) {
      in_slice(offsets[c] + t.offset, offsets[c] + t.offset + t.size(),
               [&](int64_t a, int64_t b, int64_t) {
                 std::fill(mask.begin() + a, mask.begin() + b, decays(t) ? 1 : 0);
                 std::fill(norm_class.begin() + a, norm_class.begin() + b,
                           &t == tied_copy ? uint8_t{2} : norm_class_of(t));
               });
    }
    // Every copy and shard of a tensor alike. Under ZeRO-3 one unit at a time: the rank keeps
    // its slice of it and hands the unit's pages back, so the whole model is never resident.
    if (!o.shard_parameters) {
      m.init(chunk_span(params, c), o.seed);
      continue;
    }
    std::vector<int64_t> units{ParamUnits::kEmbedUnit, ParamUnits::kHeadUnit};
    for (int64_t l = m.stage().first_layer; l < m.stage().end_layer; ++l) units.push_back(l);
    for (const int64_t u : units) {
      const auto [ua, ub] = m.unit_range(u);
      if (ua == ub) continue;
      m.init(chunk_span(params, c), o.seed, ua, ub);
      in_slice(offsets[c] + ua, offsets[c] + ub, [&](int64_t a, int64_t b, int64_t flat) {
        std::copy_n(params.begin() + flat, b - a, own_params.begin() + a);
      });
      release_pages(std::span<float>(params).subspan(static_cast<size_t>(offsets[c] + ua),
                                                     static_cast<size_t>(ub - ua)));
    }
  }
  const TensorSlot* tied_first =
      shape.tied_embeddings && stages > 1 && me.pp == 0 ? &chunks[0].layout().front() : nullptr;
  AdamW adam(o.adam, std::move(mask));
  // Sequence parallelism: the elements of this rank's slice that belong to tensors replicated
  // over tp (classes 1, 2 and 4 above), whose gradients the tp ranks sum.
  std::vector<size_t> tp_summed;
  if (sp)
    for (int64_t i = 0; i < owned; ++i)
      if (const uint8_t k = norm_class[static_cast<size_t>(i)]; k == 1 || k == 2 || k == 4)
        tp_summed.push_back(static_cast<size_t>(i));
  std::vector<float> tp_buf(tp_summed.size());
  // The runs [a, b) of this rank's slice that its gradient norm counts, so that each element
  // counts once over the job: classes 0 and 3, and 1 and 4 on tp rank 0; on every data rank
  // under a distributed optimizer (each holds its own slice), else on the first replica.
  std::vector<std::pair<size_t, size_t>> counted;
  for (int64_t i = 0; i < owned; ++i) {
    const uint8_t k = norm_class[static_cast<size_t>(i)];
    if (!((k == 0 || k == 3 || ((k == 1 || k == 4) && me.tp == 0)) &&
          (o.shard_optimizer || (k >= 3 ? edp_rank == 0 : data_rank == 0))))
      continue;
    if (!counted.empty() && counted.back().second == static_cast<size_t>(i))
      ++counted.back().second;
    else
      counted.emplace_back(static_cast<size_t>(i), static_cast<size_t>(i) + 1);
  }
  std::vector<uint8_t>().swap(norm_class);

  const int64_t len = o.seq + 1;
  const double step_tokens = static_cast<double>(o.global_batch) * o.seq;
  // A stage's input or output: the microbatch's rows on this rank (under sequence parallelism,
  // its tp share of them).
  const int64_t activation = o.micro_batch * local_seq * shape.hidden / (sp ? o.tp : 1);
  std::vector<int32_t> sequence(static_cast<size_t>(len));
  struct InFlight {
    std::vector<int32_t> tokens;
    std::unique_ptr<StagePass<float>> pass;
  };
  std::vector<float> buffer(static_cast<size_t>(activation));

  // Checkpoints: the pieces of the logical tensors this rank writes. A tensor replicated over
  // tp is written by tp rank 0, the head stage's copy of a tied embedding not at all, and the
  // parameters by data rank 0 (the moments too, unless the optimizer is sharded).
  std::vector<ChunkView> views;
  for (int c = 0; c < vpp; ++c) views.push_back({&chunks[c], offsets[c]});
  const SlotFilter writes = [&](const TensorSlot& t) {
    return &t != tied_copy && (!t.replicated || me.tp == 0);
  };
  const nlohmann::json meta_model = checkpoint_model(shape);
  TrainResult result;
  result.params = n;
  int64_t start = 1;
  if (o.resume) {
    auto ckpt = Checkpoint::open_latest(o.checkpoint_dir);
    if (!ckpt) return ckpt.errors();
    const nlohmann::json& meta = ckpt->meta();
    if (Diagnostics d = check_checkpoint_model(*ckpt, shape); !d.empty()) return d;
    const std::string data = text_at(meta, "data", "(not recorded)");
    if (data != o.data_name)
      return Diagnostic{ckpt->path(),
                        "the checkpoint was trained on " + text_excerpt(data, 200) +
                            ", this run reads " + o.data_name,
                        "resume with the same --data"};
    // The whole parameters, or (ZeRO-3) this rank's slice of them, and its slice of the
    // moments: each read from whichever pieces cover it.
    if (!o.shard_parameters)
      if (Diagnostics d = read_pieces(*ckpt, views, 0, std::span<float>(params).first(n), "param");
          !d.empty())
        return d;
    for (const auto& [kind, buf] : {std::pair<const char*, std::span<float>>{"param", own_params},
                                    {"adam_m", adam.first_moment()},
                                    {"adam_v", adam.second_moment()}}) {
      if (buf.empty()) continue;
      for (const SliceRun& r : slice_runs)
        if (Diagnostics d = read_pieces(*ckpt, views, r.flat, buf.subspan(r.at, r.length), kind);
            !d.empty())
          return d;
    }
    start = ckpt->step() + 1;
    result.resumed_from = ckpt->step();
  }
  std::optional<ShardedUnits> sharded;
  std::vector<ParamUnits> units(static_cast<size_t>(vpp));  // per chunk; empty without ZeRO-2/3
  const ShardedUnits::Buffers buffers{params, grads, own_params, grad_slice};
  if (dp_sharded)
    sharded.emplace(dp_group, slice, o.shard_parameters, o.shard_gradients, buffers, &comm_errors);
  else if (split && o.shard_gradients)
    sharded.emplace(*split, o.shard_parameters, o.shard_gradients, buffers, &comm_errors);
  if (o.shard_gradients)
    for (int c = 0; c < vpp; ++c) units[c] = sharded->hooks(chunks[c], offsets[c]);
  // A save writes this rank's shard (at once, or with --async-save on a thread that overlaps the
  // next step), then completes the step: every rank's outcome to rank 0, which writes the
  // manifest. An asynchronous save completes at the end of the next step, at the same point on
  // every rank.
  struct PendingSave {
    int64_t step = 0;
    size_t losses = 0;  // steps recorded when the state was taken
    std::future<Result<ShardInfo>> shard;
  };
  std::optional<PendingSave> pending;
  auto complete = [&](int64_t step, Result<ShardInfo> info, size_t losses_known) -> Diagnostics {
    // Every rank's outcome, size and checksum (in 32-bit halves, exact in doubles) to rank 0.
    const int world = group.size(), me_rank = group.rank();
    std::vector<double> table(4 * static_cast<size_t>(world), 0.0);
    if (info) {
      table[4 * me_rank] = 1;
      table[4 * me_rank + 1] = static_cast<double>(info->bytes);
      table[4 * me_rank + 2] = static_cast<double>(info->checksum >> 32);
      table[4 * me_rank + 3] = static_cast<double>(info->checksum & 0xffffffffu);
    }
    if (Diagnostics d = group.all_reduce_sum(std::span<double>(table)); !d.empty()) return d;
    if (!info) return info.errors();
    for (int r = 0; r < world; ++r)
      if (table[4 * r] != 1)
        return {Diagnostic{o.checkpoint_dir,
                           "rank " + std::to_string(r) + " could not write its shard of step " +
                               std::to_string(step),
                           "the previous complete checkpoint is intact"}};
    double written = 1;
    if (me_rank == 0) {
      std::vector<ShardInfo> shards;
      for (int r = 0; r < world; ++r) {
        char file[32];
        std::snprintf(file, sizeof file, "shard-%05d.bin", r);  // write_shard's name
        shards.push_back({file, static_cast<int64_t>(table[4 * r + 1]),
                          (static_cast<uint64_t>(table[4 * r + 2]) << 32) |
                              static_cast<uint64_t>(table[4 * r + 3]),
                          r});
      }
      nlohmann::json meta = {{"model", meta_model},
                             {"data", o.data_name},
                             {"seed", o.seed},
                             {"global_batch", o.global_batch},
                             {"seq", o.seq},
                             {"layout",
                              {{"tp", o.tp},
                               {"pp", o.pp},
                               {"cp", o.cp},
                               {"dp", dp},
                               {"vpp", o.vpp},
                               {"zero", o.shard_parameters  ? 3
                                        : o.shard_gradients ? 2
                                        : o.shard_optimizer ? 1
                                                            : 0}}}};
      nlohmann::json losses = nlohmann::json::array();
      for (size_t i = 0; i < losses_known; ++i) losses.push_back(result.steps[i].loss);
      meta["losses"] = losses;
      Diagnostics d = write_manifest(o.checkpoint_dir, step, shards, meta);
      written = d.empty() ? 1 : 0;
      double ok = written;
      if (Diagnostics e = group.all_reduce_sum(std::span<double>(&ok, 1)); !e.empty()) return e;
      if (!d.empty()) return d;
      // Committed: now the oldest beyond keep_last may go (a failure to delete is a note).
      CheckpointCleanup gone = remove_old_checkpoints(o.checkpoint_dir, o.keep_last, step);
      result.removed.insert(result.removed.end(), gone.steps.begin(), gone.steps.end());
      result.notes.insert(result.notes.end(), gone.notes.begin(), gone.notes.end());
    } else {
      double ok = 0;
      if (Diagnostics e = group.all_reduce_sum(std::span<double>(&ok, 1)); !e.empty()) return e;
      if (ok != 1)
        return {
            Diagnostic{o.checkpoint_dir,
                       "rank 0 could not complete the checkpoint of step " + std::to_string(step),
                       "the previous complete checkpoint is intact"}};
    }
    return {};
  };
  auto save = [&](int64_t step) -> Diagnostics {
    std::vector<Piece> pieces;
    // A replica's tensors are written by its first holder: data rank 0 for dense tensors, the
    // first rank holding the same experts for expert tensors (each rank its own slice of the
    // moments under the distributed optimizer, and of the parameters under ZeRO-3, which are
    // never gathered whole).
    const SlotFilter replica = [&](const TensorSlot& t) {
      return writes(t) && (t.expert ? edp_rank == 0 : data_rank == 0);
    };
    auto append_slice = [&](std::span<const float> v, const char* name, const SlotFilter& keep) {
      for (const SliceRun& r : slice_runs)
        append_pieces(views, r.flat, v.subspan(r.at, r.length), name, keep, pieces);
    };
    if (o.shard_parameters)
      append_slice(own_params, "param", writes);
    else
      append_pieces(views, 0, std::span<const float>(params).first(n), "param", replica, pieces);
    const SlotFilter& moments = o.shard_optimizer ? writes : replica;
    append_slice(adam.first_moment(), "adam_m", moments);
    append_slice(adam.second_moment(), "adam_v", moments);
    inject_fault("save", step, group.rank());
    if (o.async_save) {
      // The state is copied now; the thread writes the copy while training goes on.
      std::vector<std::vector<float>> copies;
      for (Piece& piece : pieces) {
        copies.emplace_back(piece.data.begin(), piece.data.end());
        piece.data = copies.back();
      }
      pending = PendingSave{
          step, result.steps.size(),
          std::async(std::launch::async, [dir = o.checkpoint_dir, step, rank = group.rank(),
                                          pieces = std::move(pieces), copies = std::move(copies)] {
            return write_shard(dir, step, rank, pieces);
          })};
      return {};
    }
    auto info = write_shard(o.checkpoint_dir, step, group.rank(), pieces);
    return complete(step, std::move(info), result.steps.size());
  };
  auto finish_pending = [&]() -> Diagnostics {
    if (!pending) return {};
    PendingSave p = std::move(*pending);
    pending.reset();
    return complete(p.step, p.shard.get(), p.losses);
  };

  for (int64_t step = start; step <= o.steps; ++step) {
    inject_fault("step", step, group.rank());
    group.barrier();
    OpClock::enable(o.op_times);
    const auto t0 = std::chrono::steady_clock::now();
    if (!o.shard_gradients) std::fill(grads.begin(), grads.end(), 0.0f);  // else released zero
    std::fill(grad_slice.begin(), grad_slice.end(), 0.0f);
    double loss_sum = 0;
    std::map<std::pair<int, int>, InFlight> flight;  // (microbatch, chunk)
    for (const PipelineOp& op : ops) {
      const int c = op.chunk, vs = virtual_stage(me.pp, c, pp);
      const std::span<float> params_c = chunk_span(params, c), cg = chunk_span(grads, c);
      const int prev = (vs - 1) % pp, next = (vs + 1) % pp;
      if (op.kind == PassKind::kForward) {
        InFlight& f = flight[{op.microbatch, c}];
        // Sequence ids of this microbatch: the run's global order, split by replica.
        // A context-parallel rank keeps its two chunks of each sequence (positions and the id
        // after each): first the early chunks of the microbatch's sequences, then the late ones.
        const int64_t chunk = o.cp > 1 ? local_seq / 2 : local_seq, parts = o.cp > 1 ? 2 : 1;
        f.tokens.resize(static_cast<size_t>(o.micro_batch * parts * (chunk + 1)));
        const int64_t seq0 =
            (step - 1) * o.global_batch + me.dp * per_rank + op.microbatch * o.micro_batch;
        for (int64_t b = 0; b < o.micro_batch; ++b) {
          data.sequence(seq0 + b, sequence);
          for (int64_t part = 0; part < parts; ++part) {
            const int64_t j = part == 0 ? me.cp : 2 * o.cp - 1 - me.cp;  // chunk of the sequence
            std::copy_n(sequence.begin() + j * chunk, chunk + 1,
                        f.tokens.begin() + (part * o.micro_batch + b) * (chunk + 1));
          }
        }
        f.pass = std::make_unique<StagePass<float>>(chunks[c], params_c, f.tokens,
                                                    o.micro_batch * parts, chunk, units[c]);
        std::span<const float> input;
        if (vs > 0) {
          if (Diagnostics d =
                  pp_group.recv(buffer, prev, pipeline_tag(op.microbatch, vs, stages, 0));
              !d.empty())
            return d;
          input = buffer;
        }
        const double l = f.pass->forward(input, static_cast<float>(1.0 / step_tokens), cg);
        if (!comm_errors.empty()) return comm_errors;
        loss_sum += f.pass->aux();  // MoE load-balancing terms of this stage (0 when dense)
        if (vs == stages - 1) {
          loss_sum += l;
        } else if (Diagnostics d = pp_group.send(f.pass->output(), next,
                                                 pipeline_tag(op.microbatch, vs + 1, stages, 0));
                   !d.empty()) {
          return d;
        }
      } else {
        auto it = flight.find({op.microbatch, c});
        PX_CHECK(it != flight.end(),
                 "backward of microbatch " << op.microbatch << " before its forward");
        std::span<const float> d_output;
        if (vs < stages - 1) {
          if (Diagnostics d =
                  pp_group.recv(buffer, next, pipeline_tag(op.microbatch, vs, stages, 1));
              !d.empty())
            return d;
          d_output = buffer;
        }
        it->second.pass->backward(d_output, cg);
        if (!comm_errors.empty()) return comm_errors;
        if (vs > 0) {
          if (Diagnostics d = pp_group.send(it->second.pass->input_grad(), prev,
                                            pipeline_tag(op.microbatch, vs - 1, stages, 1));
              !d.empty())
            return d;
        }
        flight.erase(it);
      }
    }
    if (Diagnostics d = pp_group.wait_sends(); !d.empty()) return d;
    // A tied embedding's two copies (first and last stage) add their gradients, in one order on
    // both, so the copies stay bitwise equal.
    if (tied_first || tied_copy) {
      const TensorSlot& t = tied_first ? *tied_first : *tied_copy;
      const std::span<float> mine =
          chunk_span(grads, tied_first ? 0 : tied_chunk)
              .subspan(static_cast<size_t>(t.offset), static_cast<size_t>(t.size()));
      std::vector<float> other(mine.size());
      const int peer = tied_first ? pp - 1 : 0;
      if (Diagnostics d = pp_group.send(mine, peer, 2 * stages * 64 + 1); !d.empty()) return d;
      if (Diagnostics d = pp_group.recv(other, peer, 2 * stages * 64 + 1); !d.empty()) return d;
      if (Diagnostics d = pp_group.wait_sends(); !d.empty()) return d;
      for (size_t i = 0; i < mine.size(); ++i)
        mine[i] = tied_first ? mine[i] + other[i] : other[i] + mine[i];
    }
    // The loss: the head stage's tp rank 0 of every replica and context-parallel slice (every
    // tp rank's rows under sequence parallelism).
    double loss = me.tp == 0 || sp ? loss_sum : 0.0;
    if (Diagnostics d = group.all_reduce_sum(std::span<double>(&loss, 1)); !d.empty()) return d;
    // The gradient of this rank's slice, summed over the data-parallel replicas and the
    // context-parallel slices.
    std::span<float> g = grads;
    if (o.shard_gradients) {
      g = grad_slice;  // reduced after each backward
    } else if (split) {
      if (Diagnostics d = split->reduce(grads, grad_slice); !d.empty()) return d;
      g = grad_slice;
    } else if (o.shard_optimizer) {
      // In buckets, as Megatron's distributed optimizer reduces: no collective needs a
      // temporary buffer of the whole gradient.
      constexpr int64_t kBucket = int64_t{1} << 22;
      for (int64_t a = 0; a < padded; a += kBucket)
        sharded->reduce(a, std::min(padded, a + kBucket));
      if (!comm_errors.empty()) return comm_errors;
      g = grad_slice;
    } else if (o.ep == 1) {
      if (Diagnostics d = dp_group.all_reduce_sum(std::span<float>(grads)); !d.empty()) return d;
    } else {
      // Dense tensors over the data group, expert tensors over the ranks holding the same
      // experts (an expert's tokens from the whole ep group already reached it).
      for (const ChunkView& v : views)
        for (const TensorSlot& t : v.model->layout()) {
          const std::span<float> x = std::span<float>(grads).subspan(
              static_cast<size_t>(v.offset + t.offset), static_cast<size_t>(t.size()));
          if (Diagnostics d = (t.expert ? edp_group : dp_group).all_reduce_sum(x); !d.empty())
            return d;
        }
    }
    // Under sequence parallelism the tp ranks' shares of the replicated tensors' gradients (each
    // from its rows) add up to the replica's; summed after the data-parallel reduction, on the
    // slice this rank updates.
    if (!tp_summed.empty()) {
      for (size_t j = 0; j < tp_summed.size(); ++j) tp_buf[j] = g[tp_summed[j]];
      if (Diagnostics d = tp_group.all_reduce_sum(std::span<float>(tp_buf)); !d.empty()) return d;
      for (size_t j = 0; j < tp_summed.size(); ++j) g[tp_summed[j]] = tp_buf[j];
    }
    // Squared norm of the whole gradient: each element once over the job.
    double sq = 0;
    {
      const OpScope timed(OpKind::kOptimizer, false);
      for (const auto& [a, b] : counted) sq += squared_norm(g.subspan(a, b - a));
    }
    if (fault_is("nan", "step", step, group.rank())) sq = std::numeric_limits<double>::quiet_NaN();
    if (Diagnostics d = group.all_reduce_sum(std::span<double>(&sq, 1)); !d.empty()) return d;
    const double norm = std::sqrt(sq);
    // Stop before the update, so the weights stay those of the last good step; a pending
    // asynchronous save holds that state and still completes.
    if (auto stop = non_finite(group, step, loss / step_tokens, norm)) {
      result.stopped = stop;
      if (Diagnostics d = finish_pending(); !d.empty()) return d;
      break;
    }
    {
      const OpScope timed(OpKind::kOptimizer, false);
      if (o.shard_parameters) {
        adam.step(std::span<float>(own_params).first(owned), g.first(owned), norm, step);
      } else if (split) {
        for (const SliceRun& r : split->runs())
          adam.step_part(std::span<float>(params).subspan(r.flat, r.length),
                         g.subspan(r.at, r.length), norm, step, r.at);
      } else {
        adam.step(std::span<float>(params).subspan(first, owned), g.first(owned), norm, step);
      }
    }
    if (split && !o.shard_parameters) {
      if (Diagnostics d = split->gather(params); !d.empty()) return d;
    }
    if (dp_sharded && !o.shard_parameters) {
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
    r.ops = OpClock::seconds();
    if (o.op_times && pp == 1 && o.ep == 1) {
      // The ranks' operator time: without pipeline stages and routed experts every rank has
      // the same work, so a spread says a rank ran slower (a straggler).
      const double mine = r.ops.compute();
      r.ops_max_s = group.max(mine);
      r.ops_min_s = -group.max(-mine);
      r.slowest_rank = static_cast<int>(group.max(mine == r.ops_max_s ? group.rank() : -1));
    }
    result.steps.push_back(r);
    if (on_step) on_step(r);
    if (Diagnostics d = finish_pending(); !d.empty()) return d;
    if (o.save_every > 0 && !o.checkpoint_dir.empty() && step % o.save_every == 0) {
      const auto s0 = std::chrono::steady_clock::now();
      if (Diagnostics d = save(step); !d.empty()) return d;
      result.saved.push_back(step);
      result.save_time_s +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count();
    }
  }
  if (Diagnostics d = finish_pending(); !d.empty()) return d;
  summarise_steps(&result, step_tokens);
  return result;
}

void summarise_steps(TrainResult* r, double step_tokens) {
  std::vector<double> times;
  for (size_t i = r->steps.size() > 1 ? 1 : 0; i < r->steps.size(); ++i)
    times.push_back(r->steps[i].time_s);
  r->median_step_time_s = median(times);
  double closest = std::numeric_limits<double>::infinity();
  for (size_t i = r->steps.size() > 1 ? 1 : 0; i < r->steps.size(); ++i)
    if (const double d = std::abs(r->steps[i].time_s - r->median_step_time_s); d < closest) {
      closest = d;
      r->median_step = r->steps[i].step;
    }
  r->tokens_per_s = r->median_step_time_s > 0 ? step_tokens / r->median_step_time_s : 0;
  r->peak_memory_gib = r->steps.empty() ? 0 : r->steps.back().peak_memory_gib;
}

}  // namespace parallax::exec
