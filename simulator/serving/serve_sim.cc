#include "simulator/serving/serve_sim.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <numeric>
#include <string>
#include <utility>

#include "core/text.h"

namespace parallax::serving {
namespace {

Diagnostics validate_inputs(const std::vector<Request>& requests, const ServeConfig& config,
                            const SloSpec& slo) {
  Diagnostics out = validate_scheduler_config(config.scheduler, "serve.scheduler");
  if (config.replicas < 1) {
    out.push_back({"serve.replicas", "must be >= 1, got " + std::to_string(config.replicas), ""});
  }
  if (config.pipeline_stages < 1) {
    out.push_back({"serve.pipeline_stages",
                   "must be >= 1, got " + std::to_string(config.pipeline_stages), ""});
  }
  Diagnostics bad = validate_requests(requests, slo);
  out.insert(out.end(), bad.begin(), bad.end());
  if (!out.empty()) return out;
  return check_requests_fit(requests, config.scheduler, "requests");
}

/// Counts a step of `work`'s engine just planned in `sched` (KV use weighted by `weight`, the
/// step's share of the engine's time) and, with `keep`, records it.
void account_step(const EngineWork& work, const Scheduler& sched, const IterationBatch& b, int lane,
                  double start, double duration, double weight, bool keep, EngineTimeline* tl) {
  const double util =
      static_cast<double>(sched.blocks_used()) / static_cast<double>(work.config->num_gpu_blocks);
  tl->kv_weighted += util * weight;
  tl->kv_plain += util;
  tl->busy_s += weight;
  tl->kv_max = std::max(tl->kv_max, util);
  ++tl->iterations;
  if (keep) {
    tl->records.push_back({work.replica, work.pool, lane, start, duration, b.prefill_tokens,
                           b.decode_tokens, b.num_seqs(), sched.num_running(),
                           sched.blocks_used()});
  }
}

/// Adds an engine's prefix-cache lookups, once it has finished, to the timeline.
void add_prefix_stats(const Scheduler& sched, EngineTimeline* tl) {
  tl->prefix_query_tokens += sched.prefix_query_tokens();
  tl->prefix_hit_tokens += sched.prefix_hit_tokens();
}

/// Stamps the step [t, end] on the clocks of the requests in `batch`.
void record_tokens(const IterationBatch& batch, double t, double end, EngineTimeline* tl) {
  for (int64_t p : batch.preempted) ++tl->clock[static_cast<size_t>(p)].preemptions;
  // Samplers whose previous tokens came at the same time (one earlier step's end, the same
  // double) see the same gap: consecutive equal gaps make one run.
  double gap = -1;
  int64_t count = 0;
  for (const ScheduledSeq& q : batch.seqs) {
    RequestClock& c = tl->clock[static_cast<size_t>(q.request)];
    if (c.first_scheduled < 0) c.first_scheduled = t;
    if (!q.samples) continue;
    if (c.first_token < 0) {
      c.first_token = end;
    } else {
      const double g = end - c.last_token;
      if (count > 0 && g != gap) {
        tl->itl.push_back({gap, count});
        count = 0;
      }
      gap = g;
      ++count;
    }
    c.last_token = end;
  }
  if (count > 0) tl->itl.push_back({gap, count});
}

}  // namespace

Diagnostics validate_requests(const std::vector<Request>& requests, const SloSpec& slo) {
  Diagnostics out;
  if (!(slo.ttft_s >= 0) || !(slo.tpot_s >= 0)) {
    out.push_back({"slo",
                   "limits must be >= 0 seconds (0 = none), got ttft_s " +
                       format_number("%g", slo.ttft_s) + ", tpot_s " +
                       format_number("%g", slo.tpot_s),
                   ""});
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    const Request& r = requests[i];
    const std::string where =
        "requests[" + std::to_string(i) + "] (id " + std::to_string(r.id) + ")";
    if (!std::isfinite(r.arrival_s) || r.arrival_s < 0) {
      out.push_back({where,
                     "arrival_s: must be finite and >= 0, got " + format_number("%g", r.arrival_s),
                     ""});
    }
    if (r.prompt_len < 1 || r.output_len < 1) {
      out.push_back({where,
                     "lengths: must be >= 1, got prompt_len " + std::to_string(r.prompt_len) +
                         ", output_len " + std::to_string(r.output_len),
                     ""});
    }
  }
  return out;
}

Result<bool> run_engine(const EngineWork& work, bool keep_iterations, EngineTimeline* tl) {
  PX_CHECK(work.config != nullptr && (work.cost != nullptr || work.stages != nullptr) && work.admit,
           "run_engine: missing config, cost or admit");
  PX_CHECK(work.mine.size() == work.ready_s.size(), "run_engine: mine and ready_s differ in size");
  PX_CHECK(work.pipeline_stages >= 1 && (work.stages != nullptr || work.pipeline_stages == 1),
           "run_engine: " << work.pipeline_stages << " stages need a StageCost");
  Scheduler sched(*work.config);
  const auto stages = static_cast<size_t>(work.pipeline_stages);
  std::vector<double> stage_s(1), stage_free(stages, 0.0);
  struct Flight {
    double start, end;
  };
  std::deque<Flight> flights;
  size_t next = 0;
  int64_t launched = 0;
  double t = 0;
  while (true) {
    for (; next < work.mine.size() && work.ready_s[next] <= t; ++next) {
      work.admit(sched, work.mine[next]);
    }
    if (flights.size() < stages && sched.has_work()) {
      const IterationBatch& batch = sched.schedule();
      for (int64_t p : batch.preempted) {
        if (batch.empty()) ++tl->clock[static_cast<size_t>(p)].preemptions;
      }
      if (!batch.empty()) {
        if (work.stages != nullptr) {
          (*work.stages)(batch, &stage_s);
        } else {
          stage_s.assign(1, (*work.cost)(batch));
        }
        double total = 0;
        bool bad = stage_s.size() != stages;
        for (double x : stage_s) {
          bad = bad || !std::isfinite(x) || x < 0;
          total += x;
        }
        if (bad) {
          std::string got;
          for (double x : stage_s) got += (got.empty() ? "" : ", ") + format_number("%g", x);
          const std::string want = stages == 1
                                       ? "must be finite and >= 0 seconds, got " + got
                                       : "must be " + std::to_string(stages) +
                                             " finite stage times >= 0 seconds, got [" + got + "]";
          return Diagnostic{"iteration cost",
                            want + " for a step of " + std::to_string(batch.num_seqs()) +
                                " seqs (" + std::to_string(batch.prefill_tokens) + " prefill + " +
                                std::to_string(batch.decode_tokens) + " decode tokens)",
                            (work.pool == 1 ? "decode replica " : "replica ") +
                                std::to_string(work.replica) + " at t=" + format_number("%g", t)};
        }
        const double start = std::max(t, stage_free[0]);
        double end = start;
        for (size_t st = 0; st < stages; ++st) {
          end = std::max(end, stage_free[st]) + stage_s[st];
          stage_free[st] = end;
        }
        flights.push_back({start, end});
        // Weighted by the step's share of the engine's time: its mean stage time.
        account_step(work, sched, batch, static_cast<int>(launched % work.pipeline_stages), start,
                     end - start, total / static_cast<double>(stages), keep_iterations, tl);
        ++launched;
        continue;
      }
    }
    if (!flights.empty()) {
      const Flight f = flights.front();
      flights.pop_front();
      t = std::max(t, f.end);
      record_tokens(sched.update_from_output(nullptr), f.start, f.end, tl);
      continue;
    }
    PX_CHECK(!sched.has_work(), "run_engine: work pending but nothing scheduled or in flight");
    if (next == work.mine.size()) {
      add_prefix_stats(sched, tl);
      return true;
    }
    t = work.ready_s[next];
  }
}

ServeResult summarize_timeline(const std::vector<Request>& requests, const SloSpec& slo,
                               EngineTimeline& tl) {
  PX_CHECK(
      !requests.empty() && tl.clock.size() == requests.size(),
      "summarize_timeline: " << requests.size() << " requests, " << tl.clock.size() << " clocks");
  ServeResult res;
  const size_t n = requests.size();
  std::vector<double> ttft, tpot, e2e, queue;
  ttft.reserve(n);
  e2e.reserve(n);
  queue.reserve(n);
  tpot.reserve(n);
  double first_arrival = requests[0].arrival_s, last_finish = 0;
  double output_tokens = 0, all_tokens = 0;
  int64_t good = 0;
  for (size_t i = 0; i < n; ++i) {
    const Request& r = requests[i];
    const RequestClock& c = tl.clock[i];
    RequestRecord rec;
    rec.id = r.id;
    rec.replica = c.replica;
    rec.prefill_replica = c.prefill_replica;
    rec.prompt_len = r.prompt_len;
    rec.output_len = r.output_len;
    rec.arrival_s = r.arrival_s;
    rec.first_scheduled_s = c.first_scheduled;
    rec.first_token_s = c.first_token;
    rec.finish_s = c.last_token;
    rec.preemptions = c.preemptions;
    ttft.push_back(rec.first_token_s - r.arrival_s);
    e2e.push_back(rec.finish_s - r.arrival_s);
    queue.push_back(rec.first_scheduled_s - r.arrival_s);
    bool meets = slo.ttft_s <= 0 || ttft.back() <= slo.ttft_s;
    if (r.output_len > 1) {
      tpot.push_back((rec.finish_s - rec.first_token_s) / static_cast<double>(r.output_len - 1));
      meets = meets && (slo.tpot_s <= 0 || tpot.back() <= slo.tpot_s);
    }
    good += meets ? 1 : 0;
    first_arrival = std::min(first_arrival, r.arrival_s);
    last_finish = std::max(last_finish, rec.finish_s);
    output_tokens += static_cast<double>(r.output_len);
    all_tokens += static_cast<double>(r.prompt_len + r.output_len);
    res.preemptions += rec.preemptions;
    res.requests.push_back(rec);
  }
  res.duration_s = last_finish - first_arrival;
  auto per_s = [&](double x) { return res.duration_s > 0 ? x / res.duration_s : 0.0; };
  res.requests_per_s = per_s(static_cast<double>(n));
  res.output_tokens_per_s = per_s(output_tokens);
  res.total_tokens_per_s = per_s(all_tokens);
  res.goodput_requests_per_s = per_s(static_cast<double>(good));
  res.ttft_s = summarize(std::move(ttft));
  res.tpot_s = summarize(std::move(tpot));
  res.itl_s = summarize_runs(std::move(tl.itl));
  res.e2e_s = summarize(std::move(e2e));
  res.queue_s = summarize(std::move(queue));
  res.iterations = tl.iterations;
  res.prefix_hit_tokens = tl.prefix_hit_tokens;
  res.prefix_cache_hit_rate =
      tl.prefix_query_tokens > 0
          ? static_cast<double>(tl.prefix_hit_tokens) / static_cast<double>(tl.prefix_query_tokens)
          : 0.0;
  res.kv_utilization_max = tl.kv_max;
  res.kv_utilization_mean = tl.busy_s > 0       ? tl.kv_weighted / tl.busy_s
                            : tl.iterations > 0 ? tl.kv_plain / static_cast<double>(tl.iterations)
                                                : 0.0;
  res.iteration_records = std::move(tl.records);
  std::stable_sort(res.iteration_records.begin(), res.iteration_records.end(),
                   [](const IterationRecord& a, const IterationRecord& b) {
                     if (a.start_s != b.start_s) return a.start_s < b.start_s;
                     if (a.pool != b.pool) return a.pool < b.pool;
                     return a.replica < b.replica;
                   });
  return res;
}

std::vector<size_t> arrival_order(const std::vector<Request>& requests) {
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return requests[a].arrival_s < requests[b].arrival_s;
  });
  return order;
}

