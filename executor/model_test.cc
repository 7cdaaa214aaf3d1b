#include "executor/model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <functional>
#include <iomanip>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/model_spec.h"
#include "core/model_zoo.h"
#include "executor/model_ops.h"
#include "executor/moe.h"

namespace parallax::exec {
namespace {

// The gradient-check model of the brief: 2 layers, hidden 16, 4 heads of 4 sharing 2 kv heads,
// SwiGLU width 24, 11 tokens.
ModelShape tiny_shape(bool tied) {
  ModelShape s;
  s.layers = 2;
  s.hidden = 16;
  s.heads = 4;
  s.kv_heads = 2;
  s.head_dim = 4;
  s.ffn_hidden = 24;
  s.vocab = 11;
  s.tied_embeddings = tied;
  return s;
}

// A model a little wider, for the comparisons that want more than a handful of logits.
ModelShape small_shape(bool tied) {
  ModelShape s = tiny_shape(tied);
  s.hidden = 32;
  s.head_dim = 8;
  s.ffn_hidden = 64;
  s.vocab = 64;
  return s;
}

double uniform(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

std::vector<int32_t> random_tokens(int64_t count, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> t(static_cast<size_t>(count));
  for (int32_t& id : t) id = static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab));
  return t;
}

// Parameters of order one, unlike init(): matrices with variance 1 / rows so activations stay
// O(1), norm weights in [0.7, 1.3]. Every nonlinearity then bends and no gradient is tiny.
std::vector<double> rich_params(const Transformer<double>& m, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<double> p(static_cast<size_t>(m.num_params()));
  for (const TensorSlot& s : m.layout()) {
    const bool norm = s.rows == 1;
    // An expert's block of rows is its input: fan-in hidden (w_gate, w_up) or width (w_down).
    const int64_t fan_in = s.expert ? s.full_rows / m.shape().moe.experts : s.rows;
    const double half_width = norm ? 0.3 : std::sqrt(3.0 / static_cast<double>(fan_in));
    for (int64_t i = 0; i < s.size(); ++i)
      p[s.offset + i] = (norm ? 1.0 : 0.0) + half_width * (2 * uniform(rng) - 1);
  }
  return p;
}

// This rank's blocks of the whole model's buffer `from` (parameters, gradients, initial
// values): tensor by tensor (matched by index in the whole layout), rows and columns of the
// slot's block.
std::vector<double> pick_blocks(const Transformer<double>& part, const Transformer<double>& whole,
                                const std::vector<double>& from) {
  std::vector<double> out(static_cast<size_t>(part.num_params()));
  for (const TensorSlot& s : part.layout()) {
    const auto w = std::find_if(whole.layout().begin(), whole.layout().end(),
                                [&](const TensorSlot& t) { return t.index == s.index; });
    EXPECT_EQ(w->name, s.name);
    EXPECT_EQ(w->rows, s.full_rows);
    EXPECT_EQ(w->cols, s.full_cols);
    for (int64_t i = 0; i < s.rows; ++i)
      for (int64_t j = 0; j < s.cols; ++j)
        out[static_cast<size_t>(s.offset + i * s.cols + j)] =
            from[static_cast<size_t>(w->offset + (s.row0 + i) * w->cols + s.col0 + j)];
  }
  return out;
}

TEST(ModelLayout, TensorsAreContiguousInTheDocumentedOrder) {
  for (bool tied : {false, true}) {
    const Transformer<double> m(tiny_shape(tied));
    std::vector<std::string> want = {"embed"};
    for (const char* layer : {"layers.0.", "layers.1."}) {
      for (const char* t :
           {"attn_norm", "wq", "wk", "wv", "wo", "mlp_norm", "w_gate", "w_up", "w_down"})
        want.push_back(std::string(layer) + t);
    }
    want.push_back("final_norm");
    if (!tied) want.push_back("output");
    ASSERT_EQ(m.layout().size(), want.size());
    int64_t end = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(m.layout()[i].name, want[i]);
      EXPECT_EQ(m.layout()[i].offset, end) << want[i];
      end += m.layout()[i].size();
    }
    EXPECT_EQ(end, m.num_params());
    // P = V h + L (2 h + h d (heads + 2 kv_heads) + heads d h + 3 h f) + h + (tied ? 0 : h V)
    //   = 176 + 2 (32 + 512 + 256 + 1152) + 16 + 176 = 4272, or 4096 tied.
    EXPECT_EQ(m.num_params(), tied ? 4096 : 4272);
  }
  const Transformer<double> m(tiny_shape(false));
  using Dims = std::pair<int64_t, int64_t>;
  auto dims = [&](size_t i) { return Dims(m.layout()[i].rows, m.layout()[i].cols); };
  EXPECT_EQ(dims(0), Dims(11, 16));   // embed
  EXPECT_EQ(dims(1), Dims(1, 16));    // attn_norm
  EXPECT_EQ(dims(3), Dims(16, 8));    // wk: hidden x kv_heads head_dim
  EXPECT_EQ(dims(5), Dims(16, 16));   // wo
  EXPECT_EQ(dims(9), Dims(24, 16));   // w_down
  EXPECT_EQ(dims(20), Dims(16, 11));  // output
}

TEST(ModelShape, ZooModelsRunOrSayWhyNot) {
  int runnable = 0;
  for (const ModelSpec& spec : model_zoo()) {
    const Result<ModelShape> r = executable_shape(spec);
    if (spec.mla || spec.ffn_act != FfnAct::kSwiglu) {
      ASSERT_FALSE(r.ok()) << spec.name;
      const std::string why = spec.mla ? "MLA" : "only SwiGLU MLPs are executed";
      EXPECT_NE(r.error_text().find(why), std::string::npos) << r.error_text();
      continue;
    }
    ASSERT_TRUE(r.ok()) << spec.name << ": " << r.error_text();
    ++runnable;
    EXPECT_EQ(r->head_dim, spec.head_dim);
    EXPECT_EQ(r->rope_theta, 10000.0);
    EXPECT_EQ(r->moe.experts, spec.moe ? spec.moe->experts : 0) << spec.name;
    // One count of parameters: the executor's layout and the planner's formula agree.
    EXPECT_EQ(static_cast<double>(Transformer<float>(*r).num_params()), count_params(spec).total())
        << spec.name;
  }
  EXPECT_GT(runnable, 0);
}

TEST(ModelShape, ReportsEveryProblem) {
  ModelSpec m;
  m.name = "odd";
  m.layers = 2;
  m.hidden = 64;
  m.heads = 4;
  m.kv_heads = 4;
  m.head_dim = 15;
  m.ffn_hidden = 128;
  m.vocab = 100;
  m.ffn_act = FfnAct::kGelu;
  m.moe = MoeSpec{.experts = 4, .top_k = 5, .shared_experts = 0, .expert_ffn_hidden = 64};
  const Result<ModelShape> r = executable_shape(m);
  ASSERT_FALSE(r.ok());
  const std::string text = r.error_text();
  EXPECT_NE(text.find("odd/moe/top_k: top_k=5 must be in [1, experts=4]"), std::string::npos)
      << text;
  EXPECT_NE(text.find("only SwiGLU MLPs are executed, got gelu"), std::string::npos) << text;
  EXPECT_NE(text.find("even head_dim, got 15"), std::string::npos) << text;
}

std::string scientific(double x) {
  std::ostringstream os;
  os << std::scientific << std::setprecision(2) << x;
  return os.str();
}

// The smallest top-k margin (ln p_k / p_(k+1)) a MoE gradient check accepts: the largest
// parameter step is 2e-3, and moves a router logit by well under 0.05.
constexpr double kMinRoutingMargin = 0.05;

