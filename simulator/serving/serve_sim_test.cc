#include "simulator/serving/serve_sim.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "simulator/serving/serving_test_support.h"

namespace parallax::serving {
namespace {

using testing::LinearCost;  // the fake engine

ServeConfig config_with(int64_t budget, int64_t blocks, int64_t max_seqs = 256) {
  ServeConfig c;
  c.scheduler.max_num_batched_tokens = budget;
  c.scheduler.num_gpu_blocks = blocks;
  c.scheduler.max_num_seqs = max_seqs;
  return c;
}

bool has_error(const Diagnostics& ds, const std::string& needle) {
  for (const auto& d : ds) {
    if (d.str().find(needle) != std::string::npos) return true;
  }
  return false;
}

constexpr double kTol = 1e-12;

TEST(ServeSimSingle, AloneTheLatenciesAreTheStepCosts) {
  const LinearCost f;
  auto r = simulate_serving({{5, 2.0, 100, 10}}, config_with(8192, 1000), f);
  ASSERT_TRUE(r.ok()) << r.error_text();
  // TTFT = a + 100 b (one prefill step); TPOT = a + c (one decode a token);
  // e2e = TTFT + (10 - 1) TPOT.
  const double ttft = f.a + 100 * f.b, tpot = f.a + f.c;
  EXPECT_NEAR(r->ttft_s.mean, ttft, kTol);
  EXPECT_NEAR(r->tpot_s.mean, tpot, kTol);
  EXPECT_NEAR(r->e2e_s.max, ttft + 9 * tpot, kTol);
  EXPECT_NEAR(r->itl_s.p99, tpot, kTol);
  EXPECT_EQ(r->itl_s.count, 9);
  EXPECT_EQ(r->queue_s.max, 0.0);
  EXPECT_EQ(r->iterations, 10);
  const RequestRecord& rec = r->requests.at(0);
  EXPECT_EQ(rec.id, 5);
  EXPECT_EQ(rec.first_scheduled_s, 2.0);
  EXPECT_NEAR(rec.first_token_s, 2.0 + ttft, kTol);
  EXPECT_NEAR(r->duration_s, ttft + 9 * tpot, kTol);
  EXPECT_NEAR(r->output_tokens_per_s, 10 / r->duration_s, kTol);
  EXPECT_NEAR(r->total_tokens_per_s, 110 / r->duration_s, 1e-9);
}

TEST(ServeSimSingle, ChunkedPrefillSumsTheChunkSteps) {
  const LinearCost f;
  // Budget 32: chunks 32 + 32 + 32 + 4, so TTFT = 4 a + 100 b.
  auto r = simulate_serving({{0, 0.0, 100, 10}}, config_with(32, 1000), f);
  ASSERT_TRUE(r.ok()) << r.error_text();
  EXPECT_NEAR(r->ttft_s.mean, 4 * f.a + 100 * f.b, kTol);
  EXPECT_NEAR(r->tpot_s.mean, f.a + f.c, kTol);
  EXPECT_EQ(r->iterations, 4 + 9);
  // long_prefill_token_threshold 40: chunks 40 + 40 + 20, TTFT = 3 a + 100 b.
  ServeConfig c = config_with(8192, 1000);
  c.scheduler.long_prefill_token_threshold = 40;
  auto t = simulate_serving({{0, 0.0, 100, 10}}, c, f);
  ASSERT_TRUE(t.ok()) << t.error_text();
  EXPECT_NEAR(t->ttft_s.mean, 3 * f.a + 100 * f.b, kTol);
}

TEST(ServeSimSingle, OneOutputTokenHasNoTpot) {
  auto r = simulate_serving({{0, 0.0, 16, 1}}, config_with(8192, 100), LinearCost{});
  ASSERT_TRUE(r.ok()) << r.error_text();
  EXPECT_EQ(r->tpot_s.count, 0);
  EXPECT_EQ(r->itl_s.count, 0);
  EXPECT_NEAR(r->e2e_s.mean, r->ttft_s.mean, kTol);
}

/// Random workloads: nothing lost, every request gets exactly output_len tokens, the limits hold
/// on every step, and each record's times are ordered.
TEST(ServeSimProperty, RandomWorkloadsKeepEveryInvariant) {
  for (uint64_t seed = 11; seed <= 15; ++seed) {
    std::mt19937_64 rng(seed);
    std::vector<Request> reqs = poisson_requests(300, 40.0, 1, 1, seed);
    for (auto& q : reqs) {
      q.prompt_len = 1 + static_cast<int64_t>(rng() % 300);
      q.output_len = 1 + static_cast<int64_t>(rng() % 100);
    }
    const bool chunked = seed % 2 == 1;
    ServeConfig c = config_with(chunked ? 64 : 512, 40, 8);
    c.scheduler.enable_chunked_prefill = chunked;
    c.replicas = seed == 13 ? 3 : 1;
    std::map<int64_t, int64_t> sampled, computed;
    auto cost = [&](const IterationBatch& b) {
      std::set<int64_t> ids;
      for (const auto& q : b.seqs) {
        EXPECT_TRUE(ids.insert(q.request).second);
        sampled[q.request] += q.samples ? 1 : 0;
        computed[q.request] += q.new_tokens;
      }
      return LinearCost{}(b);
    };
    auto r = simulate_serving(reqs, c, cost, {}, /*keep_iterations=*/true);
    ASSERT_TRUE(r.ok()) << r.error_text();
    ASSERT_EQ(r->requests.size(), reqs.size());
    for (size_t i = 0; i < reqs.size(); ++i) {
      const RequestRecord& rec = r->requests[i];
      EXPECT_EQ(sampled[static_cast<int64_t>(i)], reqs[i].output_len) << "seed " << seed;
      // Without preemption, each token but the last sampled one is computed once.
      if (rec.preemptions == 0) {
        EXPECT_EQ(computed[static_cast<int64_t>(i)], reqs[i].prompt_len + reqs[i].output_len - 1);
      }
      EXPECT_LE(rec.arrival_s, rec.first_scheduled_s);
      EXPECT_LT(rec.first_scheduled_s, rec.first_token_s);
      EXPECT_LE(rec.first_token_s, rec.finish_s);
    }
    ASSERT_EQ(r->iteration_records.size(), static_cast<size_t>(r->iterations));
    for (const IterationRecord& it : r->iteration_records) {
      EXPECT_LE(it.prefill_tokens + it.decode_tokens, c.scheduler.max_num_batched_tokens);
      EXPECT_LE(it.num_seqs, it.running_seqs);
      EXPECT_LE(it.running_seqs, c.scheduler.max_num_seqs);
      EXPECT_LE(it.kv_blocks_used, c.scheduler.num_gpu_blocks);
    }
    EXPECT_LE(r->kv_utilization_mean, r->kv_utilization_max);
    EXPECT_LE(r->kv_utilization_max, 1.0);
  }
}

TEST(ServeSimOverload, SerialQueueGrowsLinearlyWithTheIndex) {
  // One seat (max_num_seqs 1), arrivals every 1 ms, service S = (a + 64 b) + 7 (a + c) = 93.4 ms:
  // request i starts when i - 1 finishes, so queue_i = i S - i dt = i (S - dt) exactly.
  const LinearCost f;
  const int n = 40;
  const double dt = 0.001, service = (f.a + 64 * f.b) + 7 * (f.a + f.c);
  std::vector<Request> reqs;
  for (int i = 0; i < n; ++i) reqs.push_back({i, i * dt, 64, 8});
  auto r = simulate_serving(reqs, config_with(8192, 1000, 1), f);
  ASSERT_TRUE(r.ok()) << r.error_text();
  double first = 0, second = 0;
  for (int i = 0; i < n; ++i) {
    const auto& rec = r->requests[static_cast<size_t>(i)];
    EXPECT_NEAR(rec.first_scheduled_s - rec.arrival_s, i * (service - dt), 1e-9) << i;
    (i < n / 2 ? first : second) += rec.first_scheduled_s - rec.arrival_s;
  }
  // Half means differ by (n / 2) (S - dt).
  EXPECT_NEAR((second - first) / (n / 2), (n / 2) * (service - dt), 1e-9);
  EXPECT_NEAR(r->queue_s.mean, (n - 1) / 2.0 * (service - dt), 1e-9);
}

TEST(ServeSimOverload, BatchedQueueGrowsAtTheServiceDeficit) {
  // Poisson at ~10x capacity into a 16-seat engine. The engine drains X requests/s, so request
  // i waits about i / X - i / rate: the second half's mean queue exceeds the first's by
  // (n / 2) (1 / X - 1 / rate).
  const int64_t n = 2000;
  const double rate = 1000;
  auto r = simulate_serving(poisson_requests(n, rate, 128, 32, 3), config_with(8192, 10000, 16),
                            LinearCost{});
  ASSERT_TRUE(r.ok()) << r.error_text();
  const double x = r->requests_per_s;
  ASSERT_LT(x * 5, rate);
  double first = 0, second = 0;
  for (int64_t i = 0; i < n; ++i) {
    const auto& rec = r->requests[static_cast<size_t>(i)];
    (i < n / 2 ? first : second) += rec.first_scheduled_s - rec.arrival_s;
  }
  const double want = (n / 2) * (1 / x - 1 / rate);
  EXPECT_NEAR((second - first) / (n / 2), want, 0.1 * want);
}

TEST(ServeSimPreemption, TinyCacheStillCompletesEveryRequest) {
  // 10 blocks of 4 tokens; each request peaks at ceil((8 + 20 - 1) / 4) = 7 blocks, so four of
  // them start together and must preempt as they decode.
  ServeConfig c = config_with(8192, 10);
  c.scheduler.block_size = 4;
  std::vector<Request> reqs;
  for (int i = 0; i < 4; ++i) reqs.push_back({i, 0.0, 8, 20});
  std::map<int64_t, int64_t> sampled;
  auto cost = [&](const IterationBatch& b) {
    for (const auto& q : b.seqs) sampled[q.request] += q.samples ? 1 : 0;
    return LinearCost{}(b);
  };
  auto r = simulate_serving(reqs, c, cost);
  ASSERT_TRUE(r.ok()) << r.error_text();
  EXPECT_GT(r->preemptions, 0);
  int64_t per_request = 0;
  for (const auto& rec : r->requests) per_request += rec.preemptions;
  EXPECT_EQ(per_request, r->preemptions);
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(sampled[i], 20);
  EXPECT_LE(r->kv_utilization_max, 1.0);
  // A preempted request's stall shows in its inter-token latencies.
  EXPECT_GT(r->itl_s.max, LinearCost{}.a + 4 * LinearCost{}.c);
}

TEST(ServeSimErrors, ARequestThatCanNeverFitIsNamed) {
  ServeConfig c = config_with(8192, 10);
  c.scheduler.block_size = 4;
  auto r = simulate_serving({{0, 0.0, 8, 20}, {7, 0.0, 30, 20}}, c, LinearCost{});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(has_error(r.errors(), "request 7: can never fit the KV cache: needs 13 blocks"))
      << r.error_text();
  EXPECT_TRUE(has_error(r.errors(), "got 10 blocks in the cache"));
}

TEST(ServeSimErrors, EveryBadInputIsReported) {
  ServeConfig c = config_with(8192, 0);
  c.replicas = 0;
  auto r = simulate_serving({{0, -1.0, 0, 4}}, c, LinearCost{}, SloSpec{-1, 0});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.errors().size(), 5u) << r.error_text();
  EXPECT_TRUE(has_error(r.errors(), "serve.scheduler.num_gpu_blocks: must be >= 1, got 0"));
  EXPECT_TRUE(has_error(r.errors(), "serve.replicas: must be >= 1, got 0"));
  EXPECT_TRUE(has_error(r.errors(), "slo: limits must be >= 0"));
  EXPECT_TRUE(has_error(r.errors(), "requests[0] (id 0): arrival_s"));
  EXPECT_TRUE(has_error(r.errors(), "requests[0] (id 0): lengths: must be >= 1, got prompt_len 0"));
}

TEST(ServeSimErrors, ABadCostIsReported) {
  auto r = simulate_serving({{0, 0.0, 8, 2}}, config_with(8192, 100),
                            [](const IterationBatch&) { return std::nan(""); });
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(has_error(r.errors(), "iteration cost: must be finite and >= 0 seconds, got nan"))
      << r.error_text();
}

TEST(ServeSimReplicas, RoundRobinEqualsOneReplicaPerHalf) {
  const auto reqs = poisson_requests(200, 40.0, 200, 50, 5);
  ServeConfig two = config_with(256, 200, 16);
  two.replicas = 2;
  auto r2 = simulate_serving(reqs, two, LinearCost{});
  ASSERT_TRUE(r2.ok()) << r2.error_text();
  int64_t iterations = 0;
  for (int half = 0; half < 2; ++half) {
    std::vector<Request> mine;
    for (size_t i = static_cast<size_t>(half); i < reqs.size(); i += 2) mine.push_back(reqs[i]);
    auto r1 = simulate_serving(mine, config_with(256, 200, 16), LinearCost{});
    ASSERT_TRUE(r1.ok()) << r1.error_text();
    iterations += r1->iterations;
    for (size_t k = 0; k < mine.size(); ++k) {
      const RequestRecord& a = r1->requests[k];
      const RequestRecord& b = r2->requests[static_cast<size_t>(half) + 2 * k];
      EXPECT_EQ(b.replica, half);
      EXPECT_EQ(a.id, b.id);
      EXPECT_EQ(a.first_scheduled_s, b.first_scheduled_s);
      EXPECT_EQ(a.first_token_s, b.first_token_s);
      EXPECT_EQ(a.finish_s, b.finish_s);
    }
  }
  EXPECT_EQ(iterations, r2->iterations);
}

TEST(ServeSimSlo, GoodputCountsRequestsMeetingEverySlo) {
  // Serial engine, two requests at t=0: TTFTs are P and P + S with P = a + 16 b the prefill and
  // S = P + 3 (a + c) the service; a TTFT limit between them passes only the first.
  const LinearCost f;
  const double p = f.a + 16 * f.b, s = p + 3 * (f.a + f.c);
  const std::vector<Request> reqs = {{0, 0.0, 16, 4}, {1, 0.0, 16, 4}};
  auto r = simulate_serving(reqs, config_with(8192, 100, 1), f, SloSpec{p + s / 2, 0});
  ASSERT_TRUE(r.ok()) << r.error_text();
  EXPECT_NEAR(r->duration_s, 2 * s, kTol);
  EXPECT_NEAR(r->goodput_requests_per_s, 1 / (2 * s), 1e-9);
  EXPECT_NEAR(r->requests_per_s, 2 / (2 * s), 1e-9);
  // TPOT is a + c for both; a limit just below it fails both.
  auto t = simulate_serving(reqs, config_with(8192, 100, 1), f, SloSpec{0, f.a + f.c - 1e-6});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->goodput_requests_per_s, 0.0);
}

