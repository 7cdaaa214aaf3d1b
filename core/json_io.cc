#include "core/json_io.h"

#include <algorithm>
#include <cmath>

#include "core/builtin_profiles.h"
#include "core/model_numerics_json.h"
#include "core/names.h"
#include "core/plan_moe_json.h"

namespace parallax {

std::optional<Recompute> parse_recompute(const std::string& s) {
  if (s == "none") return Recompute::kNone;
  if (s == "selective") return Recompute::kSelective;
  if (s == "selective-op") return Recompute::kSelectiveOp;
  if (s == "full") return Recompute::kFull;
  return std::nullopt;
}

std::optional<ScheduleKind> parse_schedule(const std::string& s) {
  if (s == "1f1b") return ScheduleKind::k1F1B;
  if (s == "interleaved" || s == "interleaved-1f1b") return ScheduleKind::kInterleaved1F1B;
  if (s == "zb-h1" || s == "zero-bubble") return ScheduleKind::kZeroBubbleH1;
  if (s == "dualpipe") return ScheduleKind::kDualPipe;
  return std::nullopt;
}

std::optional<Precision> parse_precision(const std::string& s) {
  if (s == "bf16" || s == "fp16") return Precision::kBf16;  // same tensor-core rate
  if (s == "fp8") return Precision::kFp8;
  if (s == "fp32") return Precision::kFp32;
  if (s == "mxfp8") return Precision::kMxfp8;
  if (s == "nvfp4") return Precision::kNvfp4;
  return std::nullopt;
}

std::optional<CollectiveOp> parse_collective(const std::string& s) {
  for (auto op : {CollectiveOp::kAllReduce, CollectiveOp::kAllGather, CollectiveOp::kReduceScatter,
                  CollectiveOp::kAllToAll, CollectiveOp::kSendRecv})
    if (s == to_string(op)) return op;
  return std::nullopt;
}

std::optional<FfnAct> parse_ffn_act(const std::string& s) {
  if (s == "gelu") return FfnAct::kGelu;
  if (s == "swiglu" || s == "silu") return FfnAct::kSwiglu;
  return std::nullopt;
}

std::optional<CpComm> parse_cp_comm(const std::string& s) {
  if (s == "ring" || s == "p2p") return CpComm::kRing;
  if (s == "allgather" || s == "all-gather") return CpComm::kAllGather;
  return std::nullopt;
}

std::optional<AttentionImpl> parse_attention(const std::string& s) {
  if (s == "flash") return AttentionImpl::kFlash;
  if (s == "flash2") return AttentionImpl::kFlash2;
  if (s == "flash1") return AttentionImpl::kFlash1;
  if (s == "unfused") return AttentionImpl::kUnfused;
  return std::nullopt;
}

Result<ModelSpec> model_from_json(const Json& j, const std::string& where) {
  Diagnostics d;
  JsonFields f(j, where, &d);
  f.reject_unknown({"name", "layers", "hidden", "heads", "kv_heads", "head_dim", "ffn_hidden",
                    "ffn_act", "vocab", "tied_embeddings", "dropout", "moe", "mla", "qk_norm",
                    "rope_theta", "norm_eps", "rope_scaling", "mtp_layers"});
  ModelSpec m;
  m.name = f.name("name", "custom");
  m.layers = static_cast<int>(f.integer("layers"));
  m.hidden = f.integer("hidden");
  m.heads = static_cast<int>(f.integer("heads"));
  const bool mla = f.has("mla");
  m.kv_heads = static_cast<int>(f.integer("kv_heads", m.heads));
  const int64_t default_hd = m.heads > 0 ? m.hidden / m.heads : 0;
  m.head_dim = static_cast<int>(f.integer("head_dim", default_hd));
  m.vocab = f.integer("vocab");
  m.tied_embeddings = f.boolean("tied_embeddings", false);
  m.dropout = f.number("dropout", 0.0);
  m.mtp_layers = static_cast<int>(f.integer("mtp_layers", 0));
  detail::read_model_numerics(f, where, &d, &m);
  const std::string act = f.string("ffn_act", "swiglu");
  if (auto a = parse_ffn_act(act))
    m.ffn_act = *a;
  else
    d.push_back({f.path("ffn_act"), "unknown activation '" + act + "'", "valid: gelu, swiglu"});
  if (const Json* moe = f.object("moe")) {
    JsonFields e(*moe, where + "/moe", &d);
    e.reject_unknown(
        {"experts", "top_k", "shared_experts", "expert_ffn_hidden", "dense_layers", "router"});
    MoeSpec s;
    s.experts = static_cast<int>(e.integer("experts"));
    s.top_k = static_cast<int>(e.integer("top_k"));
    s.shared_experts = static_cast<int>(e.integer("shared_experts", 0));
    s.expert_ffn_hidden = e.integer("expert_ffn_hidden");
    s.dense_layers = static_cast<int>(e.integer("dense_layers", 0));
    detail::read_router(e, where + "/moe", &d, &s.router);
    m.moe = s;
  }
  m.ffn_hidden = f.integer("ffn_hidden",
                           m.moe ? std::optional<int64_t>(m.moe->expert_ffn_hidden) : std::nullopt);
  if (mla) {
    JsonFields a(*f.object("mla"), where + "/mla", &d);
    a.reject_unknown(
        {"q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"});
    MlaSpec s;
    s.q_lora_rank = static_cast<int>(a.integer("q_lora_rank", 0));
    s.kv_lora_rank = static_cast<int>(a.integer("kv_lora_rank"));
    s.qk_nope_head_dim = static_cast<int>(a.integer("qk_nope_head_dim"));
    s.qk_rope_head_dim = static_cast<int>(a.integer("qk_rope_head_dim"));
    s.v_head_dim = static_cast<int>(a.integer("v_head_dim"));
    m.mla = s;
    m.head_dim = s.qk_nope_head_dim + s.qk_rope_head_dim;
    m.kv_heads = m.heads;
  }
  if (!d.empty()) return d;
  auto v = validate_model(m, where);
  if (!v.empty()) return v;
  return m;
}

Json to_json(const ModelSpec& m) {
  Json j = {{"name", m.name},
            {"layers", m.layers},
            {"hidden", m.hidden},
            {"heads", m.heads},
            {"kv_heads", m.kv_heads},
            {"head_dim", m.head_dim},
            {"ffn_hidden", m.ffn_hidden},
            {"ffn_act", m.ffn_act == FfnAct::kGelu ? "gelu" : "swiglu"},
            {"vocab", m.vocab},
            {"tied_embeddings", m.tied_embeddings},
            {"dropout", m.dropout},
            {"moe", nullptr},
            {"mla", nullptr}};
  if (m.moe)
    j["moe"] = {{"experts", m.moe->experts},
                {"top_k", m.moe->top_k},
                {"shared_experts", m.moe->shared_experts},
                {"expert_ffn_hidden", m.moe->expert_ffn_hidden},
                {"dense_layers", m.moe->dense_layers}};
  if (m.mla)
    j["mla"] = {{"q_lora_rank", m.mla->q_lora_rank},
                {"kv_lora_rank", m.mla->kv_lora_rank},
                {"qk_nope_head_dim", m.mla->qk_nope_head_dim},
                {"qk_rope_head_dim", m.mla->qk_rope_head_dim},
                {"v_head_dim", m.mla->v_head_dim}};
  if (m.mtp_layers > 0) j["mtp_layers"] = m.mtp_layers;
  detail::write_model_numerics(m, &j);
  return j;
}

namespace {

// The numeric fields of a profile, in file order, with their members.
struct NumField {
  const char* key;
  double HwProfile::*member;
  bool required;
};
struct IntField {
  const char* key;
  int HwProfile::*member;
  bool required;
};

constexpr NumField kNumFields[] = {
    {"bf16_tflops", &HwProfile::bf16_tflops, true},
    {"fp8_tflops", &HwProfile::fp8_tflops, false},
    {"fp32_tflops", &HwProfile::fp32_tflops, false},
    {"mxfp8_tflops", &HwProfile::mxfp8_tflops, false},
    {"nvfp4_tflops", &HwProfile::nvfp4_tflops, false},
    {"gemm_efficiency", &HwProfile::gemm_efficiency, true},
    {"fp8_gemm_efficiency", &HwProfile::fp8_gemm_efficiency, false},
    {"mxfp8_gemm_efficiency", &HwProfile::mxfp8_gemm_efficiency, false},
    {"nvfp4_gemm_efficiency", &HwProfile::nvfp4_gemm_efficiency, false},
    {"attention_fwd_efficiency", &HwProfile::attention_fwd_efficiency, true},
    {"attention_bwd_efficiency", &HwProfile::attention_bwd_efficiency, true},
    {"fa2_attention_fwd_efficiency", &HwProfile::fa2_attention_fwd_efficiency, false},
    {"fa2_attention_bwd_efficiency", &HwProfile::fa2_attention_bwd_efficiency, false},
    {"causal_attention_factor", &HwProfile::causal_attention_factor, false},
    {"fa2_causal_attention_factor", &HwProfile::fa2_causal_attention_factor, false},
    {"kernel_overhead_us", &HwProfile::kernel_overhead_us, false},
    {"hbm_gib", &HwProfile::hbm_gib, true},
    {"hbm_bw_gbps", &HwProfile::hbm_bw_gbps, true},
    {"hbm_efficiency", &HwProfile::hbm_efficiency, true},
    {"reserved_gib", &HwProfile::reserved_gib, false},
    {"scale_up_bw_gbps", &HwProfile::scale_up_bw_gbps, true},
    {"scale_up_efficiency", &HwProfile::scale_up_efficiency, true},
    {"scale_up_latency_us", &HwProfile::scale_up_latency_us, false},
    {"scale_out_bw_gbps", &HwProfile::scale_out_bw_gbps, true},
    {"scale_out_efficiency", &HwProfile::scale_out_efficiency, true},
    {"scale_out_latency_us", &HwProfile::scale_out_latency_us, false},
};
constexpr IntField kIntFields[] = {
    {"sm_count", &HwProfile::sm_count, true},
    {"gemm_tile_m", &HwProfile::gemm_tile_m, false},
    {"gemm_tile_n", &HwProfile::gemm_tile_n, false},
    {"gemm_k_overhead", &HwProfile::gemm_k_overhead, false},
    {"comm_sms", &HwProfile::comm_sms, false},
    {"gpus_per_node", &HwProfile::gpus_per_node, true},
    {"scale_up_domain", &HwProfile::scale_up_domain, true},
    {"shared_processors", &HwProfile::shared_processors, false},
};

}  // namespace

LinkClass read_link(JsonFields& s, Diagnostics* d) {
  const std::string link = s.string("link", "scale_up");
  if (link != "scale_up" && link != "scale_out")
    d->push_back({s.path("link"), "unknown link '" + text_excerpt(link, 40) + "'",
                  "valid: scale_up, scale_out"});
  return link == "scale_out" ? LinkClass::kScaleOut : LinkClass::kScaleUp;
}

namespace {

void read_tables(const Json& t, const std::string& where, HwProfile* p, Diagnostics* d) {
  JsonFields f(t, where, d);
  f.reject_unknown({"gemm", "memory", "attention", "collectives"});
  if (const Json* g = f.array("gemm")) {
    for (size_t i = 0; i < g->size(); ++i) {
      JsonFields s((*g)[i], where + "/gemm/" + std::to_string(i), d);
      GemmSample x{s.integer("m"), s.integer("n"), s.integer("k"), Precision::kBf16,
                   s.number("tflops")};
      x.spread = s.number("spread", 0.0);
      assign_enum(s.string("precision", "bf16"), s.path("precision"), "precision", parse_precision,
                  &x.precision, kPrecisionNames, d);
      p->gemm_samples.push_back(x);
    }
  }
  if (const Json* c = f.array("collectives")) {
    for (size_t i = 0; i < c->size(); ++i) {
      const std::string w = where + "/collectives/" + std::to_string(i);
      JsonFields s((*c)[i], w, d);
      CollectiveSample x;
      const std::string op = s.string("op");
      if (auto o = parse_collective(op))
        x.op = *o;
      else
        d->push_back({w + "/op", "unknown collective '" + op + "'",
                      "valid: all_reduce, all_gather, reduce_scatter, all_to_all, send_recv"});
      x.link = read_link(s, d);
      x.group_size = static_cast<int>(s.integer("group_size"));
      x.bytes = s.number("bytes");
      x.busbw_gbps = s.number("busbw_gbps");
      x.spread = s.number("spread", 0.0);
      p->collective_samples.push_back(x);
    }
  }
  if (const Json* m = f.array("memory")) {
    for (size_t i = 0; i < m->size(); ++i) {
      JsonFields s((*m)[i], where + "/memory/" + std::to_string(i), d);
      MemorySample x{s.string("kernel"), s.number("bytes"), s.number("gbps"),
                     s.number("spread", 0.0)};
      p->memory_samples.push_back(x);
    }
  }
  if (const Json* a = f.array("attention")) {
    for (size_t i = 0; i < a->size(); ++i) {
      JsonFields s((*a)[i], where + "/attention/" + std::to_string(i), d);
      AttentionSample x{s.integer("seq"), s.integer("head_dim"), s.boolean("backward", false),
                        s.number("tflops"), s.number("spread", 0.0)};
      p->attention_samples.push_back(x);
    }
  }
}

// Samples must be positive to be data (calibrate never writes others).
void check_tables(const HwProfile& p, const std::string& where, Diagnostics* d) {
  auto bad = [&](const std::string& w, const char* what) {
    d->push_back({w, std::string(what) + " must be positive", "a measured table holds data only"});
  };
  for (size_t i = 0; i < p.gemm_samples.size(); ++i) {
    const auto& s = p.gemm_samples[i];
    if (!(s.m > 0 && s.n > 0 && s.k > 0 && s.tflops > 0))
      bad(where + "/gemm/" + std::to_string(i), "m, n, k and tflops");
  }
  for (size_t i = 0; i < p.collective_samples.size(); ++i) {
    const auto& s = p.collective_samples[i];
    if (!(s.group_size > 1 && s.bytes > 0 && s.busbw_gbps > 0))
      bad(where + "/collectives/" + std::to_string(i), "group_size - 1, bytes and busbw_gbps");
  }
  for (size_t i = 0; i < p.memory_samples.size(); ++i) {
    const auto& s = p.memory_samples[i];
    if (!(s.bytes > 0 && s.gbps > 0)) bad(where + "/memory/" + std::to_string(i), "bytes and gbps");
  }
  for (size_t i = 0; i < p.attention_samples.size(); ++i) {
    const auto& s = p.attention_samples[i];
    if (!(s.seq > 0 && s.head_dim > 0 && s.tflops > 0))
      bad(where + "/attention/" + std::to_string(i), "seq, head_dim and tflops");
  }
}

}  // namespace

Result<HwProfile> profile_from_json(const Json& j, const std::string& where) {
  Diagnostics d;
  JsonFields f(j, where, &d);
  std::vector<std::string> known = {"name", "description", "measured", "measured_tables",
                                    "date", "driver",      "notes"};
  for (const auto& nf : kNumFields) known.push_back(nf.key);
  for (const auto& inf : kIntFields) known.push_back(inf.key);
  f.reject_unknown(known);
  HwProfile p;
  p.name = f.name("name");
  p.description = f.string("description", "");
  p.measured = f.boolean("measured", false);
  p.date = f.string("date", "");
  p.driver = f.string("driver", "");
  for (const auto& nf : kNumFields)
    p.*(nf.member) =
        f.number(nf.key, nf.required ? std::nullopt : std::optional<double>(p.*(nf.member)));
  for (const auto& inf : kIntFields)
    p.*(inf.member) = static_cast<int>(
        f.integer(inf.key, inf.required ? std::nullopt : std::optional<int64_t>(p.*(inf.member))));
  if (const Json* t = f.object("measured_tables")) {
    read_tables(*t, where + "/measured_tables", &p, &d);
    check_tables(p, where + "/measured_tables", &d);
  }
  p.sources = f.sources();
  if (!d.empty()) return d;
  auto v = validate_profile(p, where);
  if (!v.empty()) return v;
  return p;
}

Json to_json(const HwProfile& p) {
  Json j = {{"name", p.name}, {"description", p.description}, {"measured", p.measured}};
  if (!p.date.empty()) j["date"] = p.date;
  if (!p.driver.empty()) j["driver"] = p.driver;
  // An optional number the profile never gave stays out (rather than "0, unspecified").
  auto put = [&](const char* key, double v, bool required) {
    auto it = p.sources.find(key);
    if (!required && v == 0 && it == p.sources.end()) return;
    j[key] = {{"value", v}, {"source", it == p.sources.end() ? "unspecified" : it->second}};
  };
  for (const auto& nf : kNumFields) put(nf.key, p.*(nf.member), nf.required);
  for (const auto& inf : kIntFields) put(inf.key, p.*(inf.member), inf.required);
  if (p.has_measured_tables()) {
    // A spread that was not recorded stays out.
    auto spread = [](Json* row, double v) {
      if (v > 0) (*row)["spread"] = v;
    };
    Json g = Json::array(), c = Json::array(), m = Json::array(), a = Json::array();
    for (const auto& s : p.gemm_samples) {
      Json row = {{"m", s.m},
                  {"n", s.n},
                  {"k", s.k},
                  {"precision", to_string(s.precision)},
                  {"tflops", s.tflops}};
      spread(&row, s.spread);
      g.push_back(row);
    }
    for (const auto& s : p.collective_samples) {
      Json row = {{"op", to_string(s.op)},
                  {"link", to_string(s.link)},
                  {"group_size", s.group_size},
                  {"bytes", s.bytes},
                  {"busbw_gbps", s.busbw_gbps}};
      spread(&row, s.spread);
      c.push_back(row);
    }
    for (const auto& s : p.memory_samples) {
      Json row = {{"kernel", s.kernel}, {"bytes", s.bytes}, {"gbps", s.gbps}};
      spread(&row, s.spread);
      m.push_back(row);
    }
    for (const auto& s : p.attention_samples) {
      Json row = {
          {"seq", s.seq}, {"head_dim", s.head_dim}, {"backward", s.backward}, {"tflops", s.tflops}};
      spread(&row, s.spread);
      a.push_back(row);
    }
    Json t = Json::object();
    if (!g.empty()) t["gemm"] = g;
    if (!m.empty()) t["memory"] = m;
    if (!a.empty()) t["attention"] = a;
    if (!c.empty()) t["collectives"] = c;
    j["measured_tables"] = t;
  }
  return j;
}

Result<std::vector<HwProfile>> builtin_profiles() {
  std::vector<HwProfile> out;
  Diagnostics d;
  for (const auto& [stem, text] : builtin_profile_texts()) {
    const std::string file = "hw_profiles/" + stem + ".json";
    auto j = parse_json(text, file);
    if (!j) {
      d.insert(d.end(), j.errors().begin(), j.errors().end());
      continue;
    }
    auto p = profile_from_json(*j, file + ":");
    if (!p) {
      d.insert(d.end(), p.errors().begin(), p.errors().end());
      continue;
    }
    out.push_back(std::move(p).value());
  }
  if (!d.empty()) return d;
  return out;
}

Result<HwProfile> find_profile(const std::vector<HwProfile>& profiles, const std::string& name,
                               const std::string& where) {
  std::vector<std::string> names;
  for (const auto& p : profiles) {
    if (p.name == name) return p;
    names.push_back(p.name);
  }
  return Diagnostic{where, "unknown hardware profile '" + name + "'",
                    unknown_name_hint(name, names)};
}

namespace {

/// Reads an optional enum-valued field; an unknown name is reported with the valid ones.
template <typename E, typename Parse>
void read_enum(JsonFields& f, const char* key, Parse parse, E* target, const char* valid,
               Diagnostics* d) {
  if (f.has(key)) assign_enum(f.string(key), f.path(key), key, parse, target, valid, d);
}

}  // namespace

Result<Scenario> scenario_from_json(const Json& j, const std::string& where,
                                    ParallelPlan defaults) {
  Diagnostics d;
  JsonFields f(j, where, &d);
  // A plan file (`parallax plan --out`) is a scenario with its format and predicted figures.
  f.reject_unknown({"model", "cluster", "parallel", "batch", "seq_len", "recompute", "precision",
                    "attention", "eager", "moe_imbalance", "moe", "overlap", "notes", "format",
                    "predicted"});
  // A plan file of another format version may mean other things by the same keys.
  if (f.has("format")) {
    const std::string format = f.string("format");
    if (format != kPlanFileFormat && f.object("format")->is_string())
      d.push_back({f.path("format"), "unknown format '" + text_excerpt(format, 40) + "'",
                   std::string("this parallax reads ") + kPlanFileFormat +
                       "; write the plan again with this version's `parallax plan --out`"});
  }
  if (const Json* pred = f.object("predicted"); pred && !pred->is_object())
    d.push_back({f.path("predicted"), "expected an object, got " + json_excerpt(*pred), ""});
  if (const Json* notes = f.object("notes"); notes && !notes->is_string() && !notes->is_array())
    d.push_back({f.path("notes"), "expected text, got " + json_excerpt(*notes), ""});
  Scenario s;
  s.plan = defaults;
  ParallelPlan& p = s.plan;
  if (f.has("model")) {
    const Json& m = *f.object("model");
    if (m.is_string())
      s.model_name = m.get<std::string>();
    else if (auto r = model_from_json(m, where + "/model"))
      s.model = r.value();
    else
      d.insert(d.end(), r.errors().begin(), r.errors().end());
  }
  if (const Json* c = f.object("cluster")) {
    JsonFields cf(*c, where + "/cluster", &d);
    cf.reject_unknown({"gpu", "num_gpus", "gpus_per_node"});
    if (cf.has("gpu")) s.gpu = cf.string("gpu");
    if (cf.has("num_gpus"))
      s.num_gpus = static_cast<int>(
          cf.integer_in("num_gpus", 1, kMaxGpus, "GPUs of the cluster the layout runs on"));
    if (cf.has("gpus_per_node")) cf.integer_in("gpus_per_node", 1, 1 << 16, "GPUs of one node");
  }
  if (const Json* par = f.object("parallel")) {
    JsonFields pf(*par, where + "/parallel", &d);
    pf.reject_unknown({"tp", "pp", "dp", "cp", "ep", "etp", "vpp", "sequence_parallel", "fsdp",
                       "zero", "distributed_optimizer", "schedule", "cp_comm",
                       "pp_scatter_gather"});
    auto deg = [&](const char* k, int* v) { *v = static_cast<int>(pf.integer(k, *v)); };
    deg("tp", &p.tp);
    deg("pp", &p.pp);
    deg("cp", &p.cp);
    deg("ep", &p.ep);
    deg("etp", &p.etp);
    deg("vpp", &p.vpp);
    if (pf.has("dp")) {
      p.dp = static_cast<int>(pf.integer("dp"));
      s.dp_given = true;
    }
    p.sequence_parallel = pf.boolean("sequence_parallel", p.sequence_parallel);
    p.fsdp = pf.boolean("fsdp", p.fsdp);
    p.zero_stage = static_cast<int>(pf.integer("zero", p.zero_stage));
    if (pf.boolean("distributed_optimizer", false)) p.zero_stage = std::max(p.zero_stage, 1);
    read_enum(pf, "schedule", parse_schedule, &p.schedule, "1f1b, interleaved, zb-h1, dualpipe",
              &d);
    read_enum(pf, "cp_comm", parse_cp_comm, &p.cp_comm, "ring, allgather", &d);
    p.pp_scatter_gather = pf.boolean("pp_scatter_gather", p.pp_scatter_gather);
  }
  if (const Json* b = f.object("batch")) {
    JsonFields bf(*b, where + "/batch", &d);
    bf.reject_unknown({"micro_batch", "global_batch"});
    p.micro_batch = static_cast<int>(bf.integer("micro_batch", p.micro_batch));
    p.global_batch = bf.integer("global_batch", p.global_batch);
  }
  p.seq_len = f.integer("seq_len", p.seq_len);
  read_enum(f, "recompute", parse_recompute, &p.recompute, "none, selective, selective-op, full",
            &d);
  read_enum(f, "precision", parse_precision, &p.precision, kPrecisionNames, &d);
  read_enum(f, "attention", parse_attention, &p.attention, "flash, flash2, flash1, unfused", &d);
  p.eager = f.boolean("eager", p.eager);
  p.moe_imbalance = f.number("moe_imbalance", p.moe_imbalance);
  detail::read_moe_plan(f, where, &d, &p);
  if (const Json* o = f.object("overlap")) {
    JsonFields of(*o, where + "/overlap", &d);
    of.reject_unknown({"grad_reduce", "param_gather", "tp_comm", "moe_comm"});
    p.overlap_grad_reduce = of.boolean("grad_reduce", p.overlap_grad_reduce);
    p.overlap_param_gather = of.boolean("param_gather", p.overlap_param_gather);
    p.overlap_tp_comm = of.boolean("tp_comm", p.overlap_tp_comm);
    p.overlap_moe_comm = of.boolean("moe_comm", p.overlap_moe_comm);
  }
  if (!d.empty()) return d;
  return s;
}

Json plan_to_json(const ParallelPlan& p) {
  Json j = {{"parallel",
             {{"tp", p.tp},
              {"pp", p.pp},
              {"dp", p.dp},
              {"cp", p.cp},
              {"ep", p.ep},
              {"etp", p.etp},
              {"vpp", p.vpp},
              {"sequence_parallel", p.sequence_parallel},
              {"zero", p.zero_stage},
              {"fsdp", p.fsdp},
              {"schedule", to_string(p.schedule)},
              {"cp_comm", to_string(p.cp_comm)},
              {"pp_scatter_gather", p.pp_scatter_gather}}},
            {"batch", {{"micro_batch", p.micro_batch}, {"global_batch", p.global_batch}}},
            {"seq_len", p.seq_len},
            {"recompute", to_string(p.recompute)},
            {"precision", to_string(p.precision)},
            {"attention", to_string(p.attention)},
            {"eager", p.eager},
            {"moe_imbalance", p.moe_imbalance},
            {"overlap",
             {{"grad_reduce", p.overlap_grad_reduce},
              {"param_gather", p.overlap_param_gather},
              {"tp_comm", p.overlap_tp_comm}}}};
  detail::write_moe_plan(p, &j);
  return j;
}

}  // namespace parallax
