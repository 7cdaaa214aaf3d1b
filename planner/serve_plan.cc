#include "planner/serve_plan.h"

#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <iterator>
#include <optional>
#include <set>
#include <tuple>

#include "core/text.h"
#include "planner/thread_arena.h"
#include "simulator/serving/pd_sim.h"
#include "simulator/serving/serve_sim.h"
#include "simulator/serving/step_shape.h"

namespace parallax {
namespace {

using serving::Deployment;

/// Why a candidate was pruned, in the order the rules apply.
enum class Prune { kScaleUp, kTokenBudget, kTp, kPp, kEp, kOther, kNoKvCache, kRequestFit, kCount };

const char* prune_text(Prune p) {
  switch (p) {
    case Prune::kScaleUp:
      return "tp beyond one scale-up (NVLink) domain";
    case Prune::kTokenBudget:
      return "engine: max_num_batched_tokens below max_num_seqs (vLLM refuses it)";
    case Prune::kTp:
      return "tp must divide the heads and MLP widths, and divide or be a multiple of the KV heads";
    case Prune::kPp:
      return "pp exceeds the layers";
    case Prune::kEp:
      return "ep must divide tp and the experts";
    case Prune::kOther:
      return "other deployment rules (serving::check_deployment)";
    case Prune::kNoKvCache:
      return "memory: weights and profiling activations leave no KV cache";
    case Prune::kRequestFit:
      return "memory: a replica's KV cache cannot hold one request (prompt + output)";
    case Prune::kCount:
      break;
  }
  return "?";
}

Prune prune_of(const Diagnostics& d) {
  const std::string& where = d.front().where;
  if (where == "--tp") return Prune::kTp;
  if (where == "--pp") return Prune::kPp;
  if (where == "--ep") return Prune::kEp;
  return Prune::kOther;
}

/// Total order for ties: the layout, the P/D split (colocated first), then the engine limits.
auto layout_key(const ServeCandidate& c) {
  const Deployment& d = c.deployment;
  return std::make_tuple(d.tp, d.pp, d.dp, d.ep, d.two_batch_overlap, c.engine.prefill_replicas,
                         d.max_num_seqs, d.max_num_batched_tokens);
}

bool ranked_before(const ServeCandidate& a, const ServeCandidate& b) {
  if (a.meets != b.meets) return a.meets;
  if (!a.meets && a.miss != b.miss) return a.miss < b.miss;
  if (a.output_tokens_per_s_per_gpu != b.output_tokens_per_s_per_gpu)
    return a.output_tokens_per_s_per_gpu > b.output_tokens_per_s_per_gpu;
  if (a.ttft_p90_s != b.ttft_p90_s) return a.ttft_p90_s < b.ttft_p90_s;
  return layout_key(a) < layout_key(b);
}

Diagnostics validate(const ServePlanRequest& r, const ServePlanOptions& opt) {
  Diagnostics out = validate_model(r.model, "model");
  auto bad = [&](const char* where, std::string what, std::string hint = "") {
    out.push_back({where, std::move(what), std::move(hint)});
  };
  const ServeWorkload& w = r.workload;
  if (r.gpus < 1) bad("--gpus", "must be at least 1, got " + std::to_string(r.gpus));
  if (r.gpus > kMaxGpus)
    bad("--gpus", "gpus=" + std::to_string(r.gpus) + " is beyond the largest cluster modelled",
        "at most " + std::to_string(kMaxGpus) + " GPUs");
  if (w.requests < 1) bad("--requests", "must be at least 1, got " + std::to_string(w.requests));
  if (w.prompt_len < 1 || w.output_len < 1)
    bad("--prompt-len", "prompt and output lengths must be at least 1, got " +
                            std::to_string(w.prompt_len) + " and " + std::to_string(w.output_len));
  if (w.prefix_len < 0 || w.prefix_len > w.prompt_len || w.prefix_groups < 1)
    bad("--prefix-len", "a shared prefix is 0 to --prompt-len tokens in 1 or more groups, got " +
                            std::to_string(w.prefix_len) + " tokens in " +
                            std::to_string(w.prefix_groups));
  if (!(w.rate_per_s >= 0) || std::isinf(w.rate_per_s))
    bad("--rate",
        "must be a finite rate >= 0 (0: all at once), got " + format_number("%g", w.rate_per_s));
  if (!(r.slo.ttft_p90_s >= 0) || !(r.slo.tpot_p90_s >= 0))
    bad("--ttft-p90", "latency targets must be >= 0 seconds (0: no limit)");
  if (r.pp_grid.empty() || r.max_num_seqs_grid.empty() || r.max_num_batched_tokens_grid.empty())
    bad("serve-plan", "the pp, max_num_seqs and max_num_batched_tokens grids must not be empty");
  if (r.tp < 0 || r.pp < 0) bad("--tp", "pinned degrees must be >= 1 (0: searched)");
  const int replica = std::max(1, r.tp) * std::max(1, r.pp);
  if (r.gpus >= 1 && r.tp >= 0 && r.pp >= 0 && r.gpus % replica != 0)
    bad("--gpus",
        std::to_string(r.gpus) + " GPUs do not split into replicas of tp*pp = " +
            std::to_string(replica) + ", want a multiple of " + std::to_string(replica),
        "--gpus " + std::to_string(std::max(replica, r.gpus / replica * replica)) + " or " +
            std::to_string((r.gpus / replica + 1) * replica));
  if (opt.max_load && !r.slo.any())
    bad("--max-load", "the highest rate meeting the SLO needs a latency target",
        "give --ttft-p90 and/or --tpot-p90");
  if (opt.bisection_steps < 1 || opt.max_load_top < 1)
    bad("--max-load", "bisection steps and candidates must be at least 1");
  return out;
}

/// A candidate to simulate: a deployment and its P/D split (0: colocated).
struct Layout {
  Deployment d;
  int prefill_replicas = 0;
};

struct Space {
  std::vector<Layout> kept;  ///< colocated
  int64_t candidates = 0;
  std::array<int64_t, static_cast<size_t>(Prune::kCount)> pruned{};
};

void consider(const ServePlanRequest& r, const Deployment& d, Space* s) {
  ++s->candidates;
  auto prune = [&](Prune p) { ++s->pruned[static_cast<size_t>(p)]; };
  if (r.hw.scale_up_domain > 0 && d.tp > r.hw.scale_up_domain) return prune(Prune::kScaleUp);
  if (d.max_num_batched_tokens < d.max_num_seqs) return prune(Prune::kTokenBudget);
  const Diagnostics rules = serving::check_deployment(r.model, d, r.gpus);
  if (!rules.empty()) return prune(prune_of(rules));
  auto kv = serving::kv_budget(r.model, r.hw, d);
  if (!kv) return prune(Prune::kNoKvCache);
  const serving::Request one{0, 0, r.workload.prompt_len, r.workload.output_len};
  if (serving::peak_blocks(one, d.block_size) > kv->blocks) return prune(Prune::kRequestFit);
  s->kept.push_back({d, 0});
}

Space enumerate(const ServePlanRequest& r) {
  Space s;
  for (int tp = 1; tp <= r.gpus; ++tp) {
    if (r.gpus % tp != 0 || (r.tp > 0 && tp != r.tp)) continue;
    for (int pp : r.pp_grid) {
      if (pp < 1 || r.gpus % (tp * pp) != 0 || (r.pp > 0 && pp != r.pp)) continue;
      std::vector<int> eps = {1};
      if (r.model.moe && tp > 1) eps.push_back(tp);
      // Wide expert parallelism: the experts over every GPU, the replicas stepping together.
      const int dp = r.gpus / (tp * pp);
      if (r.model.moe && pp == 1 && dp > 1 && r.model.moe->experts % (tp * dp) == 0)
        eps.push_back(tp * dp);
      for (int ep : eps)
        for (const bool tbo : {false, true})
          for (int64_t seqs : r.max_num_seqs_grid)
            for (int64_t tokens : r.max_num_batched_tokens_grid) {
              // Two-batch overlap only where there are all-to-alls to overlap (wide ep).
              if (tbo && ep <= tp) continue;
              Deployment d;
              d.tp = tp;
              d.pp = pp;
              d.dp = r.gpus / (tp * pp);
              d.ep = ep;
              d.two_batch_overlap = tbo;
              d.precision = r.precision;
              d.gpu_memory_utilization = r.gpu_memory_utilization;
              d.block_size = r.block_size;
              d.max_num_seqs = seqs;
              d.max_num_batched_tokens = tokens;
              consider(r, d, &s);
            }
    }
  }
  return s;
}

/// A simulated candidate and the request rate it achieved (finished requests / duration).
struct Run {
  ServeCandidate c;
  double requests_per_s = 0;
};

/// Whether both pools of wide-ep `d` split at `p` are valid and hold one request.
bool wide_split_fits(const ServePlanRequest& r, const Deployment& d, int p) {
  for (const int replicas : {p, d.dp - p}) {
    const Deployment pool = serving::wide_ep_pool(d, replicas);
    if (!serving::check_deployment(r.model, pool, 0).empty()) return false;
    auto kv = serving::kv_budget(r.model, r.hw, pool);
    const serving::Request one{0, 0, r.workload.prompt_len, r.workload.output_len};
    if (!kv || serving::peak_blocks(one, d.block_size) > kv->blocks) return false;
  }
  return true;
}

/// Simulates `d` colocated (prefill_replicas = 0) or disaggregated as `serve --pd P:D` does with
/// the same engine limits in both pools, and scores it.
Result<Run> run(const ServePlanRequest& r, const Deployment& d, int prefill_replicas,
                double rate_per_s) {
  auto kv = serving::kv_budget(r.model, r.hw, d);
  if (!kv) return kv.errors();
  const ServeWorkload& w = r.workload;
  auto requests =
      serving::poisson_requests(w.requests, rate_per_s, w.prompt_len, w.output_len, w.seed);
  if (w.prefix_len > 0)
    serving::assign_shared_prefixes(&requests, w.prefix_len, w.prefix_groups, w.seed);
  const serving::StepCost cost(r.model, r.hw, d);
  const serving::SloSpec slo{r.slo.ttft_p90_s, r.slo.tpot_p90_s};
  Run out;
  ServeCandidate& c = out.c;
  Result<serving::ServeResult> sim = serving::ServeResult{};
  if (prefill_replicas == 0 && d.wide_ep()) {
    sim = serving::simulate_lockstep(requests, serving::engine_config(d, kv->blocks),
                                     serving::lockstep_cost(cost), slo);
  } else if (prefill_replicas == 0) {
    sim = serving::simulate_serving(requests, serving::engine_config(d, kv->blocks),
                                    serving::stage_cost(cost), slo);
  } else {
    const serving::KvTransferTime transfer =
        serving::kv_transfer_time(r.hw, kv->kv_bytes_per_token);
    double sum = 0;
    int64_t moved = 0;
    for (const serving::Request& q : requests) {
      if (q.output_len < 2) continue;  // finished at its first token, never transferred
      sum += transfer(q.prompt_len);
      ++moved;
    }
    c.kv_transfer_mean_s = moved > 0 ? sum / static_cast<double>(moved) : 0.0;
    if (!d.wide_ep()) {
      sim = serving::simulate_disaggregated(
          requests, serving::pd_config(d, kv->blocks, prefill_replicas, d.dp - prefill_replicas),
          serving::stage_cost(cost), serving::stage_cost(cost), transfer, slo);
    } else {
      // Each pool spreads the experts over its own GPUs and steps together, its KV cache what
      // its own expert share leaves (as `serve --pd` runs it).
      const Deployment pre = serving::wide_ep_pool(d, prefill_replicas),
                       dec = serving::wide_ep_pool(d, d.dp - prefill_replicas);
      auto pre_kv = serving::kv_budget(r.model, r.hw, pre);
      auto dec_kv = serving::kv_budget(r.model, r.hw, dec);
      if (!pre_kv) return pre_kv.errors();
      if (!dec_kv) return dec_kv.errors();
      serving::PdConfig pd;
      pd.prefill = serving::engine_config(pre, pre_kv->blocks).scheduler;
      pd.decode = serving::engine_config(dec, dec_kv->blocks).scheduler;
      pd.prefill_replicas = prefill_replicas;
      pd.decode_replicas = d.dp - prefill_replicas;
      const serving::StepCost pre_cost(r.model, r.hw, pre), dec_cost(r.model, r.hw, dec);
      sim = serving::simulate_disaggregated(requests, pd, serving::lockstep_cost(pre_cost),
                                            serving::lockstep_cost(dec_cost), transfer, slo);
      kv = dec_kv;
    }
  }
  if (!sim) return sim.errors();
  c.deployment = d;
  c.engine.enable_chunked_prefill = true;
  c.engine.gpus = d.gpus();
  c.engine.gpus_per_node = r.hw.gpus_per_node;
  c.engine.prefill_replicas = prefill_replicas;
  c.kv_tokens = kv->tokens();
  c.output_tokens_per_s = sim->output_tokens_per_s;
  c.output_tokens_per_s_per_gpu = sim->output_tokens_per_s / d.gpus();
  c.ttft_p90_s = sim->ttft_s.p90;
  c.tpot_p90_s = sim->tpot_s.p90;
  c.goodput_requests_per_s = sim->goodput_requests_per_s;
  double worst = 0;  // max(p90 / limit) over the limits given
  if (r.slo.ttft_p90_s > 0) worst = std::max(worst, c.ttft_p90_s / r.slo.ttft_p90_s);
  if (r.slo.tpot_p90_s > 0) worst = std::max(worst, c.tpot_p90_s / r.slo.tpot_p90_s);
  c.meets = worst <= 1;
  c.miss = r.slo.any() ? worst - 1 : 0;
  out.requests_per_s = sim->requests_per_s;
  return out;
}

/// The P/D candidates (see the header): for each layout (tp, pp, dp, ep) with dp >= 2, the
/// max_num_seqs of its first-ranked colocated candidate with every max_num_batched_tokens kept
/// with it colocated, each split P = 1 .. dp-1. Each pool holds the colocated replica's KV blocks,
/// so what fits colocated fits both pools: nothing more to prune.
std::vector<Layout> pd_layouts(const ServePlanRequest& r, const std::vector<ServeCandidate>& ranked,
                               const Space& space) {
  std::set<std::tuple<int, int, int, int>> seen;
  std::vector<Layout> out;
  for (const ServeCandidate& best : ranked) {
    const Deployment& b = best.deployment;
    if (b.dp < 2 || !seen.insert({b.tp, b.pp, b.dp, b.ep}).second) continue;
    for (const Layout& l : space.kept) {
      const Deployment& d = l.d;
      if (std::tie(d.tp, d.pp, d.dp, d.ep, d.max_num_seqs) !=
          std::tie(b.tp, b.pp, b.dp, b.ep, b.max_num_seqs))
        continue;
      for (int p = 1; p < d.dp; ++p)
        if (!d.wide_ep() || wide_split_fits(r, d, p)) out.push_back({d, p});
    }
  }
  return out;
}

/// Simulates every layout at the workload's rate, in parallel; those whose simulation fails are
/// left out.
std::vector<ServeCandidate> simulate_all(const ServePlanRequest& r,
                                         const std::vector<Layout>& layouts,
                                         tbb::task_arena& arena) {
  std::vector<std::optional<ServeCandidate>> sims(layouts.size());
  arena.execute([&] {
    tbb::parallel_for(size_t{0}, layouts.size(), size_t{1}, [&](size_t i) {
      auto c = run(r, layouts[i].d, layouts[i].prefill_replicas, r.workload.rate_per_s);
      if (c) sims[i] = c->c;
    });
  });
  std::vector<ServeCandidate> out;
  for (auto& c : sims)
    if (c) out.push_back(std::move(*c));
  return out;
}

/// Bisects the highest Poisson rate at which `c` meets the SLO between 0 and twice its
/// saturation rate (c->saturation_rate_per_s): the bound first, then `steps` halvings. The same
/// seed scales every arrival by 1 / rate, so a lower rate is the same trace stretched. Returns
/// the simulations run.
int64_t bisect_load(const ServePlanRequest& r, int steps, ServeCandidate* c) {
  double lo = 0, hi = 2 * c->saturation_rate_per_s;
  c->load_searched = true;
  int64_t sims = 1;
  const int pd = c->engine.prefill_replicas;
  auto top = run(r, c->deployment, pd, hi);
  if (top && top->c.meets) {
    c->max_rate_per_s = hi;
    c->max_rate_capped = true;
    return sims;
  }
  for (int i = 0; i < steps; ++i) {
    const double mid = 0.5 * (lo + hi);
    ++sims;
    auto at = run(r, c->deployment, pd, mid);
    (at && at->c.meets ? lo : hi) = mid;
  }
  c->max_rate_per_s = lo;
  c->failing_rate_per_s = hi;
  return sims;
}

/// Max-load mode: the saturation rate of every candidate (every request at once), then a
/// bisection for `max_load_top` of them: the best-saturating of each layout (tp, pp, dp, ep, P/D
/// split) by saturation rate, then the others by it. The bisected lead the ranking by their highest
/// rate meeting the SLO; the others follow in their first order.
void rank_by_load(const ServePlanRequest& r, const ServePlanOptions& opt, tbb::task_arena& arena,
                  ServePlanResult* result) {
  std::vector<ServeCandidate>& ranked = result->ranked;
  arena.execute([&] {
    tbb::parallel_for(size_t{0}, ranked.size(), size_t{1}, [&](size_t i) {
      auto sat = run(r, ranked[i].deployment, ranked[i].engine.prefill_replicas, 0);
      ranked[i].saturation_rate_per_s = sat ? sat->requests_per_s : 0;
    });
  });
  result->load_simulations = static_cast<int64_t>(ranked.size());
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const ServeCandidate& a, const ServeCandidate& b) {
                     return a.saturation_rate_per_s > b.saturation_rate_per_s;
                   });
  // The best-saturating engine limits of each layout first, so that the bisected compare
  // layouts, not only the limits of one.
  std::set<std::tuple<int, int, int, int, int>> layouts;
  std::stable_partition(ranked.begin(), ranked.end(), [&](const ServeCandidate& c) {
    const Deployment& d = c.deployment;
    return layouts.insert({d.tp, d.pp, d.dp, d.ep, c.engine.prefill_replicas}).second;
  });
  const size_t k = std::min(ranked.size(), static_cast<size_t>(opt.max_load_top));
  std::vector<int64_t> sims(k, 0);
  arena.execute([&] {
    tbb::parallel_for(size_t{0}, k, size_t{1},
                      [&](size_t i) { sims[i] = bisect_load(r, opt.bisection_steps, &ranked[i]); });
  });
  for (int64_t n : sims) result->load_simulations += n;
  result->simulated += result->load_simulations;
  // Bisected first, by their highest rate; then the first ranking (the sort is total).
  std::sort(ranked.begin(), ranked.end(), [](const ServeCandidate& a, const ServeCandidate& b) {
    if (a.load_searched != b.load_searched) return a.load_searched;
    if (a.max_rate_per_s != b.max_rate_per_s) return a.max_rate_per_s > b.max_rate_per_s;
    return ranked_before(a, b);
  });
}

