// Prefill and KV-cached decode over the executor's model (dense layers), tensor- and pipeline-
// parallel, with the same operators as training: attention_forward reads the cache with the new
// queries at their true positions (AttentionShape::q_offset), so no kernel is written twice.

#include "executor/generate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <random>

#include "executor/checkpoint.h"
#include "executor/model_ops.h"
#include "executor/moe.h"
#include "executor/train_state.h"
#include "executor/trainer.h"

namespace parallax::exec {
namespace {

using ops::RowMatrix;

/// One pipeline stage's layers with their KV cache: batch sequences of up to max_len positions.
class StageDecoder {
 public:
  StageDecoder(const Transformer<float>& m, std::span<const float> params, int64_t batch,
               int64_t max_len)
      : m_(m), p_(params), batch_(batch), max_len_(max_len) {
    for (const TensorSlot& s : m.layout()) slots_[s.name] = &s;
    const ModelShape& s = m.shape();
    const StageRange& st = m.stage();
    for (int64_t l = st.first_layer; l < st.end_layer; ++l) {
      const int64_t kv_cols = slot(l, "wk").cols;
      k_.emplace_back(batch * max_len, kv_cols);
      v_.emplace_back(batch * max_len, kv_cols);
    }
    heads_ = st.end_layer > st.first_layer ? slot(st.first_layer, "wq").cols / s.head_dim : 0;
  }

  /// h (batch * n rows) = the embedding of `tokens` (batch * n ids).
  void embed(std::span<const int32_t> tokens, RowMatrix<float>& h) const {
    const auto e = mat(*slots_.at("embed"));
    h.resize(static_cast<int64_t>(tokens.size()), m_.shape().hidden);
    for (size_t r = 0; r < tokens.size(); ++r) h.row(static_cast<int64_t>(r)) = e.row(tokens[r]);
  }

  /// The stage's layers over positions [pos, pos + n) of every sequence, in place.
  void layers(RowMatrix<float>& h, int64_t n, int64_t pos) {
    const ModelShape& s = m_.shape();
    const float eps = static_cast<float>(s.norm_eps);
    const int64_t rows = batch_ * n, hd = s.head_dim;
    RowMatrix<float> xn(rows, s.hidden), out(rows, s.hidden);
    std::vector<float> rstd(static_cast<size_t>(rows));
    const ops::RotaryTable<float> rope(n, hd, s.rope_theta, pos);
    const StageRange& st = m_.stage();
    for (int64_t l = st.first_layer; l < st.end_layer; ++l) {
      RowMatrix<float>& kc = k_[static_cast<size_t>(l - st.first_layer)];
      RowMatrix<float>& vc = v_[static_cast<size_t>(l - st.first_layer)];
      const int64_t kv_heads = kc.cols() / hd;
      ops::rms_norm_forward<float>(h, vec(slot(l, "attn_norm")), eps, xn, rstd);
      RowMatrix<float> q = xn * mat(slot(l, "wq"));
      RowMatrix<float> k = xn * mat(slot(l, "wk"));
      RowMatrix<float> v = xn * mat(slot(l, "wv"));
      rope.rotate(q, heads_, false);
      rope.rotate(k, kv_heads, false);
      for (int64_t b = 0; b < batch_; ++b) {
        kc.middleRows(b * max_len_ + pos, n) = k.middleRows(b * n, n);
        vc.middleRows(b * max_len_ + pos, n) = v.middleRows(b * n, n);
      }
      // The cache's rows per sequence are max_len apart; queries at pos.. see keys 0..pos+i.
      const ops::AttentionShape shape{batch_, n, heads_, kv_heads, hd, max_len_, pos};
      RowMatrix<float> attn(rows, q.cols());
      std::vector<float> lse(static_cast<size_t>(rows * heads_));
      ops::attention_forward<float>(shape, q, kc, vc, attn, lse);
      out.noalias() = attn * mat(slot(l, "wo"));
      reduce(out);
      h += out;
      ops::rms_norm_forward<float>(h, vec(slot(l, "mlp_norm")), eps, xn, rstd);
      const bool moe = s.is_moe_layer(l);
      const std::string dense = moe ? "shared." : "";  // a MoE layer's shared experts
      if (!moe || s.moe.shared_experts > 0) {
        const RowMatrix<float> gate = xn * mat(slot(l, (dense + "w_gate").c_str()));
        const RowMatrix<float> up = xn * mat(slot(l, (dense + "w_up").c_str()));
        RowMatrix<float> act(rows, gate.cols());
        ops::swiglu_forward<float>(gate, up, act);
        out.noalias() = act * mat(slot(l, (dense + "w_down").c_str()));
        reduce(out);
        h += out;
      }
      if (moe) {  // the routed experts, every one of them on this rank (no ep in generation)
        const MoeConfig c{s.moe.experts, s.moe.top_k,          s.moe.expert_ffn_hidden,
                          s.hidden,      s.moe.aux_loss_coeff, rows};
        const MoeWeights<ConstMatrixMap<float>> w{
            mat(slot(l, "router")), mat(slot(l, "experts.w_gate")), mat(slot(l, "experts.w_up")),
            mat(slot(l, "experts.w_down"))};
        MoeActs<float> acts;
        moe_forward<float>(c, ExpertParallel<float>{}, {}, xn, w, acts, out);
        h += out;
      }
    }
  }