// d(loss)/d(params) by loss_and_grad against five-point central differences of loss(), on ten
// coordinates of every tensor; relative error, absolute below 1e-4 (embedding rows of tokens
// absent from the batch have exact zeros). grads start nonzero and grad_scale is not 1, so the
// check also covers "grads += grad_scale * gradient". The objective of a MoE model is smooth
// only while no token's top-k choice changes: the routing must be kMinRoutingMargin from a tie,
// and is checked to be the same at every point the differences evaluate.
double max_gradient_error(const ModelShape& shape, uint64_t seed) {
  const Transformer<double> m(shape);
  std::vector<double> p = rich_params(m, seed);
  const int64_t batch = 2, seq = 5;
  const std::vector<int32_t> tokens = random_tokens(batch * (seq + 1), shape.vocab, 13);
  const bool moe = shape.moe.experts > 0;
  const Routing routed = routing<double>(m, p, tokens, batch, seq);
  if (moe) {
    EXPECT_GT(routed.margin, kMinRoutingMargin);
    ::testing::Test::RecordProperty("routing_margin", scientific(routed.margin));
  }
  const double start = 0.125, scale = 0.5;
  std::vector<double> g(p.size(), start);
  const double loss = m.loss_and_grad(p, tokens, batch, seq, scale, g);
  EXPECT_NEAR(loss, m.loss(p, tokens, batch, seq), 1e-12 * loss);
  std::mt19937_64 rng(14);
  double worst = 0;
  for (const TensorSlot& s : m.layout()) {
    for (int k = 0; k < 10; ++k) {
      const size_t i = static_cast<size_t>(s.offset) + rng() % static_cast<uint64_t>(s.size());
      const double h = 1e-3, x = p[i];
      auto f = [&](double dx) {
        p[i] = x + dx;
        if (moe) {
          EXPECT_EQ(routing<double>(m, p, tokens, batch, seq).experts, routed.experts);
        }
        return m.loss(p, tokens, batch, seq);
      };
      const double numeric = (-f(2 * h) + 8 * f(h) - 8 * f(-h) + f(-2 * h)) / (12 * h);
      p[i] = x;
      const double analytic = (g[i] - start) / scale;
      const double err =
          std::abs(analytic - numeric) / std::max({std::abs(analytic), std::abs(numeric), 1e-4});
      EXPECT_LT(err, 1e-6) << s.name << " [" << i - s.offset << "]: " << analytic << " vs "
                           << numeric;
      worst = std::max(worst, err);
    }
  }
  return worst;
}

double max_gradient_error(bool tied) {
  return max_gradient_error(tiny_shape(tied), tied ? 11 : 12);
}

TEST(TransformerGradient, MatchesFiniteDifferencesUntied) {
  const double worst = max_gradient_error(false);
  RecordProperty("max_relative_error", std::to_string(worst));
}

TEST(TransformerGradient, MatchesFiniteDifferencesTied) {
  const double worst = max_gradient_error(true);
  RecordProperty("max_relative_error", std::to_string(worst));
}

// The float model's loss and gradients against the double model's at the same parameters.
void ExpectFloatMatchesDouble(const Transformer<float>& mf, const std::vector<float>& pf,
                              const Transformer<double>& md, const std::vector<double>& pd,
                              const std::vector<int32_t>& tokens, int64_t batch, int64_t seq) {
  std::vector<float> gf(pf.size(), 0.0f);
  std::vector<double> gd(pd.size(), 0.0);
  const double lf = mf.loss_and_grad(pf, tokens, batch, seq, 1.0f, gf);
  const double ld = md.loss_and_grad(pd, tokens, batch, seq, 1.0, gd);
  EXPECT_NEAR(lf, ld, 1e-5 * ld);
  EXPECT_NEAR(mf.loss(pf, tokens, batch, seq), ld, 1e-5 * ld);
  double diff = 0, norm = 0;
  for (size_t i = 0; i < gd.size(); ++i) {
    diff += (gf[i] - gd[i]) * (gf[i] - gd[i]);
    norm += gd[i] * gd[i];
  }
  EXPECT_LT(std::sqrt(diff / norm), 1e-4);
}

TEST(Transformer, FloatAndDoubleAgree) {
  const Transformer<float> mf(small_shape(false));
  const Transformer<double> md(small_shape(false));
  std::vector<float> pf(static_cast<size_t>(mf.num_params()));
  std::vector<double> pd(pf.size());
  mf.init(pf, 42);
  md.init(pd, 42);
  for (size_t i = 0; i < pf.size(); ++i) ASSERT_EQ(pf[i], static_cast<float>(pd[i])) << i;
  const int64_t batch = 2, seq = 16;
  const std::vector<int32_t> tokens = random_tokens(batch * (seq + 1), 64, 3);
  ExpectFloatMatchesDouble(mf, pf, md, pd, tokens, batch, seq);
}

TEST(Transformer, InitialLossIsNearLogVocab) {
  // After the final norm the hidden state has unit rms, so with output weights ~ N(0, 0.02^2)
  // each logit is ~ N(0, s2), s2 = hidden 0.02^2 = 0.0128, and the expected loss is
  // ln(vocab) + s2 / 2 to second order: 4.1589 + 0.0064 for vocab 64.
  for (bool tied : {false, true}) {
    const Transformer<double> m(small_shape(tied));
    std::vector<double> p(static_cast<size_t>(m.num_params()));
    m.init(p, 7);
    const int64_t batch = 4, seq = 32;
    const double mean = m.loss(p, random_tokens(batch * (seq + 1), 64, 8), batch, seq) /
                        static_cast<double>(batch * seq);
    EXPECT_NEAR(mean, std::log(64.0) + 0.0064, 0.05) << (tied ? "tied" : "untied");
  }
}

TEST(Transformer, SgdOnARepeatedBatchLowersTheLoss) {
  // Plain gradient descent memorising 16 tokens: from ln(11) = 2.40 to about 1.08 in 15 steps,
  // every step lower. (Run longer at this rate and it reaches the edge of stability and
  // oscillates, in double exactly as in float: the dynamics, not rounding.)
  const Transformer<float> m(tiny_shape(false));
  std::vector<float> p(static_cast<size_t>(m.num_params())), g(p.size());
  m.init(p, 1);
  const int64_t batch = 2, seq = 8, n = batch * seq;
  const std::vector<int32_t> tokens = random_tokens(batch * (seq + 1), 11, 2);
  std::vector<double> losses;
  for (int step = 0; step < 15; ++step) {
    std::fill(g.begin(), g.end(), 0.0f);
    losses.push_back(m.loss_and_grad(p, tokens, batch, seq, 1.0f / n, g) / n);
    for (size_t i = 0; i < p.size(); ++i) p[i] -= 0.1f * g[i];
  }
  EXPECT_NEAR(losses.front(), std::log(11.0), 0.05);
  EXPECT_LT(losses.back(), 0.6 * losses.front());
  for (size_t i = 1; i < losses.size(); ++i) EXPECT_LT(losses[i], losses[i - 1]) << "step " << i;
}

TEST(Transformer, LaterTokensDoNotChangeEarlierLosses) {
  const Transformer<double> m(tiny_shape(false));
  const std::vector<double> p = rich_params(m, 21);
  const int64_t seq = 8;
  std::vector<int32_t> a = random_tokens(seq + 1, 11, 22);
  std::vector<int32_t> b = a;
  b[5] = (a[5] + 3) % 11;  // the input of position 5 and the target of position 4
  std::vector<double> la(seq), lb(seq);
  ops::position_losses<double>(m, p, a, 1, seq, la);
  ops::position_losses<double>(m, p, b, 1, seq, lb);
  for (int64_t s = 0; s < 4; ++s) EXPECT_EQ(la[s], lb[s]) << "position " << s;
  EXPECT_NE(la[4], lb[4]);
  for (int64_t s = 5; s < seq; ++s) EXPECT_GT(std::abs(la[s] - lb[s]), 1e-9) << "position " << s;

  // A run over the first 4 positions alone gives the full run's first 4 losses: nothing later
  // leaks in, and rotary positions do not depend on the sequence length.
  std::vector<double> prefix(4);
  ops::position_losses<double>(m, p, std::span(a).first(5), 1, 4, prefix);
  for (int64_t s = 0; s < 4; ++s) EXPECT_NEAR(prefix[s], la[s], 1e-13) << "position " << s;
  double sum = 0;
  for (double l : la) sum += l;
  EXPECT_NEAR(m.loss(p, a, 1, seq), sum, 1e-12);
}