std::vector<PruneCount> pruned_counts(const Space& s, const HwProfile& hw) {
  std::vector<PruneCount> out;
  for (size_t i = 0; i < s.pruned.size(); ++i) {
    if (s.pruned[i] == 0) continue;
    std::string rule = prune_text(static_cast<Prune>(i));
    if (static_cast<Prune>(i) == Prune::kScaleUp)
      rule += " of " + std::to_string(hw.scale_up_domain) + " GPUs";
    out.push_back({rule, s.pruned[i]});
  }
  return out;
}

std::string ms(double s) { return format_number("%.0f ms", s * 1e3); }
std::string ms1(double s) { return format_number("%.1f ms", s * 1e3); }

std::string split_text(const ServeCandidate& c) {
  const int p = c.engine.prefill_replicas;
  return p == 0 ? "colocated"
                : "pd" + std::to_string(p) + ":" + std::to_string(c.deployment.dp - p);
}

/// "tp 4 vs 8; max_num_seqs 128 vs 256": the fields in which `u` differs from `w`.
std::string differences(const ServeCandidate& w, const ServeCandidate& u) {
  const Deployment &a = w.deployment, &b = u.deployment;
  std::string out;
  auto diff = [&](const char* name, int64_t x, int64_t y) {
    if (x == y) return;
    out += (out.empty() ? "" : "; ") + std::string(name) + " " + std::to_string(x) + " vs " +
           std::to_string(y);
  };
  diff("tp", a.tp, b.tp);
  diff("pp", a.pp, b.pp);
  diff("dp", a.dp, b.dp);
  diff("ep", a.ep, b.ep);
  if (split_text(w) != split_text(u))
    out += (out.empty() ? "" : "; ") + ("prefill/decode " + split_text(w)) + " vs " + split_text(u);
  diff("max_num_seqs", a.max_num_seqs, b.max_num_seqs);
  diff("max_num_batched_tokens", a.max_num_batched_tokens, b.max_num_batched_tokens);
  return out.empty() ? "the same" : out;
}

