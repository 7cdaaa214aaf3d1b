// Prefill and KV-cached decode over the executor's model (dense and MoE), tensor- and pipeline-
// parallel: each stage runs Transformer::decode, the training forward with attention against its
// KV cache (the new queries at their true positions), so no layer is written twice.

#include "executor/generate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

#include "executor/checkpoint.h"
#include "executor/model_ops.h"
#include "executor/train_state.h"
#include "executor/trainer.h"

namespace parallax::exec {
namespace {

using ops::RowMatrix;

/// The next id of each sequence: argmax (the lowest id on ties), or a sample of
/// softmax(logits / temperature).
std::vector<int32_t> pick(const ops::ConstMatrixRef<float>& logits, double temperature,
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
  // The layout rules of training (tp dividing the heads and the MLP, layers splitting into
  // stages) for one sequence a step on tp * pp ranks.
  TrainOptions layout;
  layout.tp = o.tp;
  layout.pp = o.pp;
  layout.seq = std::max<int64_t>(1, static_cast<int64_t>(prompts.empty() ? 1 : prompts[0].size()));
  layout.micro_batch = layout.global_batch = 1;
  layout.steps = 1;
  const Diagnostics rules = check_training(shape, layout, std::max(1, o.tp * o.pp));
  bad.insert(bad.end(), rules.begin(), rules.end());
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
  KvCache<float> cache(model, batch, prompt_len + o.max_new_tokens);
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
  std::vector<float> h, wire;
  group.barrier();
  const auto t0 = std::chrono::steady_clock::now();
  double first_token_s = 0;
  for (int64_t i = 0; i < o.max_new_tokens; ++i) {
    const int64_t n = i == 0 ? prompt_len : 1, pos = i == 0 ? 0 : prompt_len + i - 1;
    if (!first) {
      h.resize(static_cast<size_t>(batch * n * shape.hidden));
      if (Diagnostics d = pp_group.recv(h, me.pp - 1, 0); !d.empty()) return d;
    }
    h = model.decode(params, cache,
                     first ? std::span<const int32_t>(tokens) : std::span<const int32_t>(), h, n,
                     pos);
    if (!comm_errors.empty()) return comm_errors;
    if (!last) {
      if (Diagnostics d = pp_group.send(h, me.pp + 1, 0); !d.empty()) return d;
    } else {
      tokens = pick(Eigen::Map<const RowMatrix<float>>(h.data(), batch, shape.vocab), o.temperature,
                    rng);
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