TEST(ServeSimStats, PercentilesInterpolateLinearly) {
  // Sorted 1..5: p90 at position 0.9 * 4 = 3.6 -> 4 + 0.6 (5 - 4) = 4.6; p99 at 3.96 -> 4.96.
  const Stats s = summarize({5, 1, 4, 2, 3});
  EXPECT_EQ(s.count, 5);
  EXPECT_DOUBLE_EQ(s.mean, 3);
  EXPECT_DOUBLE_EQ(s.p50, 3);
  EXPECT_DOUBLE_EQ(s.p90, 4.6);
  EXPECT_DOUBLE_EQ(s.p99, 4.96);
  EXPECT_DOUBLE_EQ(s.max, 5);
  EXPECT_EQ(summarize({}).count, 0);
  // Against a full sort on random data.
  std::mt19937_64 rng(9);
  std::vector<double> v(1001);
  for (auto& x : v) x = static_cast<double>(rng() % 100000) / 7.0;
  const Stats r = summarize(v);
  std::sort(v.begin(), v.end());
  auto pct = [&](double p) {
    const double pos = p * (v.size() - 1);
    const auto lo = static_cast<size_t>(pos);
    const double hi = lo + 1 < v.size() ? v[lo + 1] : v[lo];
    return v[lo] + (pos - lo) * (hi - v[lo]);
  };
  EXPECT_DOUBLE_EQ(r.p50, pct(0.5));
  EXPECT_DOUBLE_EQ(r.p90, pct(0.9));
  EXPECT_DOUBLE_EQ(r.p99, pct(0.99));
}

