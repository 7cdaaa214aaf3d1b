#include "core/measured_run.h"

#include <cctype>

#include "core/text.h"

namespace parallax {
namespace {

std::optional<int> opt_int(JsonFields& f, const char* key) {
  if (!f.has(key)) return std::nullopt;
  return static_cast<int>(f.integer(key));
}
/// A parallel degree: `absent` when the key is left out, nullopt when it is null (the source
/// does not say).
std::optional<int> degree(JsonFields& f, const Json& obj, const char* key,
                          std::optional<int> absent) {
  if (!obj.contains(key)) return absent;
  if (obj.at(key).is_null()) return std::nullopt;
  return static_cast<int>(f.integer_in(key, 1, kMaxGpus, "a parallel degree"));
}
std::optional<bool> opt_bool(JsonFields& f, const char* key) {
  if (!f.has(key)) return std::nullopt;
  return f.boolean(key);
}
std::optional<double> opt_num(JsonFields& f, const char* key) {
  if (!f.has(key)) return std::nullopt;
  return f.number(key);
}

RecordStack read_stack(const Json& j, const std::string& where, Diagnostics* d) {
  JsonFields f(j, where, d);
  f.reject_unknown({"framework", "version", "kernels", "notes", "attention", "compiled"});
  RecordStack s;
  if (f.has("attention")) {
    const std::string a = f.string("attention");
    if (auto k = parse_attention(a))
      s.attention = *k;
    else
      d->push_back({f.path("attention"), "unknown attention kernel '" + text_excerpt(a, 40) + "'",
                    "valid: flash, flash2, flash1, unfused"});
  }
  if (f.has("compiled")) s.compiled = f.boolean("compiled");
  s.framework = f.string("framework", "");
  s.version = f.string("version", "");
  s.kernels = f.string("kernels", "");
  s.notes = f.string("notes", "");
  const std::string known = std::string(", ") + kRecordFrameworks + ", ";
  if (!s.framework.empty() && known.find(", " + s.framework + ", ") == std::string::npos)
    d->push_back({f.path("framework"), "unknown framework '" + text_excerpt(s.framework, 40) + "'",
                  std::string("valid: ") + kRecordFrameworks});
  return s;
}

PipelineSplit read_pipeline_split(const Json& j, const std::string& where, Diagnostics* d) {
  JsonFields f(j, where, d);
  f.reject_unknown(
      {"first_stage_layers", "last_stage_layers", "embedding_as_layer", "loss_as_layer", "layout"});
  PipelineSplit s;
  for (const auto& [key, target] : {std::pair{"first_stage_layers", &s.first_stage_layers},
                                    {"last_stage_layers", &s.last_stage_layers}})
    if (f.has(key))
      *target = static_cast<int>(f.integer_in(key, 0, 2048, "layers of one pipeline stage"));
  if (f.has("embedding_as_layer")) s.embedding_as_layer = f.boolean("embedding_as_layer");
  if (f.has("loss_as_layer")) s.loss_as_layer = f.boolean("loss_as_layer");
  s.layout = f.string("layout", "");
  return s;
}

}  // namespace

Result<MeasuredRun> measured_run_from_json(const Json& j, const std::string& where) {
  Diagnostics d;
  JsonFields f(j, where, &d);
  // Every key of validation/SCHEMA.md; another is a typo (a "measurd" block would otherwise
  // leave the record without its measurement, silently).
  f.reject_unknown({"id", "source", "source_url", "source_locator", "sweep", "stack",
                    "pipeline_split", "model", "seq_len", "cluster", "parallel", "batch",
                    "recompute", "precision", "measured", "unknown", "notes"});
  MeasuredRun r;
  r.where = where;
  r.id = f.name("id");
  r.source = f.string("source", "");
  r.source_url = f.string("source_url", "");
  r.source_locator = f.string("source_locator", "");
  r.sweep = f.string("sweep", "");
  if (const Json* s = f.object("stack")) r.stack = read_stack(*s, where + "/stack", &d);
  if (const Json* s = f.object("pipeline_split"))
    r.pipeline_split = read_pipeline_split(*s, where + "/pipeline_split", &d);
  if (const Json* m = f.object("model")) {
    auto mr = model_from_json(*m, where + "/model");
    r.dropout_given = m->is_object() && m->contains("dropout");
    if (mr)
      r.model = mr.value();
    else
      d.insert(d.end(), mr.errors().begin(), mr.errors().end());
  } else {
    d.push_back({f.path("model"), "missing", ""});
  }
  r.seq_len = f.integer("seq_len");
  if (const Json* c = f.object("cluster")) {
    JsonFields cf(*c, where + "/cluster", &d);
    cf.reject_unknown({"gpu", "num_gpus", "gpus_per_node"});
    r.gpu = cf.string("gpu");
    r.num_gpus = static_cast<int>(cf.integer_in("num_gpus", 1, kMaxGpus, "GPUs of the run"));
  } else {
    d.push_back({f.path("cluster"), "missing", ""});
  }
  if (const Json* p = f.object("parallel")) {
    JsonFields pf(*p, where + "/parallel", &d);
    pf.reject_unknown({"tp", "pp", "dp", "cp", "ep", "etp", "vpp", "sequence_parallel", "fsdp",
                       "distributed_optimizer"});
    for (auto [key, target] :
         {std::pair{"tp", &r.tp}, {"pp", &r.pp}, {"cp", &r.cp}, {"ep", &r.ep}, {"etp", &r.etp}})
      *target = degree(pf, *p, key, 1);
    r.dp = degree(pf, *p, "dp", std::nullopt);
    r.vpp = opt_int(pf, "vpp");
    r.sequence_parallel = opt_bool(pf, "sequence_parallel");
    r.fsdp = opt_bool(pf, "fsdp");
    r.distributed_optimizer = opt_bool(pf, "distributed_optimizer");
  }
  if (const Json* b = f.object("batch")) {
    JsonFields bf(*b, where + "/batch", &d);
    bf.reject_unknown({"micro_batch", "global_batch"});
    r.micro_batch = opt_int(bf, "micro_batch");
    r.global_batch = bf.integer("global_batch");
  } else {
    d.push_back({f.path("batch"), "missing", ""});
  }
  if (f.has("recompute")) {
    const std::string rc = f.string("recompute");
    if (auto k = parse_recompute(rc))
      r.recompute = *k;
    else
      d.push_back({f.path("recompute"), "unknown recompute mode '" + rc + "'",
                   "valid: none, selective, selective-op, full, null"});
  }
  const std::string prec = f.string("precision", "bf16");
  if (auto k = parse_precision(prec))
    r.precision = *k;
  else
    d.push_back({f.path("precision"), "unknown precision '" + prec + "'",
                 std::string("valid: ") + kPrecisionNames});
  if (const Json* m = f.object("measured")) {
    JsonFields mf(*m, where + "/measured", &d);
    mf.reject_unknown({"tflops_per_gpu", "flops_basis", "mfu", "tokens_per_s_per_gpu",
                       "step_time_s", "attention_flops"});
    r.tflops_per_gpu = opt_num(mf, "tflops_per_gpu");
    r.mfu = opt_num(mf, "mfu");
    r.tokens_per_s_per_gpu = opt_num(mf, "tokens_per_s_per_gpu");
    r.step_time_s = opt_num(mf, "step_time_s");
    const std::string basis = mf.string("flops_basis", "model");
    if (basis == "hardware" || basis == "model")
      r.flops_basis = basis == "hardware" ? FlopsBasis::kHardware : FlopsBasis::kModel;
    else
      d.push_back(
          {mf.path("flops_basis"), "unknown FLOP basis '" + basis + "'", "valid: model, hardware"});
    if (mf.has("attention_flops")) {
      const std::string att = mf.string("attention_flops");
      if (att == "causal" || att == "full")
        r.attention_flops = att == "causal" ? AttentionCounting::kCausal : AttentionCounting::kFull;
      else
        d.push_back({mf.path("attention_flops"), "unknown attention FLOP counting '" + att + "'",
                     "valid: full, causal, null"});
    }
    if (!r.tflops_per_gpu && !r.mfu && !r.tokens_per_s_per_gpu && !r.step_time_s)
      d.push_back({where + "/measured", "no measurement",
                   "give step_time_s, tokens_per_s_per_gpu, tflops_per_gpu or mfu"});
    for (auto [key, v] : {std::pair{"tflops_per_gpu", r.tflops_per_gpu},
                          {"mfu", r.mfu},
                          {"tokens_per_s_per_gpu", r.tokens_per_s_per_gpu},
                          {"step_time_s", r.step_time_s}})
      if (v && !(*v > 0))
        d.push_back(
            {mf.path(key), std::string(key) + " must be positive, got " + std::to_string(*v), ""});
    if (r.mfu && *r.mfu > 1)
      d.push_back({mf.path("mfu"), "mfu=" + format_number("%g", *r.mfu) + " is above 1",
                   "a fraction of the dense peak, 0..1 (not a percentage)"});
  } else {
    d.push_back({f.path("measured"), "missing", ""});
  }
  if (!d.empty()) return d;
  return r;
}

std::optional<double> arxiv_number(const std::string& url) {
  for (const char* prefix : {"arxiv.org/abs/", "arxiv.org/pdf/"}) {
    const size_t at = url.find(prefix);
    if (at == std::string::npos) continue;
    // YYMM.NNNN or YYMM.NNNNN (new-style identifiers, since 2007).
    const std::string id = url.substr(at + std::string(prefix).size());
    size_t digits = 0;
    while (digits < id.size() && std::isdigit(static_cast<unsigned char>(id[digits]))) ++digits;
    if (digits != 4 || id.size() < 9 || id[4] != '.') return std::nullopt;
    size_t end = 5;
    while (end < id.size() && std::isdigit(static_cast<unsigned char>(id[end]))) ++end;
    if (end - 5 < 4 || end - 5 > 5) return std::nullopt;
    // Five-digit numbers (2015 on) and four-digit ones order alike as YYMM + n / 1e5.
    return std::stod(id.substr(0, 4)) + std::stod(id.substr(5, end - 5)) / 1e5;
  }
  return std::nullopt;
}

const StackKernels& record_stack(const MeasuredRun& r) {
  if (const StackKernels* s = find_stack_kernels(r.stack.framework)) return *s;
  return r.fsdp.value_or(false) ? pytorch_fsdp_stack() : megatron_stack();
}

std::vector<std::string> unknown_degrees(const MeasuredRun& r) {
  std::vector<std::string> out;
  for (auto [name, v] :
       {std::pair{"tp", r.tp}, {"pp", r.pp}, {"cp", r.cp}, {"ep", r.ep}, {"etp", r.etp}})
    if (!v) out.emplace_back(name);
  return out;
}

ParallelPlan to_plan(const MeasuredRun& r) {
  ParallelPlan p;
  p.tp = r.tp.value_or(1);
  p.pp = r.pp.value_or(1);
  p.cp = r.cp.value_or(1);
  p.ep = r.ep.value_or(1);
  p.etp = r.etp.value_or(1);
  const int model_parallel = p.tp * p.pp * p.cp;
  p.dp = r.dp ? *r.dp : (model_parallel > 0 ? r.num_gpus / model_parallel : 0);
  p.vpp = r.vpp.value_or(1);
  p.schedule = p.vpp > 1 ? ScheduleKind::kInterleaved1F1B : ScheduleKind::k1F1B;
  p.micro_batch = r.micro_batch.value_or(1);
  p.global_batch = r.global_batch;
  p.seq_len = r.seq_len;
  p.sequence_parallel = r.sequence_parallel.value_or(p.tp > 1);
  p.recompute = r.recompute.value_or(Recompute::kNone);
  p.fsdp = r.fsdp.value_or(false);
  p.zero_stage = r.distributed_optimizer.value_or(false) ? 1 : 0;
  p.precision = r.precision;
  const StackKernels& stack = record_stack(r);
  p = apply_stack(stack, p);
  // What the record says of its kernels overrides the framework's defaults.
  if (r.stack.attention) p.attention = *r.stack.attention;
  if (r.stack.compiled) p.eager = !*r.stack.compiled;
  // FlashAttention (Dao et al., arXiv 2205.14135, May 2022) was the first fused attention kernel
  // frameworks adopted; a run published before it computed the s x s scores.
  constexpr double kFlashAttentionArxiv = 2205.14135;
  if (const auto a = arxiv_number(r.source_url);
      !r.stack.attention && a && *a < kFlashAttentionArxiv)
    p.attention = AttentionImpl::kUnfused;
  const int64_t stages = static_cast<int64_t>(p.pp) * p.vpp;
  if (stack.microbatch_per_stage && !r.micro_batch && p.pp > 1 && p.dp > 0 &&
      r.global_batch % p.dp == 0 && (r.global_batch / p.dp) % stages == 0)
    p.micro_batch = static_cast<int>(r.global_batch / p.dp / stages);
  return p;
}

ModelSpec to_model(const MeasuredRun& r) {
  ModelSpec m = r.model;
  // The stack's default (Megatron-LM's 0.1; the others' Llama-style models have none).
  if (!r.dropout_given) m.dropout = record_stack(r).default_dropout;
  return m;
}

}  // namespace parallax