TEST(Transformer, SequencesOfABatchAreIndependent) {
  const Transformer<double> m(tiny_shape(true));
  const std::vector<double> p = rich_params(m, 31);
  const int64_t seq = 6;
  const std::vector<int32_t> both = random_tokens(2 * (seq + 1), 11, 32);
  const std::span<const int32_t> all(both);
  EXPECT_NEAR(m.loss(p, all, 2, seq),
              m.loss(p, all.first(seq + 1), 1, seq) + m.loss(p, all.last(seq + 1), 1, seq), 1e-12);
}

}  // namespace
}  // namespace parallax::exec

namespace parallax::exec {
namespace {

/// In-process collectives for `n` threads, one per rank. Sums are added in rank order, so every
/// rank gets bitwise the same result, as MPI gives.
class ThreadGroup {
 public:
  explicit ThreadGroup(int n) : n_(n), slots_(static_cast<size_t>(n)), sync_(n) {}
  void operator()(int rank, std::span<double> x) {  // all-reduce
    std::vector<double> sum = reduce(rank, x, 0, x.size());
    std::copy(sum.begin(), sum.end(), x.begin());
    sync_.arrive_and_wait();
  }
  void all_gather(int rank, std::span<const double> local, std::span<double> out) {
    gather(slots_, rank, local, out);
  }
  void reduce_scatter(int rank, std::span<const double> full, std::span<double> out) {
    std::vector<double> sum = reduce(rank, full, rank * out.size(), out.size());
    std::copy(sum.begin(), sum.end(), out.begin());
    sync_.arrive_and_wait();
  }
  // Unequal blocks: rank r contributes counts[r] values.
  void all_gather(int rank, std::span<const double> mine, std::span<const int64_t> counts,
                  std::span<double> out) {
    EXPECT_EQ(static_cast<int64_t>(mine.size()), counts[static_cast<size_t>(rank)]);
    gather(slots_, rank, mine, out);
  }
  void reduce_scatter(int rank, std::span<const double> full, std::span<const int64_t> counts,
                      std::span<double> out) {
    const auto from =
        static_cast<size_t>(std::accumulate(counts.begin(), counts.begin() + rank, int64_t{0}));
    std::vector<double> sum = reduce(rank, full, from, out.size());
    std::copy(sum.begin(), sum.end(), out.begin());
    sync_.arrive_and_wait();
  }
  // Every rank's `mine` (the same number of values on each) in rank order.
  void all_gather_counts(int rank, std::span<const int64_t> mine, std::span<int64_t> out) {
    gather(counts_, rank, mine, out);
  }
  // Rank r's send_counts[q] values (consecutive in rank order) go to rank q.
  void all_to_all(int rank, std::span<const double> send, std::span<const int64_t> send_counts,
                  std::span<double> recv, std::span<const int64_t> recv_counts) {
    slots_[static_cast<size_t>(rank)] = send;
    counts_[static_cast<size_t>(rank)] = send_counts;
    sync_.arrive_and_wait();
    size_t at = 0;
    for (int r = 0; r < n_; ++r) {
      const std::span<const int64_t> c = counts_[static_cast<size_t>(r)];
      const auto from =
          static_cast<size_t>(std::accumulate(c.begin(), c.begin() + rank, int64_t{0}));
      const auto count = static_cast<size_t>(c[static_cast<size_t>(rank)]);
      EXPECT_EQ(c[static_cast<size_t>(rank)], recv_counts[static_cast<size_t>(r)]);
      std::copy_n(slots_[static_cast<size_t>(r)].begin() + from, count, recv.begin() + at);
      at += count;
    }
    EXPECT_EQ(at, recv.size());
    sync_.arrive_and_wait();
  }
  void all_to_all_counts(int rank, std::span<const int64_t> send, std::span<int64_t> recv) {
    counts_[static_cast<size_t>(rank)] = send;
    sync_.arrive_and_wait();
    const size_t per = send.size() / static_cast<size_t>(n_);
    for (int r = 0; r < n_; ++r)
      std::copy_n(counts_[static_cast<size_t>(r)].begin() + rank * per, per,
                  recv.begin() + r * per);
    sync_.arrive_and_wait();
  }