Stats summarize(std::vector<double> values) {
  Stats s;
  s.count = static_cast<int64_t>(values.size());
  if (values.empty()) return s;
  const size_t n = values.size();
  s.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(n);
  s.max = *std::max_element(values.begin(), values.end());
  // Percentiles in increasing order: each selection runs on the suffix the previous one left,
  // whose elements are all >= the previous pick; the (lo+1)-th smallest is the suffix's minimum.
  auto from = values.begin();
  double* outs[] = {&s.p50, &s.p90, &s.p99};
  const double ps[] = {0.5, 0.9, 0.99};
  for (int k = 0; k < 3; ++k) {
    const double pos = ps[k] * static_cast<double>(n - 1);
    const auto lo = static_cast<size_t>(std::floor(pos));
    const double frac = pos - static_cast<double>(lo);
    const auto nth = values.begin() + static_cast<std::ptrdiff_t>(lo);
    std::nth_element(from, nth, values.end());
    from = nth;
    const double a = *nth;
    const double b = (frac > 0 && lo + 1 < n) ? *std::min_element(nth + 1, values.end()) : a;
    *outs[k] = a + frac * (b - a);
  }
  return s;
}

Stats summarize_runs(Runs runs) {
  Stats s;
  std::erase_if(runs, [](const auto& run) {
    PX_CHECK(run.second >= 0, "summarize_runs: negative count " << run.second);
    return run.second == 0;
  });
  std::sort(runs.begin(), runs.end());
  double sum = 0;
  for (const auto& [v, k] : runs) {
    s.count += k;
    sum += v * static_cast<double>(k);
  }
  if (s.count == 0) return s;
  s.mean = sum / static_cast<double>(s.count);
  s.max = runs.back().first;
  // The value of 0-based rank `r` in the expanded sorted sample; ranks only grow, so one cursor.
  size_t at = 0;
  int64_t below = 0;  // values in runs before `at`
  auto value_at = [&](int64_t r) {
    while (below + runs[at].second <= r) below += runs[at++].second;
    return runs[at].first;
  };
  double* outs[] = {&s.p50, &s.p90, &s.p99};
  const double ps[] = {0.5, 0.9, 0.99};
  for (int k = 0; k < 3; ++k) {
    const double pos = ps[k] * static_cast<double>(s.count - 1);
    const auto lo = static_cast<int64_t>(std::floor(pos));
    const double frac = pos - static_cast<double>(lo);
    const double a = value_at(lo);
    const double b = (frac > 0 && lo + 1 < s.count) ? value_at(lo + 1) : a;
    *outs[k] = a + frac * (b - a);
  }
  return s;
}