TEST(ServeSimStats, RunsMatchTheExpandedSample) {
  std::mt19937_64 rng(4);
  for (int trial = 0; trial < 20; ++trial) {
    Runs runs;
    std::vector<double> flat;
    const int n = 1 + static_cast<int>(rng() % 50);
    for (int i = 0; i < n; ++i) {
      const double v = static_cast<double>(rng() % 20) / 4.0;
      const auto k = static_cast<int64_t>(rng() % 5);  // 0 = an empty run
      runs.push_back({v, k});
      flat.insert(flat.end(), static_cast<size_t>(k), v);
    }
    const Stats a = summarize_runs(runs), b = summarize(flat);
    EXPECT_EQ(a.count, b.count);
    EXPECT_NEAR(a.mean, b.mean, 1e-12);
    EXPECT_EQ(a.p50, b.p50);
    EXPECT_EQ(a.p90, b.p90);
    EXPECT_EQ(a.p99, b.p99);
    EXPECT_EQ(a.max, b.max);
  }
}

// Two pipeline stages, each half of a step that costs L = a + 32 c (b = c: prefill and decode
// tokens cost the same). 64 one-token prompts, a 32-token budget: the first step takes 32, the
// second (launched at once, the first still in flight) the other 32, and from then on the two
// groups alternate, each step entering a stage as the other leaves it. So group A's first token
// comes at L, group B's at 1.5 L, and every later token of either L after the last: TPOT = L,
// all done at 50.5 L. One stage at a time (the same budget) runs group A's 50 steps first
// (running requests take the budget before waiting ones) and then B's: done at 100 L.
TEST(ServeSimPipeline, TwoStagesKeepTwoStepsInFlight) {
  std::vector<Request> reqs;
  for (int64_t i = 0; i < 64; ++i) reqs.push_back({i, 0.0, 1, 50});
  const LinearCost f{0.01, 1e-3, 1e-3};
  const double step = f.a + 32 * f.c;
  ServeConfig c = config_with(32, 10000);
  c.pipeline_stages = 2;
  const StageCost halves = [&f](const IterationBatch& b, std::vector<double>* out) {
    out->assign(2, f(b) / 2);
  };
  auto r = simulate_serving(reqs, c, halves, {}, true);
  ASSERT_TRUE(r.ok()) << r.error_text();
  for (size_t i = 0; i < reqs.size(); ++i) {
    const RequestRecord& q = r->requests[i];
    const double ttft = i < 32 ? step : 1.5 * step;
    EXPECT_NEAR(q.first_token_s, ttft, 1e-12) << i;
    EXPECT_NEAR(q.finish_s - q.first_token_s, 49 * step, 1e-9) << i;
  }
  EXPECT_NEAR(r->tpot_s.max, step, 1e-12);
  EXPECT_NEAR(r->itl_s.max, step, 1e-12);
  // Steps overlap: each starts half a step after the one before, on alternating lanes.
  ASSERT_GE(r->iteration_records.size(), 4u);
  EXPECT_NEAR(r->iteration_records[1].start_s - r->iteration_records[0].start_s, step / 2, 1e-12);
  EXPECT_NE(r->iteration_records[0].lane, r->iteration_records[1].lane);

  ServeConfig serial = config_with(32, 10000);
  auto one = simulate_serving(reqs, serial, f);
  ASSERT_TRUE(one.ok());
  EXPECT_NEAR(one->tpot_s.p50, step, 1e-12);
  EXPECT_NEAR(one->duration_s, 100 * step, 1e-9);
  EXPECT_NEAR(r->duration_s, 50.5 * step, 1e-9);
  // The one-stage cost refuses a pipelined config.
  auto refused = simulate_serving(reqs, c, f);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(has_error(refused.errors(), "serve.pipeline_stages")) << refused.error_text();
}