  /// The logits of each sequence's last position (head stage): batch x vocab.
  RowMatrix<float> logits(const RowMatrix<float>& h, int64_t n) const {
    const ModelShape& s = m_.shape();
    RowMatrix<float> last(batch_, s.hidden), x(batch_, s.hidden);
    for (int64_t b = 0; b < batch_; ++b) last.row(b) = h.row(b * n + n - 1);
    std::vector<float> rstd(static_cast<size_t>(batch_));
    ops::rms_norm_forward<float>(last, vec(*slots_.at("final_norm")),
                                 static_cast<float>(s.norm_eps), x, rstd);
    if (s.tied_embeddings) return x * mat(*slots_.at("embed")).transpose();
    return x * mat(*slots_.at("output"));
  }

 private:
  const TensorSlot& slot(int64_t layer, const char* name) const {
    return *slots_.at("layers." + std::to_string(layer) + "." + name);
  }
  Eigen::Map<const RowMatrix<float>> mat(const TensorSlot& t) const {
    return Eigen::Map<const RowMatrix<float>>(p_.data() + t.offset, t.rows, t.cols);
  }
  std::span<const float> vec(const TensorSlot& t) const {
    return p_.subspan(static_cast<size_t>(t.offset), static_cast<size_t>(t.size()));
  }
  void reduce(RowMatrix<float>& x) const {
    const TensorParallel<float>& tp = m_.tensor_parallel();
    if (tp.size > 1) tp.all_reduce(std::span<float>(x.data(), static_cast<size_t>(x.size())));
  }