namespace {

Result<ServeResult> simulate(const std::vector<Request>& requests, const ServeConfig& config,
                             const IterationCost* cost, const StageCost* stages, const SloSpec& slo,
                             bool keep_iterations) {
  Diagnostics errors = validate_inputs(requests, config, slo);
  if (!errors.empty()) return errors;
  if (requests.empty()) return ServeResult{};
  const std::vector<size_t> order = arrival_order(requests);
  const auto replicas = static_cast<size_t>(config.replicas);
  EngineTimeline tl(requests.size());
  for (size_t rep = 0; rep < replicas; ++rep) {
    EngineWork work;
    work.replica = static_cast<int>(rep);
    work.config = &config.scheduler;
    work.cost = cost;
    work.stages = stages;
    work.pipeline_stages = config.pipeline_stages;
    for (size_t k = rep; k < order.size(); k += replicas) {
      work.mine.push_back(order[k]);
      work.ready_s.push_back(requests[order[k]].arrival_s);
      tl.clock[order[k]].replica = tl.clock[order[k]].prefill_replica = work.replica;
    }
    work.admit = [&requests](Scheduler& sched, size_t pos) {
      Request r = requests[pos];
      r.id = static_cast<int64_t>(pos);  // the scheduler reports positions back
      sched.add(r);
    };
    Result<bool> ran = run_engine(work, keep_iterations, &tl);
    if (!ran.ok()) return ran.errors();
  }
  return summarize_timeline(requests, slo, tl);
}

}  // namespace