std::string describe(const ServeCandidate& c) {
  return deployment_label(c.deployment, c.engine.prefill_replicas) + ", max_num_seqs " +
         std::to_string(c.deployment.max_num_seqs) + ", max_num_batched_tokens " +
         std::to_string(c.deployment.max_num_batched_tokens);
}

/// Why `w` ranks above `u`, in one sentence.
std::string why_first(const ServePlanRequest& r, const ServeCandidate& w, const ServeCandidate& u) {
  if (w.load_searched && u.load_searched && w.max_rate_per_s != u.max_rate_per_s)
    return "it sustains " + format_number("%.2f", w.max_rate_per_s) + " req/s within the SLO vs " +
           format_number("%.2f", u.max_rate_per_s) + " req/s";
  if (w.meets && !u.meets)
    return "the runner-up misses the SLO by " + format_number("%.0f%%", 100 * u.miss);
  if (!w.meets)
    return "neither meets the SLO; the winner misses it by less (" +
           format_number("%.0f%%", 100 * w.miss) + " vs " + format_number("%.0f%%", 100 * u.miss) +
           ")";
  const double gain = w.output_tokens_per_s_per_gpu / u.output_tokens_per_s_per_gpu - 1;
  if (gain > 0.005)
    return format_number("%.1f%%", 100 * gain) + " more output tokens/s per GPU (" +
           format_number("%.0f", w.output_tokens_per_s_per_gpu) + " vs " +
           format_number("%.0f", u.output_tokens_per_s_per_gpu) + ")";
  std::string s = "both serve the offered " + format_number("%g", r.workload.rate_per_s) +
                  " req/s at the same throughput (within 0.5%)";
  if (w.ttft_p90_s < u.ttft_p90_s) s += "; the winner has the lower p90 TTFT";
  return s + "; --max-load ranks by the highest rate each sustains";
}

}  // namespace