TEST(ServeSimPipeline, AStageCostOfTheWrongLengthIsReported) {
  ServeConfig c = config_with(8192, 100);
  c.pipeline_stages = 2;
  auto r = simulate_serving({{0, 0.0, 8, 2}}, c, [](const IterationBatch&, std::vector<double>* o) {
    o->assign(3, 0.01);
  });
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(has_error(r.errors(),
                        "must be 2 finite stage times >= 0 seconds, got [0.01, 0.01, "
                        "0.01]"))
      << r.error_text();
}

// Two replicas stepping together, a step costing a + c x (tokens of all replicas). A (replica
// 0, prompt 10, 3 outputs) and B (replica 1, prompt 20, 2 outputs) arrive at 0: step 1 computes
// both prompts (a + 30 c), step 2 both decode (a + 2 c) and B is done, step 3 only A decodes
// (a + c) while replica 1 sits idle. C arrives at 100 s on replica 0 alone: one step for it.
TEST(ServeSimLockstep, ReplicasStepTogether) {
  const double a = 0.01, c = 1e-3;
  std::vector<std::vector<int64_t>> seen_tokens;
  const LockstepCost cost = [&](const std::vector<const IterationBatch*>& batches) {
    std::vector<int64_t> tokens;
    int64_t sum = 0;
    for (const IterationBatch* b : batches) {
      tokens.push_back(b != nullptr ? b->total_tokens() : -1);
      sum += b != nullptr ? b->total_tokens() : 0;
    }
    seen_tokens.push_back(tokens);
    return a + c * static_cast<double>(sum);
  };
  ServeConfig cfg = config_with(8192, 1000);
  cfg.replicas = 2;
  auto r = simulate_lockstep({{0, 0.0, 10, 3}, {1, 0.0, 20, 2}, {2, 100.0, 5, 1}}, cfg, cost);
  ASSERT_TRUE(r.ok()) << r.error_text();
  const double s1 = a + 30 * c, s2 = a + 2 * c, s3 = a + c;
  EXPECT_NEAR(r->requests[0].first_token_s, s1, kTol);
  EXPECT_NEAR(r->requests[1].first_token_s, s1, kTol);
  EXPECT_NEAR(r->requests[1].finish_s, s1 + s2, kTol);
  EXPECT_NEAR(r->requests[0].finish_s, s1 + s2 + s3, kTol);
  EXPECT_NEAR(r->requests[2].finish_s, 100 + a + 5 * c, kTol);
  EXPECT_EQ(r->requests[2].replica, 0);
  EXPECT_EQ(seen_tokens, (std::vector<std::vector<int64_t>>{{10, 20}, {1, 1}, {1, -1}, {5, -1}}));
  EXPECT_EQ(r->iterations, 2 + 2 + 1 + 1);  // each replica's non-empty steps

  cfg.pipeline_stages = 2;
  auto refused = simulate_lockstep({{0, 0.0, 10, 3}}, cfg, cost);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(has_error(refused.errors(), "serve.pipeline_stages")) << refused.error_text();
}