Result<ServeResult> simulate_serving(const std::vector<Request>& requests,
                                     const ServeConfig& config, const IterationCost& cost,
                                     const SloSpec& slo, bool keep_iterations) {
  PX_CHECK(static_cast<bool>(cost), "simulate_serving: no cost function");
  if (config.pipeline_stages != 1) {
    return Diagnostic{"serve.pipeline_stages",
                      "a one-stage step cost prices " + std::to_string(config.pipeline_stages) +
                          " stages, want 1",
                      "give a StageCost for pipelined engines"};
  }
  return simulate(requests, config, &cost, nullptr, slo, keep_iterations);
}

Result<ServeResult> simulate_serving(const std::vector<Request>& requests,
                                     const ServeConfig& config, const StageCost& cost,
                                     const SloSpec& slo, bool keep_iterations) {
  PX_CHECK(static_cast<bool>(cost), "simulate_serving: no cost function");
  return simulate(requests, config, nullptr, &cost, slo, keep_iterations);
}

Result<bool> run_lockstep(const std::vector<EngineWork>& works, const LockstepCost& cost,
                          bool keep_iterations, EngineTimeline* tl) {
  const size_t replicas = works.size();
  std::vector<Scheduler> scheds;
  scheds.reserve(replicas);
  for (const EngineWork& w : works) {
    PX_CHECK(w.config != nullptr && w.admit && w.mine.size() == w.ready_s.size() &&
                 w.pipeline_stages == 1,
             "run_lockstep: replica " << w.replica << " lacks config or admit, or is pipelined");
    scheds.emplace_back(*w.config);
  }
  std::vector<size_t> next(replicas, 0);
  std::vector<const IterationBatch*> batches(replicas, nullptr);
  double t = 0;
  while (true) {
    bool any = false;
    double soonest = -1;
    for (size_t r = 0; r < replicas; ++r) {
      const EngineWork& w = works[r];
      for (; next[r] < w.mine.size() && w.ready_s[next[r]] <= t; ++next[r])
        w.admit(scheds[r], w.mine[next[r]]);
      any = any || scheds[r].has_work();
      if (next[r] < w.mine.size())
        soonest = soonest < 0 ? w.ready_s[next[r]] : std::min(soonest, w.ready_s[next[r]]);
    }
    if (!any) {
      if (soonest < 0) break;
      t = soonest;
      continue;
    }
    for (size_t r = 0; r < replicas; ++r)
      batches[r] = scheds[r].has_work() ? &scheds[r].schedule() : nullptr;
    const double dt = cost(batches);
    if (!std::isfinite(dt) || dt < 0)
      return Diagnostic{"iteration cost",
                        "must be finite and >= 0 seconds, got " + format_number("%g", dt) +
                            " for a step of the replicas together",
                        "at t=" + format_number("%g", t)};
    const double end = t + dt;
    for (size_t r = 0; r < replicas; ++r) {
      if (batches[r] == nullptr) continue;
      account_step(works[r], scheds[r], *batches[r], 0, t, dt, dt, keep_iterations, tl);
      record_tokens(scheds[r].update_from_output(nullptr), t, end, tl);
    }
    t = end;
  }
  for (const Scheduler& s : scheds) add_prefix_stats(s, tl);
  return true;
}