std::string deployment_label(const Deployment& d, int prefill_replicas) {
  std::string s =
      "tp" + std::to_string(d.tp) + " pp" + std::to_string(d.pp) + " dp" + std::to_string(d.dp);
  if (d.ep > 1) s += " ep" + std::to_string(d.ep);
  if (d.two_batch_overlap) s += " tbo";
  if (prefill_replicas > 0)
    s += " pd" + std::to_string(prefill_replicas) + ":" + std::to_string(d.dp - prefill_replicas);
  return s;
}

Result<ServeCandidate> simulate_deployment(const ServePlanRequest& r, const Deployment& d,
                                           double rate_per_s, int prefill_replicas) {
  Diagnostics bad = serving::check_deployment(r.model, d, 0);
  if (prefill_replicas < 0 || (prefill_replicas > 0 && prefill_replicas >= d.dp))
    bad.push_back({"--pd",
                   "a P:D split needs P, D >= 1 with P + D = dp=" + std::to_string(d.dp) +
                       ", got P=" + std::to_string(prefill_replicas),
                   "prefill_replicas 0 (colocated) or 1.." + std::to_string(d.dp - 1)});
  if (!bad.empty()) return bad;
  auto out = run(r, d, prefill_replicas, rate_per_s);
  if (!out) return out.errors();
  return out->c;
}