/// Random loads on 3 replicas stepping together: every request is served, every inter-token
/// gap is one or more steps, and each request's tokens come in order.
TEST(ServeSimLockstep, RandomLoadsServeEveryToken) {
  std::mt19937_64 rng(7);
  std::vector<Request> reqs;
  int64_t gaps = 0;
  for (int64_t i = 0; i < 300; ++i) {
    const int64_t out = 1 + static_cast<int64_t>(rng() % 40);
    reqs.push_back(
        {i, static_cast<double>(rng() % 1000) / 100.0, 1 + static_cast<int64_t>(rng() % 300), out});
    gaps += out - 1;
  }
  ServeConfig cfg = config_with(256, 120, 16);
  cfg.replicas = 3;
  const LinearCost f;
  auto r = simulate_lockstep(reqs, cfg, [&](const std::vector<const IterationBatch*>& batches) {
    double worst = 0;
    for (const IterationBatch* b : batches)
      if (b != nullptr) worst = std::max(worst, f(*b));
    return worst;
  });
  ASSERT_TRUE(r.ok()) << r.error_text();
  EXPECT_EQ(r->itl_s.count, gaps);
  EXPECT_GE(r->itl_s.mean, f.a);
  for (const RequestRecord& q : r->requests) {
    EXPECT_GE(q.first_token_s, q.arrival_s);
    EXPECT_GE(q.finish_s, q.first_token_s);
  }
}

