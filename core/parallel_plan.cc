#include "core/parallel_plan.h"

#include <cmath>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/text.h"

namespace parallax {
namespace {

std::string divisors_of(int64_t n, int64_t limit = 1 << 20) {
  std::vector<std::string> d;
  for (int64_t i = 1; i <= n && i <= limit; ++i)
    if (n % i == 0) d.push_back(std::to_string(i));
  std::string s = "{";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + d[i];
  return s + "}";
}

}  // namespace

FieldLocator flag_locator() {
  return [](const char* f) { return std::string("--") + f; };
}

FieldLocator json_locator(std::string prefix) {
  return [prefix](const char* f) {
    const std::string name = f;
    if (name == "mbs") return prefix + "/batch/micro_batch";
    if (name == "gbs") return prefix + "/batch/global_batch";
    if (name == "seq") return prefix + "/seq_len";
    if (name == "gpus") return prefix + "/cluster/num_gpus";
    if (name == "precision") return prefix + "/precision";
    if (name == "sp") return prefix + "/parallel/sequence_parallel";
    if (name == "moe-imbalance") return prefix + "/moe_imbalance";
    if (name == "moe-dispatcher") return prefix + "/moe/dispatcher";
    if (name == "moe-max-nodes") return prefix + "/moe/max_nodes";
    if (name == "moe-capacity-factor") return prefix + "/moe/capacity_factor";
    if (name == "overlap-moe-comm") return prefix + "/overlap/moe_comm";
    return prefix + "/parallel/" + name;
  };
}

int layers_in_virtual_stage(const ModelSpec& m, const ParallelPlan& p, int virtual_stage) {
  const int stages = p.pp * p.vpp;
  const int base = m.layers / stages, extra = m.layers % stages;
  // Extras go to stages [stages-1-extra, stages-1): not the last, which runs the output layer.
  const int first_extra = stages - extra - (extra > 0 && extra < stages ? 1 : 0);
  const bool gets_extra = virtual_stage >= first_extra && virtual_stage < first_extra + extra;
  return base + (gets_extra ? 1 : 0);
}

int first_layer_of_virtual_stage(const ModelSpec& m, const ParallelPlan& p, int virtual_stage) {
  int first = 0;
  for (int s = 0; s < virtual_stage; ++s) first += layers_in_virtual_stage(m, p, s);
  return first;
}

namespace {

using AddDiagnostic = std::function<void(const char*, std::string, std::string)>;

/// Degrees and sizes that must be positive; false when a degree is unusable.
bool check_positive(const ParallelPlan& p, const AddDiagnostic& add) {
  const struct {
    const char* name;
    int v;
  } degrees[] = {{"tp", p.tp}, {"pp", p.pp},   {"dp", p.dp},   {"cp", p.cp},
                 {"ep", p.ep}, {"etp", p.etp}, {"vpp", p.vpp}, {"mbs", p.micro_batch}};
  bool degrees_ok = true;
  for (const auto& d : degrees) {
    if (d.v < 1) {
      add(d.name, std::string(d.name) + " must be >= 1, got " + std::to_string(d.v), "");
      degrees_ok = false;
    }
  }
  if (p.seq_len <= 0)
    add("seq", "seq must be positive, got " + std::to_string(p.seq_len), "");
  else if (p.seq_len > kMaxSeqLen)
    add("seq", "seq=" + std::to_string(p.seq_len) + " is longer than any trained context",
        "at most " + std::to_string(kMaxSeqLen));
  if (p.global_batch <= 0)
    add("gbs", "gbs must be positive, got " + std::to_string(p.global_batch), "");
  else if (p.global_batch > kMaxGlobalBatch)
    add("gbs", "gbs=" + std::to_string(p.global_batch) + " sequences is beyond any training run",
        "at most " + std::to_string(kMaxGlobalBatch));
  else if (degrees_ok && p.num_microbatches() > kMaxMicrobatches)
    add("gbs",
        "gbs=" + std::to_string(p.global_batch) + " makes " + std::to_string(p.num_microbatches()) +
            " micro-batches per pipeline step",
        "at most " + std::to_string(kMaxMicrobatches) + ": raise --mbs or --dp");
  return degrees_ok;
}

/// Degrees, and the products the checks below form, within kMaxGpus (so no product of them
/// overflows int); false when one is not. Degrees are positive (check_positive).
bool check_bounded(const ParallelPlan& p, const Cluster& c, const AddDiagnostic& add) {
  const std::string limit = "at most " + std::to_string(kMaxGpus) + " GPUs";
  auto str = [](int v) { return std::to_string(v); };
  bool ok = true;
  if (c.num_gpus > kMaxGpus) {
    add("gpus", "gpus=" + str(c.num_gpus) + " is beyond the largest cluster modelled", limit);
    ok = false;
  }
  if (!within_max_gpus({p.tp, p.pp, p.dp, p.cp})) {
    add("gpus",
        "tp*pp*dp*cp=" + str(p.tp) + "*" + str(p.pp) + "*" + str(p.dp) + "*" + str(p.cp) +
            " is beyond the largest cluster modelled",
        limit);
    ok = false;
  }
  if (!within_max_gpus({p.ep, p.etp})) {
    add("ep", "ep*etp=" + str(p.ep) + "*" + str(p.etp) + " is beyond the largest cluster modelled",
        limit);
    ok = false;
  }
  if (!within_max_gpus({p.pp, p.vpp})) {
    add("vpp", "pp*vpp=" + str(p.pp) + "*" + str(p.vpp) + " is beyond the largest cluster modelled",
        "each virtual stage needs at least one layer");
    ok = false;
  }
  return ok;
}

/// How the layout splits the model: heads over tp, layers over stages, the schedule.
void check_model_split(const ModelSpec& m, const ParallelPlan& p, const AddDiagnostic& add) {
  if (m.heads % p.tp != 0)
    add("tp", "tp=" + std::to_string(p.tp) + " must divide heads=" + std::to_string(m.heads),
        "tp in " + divisors_of(m.heads, 64));
  if (!m.mla && m.kv_heads > 0 && m.kv_heads % p.tp != 0 && p.tp % m.kv_heads != 0)
    add("tp",
        "tp=" + std::to_string(p.tp) + " and kv_heads=" + std::to_string(m.kv_heads) +
            " must divide one another",
        "KV heads are split across tp ranks, or replicated when tp is a multiple of kv_heads");
  if (p.pp * p.vpp > m.layers)
    add("pp",
        "pp*vpp=" + std::to_string(p.pp * p.vpp) + " exceeds layers=" + std::to_string(m.layers),
        "each virtual stage needs at least one layer");
  if (p.vpp > 1 && p.pp == 1) add("vpp", "vpp=" + std::to_string(p.vpp) + " needs pp > 1", "");
  if (p.vpp > 1 && p.schedule != ScheduleKind::kInterleaved1F1B)
    add("vpp", "vpp=" + std::to_string(p.vpp) + " needs --schedule interleaved", "");
  if (p.schedule == ScheduleKind::kInterleaved1F1B && p.vpp < 2)
    add("schedule", "the interleaved schedule needs --vpp >= 2", "");
}

/// Batch and sequence against the data, context and sequence parallel split.
void check_batch(const ParallelPlan& p, const AddDiagnostic& add) {
  const int64_t per_step = static_cast<int64_t>(p.dp) * p.micro_batch;
  if (p.global_batch > 0 && p.global_batch % per_step != 0)
    add("gbs",
        "gbs=" + std::to_string(p.global_batch) +
            " must be a multiple of dp*mbs=" + std::to_string(per_step),
        "");
  else if (p.schedule == ScheduleKind::kInterleaved1F1B && p.global_batch > 0 &&
           p.num_microbatches() % p.pp != 0)
    add("gbs",
        "interleaved 1F1B needs microbatches=" + std::to_string(p.num_microbatches()) +
            " to be a multiple of pp=" + std::to_string(p.pp),
        "");
  if (p.seq_len > 0 && p.seq_len % p.cp != 0)
    add("cp", "cp=" + std::to_string(p.cp) + " must divide seq=" + std::to_string(p.seq_len), "");
  if (p.sequence_parallel && p.seq_len > 0 && (p.seq_len / p.cp) % p.tp != 0)
    add("sp",
        "sequence parallel needs seq/cp=" + std::to_string(p.seq_len / p.cp) +
            " divisible by tp=" + std::to_string(p.tp),
        "");
}

/// The MoE settings of a plan: node limit, capacity factor, and where Megatron-LM overlaps
/// expert-parallel communication (transformer_config.py's asserts on
/// overlap_moe_expert_parallel_comm).
void check_moe_settings(const ParallelPlan& p, const AddDiagnostic& add) {
  if (p.moe_max_nodes < 0)
    add("moe-max-nodes", "moe_max_nodes=" + std::to_string(p.moe_max_nodes) + " must be >= 0",
        "0 routes without a node limit (or by the model's own expert groups)");
  if (!(p.moe_capacity_factor >= 0) || !std::isfinite(p.moe_capacity_factor))
    add("moe-capacity-factor",
        "moe_capacity_factor=" + format_number("%g", p.moe_capacity_factor) + " must be >= 0",
        "0 is dropless; 1 caps every expert at its mean load");
  if (p.overlap_moe_comm && p.ep == 1)
    add("overlap-moe-comm", "overlapping expert-parallel communication needs ep > 1",
        "Megatron-LM asserts expert_model_parallel_size > 1");
  if (p.overlap_moe_comm && p.moe_dispatcher == MoeDispatcher::kAllGather)
    add("overlap-moe-comm",
        "overlapping expert-parallel communication needs the alltoall or flex dispatcher, got "
        "allgather",
        "--moe-dispatcher alltoall or flex");
  if (p.overlap_moe_comm && p.schedule != ScheduleKind::kInterleaved1F1B &&
      !(p.schedule == ScheduleKind::k1F1B && p.pp == 1))
    add("overlap-moe-comm",
        std::string("overlapping expert-parallel communication needs pp=1 or the interleaved "
                    "schedule, got ") +
            to_string(p.schedule) + " with pp=" + std::to_string(p.pp),
        p.schedule == ScheduleKind::kDualPipe
            ? "DualPipe overlaps it by itself: leave --overlap-moe-comm out"
            : "Megatron-LM's combined 1F1B needs virtual pipeline stages: --vpp 2 or more");
  if (p.overlap_moe_comm && p.recompute == Recompute::kFull)
    add("overlap-moe-comm", "overlapping expert-parallel communication runs without full recompute",
        "Megatron-LM asserts recompute_granularity != 'full' with it");
}

/// Expert parallelism: only for MoE models, dividing the experts and the stage's ranks.
void check_experts(const ModelSpec& m, const ParallelPlan& p, const AddDiagnostic& add) {
  if (!(p.moe_imbalance >= 1.0) || !std::isfinite(p.moe_imbalance))
    add("moe-imbalance",
        "moe_imbalance=" + format_number("%g", p.moe_imbalance) + " must be at least 1",
        "the busiest expert-parallel rank's routed tokens over the mean: 1 is even routing");
  check_moe_settings(p, add);
  if (!m.moe) {
    if (p.ep != 1)
      add("ep", "ep=" + std::to_string(p.ep) + " needs a mixture-of-experts model",
          "use ep=1 for dense models");
    if (p.etp != 1)
      add("etp", "etp=" + std::to_string(p.etp) + " needs a mixture-of-experts model",
          "use etp=1 for dense models");
    return;
  }
  if (m.moe->experts % p.ep != 0)
    add("ep",
        "ep=" + std::to_string(p.ep) + " must divide experts=" + std::to_string(m.moe->experts),
        "ep in " + divisors_of(m.moe->experts, 1024));
  if (p.tp > 1 && !p.sequence_parallel)
    add("sp", "MoE layers with tp=" + std::to_string(p.tp) + " need sequence parallelism",
        "use --sp 1: the MoE block runs on each rank's sequence shard (Megatron requires it)");
  const int fold = p.dp * p.cp * p.tp;
  if (fold % (p.ep * p.etp) != 0)
    add("ep",
        "ep*etp=" + std::to_string(p.ep * p.etp) + " must divide dp*cp*tp=" + std::to_string(fold),
        "experts are laid over the data, context and tensor parallel ranks of one stage");
}

}  // namespace

bool within_max_gpus(std::initializer_list<int> factors) {
  // Stops multiplying once past the bound, so the running product (< 2^24 * 2^31) never
  // overflows.
  int64_t product = 1;
  for (int f : factors) {
    product *= f;
    if (product > kMaxGpus) return false;
  }
  return true;
}

Diagnostics validate_plan(const ModelSpec& m, const Cluster& c, const ParallelPlan& p,
                          const FieldLocator& loc) {
  Diagnostics out;
  const AddDiagnostic add = [&](const char* f, std::string what, std::string hint) {
    out.push_back({loc(f), std::move(what), std::move(hint)});
  };
  if (!check_positive(p, add) || !check_bounded(p, c, add)) return out;
  if (c.num_gpus <= 0)
    add("gpus", "gpus must be positive, got " + std::to_string(c.num_gpus), "");
  else if (p.gpus() != c.num_gpus)
    add("gpus",
        "gpus=" + std::to_string(c.num_gpus) + " must equal tp*pp*dp*cp=" + std::to_string(p.tp) +
            "*" + std::to_string(p.pp) + "*" + std::to_string(p.dp) + "*" + std::to_string(p.cp) +
            "=" + std::to_string(p.gpus()),
        "leave --dp out to derive it from --gpus");
  check_model_split(m, p, add);
  check_batch(p, add);
  check_experts(m, p, add);
  if (p.zero_stage < 0 || p.zero_stage > 3)
    add("zero", "zero=" + std::to_string(p.zero_stage) + " must be 0, 1, 2 or 3", "");
  if (p.precision == Precision::kFp8 && c.hw.fp8_tflops <= 0)
    add("precision", "fp8 is not supported by " + c.hw.name, "use bf16");
  if (is_block_scaled(p.precision) && !c.hw.supports(p.precision))
    add("precision",
        std::string(to_string(p.precision)) + " is not supported by " + c.hw.name +
            ": its tensor cores have no block-scaled " + to_string(p.precision) +
            " GEMM (the profile gives no " + to_string(p.precision) + "_tflops)",
        "use fp8 or bf16 on this part; MXFP8 and NVFP4 need Blackwell (b200, b300, gb200, "
        "gb300)");
  if (p.precision == Precision::kFp32 && c.hw.fp32_tflops <= 0)
    add("precision", "fp32 needs an fp32 peak, and " + c.hw.name + " gives none",
        "a profile measured by `parallax calibrate` (CPU ranks train in fp32), or bf16");
  return out;
}

const char* to_string(Recompute r) {
  switch (r) {
    case Recompute::kNone:
      return "none";
    case Recompute::kSelective:
      return "selective";
    case Recompute::kSelectiveOp:
      return "selective-op";
    case Recompute::kFull:
      return "full";
  }
  return "?";
}

const char* to_string(CpComm c) { return c == CpComm::kRing ? "ring" : "allgather"; }

const char* to_string(AttentionImpl a) {
  switch (a) {
    case AttentionImpl::kFlash:
      return "flash";
    case AttentionImpl::kFlash2:
      return "flash2";
    case AttentionImpl::kUnfused:
      return "unfused";
    case AttentionImpl::kFlash1:
      return "flash1";
  }
  return "?";
}

const char* to_string(ScheduleKind s) {
  switch (s) {
    case ScheduleKind::k1F1B:
      return "1f1b";
    case ScheduleKind::kInterleaved1F1B:
      return "interleaved";
    case ScheduleKind::kZeroBubbleH1:
      return "zb-h1";
    case ScheduleKind::kDualPipe:
      return "dualpipe";
  }
  return "?";
}

const char* to_string(MoeDispatcher d) {
  switch (d) {
    case MoeDispatcher::kAllToAll:
      return "alltoall";
    case MoeDispatcher::kAllGather:
      return "allgather";
    case MoeDispatcher::kFlex:
      return "flex";
  }
  return "?";
}

}  // namespace parallax