Result<ServePlanResult> search_deployments(const ServePlanRequest& r, const ServePlanOptions& opt) {
  Diagnostics bad = validate(r, opt);
  if (!bad.empty()) return bad;
  const Space space = enumerate(r);
  ServePlanResult result;
  result.candidates = space.candidates;
  result.pruned = pruned_counts(space, r.hw);
  ThreadArena threads(opt.threads);
  tbb::task_arena& arena = threads.arena();
  result.ranked = simulate_all(r, space.kept, arena);
  result.simulated = static_cast<int64_t>(space.kept.size());
  if (result.ranked.empty()) {
    std::string why;
    for (const PruneCount& c : result.pruned)
      why += (why.empty() ? "" : "; ") + c.rule + ": " + std::to_string(c.count);
    return Diagnostic{"serve-plan",
                      "no deployment of " + r.model.name + " on " + std::to_string(r.gpus) + " x " +
                          r.hw.name + " fits (" + std::to_string(result.candidates) +
                          " candidates; " + (why.empty() ? "none enumerated" : why) + ")",
                      "add GPUs, use --precision fp8, or lower the prompt and output lengths"};
  }
  std::sort(result.ranked.begin(), result.ranked.end(), ranked_before);
  if (r.search_pd) {
    const std::vector<Layout> pd = pd_layouts(r, result.ranked, space);
    std::vector<ServeCandidate> more = simulate_all(r, pd, arena);
    result.pd_candidates = static_cast<int64_t>(pd.size());
    result.candidates += result.pd_candidates;
    result.simulated += result.pd_candidates;
    result.ranked.insert(result.ranked.end(), std::make_move_iterator(more.begin()),
                         std::make_move_iterator(more.end()));
    std::sort(result.ranked.begin(), result.ranked.end(), ranked_before);
  }
  if (opt.max_load) rank_by_load(r, opt, arena, &result);
  return result;
}