TEST(ServeSimPrefix, EveryRequestAfterTheFirstHitsTheSharedPrefix) {
  // 100 requests at once, 1024-token prompts whose first 768 tokens are one shared system
  // prompt, a cache far larger than the load: the first computes its whole prompt, and each
  // later one (admitted in the same step or after) finds the 48 shared blocks. vLLM keys a
  // block when it schedules its tokens, so even requests in the first step hit.
  std::vector<Request> reqs;
  for (int64_t i = 0; i < 100; ++i) {
    Request r(i, 0, 1024, 8);
    r.prefix_hashes = {42};
    r.hash_block = 768;
    reqs.push_back(r);
  }
  int64_t prefill_tokens = 0;
  const LinearCost f;
  auto on = simulate_serving(reqs, config_with(8192, 100000), [&](const IterationBatch& b) {
    prefill_tokens += b.prefill_tokens;
    return f(b);
  });
  ASSERT_TRUE(on.ok()) << on.error_text();
  EXPECT_EQ(prefill_tokens, 100 * 1024 - 99 * 768);
  EXPECT_EQ(on->prefix_hit_tokens, 99 * 768);
  EXPECT_NEAR(on->prefix_cache_hit_rate, 99.0 * 768 / (100.0 * 1024), 1e-12);

  ServeConfig off = config_with(8192, 100000);
  off.scheduler.enable_prefix_caching = false;
  prefill_tokens = 0;
  auto plain = simulate_serving(reqs, off, [&](const IterationBatch& b) {
    prefill_tokens += b.prefill_tokens;
    return f(b);
  });
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(prefill_tokens, 100 * 1024);
  EXPECT_EQ(plain->prefix_cache_hit_rate, 0);
  EXPECT_LT(on->ttft_s.p90, plain->ttft_s.p90);
}

/// 10k requests x 256 outputs at batch 200 (~13k steps) with a trivial cost; prints the time
/// once for the record, asserts only correctness.
TEST(ServeSimScale, TenThousandRequests) {
  const auto reqs = poisson_requests(10000, 0.0, 128, 256, 1);
  ServeConfig c = config_with(8192, 8000, 200);
  const auto t0 = std::chrono::steady_clock::now();
  auto r = simulate_serving(reqs, c, [](const IterationBatch& b) {
    return 0.01 + 1e-5 * static_cast<double>(b.total_tokens());
  });
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(r.ok()) << r.error_text();
  EXPECT_EQ(r->itl_s.count, 10000 * 255);
  EXPECT_EQ(r->preemptions, 0);
  EXPECT_GT(r->iterations, 10000 * 256 / 200);
  RecordProperty("simulate_ms", std::to_string(ms));
  std::printf("[ scale    ] 10000 requests, %lld steps: %.1f ms\n",
              static_cast<long long>(r->iterations), ms);
}

}  // namespace
}  // namespace parallax::serving