  const Transformer<float>& m_;
  std::span<const float> p_;
  int64_t batch_, max_len_, heads_ = 0;
  std::map<std::string, const TensorSlot*> slots_;
  std::vector<RowMatrix<float>> k_, v_;
};

/// The next id of each sequence: argmax (the lowest id on ties), or a sample of
/// softmax(logits / temperature).
std::vector<int32_t> pick(const RowMatrix<float>& logits, double temperature,
                          std::mt19937_64& rng) {
  std::vector<int32_t> next(static_cast<size_t>(logits.rows()));
  for (int64_t b = 0; b < logits.rows(); ++b) {
    const auto row = logits.row(b);
    Eigen::Index best = 0;
    row.maxCoeff(&best);
    if (temperature <= 0) {
      next[static_cast<size_t>(b)] = static_cast<int32_t>(best);
      continue;
    }
    std::vector<double> w(static_cast<size_t>(row.size()));
    double sum = 0;
    for (Eigen::Index i = 0; i < row.size(); ++i)
      sum += w[static_cast<size_t>(i)] = std::exp((row(i) - row(best)) / temperature);
    double u = std::uniform_real_distribution<double>(0, sum)(rng);
    Eigen::Index i = 0;
    for (; i + 1 < row.size() && u >= w[static_cast<size_t>(i)]; ++i)
      u -= w[static_cast<size_t>(i)];
    next[static_cast<size_t>(b)] = static_cast<int32_t>(i);
  }
  return next;
}

}  // namespace

Result<GenerateResult> generate(const ModelShape& shape,
                                const std::vector<std::vector<int32_t>>& prompts,
                                const GenerateOptions& o, ProcessGroup& group) {
  Diagnostics bad;
  if (prompts.empty() || prompts.front().empty())
    bad.push_back({"--prompt", "needs at least one token", ""});
  for (const auto& p : prompts)
    if (!prompts.empty() && p.size() != prompts.front().size())
      bad.push_back({"--prompt", "prompts of a batch must have equal lengths", ""});
  if (o.max_new_tokens < 1)
    bad.push_back(
        {"--max-new-tokens", "must be at least 1, got " + std::to_string(o.max_new_tokens), ""});
  if (group.size() != o.tp * o.pp)
    bad.push_back({"--gpus",
                   "generation runs on tp * pp = " + std::to_string(o.tp * o.pp) +
                       " ranks, the job has " + std::to_string(group.size()),
                   "data and context parallelism do not apply to generation here"});
  if (shape.layers % o.pp != 0)
    bad.push_back({"--pp",
                   std::to_string(shape.layers) +
                       " layers do not split into pp=" + std::to_string(o.pp) + " stages",
                   ""});
  if (shape.kv_heads % o.tp != 0 || shape.ffn_hidden % o.tp != 0)
    bad.push_back(
        {"--tp", "tp=" + std::to_string(o.tp) + " must divide kv_heads and ffn_hidden", ""});
  if (!bad.empty()) return bad;
  auto groups = split_groups(group, o.tp, 1, o.pp);
  if (!groups) return groups.errors();
  const RankCoords me = groups->me;
  ProcessGroup& tp_group = *groups->tp;
  ProcessGroup& pp_group = *groups->pp;
  Diagnostics comm_errors;
  TensorParallel<float> tp{o.tp, me.tp, [&](std::span<float> x) {
                             if (comm_errors.empty()) comm_errors = tp_group.all_reduce_sum(x);
                           }};
  const int64_t per = shape.layers / o.pp;
  const bool first = me.pp == 0, last = me.pp == o.pp - 1;
  const Transformer<float> model(shape, tp,
                                 StageRange{me.pp * per, (me.pp + 1) * per, first, last});
  std::vector<float> params(static_cast<size_t>(model.num_params()));
  GenerateResult result;
  if (o.checkpoint_dir.empty()) {
    model.init(params, o.seed);
  } else {
    auto ckpt = Checkpoint::open_latest(o.checkpoint_dir);
    if (!ckpt) return ckpt.errors();
    if (Diagnostics d = check_checkpoint_model(*ckpt, shape); !d.empty()) return d;
    const ChunkView view{&model, 0};
    if (Diagnostics d =
            read_pieces(*ckpt, std::span<const ChunkView>(&view, 1), 0, params, "param");
        !d.empty())
      return d;
    result.checkpoint_step = ckpt->step();
  }

  const auto batch = static_cast<int64_t>(prompts.size());
  const auto prompt_len = static_cast<int64_t>(prompts.front().size());
  StageDecoder decoder(model, params, batch, prompt_len + o.max_new_tokens);
  std::vector<int32_t> tokens;
  for (const auto& p : prompts) tokens.insert(tokens.end(), p.begin(), p.end());
  for (int32_t t : tokens)
    if (t < 0 || t >= shape.vocab)
      return Diagnostic{"--prompt",
                        "token " + std::to_string(t) + " outside the vocabulary of " +
                            std::to_string(shape.vocab),
                        ""};
  std::mt19937_64 rng(o.seed);
  std::vector<std::vector<int32_t>> out(static_cast<size_t>(batch));
  RowMatrix<float> h;
  std::vector<float> wire;
  group.barrier();
  const auto t0 = std::chrono::steady_clock::now();
  double first_token_s = 0;
  for (int64_t i = 0; i < o.max_new_tokens; ++i) {
    const int64_t n = i == 0 ? prompt_len : 1, pos = i == 0 ? 0 : prompt_len + i - 1;
    if (first) {
      decoder.embed(tokens, h);
    } else {
      h.resize(batch * n, shape.hidden);
      if (Diagnostics d = pp_group.recv(std::span<float>(h.data(), static_cast<size_t>(h.size())),
                                        me.pp - 1, 0);
          !d.empty())
        return d;
    }
    decoder.layers(h, n, pos);
    if (!comm_errors.empty()) return comm_errors;
    if (!last) {
      if (Diagnostics d = pp_group.send(
              std::span<const float>(h.data(), static_cast<size_t>(h.size())), me.pp + 1, 0);
          !d.empty())
        return d;
    } else {
      tokens = pick(decoder.logits(h, n), o.temperature, rng);
      for (int64_t b = 0; b < batch; ++b) out[static_cast<size_t>(b)].push_back(tokens[b]);
    }
    // The last stage hands the new ids to the first (as floats: exact below 2^24).
    if (o.pp > 1 && i + 1 < o.max_new_tokens) {
      wire.assign(static_cast<size_t>(batch), 0.0f);
      if (last) {
        std::transform(tokens.begin(), tokens.end(), wire.begin(),
                       [](int32_t t) { return static_cast<float>(t); });
        if (Diagnostics d = pp_group.send(wire, 0, 1); !d.empty()) return d;
      }
      if (first) {
        if (Diagnostics d = pp_group.recv(wire, o.pp - 1, 1); !d.empty()) return d;
        tokens.assign(wire.size(), 0);
        std::transform(wire.begin(), wire.end(), tokens.begin(),
                       [](float t) { return static_cast<int32_t>(t); });
      }
    }
    if (i == 0)
      first_token_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  if (Diagnostics d = pp_group.wait_sends(); !d.empty()) return d;
  const double total_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Every rank learns the ids and the head stage's times.
  const bool reporter = last && me.tp == 0;
  std::vector<double> ids(static_cast<size_t>(batch * o.max_new_tokens), 0.0);
  if (reporter)
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t i = 0; i < o.max_new_tokens; ++i)
        ids[static_cast<size_t>(b * o.max_new_tokens + i)] =
            out[static_cast<size_t>(b)][static_cast<size_t>(i)];
  if (Diagnostics d = group.all_reduce_sum(std::span<double>(ids)); !d.empty()) return d;
  result.tokens.assign(static_cast<size_t>(batch), {});
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < o.max_new_tokens; ++i)
      result.tokens[static_cast<size_t>(b)].push_back(
          static_cast<int32_t>(ids[static_cast<size_t>(b * o.max_new_tokens + i)]));
  result.ttft_s = group.max(reporter ? first_token_s : 0.0);
  const double total = group.max(reporter ? total_s : 0.0);
  result.tpot_s = o.max_new_tokens > 1
                      ? (total - result.ttft_s) / static_cast<double>(o.max_new_tokens - 1)
                      : 0;
  result.tokens_per_s = total > 0 ? static_cast<double>(batch * o.max_new_tokens) / total : 0;
  result.peak_memory_gib = group.max(peak_resident_gib());
  return result;
}

}  // namespace parallax::exec