 private:
  // Every rank's `mine` (through `slots`) one after the other, in rank order, into `out`.
  template <typename V>
  void gather(std::vector<std::span<const V>>& slots, int rank, std::span<const V> mine,
              std::span<V> out) {
    slots[static_cast<size_t>(rank)] = mine;
    sync_.arrive_and_wait();
    auto at = out.begin();
    for (const std::span<const V>& s : slots) at = std::copy(s.begin(), s.end(), at);
    EXPECT_EQ(at, out.end());
    sync_.arrive_and_wait();
  }
  // Every rank's x[from, from + count), summed; leaves the ranks synchronised after reading.
  std::vector<double> reduce(int rank, std::span<const double> x, size_t from, size_t count) {
    slots_[static_cast<size_t>(rank)] = x;
    sync_.arrive_and_wait();
    std::vector<double> sum(count, 0.0);
    for (int r = 0; r < n_; ++r)
      for (size_t i = 0; i < count; ++i) sum[i] += slots_[static_cast<size_t>(r)][from + i];
    sync_.arrive_and_wait();  // everyone has read every buffer
    return sum;
  }
  int n_;
  std::vector<std::span<const double>> slots_;
  std::vector<std::span<const int64_t>> counts_ = std::vector<std::span<const int64_t>>(n_);
  std::barrier<> sync_;
};

// Each tensor-parallel shard, run by its own thread, gives the whole model's loss and, for its
// block of every tensor, the whole model's gradient; its initialisation is the whole model's
// block.
TEST(TensorParallel, ShardsReproduceTheWholeModel) {
  for (int tp : {2}) {
    const ModelShape shape = small_shape(false);
    const Transformer<double> whole(shape);
    std::vector<double> p = rich_params(whole, 21), g(p.size(), 0.0), init(p.size());
    whole.init(init, 5);
    const int64_t batch = 2, seq = 9;
    const std::vector<int32_t> tokens = random_tokens(batch * (seq + 1), shape.vocab, 22);
    const double loss = whole.loss_and_grad(p, tokens, batch, seq, 0.5, g);

    ThreadGroup reduce(tp);
    std::vector<double> shard_loss(static_cast<size_t>(tp));
    std::vector<std::thread> threads;
    std::vector<std::string> failures(static_cast<size_t>(tp));
    for (int r = 0; r < tp; ++r) {
      threads.emplace_back([&, r] {
        const Transformer<double> m(shape,
                                    {tp, r, [&reduce, r](std::span<double> x) { reduce(r, x); }});
        // This shard's blocks of the whole model's parameters, gradients and initial values.
        ASSERT_EQ(m.layout().size(), whole.layout().size());
        const std::vector<double> ps = pick_blocks(m, whole, p), want_g = pick_blocks(m, whole, g),
                                  want_init = pick_blocks(m, whole, init);
        std::vector<double> gs(ps.size(), 0.0), got_init(ps.size());
        m.init(got_init, 5);
        shard_loss[static_cast<size_t>(r)] = m.loss_and_grad(ps, tokens, batch, seq, 0.5, gs);
        for (size_t i = 0; i < gs.size(); ++i) {
          if (got_init[i] != want_init[i]) failures[r] += "init " + std::to_string(i) + "; ";
          if (std::abs(gs[i] - want_g[i]) > 1e-10 * std::max(1.0, std::abs(want_g[i])))
            failures[r] += "grad " + std::to_string(i) + "; ";
        }
      });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < tp; ++r) {
      EXPECT_NEAR(shard_loss[static_cast<size_t>(r)], loss, 1e-10 * loss) << "rank " << r;
      EXPECT_EQ(failures[static_cast<size_t>(r)].substr(0, 200), "") << "rank " << r;
    }
  }
}

// Rank r of a sequence-parallel tensor-parallel group of `tp` threads.
TensorParallel<double> sequence_parallel(ThreadGroup& group, int tp, int r) {
  TensorParallel<double> par{tp, r, [&group, r](std::span<double> x) { group(r, x); }};
  par.sequence_parallel = true;
  par.all_gather = [&group, r](std::span<const double> x, std::span<double> out) {
    group.all_gather(r, x, out);
  };
  par.reduce_scatter = [&group, r](std::span<const double> x, std::span<double> out) {
    group.reduce_scatter(r, x, out);
  };
  return par;
}

// Under sequence parallelism each rank's loss and replicated tensors' gradients are its rows'
// share: over the ranks they sum to the whole model's; the split tensors' gradients are the
// whole model's blocks, as without it. A stage's output is the rank's rows of the whole stream.
TEST(TensorParallel, SequenceParallelRanksSumToTheWholeModel) {
  for (const bool tied : {false, true}) {
    const int tp = 2;
    const ModelShape shape = small_shape(tied);
    const Transformer<double> whole(shape);
    std::vector<double> p = rich_params(whole, 31), g(p.size(), 0.0);
    const int64_t batch = 2, seq = 9;  // 18 rows, 9 a rank: a rank's rows span two sequences
    const std::vector<int32_t> tokens = random_tokens(batch * (seq + 1), shape.vocab, 32);
    const double loss = whole.loss_and_grad(p, tokens, batch, seq, 0.5, g);

    ThreadGroup group(tp);
    std::vector<double> shard_loss(static_cast<size_t>(tp));
    std::vector<std::vector<double>> shard_grads(static_cast<size_t>(tp));
    std::vector<std::string> failures(static_cast<size_t>(tp));
    std::vector<std::thread> threads;
    for (int r = 0; r < tp; ++r) {
      threads.emplace_back([&, r] {
        const Transformer<double> m(shape, sequence_parallel(group, tp, r));
        const std::vector<double> ps = pick_blocks(m, whole, p), want_g = pick_blocks(m, whole, g);
        std::vector<double>& gs = shard_grads[static_cast<size_t>(r)];
        gs.assign(ps.size(), 0.0);
        shard_loss[static_cast<size_t>(r)] = m.loss_and_grad(ps, tokens, batch, seq, 0.5, gs);
        for (const TensorSlot& t : m.layout()) {
          if (t.replicated) continue;
          for (int64_t i = t.offset; i < t.offset + t.size(); ++i)
            if (std::abs(gs[i] - want_g[i]) > 1e-10 * std::max(1.0, std::abs(want_g[i])))
              failures[r] += t.name + " grad " + std::to_string(i) + "; ";
        }
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_NEAR(shard_loss[0] + shard_loss[1], loss, 1e-10 * loss) << "tied " << tied;
    // Neither rank alone holds the loss: each has about half of it.
    EXPECT_GT(shard_loss[0], 0.2 * loss);
    EXPECT_GT(shard_loss[1], 0.2 * loss);
    for (int r = 0; r < tp; ++r) EXPECT_EQ(failures[r].substr(0, 200), "") << "rank " << r;
    std::function<void(std::span<double>)> none = [](std::span<double>) {};
    const Transformer<double> r0(shape, {tp, 0, none});
    const std::vector<double> want = pick_blocks(r0, whole, g);
    int replicated = 0;
    for (const TensorSlot& t : r0.layout()) {
      if (!t.replicated) continue;
      ++replicated;
      for (int64_t i = t.offset; i < t.offset + t.size(); ++i) {
        const double sum = shard_grads[0][i] + shard_grads[1][i];
        ASSERT_NEAR(sum, want[i], 1e-10 * std::max(1.0, std::abs(want[i])))
            << t.name << " " << i << " tied " << tied;
      }
    }
    EXPECT_GE(replicated, 4);  // embedding, two norms a layer, final norm
  }
}

// Two pipeline stages under sequence parallelism pass each rank's rows of the stream: the first
// stage's output on rank r is rows [r n / 2, (r + 1) n / 2) of the whole model's stream there.
TEST(TensorParallel, SequenceParallelStageOutputIsTheRanksRows) {
  const int tp = 2;
  const ModelShape shape = small_shape(false);
  const int64_t batch = 2, seq = 8, n = batch * seq;
  const std::vector<int32_t> tokens = random_tokens(batch * (seq + 1), shape.vocab, 33);
  std::function<void(std::span<double>)> none = [](std::span<double>) {};
  const Transformer<double> whole_first(shape, {}, StageRange{0, 1, true, false});
  const std::vector<double> p = rich_params(whole_first, 34);
  StagePass<double> whole_pass(whole_first, p, tokens, batch, seq);
  std::vector<double> g(p.size(), 0.0);
  whole_pass.forward({}, 1.0, g);
  const std::span<const double> want = whole_pass.output();
  ASSERT_EQ(static_cast<int64_t>(want.size()), n * shape.hidden);

  ThreadGroup group(tp);
  std::vector<std::vector<double>> out(static_cast<size_t>(tp));
  std::vector<std::thread> threads;
  for (int r = 0; r < tp; ++r) {
    threads.emplace_back([&, r] {
      const Transformer<double> m(shape, sequence_parallel(group, tp, r),
                                  StageRange{0, 1, true, false});
      const std::vector<double> ps = pick_blocks(m, whole_first, p);
      std::vector<double> gs(ps.size(), 0.0);
      StagePass<double> pass(m, ps, tokens, batch, seq);
      pass.forward({}, 1.0, gs);
      out[static_cast<size_t>(r)].assign(pass.output().begin(), pass.output().end());
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < tp; ++r) {
    ASSERT_EQ(static_cast<int64_t>(out[r].size()), n / tp * shape.hidden);
    for (size_t i = 0; i < out[r].size(); ++i)
      ASSERT_NEAR(out[r][i], want[r * out[r].size() + i], 1e-12) << "rank " << r << " " << i;
  }
}

// ZeRO-3 / FSDP units: a pass reads only the units it has gathered (every other parameter is
// NaN), and adds to a unit's gradients only before it calls grads_done: moving each unit's
// gradients out at that call gives the whole gradient, and nothing is added afterwards.
TEST(ParamUnits, APassUsesOnlyGatheredUnitsAndFinishesEachGradientOnce) {
  for (const bool tied : {false, true}) {
    const ModelShape shape = small_shape(tied);
    const Transformer<double> m(shape);
    const std::vector<double> p = rich_params(m, 51);
    const int64_t batch = 2, seq = 9;
    const std::vector<int32_t> tokens = random_tokens(batch * (seq + 1), shape.vocab, 52);
    std::vector<double> want(p.size(), 0.0);
    const double loss = m.loss_and_grad(p, tokens, batch, seq, 0.5, want);

    const double nan = std::numeric_limits<double>::quiet_NaN();
    std::vector<double> live(p.size(), nan), g(p.size(), 0.0), got(p.size(), 0.0);
    std::map<int64_t, int> done;
    auto range = [&](int64_t u) {
      const auto [a, b] = m.unit_range(u);
      EXPECT_LT(a, b) << "unit " << u;
      return std::pair<size_t, size_t>(static_cast<size_t>(a), static_cast<size_t>(b));
    };
    ParamUnits units;
    units.gather = [&](int64_t u) {
      const auto [a, b] = range(u);
      std::copy(p.begin() + a, p.begin() + b, live.begin() + a);
    };
    units.release = [&](int64_t u) {
      const auto [a, b] = range(u);
      std::fill(live.begin() + a, live.begin() + b, nan);
    };
    units.grads_done = [&](int64_t u) {
      ++done[u];
      const auto [a, b] = range(u);
      for (size_t i = a; i < b; ++i) got[i] += std::exchange(g[i], 0.0);
    };
    StagePass<double> pass(m, live, tokens, batch, seq, units);
    const double l = pass.forward({}, 0.5, g) + pass.aux();
    pass.backward({}, g);
    EXPECT_NEAR(l, loss, 1e-12 * loss) << "tied " << tied;
    EXPECT_TRUE(std::all_of(live.begin(), live.end(), [](double x) { return std::isnan(x); }))
        << "a unit left gathered";
    EXPECT_TRUE(std::all_of(g.begin(), g.end(), [](double x) { return x == 0.0; }))
        << "a gradient added after its unit was done";
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 1e-12 * std::max(1.0, std::abs(want[i]))) << i;
    EXPECT_EQ(done.size(), static_cast<size_t>(shape.layers + 2));
    for (const auto& [u, calls] : done) EXPECT_EQ(calls, 1) << "unit " << u;
    // The units tile the buffer.
    int64_t covered = 0;
    for (const auto& [u, calls] : done) covered += m.unit_range(u).second - m.unit_range(u).first;
    EXPECT_EQ(covered, m.num_params());
  }
}

TEST(TensorParallel, ShardsSplitHeadsAndMlp) {
  const ModelShape shape = small_shape(true);
  std::function<void(std::span<double>)> none = [](std::span<double>) {};
  const Transformer<double> whole(shape), r1(shape, {2, 1, none});
  EXPECT_LT(r1.num_params(), whole.num_params());
  for (const TensorSlot& s : r1.layout()) {
    const bool rowwise = s.name.ends_with(".wo") || s.name.ends_with(".w_down");
    const bool colwise = s.name.ends_with(".wq") || s.name.ends_with(".wk") ||
                         s.name.ends_with(".wv") || s.name.ends_with(".w_gate") ||
                         s.name.ends_with(".w_up");
    EXPECT_EQ(s.replicated, !rowwise && !colwise) << s.name;
    EXPECT_EQ(s.row0, rowwise ? s.full_rows / 2 : 0) << s.name;
    EXPECT_EQ(s.col0, colwise ? s.full_cols / 2 : 0) << s.name;
    EXPECT_EQ(s.rows * (rowwise ? 2 : 1), s.full_rows) << s.name;
    EXPECT_EQ(s.cols * (colwise ? 2 : 1), s.full_cols) << s.name;
  }
}

}  // namespace
}  // namespace parallax::exec

namespace parallax::exec {
namespace {

// Two pipeline stages, run one after the other with the activation and its gradient handed
// over, give the whole model's loss and gradients; a tied embedding's two copies add up to the
// whole model's embedding gradient.
TEST(PipelineStages, ChainReproducesTheWholeModel) {
  for (bool tied : {false, true}) {
    const ModelShape shape = small_shape(tied);
    const Transformer<double> whole(shape);
    const std::vector<double> p = rich_params(whole, 31);
    std::vector<double> g(p.size(), 0.0);
    const int64_t batch = 2, seq = 7;
    const std::vector<int32_t> tokens = random_tokens(batch * (seq + 1), shape.vocab, 32);
    const double loss = whole.loss_and_grad(p, tokens, batch, seq, 0.25, g);

    const Transformer<double> s0(shape, {}, StageRange{0, 1, true, false}),
        s1(shape, {}, StageRange{1, 2, false, true});
    const std::vector<double> p0 = pick_blocks(s0, whole, p), p1 = pick_blocks(s1, whole, p);
    std::vector<double> g0(p0.size(), 0.0), g1(p1.size(), 0.0);
    StagePass<double> a(s0, p0, tokens, batch, seq), b(s1, p1, tokens, batch, seq);
    EXPECT_EQ(a.forward({}, 0.25, g0), 0.0);
    const std::vector<double> act(a.output().begin(), a.output().end());
    EXPECT_NEAR(b.forward(act, 0.25, g1), loss, 1e-12 * loss);
    b.backward({}, g1);
    const std::vector<double> d_act(b.input_grad().begin(), b.input_grad().end());
    a.backward(d_act, g0);
    if (tied) {  // the head stage's copy of the embedding holds the output layer's part
      ASSERT_EQ(s1.layout().front().name, "embed");
      for (int64_t i = 0; i < s1.layout().front().size(); ++i) g0[i] += g1[i];
      std::copy_n(g0.begin(), s1.layout().front().size(), g1.begin());
    }
    const std::vector<double> want0 = pick_blocks(s0, whole, g), want1 = pick_blocks(s1, whole, g);
    for (size_t i = 0; i < g0.size(); ++i) ASSERT_NEAR(g0[i], want0[i], 1e-12) << "stage 0, " << i;
    for (size_t i = 0; i < g1.size(); ++i) ASSERT_NEAR(g1[i], want1[i], 1e-12) << "stage 1, " << i;
  }
}

}  // namespace
}  // namespace parallax::exec

namespace parallax::exec {
namespace {

// Context-parallel ranks, each holding its chunks of every sequence (contiguous or balanced), sum
// to the whole model's loss and gradients. In a MoE model each rank's load-balancing loss is the
// whole microbatch's (router statistics summed over the group); rank 0 alone reports it.
void ExpectContextParallelSums(const ModelShape& shape, uint64_t seed) {
  for (const auto& setting : {std::pair{2, false}, {3, false}, {2, true}, {3, true}}) {
    // Named copies, not a structured binding: lambdas below capture them (clang 14 cannot).
    const int cp = setting.first;
    const bool balanced = setting.second;
    const Transformer<double> whole(shape);
    const std::vector<double> p = rich_params(whole, seed);
    std::vector<double> g(p.size(), 0.0);
    const int64_t batch = 2, seq = 12, parts = balanced ? 2 : 1, local = seq / cp / parts;
    const std::vector<int32_t> tokens = random_tokens(batch * (seq + 1), shape.vocab, seed + 1);
    const double loss = whole.loss_and_grad(p, tokens, batch, seq, 0.5, g);

    ThreadGroup group(cp);
    std::vector<double> losses(static_cast<size_t>(cp));
    std::vector<std::vector<double>> grads(static_cast<size_t>(cp));
    std::vector<std::thread> threads;
    for (int r = 0; r < cp; ++r) {
      threads.emplace_back([&, r] {
        ContextParallel<double> ctx{cp,
                                    r,
                                    [&group, r](std::span<const double> x, std::span<double> out) {
                                      group.all_gather(r, x, out);
                                    },
                                    [&group, r](std::span<const double> x, std::span<double> out) {
                                      group.reduce_scatter(r, x, out);
                                    },
                                    [&group, r](std::span<double> x) { group(r, x); },
                                    balanced};
        const Transformer<double> m(shape, {}, {}, ctx);
        // This rank's chunk r (and, balanced, chunk 2 cp - 1 - r) of each sequence: positions
        // and the id after them, early chunks first.
        std::vector<int32_t> mine;
        for (int64_t part = 0; part < parts; ++part)
          for (int64_t b = 0; b < batch; ++b) {
            const int64_t j = part == 0 ? r : 2 * cp - 1 - r;
            for (int64_t i = 0; i <= local; ++i)
              mine.push_back(tokens[b * (seq + 1) + j * local + i]);
          }
        grads[r].assign(p.size(), 0.0);
        losses[r] = m.loss_and_grad(p, mine, batch * parts, local, 0.5, grads[r]);
      });
    }
    for (auto& t : threads) t.join();
    double total = 0;
    for (double l : losses) total += l;
    EXPECT_NEAR(total, loss, 1e-10 * loss) << "cp " << cp << (balanced ? " balanced" : "");
    for (size_t i = 0; i < g.size(); ++i) {
      double sum = 0;
      for (const auto& gr : grads) sum += gr[i];
      ASSERT_NEAR(sum, g[i], 1e-10 * std::max(1.0, std::abs(g[i])))
          << "cp " << cp << (balanced ? " balanced" : "") << ", " << i;
    }
  }
}

TEST(ContextParallel, RanksSumToTheWholeModel) { ExpectContextParallelSums(small_shape(true), 41); }

}  // namespace
}  // namespace parallax::exec

namespace parallax::exec {
namespace {

// The MoE gradient-check model: tiny_shape's 2 layers, the first dense, the second 4 experts of
// width 12 with top-2 routing, one shared expert, and a load-balancing loss.
ModelShape moe_shape(bool tied, int64_t dense_layers = 1) {
  ModelShape s = tiny_shape(tied);
  s.moe = {.experts = 4,
           .top_k = 2,
           .expert_ffn_hidden = 12,
           .shared_experts = 1,
           .dense_layers = dense_layers,
           .aux_loss_coeff = 0.01};
  return s;
}

// small_shape with 4 experts of width 32, top-2, one shared expert, every layer MoE.
ModelShape small_moe_shape() {
  ModelShape s = small_shape(false);
  s.moe = {.experts = 4,
           .top_k = 2,
           .expert_ffn_hidden = 32,
           .shared_experts = 1,
           .dense_layers = 0,
           .aux_loss_coeff = 0.01};
  return s;
}

// Largest |a - b| / max(1, |b|) over the elements.
double max_difference(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::abs(a[i] - b[i]) / std::max(1.0, std::abs(b[i])));
  return worst;
}

TEST(ModelLayout, MoeLayersHoldRouterExpertsAndSharedExperts) {
  const ModelShape shape = moe_shape(false);
  const Transformer<double> m(shape);
  std::vector<std::string> want = {"embed"};
  for (const char* t :
       {"attn_norm", "wq", "wk", "wv", "wo", "mlp_norm", "w_gate", "w_up", "w_down"})
    want.push_back(std::string("layers.0.") + t);
  for (const char* t :
       {"attn_norm", "wq", "wk", "wv", "wo", "mlp_norm", "router", "experts.w_gate", "experts.w_up",
        "experts.w_down", "shared.w_gate", "shared.w_up", "shared.w_down"})
    want.push_back(std::string("layers.1.") + t);
  want.push_back("final_norm");
  want.push_back("output");
  ASSERT_EQ(m.layout().size(), want.size());
  int64_t end = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const TensorSlot& s = m.layout()[i];
    EXPECT_EQ(s.name, want[i]);
    EXPECT_EQ(s.offset, end) << want[i];
    EXPECT_EQ(s.index, static_cast<int64_t>(i)) << want[i];
    EXPECT_EQ(s.expert, s.name.find("experts.") != std::string::npos) << want[i];
    end += s.size();
  }
  EXPECT_EQ(end, m.num_params());
  using Dims = std::pair<int64_t, int64_t>;
  auto dims = [&](size_t i) { return Dims(m.layout()[i].rows, m.layout()[i].cols); };
  EXPECT_EQ(dims(16), Dims(16, 4));   // router: hidden x E
  EXPECT_EQ(dims(17), Dims(64, 12));  // experts.w_gate: E hidden x width
  EXPECT_EQ(dims(19), Dims(12, 64));  // experts.w_down: width x E hidden
  EXPECT_EQ(dims(20), Dims(16, 12));  // shared.w_gate: hidden x S width
  EXPECT_EQ(dims(22), Dims(12, 16));  // shared.w_down

  // One count of parameters: the planner's formula for the same model.
  ModelSpec spec;
  spec.layers = 2;
  spec.hidden = 16;
  spec.heads = 4;
  spec.kv_heads = 2;
  spec.head_dim = 4;
  spec.ffn_hidden = 24;
  spec.vocab = 11;
  spec.moe = MoeSpec{
      .experts = 4, .top_k = 2, .shared_experts = 1, .expert_ffn_hidden = 12, .dense_layers = 1};
  EXPECT_EQ(static_cast<double>(m.num_params()), count_params(spec).total());
  const Result<ModelShape> r = executable_shape(spec);
  ASSERT_TRUE(r.ok()) << r.error_text();
  EXPECT_EQ(Transformer<double>(*r).num_params(), m.num_params());

  // Expert-parallel rank 1 of 2 holds experts 2 and 3: the second half of the expert tensors'
  // rows (of w_down's columns); nothing else is split.
  const ExpertParallel<double> ep{2, 1, [](auto, auto, auto, auto) {}, [](auto, auto) {}};
  const Transformer<double> r1(shape, {}, {}, {}, ep);
  ASSERT_EQ(r1.layout().size(), m.layout().size());
  for (size_t i = 0; i < m.layout().size(); ++i) {
    const TensorSlot& s = r1.layout()[i];
    EXPECT_EQ(s.replicated, m.layout()[i].replicated) << s.name;
    const bool by_cols = s.name.ends_with("experts.w_down");
    EXPECT_EQ(s.rows, s.expert && !by_cols ? s.full_rows / 2 : s.full_rows) << s.name;
    EXPECT_EQ(s.row0, s.expert && !by_cols ? s.full_rows / 2 : 0) << s.name;
    EXPECT_EQ(s.cols, by_cols ? s.full_cols / 2 : s.full_cols) << s.name;
    EXPECT_EQ(s.col0, by_cols ? s.full_cols / 2 : 0) << s.name;
  }
}

// The dense tensors of a MoE model start where a dense model's do: the first layer, the
// embedding (same places in the layout, same streams).
TEST(ModelLayout, MoeModelKeepsTheDenseInitialValues) {
  const Transformer<double> dense(tiny_shape(false)), moe(moe_shape(false));
  std::vector<double> pd(static_cast<size_t>(dense.num_params())),
      pm(static_cast<size_t>(moe.num_params()));
  dense.init(pd, 3);
  moe.init(pm, 3);
  for (size_t t = 0; t < 16; ++t) {  // embed, layer 0, layer 1's attention and norm
    const TensorSlot& a = dense.layout()[t];
    const TensorSlot& b = moe.layout()[t];
    ASSERT_EQ(a.name, b.name);
    for (int64_t i = 0; i < a.size(); ++i) ASSERT_EQ(pd[a.offset + i], pm[b.offset + i]) << a.name;
  }
}

TEST(ModelShape, MoeSpecsRunAndBadOnesSayWhy) {
  const ModelSpec* mixtral = nullptr;
  for (const ModelSpec& spec : model_zoo())
    if (spec.name == "mixtral-8x7b") mixtral = &spec;
  ASSERT_NE(mixtral, nullptr);
  const Result<ModelShape> r = executable_shape(*mixtral);
  ASSERT_TRUE(r.ok()) << r.error_text();
  EXPECT_EQ(r->moe.experts, 8);
  EXPECT_EQ(r->moe.top_k, 2);
  EXPECT_EQ(r->moe.expert_ffn_hidden, 14336);
  EXPECT_EQ(r->moe.shared_experts, 0);
  EXPECT_EQ(r->moe.dense_layers, 0);
  EXPECT_EQ(r->moe.aux_loss_coeff, 0.01);

  ModelSpec bad = *mixtral;
  bad.moe->top_k = 9;
  bad.moe->expert_ffn_hidden = 0;
  bad.moe->dense_layers = 32;
  const std::string text = executable_shape(bad).error_text();
  EXPECT_NE(text.find("/moe/top_k: top_k=9 must be in [1, experts=8]"), std::string::npos) << text;
  EXPECT_NE(text.find("/moe/expert_ffn_hidden: must be positive, got 0"), std::string::npos)
      << text;
  EXPECT_NE(text.find("/moe/dense_layers: dense_layers=32 must be in [0, layers=32)"),
            std::string::npos)
      << text;
}

TEST(MoeGradient, MatchesFiniteDifferencesUntied) {
  const double worst = max_gradient_error(moe_shape(false), 12);
  RecordProperty("max_relative_error", scientific(worst));
}

TEST(MoeGradient, MatchesFiniteDifferencesTied) {
  const double worst = max_gradient_error(moe_shape(true), 11);
  RecordProperty("max_relative_error", scientific(worst));
}

// The load-balancing term alone: the objective with coefficient 1 minus that with 0 is
// batch * seq * aux (per unit coefficient), and the difference of the two gradients is its
// gradient, checked against finite differences. It reaches the router and what feeds it, never
// the experts, the shared experts or the head: their gradients do not change at all.
TEST(MoeGradient, LoadBalancingTermMatchesFiniteDifferences) {
  ModelShape with = moe_shape(false, 0), without = with;
  with.moe.aux_loss_coeff = 1.0;
  without.moe.aux_loss_coeff = 0.0;
  const Transformer<double> m1(with), m0(without);
  std::vector<double> p = rich_params(m1, 54);
  const int64_t batch = 2, seq = 5;
  const std::vector<int32_t> tokens = random_tokens(batch * (seq + 1), with.vocab, 54);
  const Routing routed = routing<double>(m1, p, tokens, batch, seq);
  ASSERT_GT(routed.margin, kMinRoutingMargin);
  std::vector<double> g1(p.size(), 0.0), g0(p.size(), 0.0);
  const double aux = m1.loss_and_grad(p, tokens, batch, seq, 1.0, g1) -
                     m0.loss_and_grad(p, tokens, batch, seq, 1.0, g0);
  EXPECT_GT(aux, 0.0);
  std::mt19937_64 rng(53);
  double worst = 0;
  for (const TensorSlot& s : m1.layout()) {
    // After the last router: the last layer's experts and shared experts, and the head.
    const bool downstream = (s.name.starts_with("layers.1.") &&
                             (s.expert || s.name.find("shared.") != std::string::npos)) ||
                            s.name == "final_norm" || s.name == "output";
    for (int64_t i = 0; i < s.size() && downstream; ++i)
      ASSERT_EQ(g1[s.offset + i], g0[s.offset + i]) << s.name;
    if (downstream) continue;
    for (int k = 0; k < 10; ++k) {
      const size_t i = static_cast<size_t>(s.offset) + rng() % static_cast<uint64_t>(s.size());
      const double h = 1e-3, x = p[i];
      auto f = [&](double dx) {
        p[i] = x + dx;
        EXPECT_EQ(routing<double>(m1, p, tokens, batch, seq).experts, routed.experts);
        return m1.loss(p, tokens, batch, seq) - m0.loss(p, tokens, batch, seq);
      };
      const double numeric = (-f(2 * h) + 8 * f(h) - 8 * f(-h) + f(-2 * h)) / (12 * h);
      p[i] = x;
      const double analytic = g1[i] - g0[i];
      const double err =
          std::abs(analytic - numeric) / std::max({std::abs(analytic), std::abs(numeric), 1e-4});
      EXPECT_LT(err, 1e-6) << s.name << " [" << i - s.offset << "]: " << analytic << " vs "
                           << numeric;
      worst = std::max(worst, err);
    }
  }
  RecordProperty("max_relative_error", scientific(worst));
}

TEST(Transformer, MoeFloatAndDoubleAgree) {
  const ModelShape shape = small_moe_shape();
  const Transformer<float> mf(shape);
  const Transformer<double> md(shape);
  const std::vector<double> pd = rich_params(md, 61);
  const std::vector<float> pf(pd.begin(), pd.end());
  const int64_t batch = 2, seq = 16;
  const std::vector<int32_t> tokens = random_tokens(batch * (seq + 1), shape.vocab, 62);
  // Both pick the same experts, far enough from a tie for float rounding not to matter.
  const Routing rd = routing<double>(md, pd, tokens, batch, seq);
  EXPECT_EQ(routing<float>(mf, pf, tokens, batch, seq).experts, rd.experts);
  EXPECT_GT(rd.margin, 1e-3);
  ExpectFloatMatchesDouble(mf, pf, md, pd, tokens, batch, seq);
}

// Two expert-parallel ranks, each with its own sequence (as data-parallel ranks) and half the
// experts: rank r's loss is the whole model's on sequence r alone (the load-balancing loss is
// per microbatch: rank r's is over its sequence), its non-expert gradients are those of
// sequence r, and its experts' gradients are the whole model's for both sequences (each
// sequence's tokens reach both ranks' experts). Without the load-balancing loss, the two ranks
// are the whole model's batch of both sequences split.
TEST(ExpertParallel, RanksReproduceTheWholeModel) {
  for (double coeff : {0.01, 0.0}) {
    ModelShape shape = moe_shape(false);
    shape.moe.aux_loss_coeff = coeff;
    const Transformer<double> whole(shape);
    const std::vector<double> p = rich_params(whole, 71);
    std::vector<double> init(p.size());
    whole.init(init, 9);
    const int64_t seq = 6, len = seq + 1;
    const std::vector<int32_t> tokens = random_tokens(2 * len, shape.vocab, 72);
    const std::span<const int32_t> all(tokens);
    // Per sequence, and both as one batch.
    std::vector<std::vector<double>> g_seq(2, std::vector<double>(p.size(), 0.0));
    double loss_seq[2];
    for (int r = 0; r < 2; ++r) {
      loss_seq[r] = whole.loss_and_grad(p, all.subspan(r * len, len), 1, seq, 0.5, g_seq[r]);
      // Each sequence sends tokens to the other rank's experts: the exchange is exercised.
      const Routing routed = routing<double>(whole, p, all.subspan(r * len, len), 1, seq);
      EXPECT_TRUE(std::any_of(routed.experts.begin(), routed.experts.end(),
                              [r](int32_t e) { return e / 2 != r; }));
    }
    std::vector<double> g_both(p.size(), 0.0), g_sum(p.size());
    const double loss_both = whole.loss_and_grad(p, all, 2, seq, 0.5, g_both);
    for (size_t i = 0; i < p.size(); ++i) g_sum[i] = g_seq[0][i] + g_seq[1][i];

    ThreadGroup group(2);
    std::vector<double> losses(2);
    std::vector<std::vector<double>> grads(2), want(2), want_init(2), got_init(2);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        ExpertParallel<double> ep{
            2, r,
            [&group, r](std::span<const double> send, std::span<const int64_t> send_counts,
                        std::span<double> recv, std::span<const int64_t> recv_counts) {
              group.all_to_all(r, send, send_counts, recv, recv_counts);
            },
            [&group, r](std::span<const int64_t> send, std::span<int64_t> recv) {
              group.all_to_all_counts(r, send, recv);
            }};
        const Transformer<double> m(shape, {}, {}, {}, ep);
        const std::vector<double> pr = pick_blocks(m, whole, p);
        // Expert blocks: both sequences; everything else: this rank's sequence.
        want[r] = pick_blocks(m, whole, g_seq[static_cast<size_t>(r)]);
        const std::vector<double> expert_want = pick_blocks(m, whole, g_sum);
        for (const TensorSlot& s : m.layout())
          if (s.expert)
            std::copy_n(expert_want.begin() + s.offset, s.size(), want[r].begin() + s.offset);
        want_init[r] = pick_blocks(m, whole, init);
        got_init[r].resize(pr.size());
        m.init(got_init[r], 9);
        grads[r].assign(pr.size(), 0.0);
        losses[r] = m.loss_and_grad(pr, all.subspan(r * len, len), 1, seq, 0.5, grads[r]);
      });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < 2; ++r) {
      EXPECT_NEAR(losses[r], loss_seq[r], 1e-12 * loss_seq[r]) << "rank " << r;
      EXPECT_LT(max_difference(grads[r], want[r]), 1e-12) << "rank " << r << ", coeff " << coeff;
      EXPECT_EQ(got_init[r], want_init[r]) << "rank " << r;
    }
    if (coeff == 0.0) {
      EXPECT_NEAR(losses[0] + losses[1], loss_both, 1e-12 * loss_both);
      EXPECT_LT(max_difference(g_sum, g_both), 1e-12);
    }
  }
}

// Tensor-parallel shards of a MoE model (shared experts split like the dense MLP, routed experts
// replicated, or with expert tensor parallelism split too: gate and up by columns, down by rows)
// give the whole model's loss and, for their blocks, its gradients.
void ExpectMoeTensorShards(bool split_experts) {
  const ModelShape shape = moe_shape(false);
  const Transformer<double> whole(shape);
  const std::vector<double> p = rich_params(whole, 81);
  std::vector<double> g(p.size(), 0.0);
  const int64_t batch = 2, seq = 6;
  const std::vector<int32_t> tokens = random_tokens(batch * (seq + 1), shape.vocab, 82);
  const double loss = whole.loss_and_grad(p, tokens, batch, seq, 0.5, g);
  ThreadGroup reduce(2);
  std::vector<double> losses(2), errors(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      const auto sum = [&reduce, r](std::span<double> x) { reduce(r, x); };
      ExpertParallel<double> ep;
      if (split_experts) {
        ep.tensor = 2;
        ep.tensor_all_reduce = sum;
      }
      const Transformer<double> m(shape, {2, r, sum}, StageRange{}, {}, ep);
      for (const TensorSlot& s : m.layout()) {
        const bool split = s.name.find("shared.") != std::string::npos || s.name.ends_with(".wq") ||
                           s.name.ends_with(".wk") || s.name.ends_with(".wv") ||
                           s.name.ends_with(".wo") || s.name.starts_with("layers.0.w_") ||
                           (split_experts && s.expert);
        EXPECT_EQ(s.replicated, !split) << s.name;
        if (split_experts && s.expert) {
          EXPECT_EQ(s.size() * 2, s.full_rows * s.full_cols) << s.name;
        }
      }
      std::vector<double> gs(static_cast<size_t>(m.num_params()), 0.0);
      losses[r] = m.loss_and_grad(pick_blocks(m, whole, p), tokens, batch, seq, 0.5, gs);
      errors[r] = max_difference(gs, pick_blocks(m, whole, g));
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_NEAR(losses[r], loss, 1e-12 * loss) << "rank " << r;
    EXPECT_LT(errors[r], 1e-12) << "rank " << r;
  }
}

TEST(TensorParallel, MoeShardsReproduceTheWholeModel) { ExpectMoeTensorShards(false); }

TEST(TensorParallel, SplitExpertsReproduceTheWholeModel) { ExpectMoeTensorShards(true); }

// Sequence parallelism in MoE layers: each tp rank routes its own rows (the router statistics
// summed over tp). Split experts gather those rows over tp around their GEMMs and reduce-scatter
// the partial outputs back, mirrored in backward (Megatron's ETP all-gather and reduce-scatter).
// The ranks' losses, and their gradients of the tensors each holds whole, sum to the whole
// model's; the gradients of split tensors are the whole model's blocks.
void ExpectMoeSequenceParallelSums(bool split_experts) {
  const int tp = 2;
  const ModelShape shape = moe_shape(false);
  const Transformer<double> whole(shape);
  const std::vector<double> p = rich_params(whole, 111);
  std::vector<double> g(p.size(), 0.0);
  const int64_t batch = 2, seq = 9;  // 18 rows, 9 a rank
  const std::vector<int32_t> tokens = random_tokens(batch * (seq + 1), shape.vocab, 112);
  const double loss = whole.loss_and_grad(p, tokens, batch, seq, 0.5, g);
  // The ranks give the experts blocks of different sizes: some expert gets more of one rank's
  // rows than of the other's (one MoE layer; slots of token t at t * top_k.., rank r's tokens
  // from r * rows).
  const Routing routed = routing<double>(whole, p, tokens, batch, seq);
  const int64_t e_count = shape.moe.experts, slots_per_rank = shape.moe.top_k * batch * seq / tp;
  std::vector<int> count(static_cast<size_t>(tp * e_count), 0);
  for (size_t s = 0; s < routed.experts.size(); ++s)
    ++count[static_cast<int64_t>(s) / slots_per_rank * e_count + routed.experts[s]];
  EXPECT_FALSE(std::equal(count.begin(), count.begin() + e_count, count.begin() + e_count));

  ThreadGroup group(tp);
  std::vector<double> losses(tp);
  std::vector<std::vector<double>> grads(tp), want(tp);
  std::vector<std::vector<TensorSlot>> layouts(tp);
  std::vector<std::thread> threads;
  for (int r = 0; r < tp; ++r) {
    threads.emplace_back([&, r] {
      ExpertParallel<double> ep;
      if (split_experts) {
        ep.tensor = tp;
        ep.tensor_all_reduce = [&group, r](std::span<double> x) { group(r, x); };
        ep.tensor_all_gather = [&group, r](std::span<const double> x,
                                           std::span<const int64_t> counts, std::span<double> out) {
          group.all_gather(r, x, counts, out);
        };
        ep.tensor_reduce_scatter =
            [&group, r](std::span<const double> x, std::span<const int64_t> counts,
                        std::span<double> out) { group.reduce_scatter(r, x, counts, out); };
        ep.tensor_all_gather_counts = [&group, r](std::span<const int64_t> x,
                                                  std::span<int64_t> out) {
          group.all_gather_counts(r, x, out);
        };
      }
      const Transformer<double> m(shape, sequence_parallel(group, tp, r), StageRange{}, {}, ep);
      layouts[r] = m.layout();
      want[r] = pick_blocks(m, whole, g);
      grads[r].assign(static_cast<size_t>(m.num_params()), 0.0);
      losses[r] = m.loss_and_grad(pick_blocks(m, whole, p), tokens, batch, seq, 0.5, grads[r]);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_NEAR(losses[0] + losses[1], loss, 1e-12 * loss);
  int experts_split = 0;
  for (int r = 0; r < tp; ++r) {
    double worst = 0;
    for (const TensorSlot& t : layouts[static_cast<size_t>(r)]) {
      experts_split += t.expert && !t.replicated;
      for (int64_t i = t.offset; i < t.offset + t.size(); ++i) {
        const double got = t.replicated ? grads[0][i] + grads[1][i] : grads[r][i];
        worst = std::max(worst, std::abs(got - want[r][i]) / std::max(1.0, std::abs(want[r][i])));
      }
    }
    EXPECT_LT(worst, 1e-12) << "rank " << r;
  }
  EXPECT_EQ(experts_split, split_experts ? 2 * 3 : 0);  // gate, up, down on each rank
}

TEST(TensorParallel, MoeSequenceParallelRanksSumToTheWholeModel) {
  ExpectMoeSequenceParallelSums(false);
}

TEST(TensorParallel, SplitExpertsSequenceParallelRanksSumToTheWholeModel) {
  ExpectMoeSequenceParallelSums(true);
}

// Two stages of a model whose layers are both MoE: the head's cross-entropy plus each stage's
// aux() is the whole model's objective, and the gradients (the first stage's load-balancing
// term weighted by the grad_scale its forward got) are the whole model's.
TEST(PipelineStages, MoeStagesAddTheirLoadBalancingLosses) {
  const ModelShape shape = moe_shape(false, 0);
  const Transformer<double> whole(shape);
  const std::vector<double> p = rich_params(whole, 91);
  std::vector<double> g(p.size(), 0.0);
  const int64_t batch = 2, seq = 7;
  const std::vector<int32_t> tokens = random_tokens(batch * (seq + 1), shape.vocab, 92);
  const double loss = whole.loss_and_grad(p, tokens, batch, seq, 0.25, g);
  const Transformer<double> s0(shape, {}, StageRange{0, 1, true, false}),
      s1(shape, {}, StageRange{1, 2, false, true});
  const std::vector<double> p0 = pick_blocks(s0, whole, p), p1 = pick_blocks(s1, whole, p);
  std::vector<double> g0(p0.size(), 0.0), g1(p1.size(), 0.0);
  StagePass<double> a(s0, p0, tokens, batch, seq), b(s1, p1, tokens, batch, seq);
  EXPECT_EQ(a.forward({}, 0.25, g0), 0.0);
  EXPECT_GT(a.aux(), 0.0);
  const std::vector<double> act(a.output().begin(), a.output().end());
  const double ce = b.forward(act, 0.25, g1);
  EXPECT_GT(b.aux(), 0.0);
  EXPECT_NEAR(ce + a.aux() + b.aux(), loss, 1e-12 * loss);
  b.backward({}, g1);
  const std::vector<double> d_act(b.input_grad().begin(), b.input_grad().end());
  a.backward(d_act, g0);
  EXPECT_LT(max_difference(g0, pick_blocks(s0, whole, g)), 1e-12);
  EXPECT_LT(max_difference(g1, pick_blocks(s1, whole, g)), 1e-12);
}

TEST(ContextParallel, MoeRanksSumToTheWholeModel) {
  ExpectContextParallelSums(small_moe_shape(), 101);
}

}  // namespace
}  // namespace parallax::exec