std::string explain_serve_plan(const ServePlanRequest& r, const ServePlanResult& s) {
  int64_t pruned = 0;
  for (const PruneCount& c : s.pruned) pruned += c.count;
  const std::string pd =
      !r.search_pd ? ", prefill/decode splits not searched"
                   : ", plus " + std::to_string(s.pd_candidates) +
                         " prefill/decode splits P:D (P + D = dp >= 2) with the best colocated "
                         "max_num_seqs of their layout";
  std::string out = "search space: " + std::to_string(s.candidates) +
                    " candidates (tp x pp with tp*pp dividing " + std::to_string(r.gpus) +
                    " GPUs, x ep, x max_num_seqs x max_num_batched_tokens" + pd + "); " +
                    (pruned > 0 ? std::to_string(pruned) + " pruned:\n" : "none pruned\n");
  for (const PruneCount& c : s.pruned)
    out += "  " + pad_right(std::to_string(c.count), 7) + c.rule + "\n";
  out += "simulated: " + std::to_string(s.simulated - s.load_simulations) + " deployments x " +
         std::to_string(r.workload.requests) + " requests";
  if (s.load_simulations > 0) {
    int64_t bisected = 0;
    for (const ServeCandidate& c : s.ranked) bisected += c.load_searched ? 1 : 0;
    out += ", plus " + std::to_string(s.load_simulations) +
           " for max load: each saturated (all requests at once), then the highest rate meeting "
           "the SLO bisected for " +
           std::to_string(bisected) + " (the best-saturating of each layout first)";
  }
  out += "\n";
  if (s.ranked.empty()) return out;
  int64_t meeting = 0;
  for (const ServeCandidate& c : s.ranked) meeting += c.meets ? 1 : 0;
  out += std::to_string(meeting) + " of " + std::to_string(s.ranked.size()) +
         " meet the SLO (p90 TTFT <= " + (r.slo.ttft_p90_s > 0 ? ms(r.slo.ttft_p90_s) : "any") +
         ", p90 TPOT <= " + (r.slo.tpot_p90_s > 0 ? ms1(r.slo.tpot_p90_s) : "any") + ")\n";
  const ServeCandidate& w = s.ranked[0];
  out += "winner: " + describe(w) + "\n";
  if (s.ranked.size() < 2) return out + "no runner-up\n";
  const ServeCandidate& u = s.ranked[1];
  out += "runner-up: " + describe(u) + "\n";
  out += "why: " + why_first(r, w, u) + "\n";
  out += "  differs in: " + differences(w, u) + "\n";
  out += "  p90 TTFT " + ms(w.ttft_p90_s) + " vs " + ms(u.ttft_p90_s) + ", p90 TPOT " +
         ms1(w.tpot_p90_s) + " vs " + ms1(u.tpot_p90_s) + "\n";
  out += "  output tokens/s per GPU " + format_number("%.0f", w.output_tokens_per_s_per_gpu) +
         " vs " + format_number("%.0f", u.output_tokens_per_s_per_gpu) + "; KV cache per replica " +
         std::to_string(w.kv_tokens) + " vs " + std::to_string(u.kv_tokens) + " tokens\n";
  if (w.engine.prefill_replicas > 0 || u.engine.prefill_replicas > 0) {
    auto transfer = [](const ServeCandidate& c) {
      return c.engine.prefill_replicas > 0 ? ms1(c.kv_transfer_mean_s) : std::string("none");
    };
    out += "  KV transfer prefill -> decode (mean) " + transfer(w) + " vs " + transfer(u) + "\n";
  }
  return out;
}

}  // namespace parallax
