#include "core/model_spec.h"

namespace parallax {

double attention_params_per_layer(const ModelSpec& m) {
  const double h = static_cast<double>(m.hidden);
  if (m.mla) {
    const auto& a = *m.mla;
    const double qk = a.qk_nope_head_dim + a.qk_rope_head_dim;
    double q = a.q_lora_rank > 0 ? h * a.q_lora_rank + a.q_lora_rank * m.heads * qk + a.q_lora_rank
                                 : h * m.heads * qk;
    double kv = h * (a.kv_lora_rank + a.qk_rope_head_dim) + a.kv_lora_rank +
                a.kv_lora_rank * m.heads * (a.qk_nope_head_dim + a.v_head_dim);
    double o = static_cast<double>(m.heads) * a.v_head_dim * h;
    return q + kv + o;
  }
  const double d = m.head_dim;
  return h * d * (m.heads + 2.0 * m.kv_heads) + m.heads * d * h;
}

double mlp_params(const ModelSpec& m, int64_t ffn_width) {
  const double mats = m.ffn_act == FfnAct::kSwiglu ? 3.0 : 2.0;
  return mats * static_cast<double>(m.hidden) * static_cast<double>(ffn_width);
}

ParamCount count_params(const ModelSpec& m) {
  ParamCount p;
  const double h = static_cast<double>(m.hidden);
  p.embedding = static_cast<double>(m.vocab) * h;
  p.output = m.tied_embeddings ? 0.0 : static_cast<double>(m.vocab) * h;
  p.attention = m.layers * attention_params_per_layer(m);
  const int moe_layers = m.num_moe_layers();
  const int dense_layers = m.layers - moe_layers;
  p.dense_mlp = dense_layers * mlp_params(m, m.ffn_hidden);
  if (m.moe) {
    p.experts =
        static_cast<double>(moe_layers) * m.moe->experts * mlp_params(m, m.moe->expert_ffn_hidden);
    p.shared_experts = static_cast<double>(moe_layers) * m.moe->shared_experts *
                       mlp_params(m, m.moe->expert_ffn_hidden);
    p.router = static_cast<double>(moe_layers) * m.moe->experts * h;
  }
  p.norms = (2.0 * m.layers + 1.0) * h;
  p.mtp = m.mtp_layers * mtp_module_params(m);
  return p;
}

double mtp_module_params(const ModelSpec& m) {
  const double h = static_cast<double>(m.hidden);
  double mlp = mlp_params(m, m.ffn_hidden);
  if (m.is_moe_layer(m.layers)) {
    const MoeSpec& e = *m.moe;
    mlp = (e.experts + e.shared_experts) * mlp_params(m, e.expert_ffn_hidden) + e.experts * h;
  }
  // enorm, hnorm, eh_proj [2h -> h]; the block with its two norms; the module's final norm.
  return 2 * h + 2 * h * h + attention_params_per_layer(m) + mlp + 2 * h + h;
}

double ParamCount::active(const ModelSpec& m) const {
  if (!m.moe || m.moe->experts == 0) return total();
  return total() - experts + experts * m.moe->top_k / m.moe->experts;
}

Diagnostics validate_model(const ModelSpec& m, const std::string& where) {
  Diagnostics out;
  auto need_pos = [&](const char* field, double v) {
    if (!(v > 0))
      out.push_back({where + "/" + field,
                     std::string(field) + " must be positive, got " +
                         std::to_string(static_cast<long long>(v)),
                     ""});
  };
  // Upper bounds well above any published model (Llama 3.1 405B: 126 layers, hidden 16,384;
  // DeepSeek-V3: 256 experts; Gemma: vocab 262,144): a size beyond them is a typo, and
  // simulating it would take minutes or exhaust memory instead of answering.
  auto at_most = [&](const char* field, int64_t v, int64_t hi) {
    if (v > hi)
      out.push_back({where + "/" + field,
                     std::string(field) + "=" + std::to_string(v) + " is larger than any model",
                     "at most " + std::to_string(hi)});
  };
  at_most("layers", m.layers, 2048);
  at_most("hidden", m.hidden, int64_t{1} << 18);
  at_most("heads", m.heads, 4096);
  at_most("kv_heads", m.kv_heads, 4096);
  at_most("head_dim", m.head_dim, 4096);
  at_most("ffn_hidden", m.ffn_hidden, int64_t{1} << 21);
  at_most("vocab", m.vocab, int64_t{1} << 24);
  if (m.moe) {
    at_most("moe/experts", m.moe->experts, 1 << 16);
    at_most("moe/expert_ffn_hidden", m.moe->expert_ffn_hidden, int64_t{1} << 20);
  }
  need_pos("layers", m.layers);
  need_pos("hidden", static_cast<double>(m.hidden));
  need_pos("heads", m.heads);
  need_pos("vocab", static_cast<double>(m.vocab));
  if (!m.mla) {
    need_pos("kv_heads", m.kv_heads);
    need_pos("head_dim", m.head_dim);
    if (m.kv_heads > 0 && m.heads > 0 && m.heads % m.kv_heads != 0) {
      out.push_back(
          {where + "/kv_heads",
           "kv_heads=" + std::to_string(m.kv_heads) +
               " must divide heads=" + std::to_string(m.heads),
           "grouped-query attention shares each KV head among heads/kv_heads query heads"});
    }
  } else {
    if (m.mla->kv_lora_rank <= 0)
      out.push_back({where + "/mla/kv_lora_rank",
                     "must be positive, got " + std::to_string(m.mla->kv_lora_rank), ""});
    if (m.mla->qk_nope_head_dim + m.mla->qk_rope_head_dim <= 0)
      out.push_back({where + "/mla/qk_nope_head_dim", "qk head dim must be positive", ""});
    if (m.mla->v_head_dim <= 0)
      out.push_back({where + "/mla/v_head_dim",
                     "must be positive, got " + std::to_string(m.mla->v_head_dim), ""});
  }
  if (!(m.rope_theta >= 0) || !(m.norm_eps >= 0) || !(m.rope_scaling_factor >= 0))
    out.push_back({where + "/rope_theta",
                   "rope_theta, norm_eps and rope_scaling.factor must be non-negative numbers",
                   ""});
  if (m.rope_scaling != RopeScaling::kNone && !(m.rope_scaling_factor > 0))
    out.push_back(
        {where + "/rope_scaling/factor",
         "a rotary scaling needs a positive factor, got " + std::to_string(m.rope_scaling_factor),
         ""});
  if (m.moe) {
    const RouterSpec& r = m.moe->router;
    if (!(r.topk_scaling > 0))
      out.push_back({where + "/moe/router/topk_scaling",
                     "must be positive, got " + std::to_string(r.topk_scaling), ""});
    if (r.groups < 0 || r.group_topk < 0 || (r.groups > 0 && m.moe->experts % r.groups != 0) ||
        r.group_topk > r.groups)
      out.push_back(
          {where + "/moe/router/groups",
           "groups must divide the experts and group_topk be at most groups, got groups=" +
               std::to_string(r.groups) + " group_topk=" + std::to_string(r.group_topk),
           ""});
  }
  if (m.mtp_layers < 0 || m.mtp_layers > 16)
    out.push_back({where + "/mtp_layers",
                   "mtp_layers=" + std::to_string(m.mtp_layers) + " must be in [0, 16]",
                   "multi-token-prediction depth: DeepSeek-V3 trains with 1"});
  if (m.dropout < 0 || m.dropout >= 1)
    out.push_back(
        {where + "/dropout", "dropout must be in [0, 1), got " + std::to_string(m.dropout), ""});
  if (!m.moe || m.moe->dense_layers > 0) need_pos("ffn_hidden", static_cast<double>(m.ffn_hidden));
  if (m.moe) {
    const auto& e = *m.moe;
    if (e.experts <= 0)
      out.push_back(
          {where + "/moe/experts", "must be positive, got " + std::to_string(e.experts), ""});
    if (e.top_k <= 0 || e.top_k > e.experts)
      out.push_back({where + "/moe/top_k",
                     "top_k=" + std::to_string(e.top_k) +
                         " must be in [1, experts=" + std::to_string(e.experts) + "]",
                     ""});
    if (e.expert_ffn_hidden <= 0)
      out.push_back({where + "/moe/expert_ffn_hidden",
                     "must be positive, got " + std::to_string(e.expert_ffn_hidden), ""});
    if (e.shared_experts < 0)
      out.push_back({where + "/moe/shared_experts",
                     "must be >= 0, got " + std::to_string(e.shared_experts), ""});
    if (e.dense_layers < 0 || e.dense_layers >= m.layers)
      out.push_back({where + "/moe/dense_layers",
                     "dense_layers=" + std::to_string(e.dense_layers) +
                         " must be in [0, layers=" + std::to_string(m.layers) + ")",
                     ""});
  }
  return out;
}

}  // namespace parallax