Result<ServeResult> simulate_lockstep(const std::vector<Request>& requests,
                                      const ServeConfig& config, const LockstepCost& cost,
                                      const SloSpec& slo, bool keep_iterations) {
  PX_CHECK(static_cast<bool>(cost), "simulate_lockstep: no cost function");
  Diagnostics errors = validate_inputs(requests, config, slo);
  if (config.pipeline_stages != 1)
    errors.push_back(
        {"serve.pipeline_stages",
         "replicas stepping together run one stage, got " + std::to_string(config.pipeline_stages),
         "pp 1"});
  if (!errors.empty()) return errors;
  if (requests.empty()) return ServeResult{};
  const std::vector<size_t> order = arrival_order(requests);
  const auto replicas = static_cast<size_t>(config.replicas);
  EngineTimeline tl(requests.size());
  std::vector<EngineWork> works(replicas);
  for (size_t r = 0; r < replicas; ++r) {
    works[r].replica = static_cast<int>(r);
    works[r].config = &config.scheduler;
    works[r].admit = [&requests](Scheduler& sched, size_t pos) {
      Request q = requests[pos];
      q.id = static_cast<int64_t>(pos);  // the scheduler reports positions back
      sched.add(q);
    };
  }
  for (size_t k = 0; k < order.size(); ++k) {
    EngineWork& w = works[k % replicas];
    w.mine.push_back(order[k]);
    w.ready_s.push_back(requests[order[k]].arrival_s);
    tl.clock[order[k]].replica = tl.clock[order[k]].prefill_replica = w.replica;
  }
  Result<bool> ran = run_lockstep(works, cost, keep_iterations, &tl);
  if (!ran.ok()) return ran.errors();
  return summarize_timeline(requests, slo, tl);
}

}  // namespace parallax::serving
