#include "simulator/serving/pd_sim.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "simulator/serving/serving_test_support.h"

namespace parallax::serving {
namespace {

using testing::LinearCost;  // the fake engine

SchedulerConfig engine(int64_t budget, int64_t blocks, int64_t max_seqs = 256) {
  SchedulerConfig c;
  c.max_num_batched_tokens = budget;
  c.num_gpu_blocks = blocks;
  c.max_num_seqs = max_seqs;
  return c;
}

PdConfig pools(int p, int d, const SchedulerConfig& prefill, const SchedulerConfig& decode) {
  PdConfig c;
  c.prefill = prefill;
  c.decode = decode;
  c.prefill_replicas = p;
  c.decode_replicas = d;
  return c;
}

bool has_error(const Diagnostics& ds, const std::string& needle) {
  for (const auto& d : ds) {
    if (d.str().find(needle) != std::string::npos) return true;
  }
  return false;
}

/// Counts, per request position, the tokens each pool samples and computes.
struct TokenLedger {
  std::vector<int64_t> prefill_samples, decode_samples, decode_prefill_tokens;
  explicit TokenLedger(size_t n)
      : prefill_samples(n), decode_samples(n), decode_prefill_tokens(n) {}
  void count(const IterationBatch& b, bool decode_pool) {
    for (const ScheduledSeq& q : b.seqs) {
      const auto i = static_cast<size_t>(q.request);
      if (q.samples) ++(decode_pool ? decode_samples : prefill_samples)[i];
      if (decode_pool && q.prefill) decode_prefill_tokens[i] += q.new_tokens;
    }
  }
  /// `cost`, counting every batch of the pool it prices.
  IterationCost counting(const LinearCost& cost, bool decode_pool) {
    return [this, cost, decode_pool](const IterationBatch& b) {
      count(b, decode_pool);
      return cost(b);
    };
  }
};

constexpr double kTol = 1e-12;

TEST(PdSimSingle, PrefillStepThenTransferThenDecodeSteps) {
  const LinearCost p{0.02, 1e-4, 1e-3}, d{0.005, 1e-4, 2e-3};
  auto transfer = [](int64_t tokens) { return 0.1 + 1e-4 * static_cast<double>(tokens); };
  std::vector<int64_t> first_decode_context;
  auto decode = [&](const IterationBatch& b) {
    if (first_decode_context.empty()) first_decode_context.push_back(b.seqs.at(0).context_before);
    EXPECT_EQ(b.prefill_tokens, 0);  // the decode engine never recomputes the prompt here
    return d(b);
  };
  auto r = simulate_disaggregated(
      {{7, 1.0, 100, 10}}, pools(1, 1, engine(8192, 100), engine(8192, 100)), p, decode, transfer);
  ASSERT_TRUE(r.ok()) << r.error_text();
  // TTFT = p.a + 100 p.b (one prefill step); the KV lands at first token + (0.1 + 100e-4);
  // each of the 9 remaining tokens is one decode step d.a + d.c:
  // finish = arrival + TTFT + transfer + 9 (d.a + d.c).
  const double ttft = p.a + 100 * p.b, xfer = 0.1 + 100e-4, step = d.a + d.c;
  const RequestRecord& rec = r->requests.at(0);
  EXPECT_EQ(rec.id, 7);
  EXPECT_EQ(rec.first_scheduled_s, 1.0);
  EXPECT_NEAR(rec.first_token_s, 1.0 + ttft, kTol);
  EXPECT_NEAR(rec.finish_s, 1.0 + ttft + xfer + 9 * step, kTol);
  EXPECT_NEAR(r->ttft_s.mean, ttft, kTol);
  // TPOT = (transfer + 9 steps) / 9: the transfer is part of what users measure.
  EXPECT_NEAR(r->tpot_s.mean, (xfer + 9 * step) / 9, kTol);
  EXPECT_EQ(r->itl_s.count, 9);
  EXPECT_NEAR(r->itl_s.max, xfer + step, kTol);  // the first gap holds the transfer
  EXPECT_NEAR(r->itl_s.p50, step, kTol);
  EXPECT_EQ(r->iterations, 1 + 9);
  EXPECT_EQ(rec.preemptions, 0);
  // The first decode step attends to the prompt: its context is the 100 transferred tokens.
  ASSERT_EQ(first_decode_context.size(), 1u);
  EXPECT_EQ(first_decode_context[0], 100);
}

// Pipelined pools (two stages, each half a step): a prompt's 4 chunks of 32 tokens follow each
// other down the prefill pipeline half a step apart, so its first token comes at 2.5 chunk
// steps instead of 4;
// one request's decodes cannot overlap (each waits for its token), so they take whole steps.
// A one-stage cost is refused for pipelined pools.
TEST(PdSimPipeline, PromptChunksOverlapInThePrefillPipeline) {
  const LinearCost p{0.02, 1e-4, 1e-3}, d{0.005, 1e-4, 2e-3};
  PdConfig c = pools(1, 1, engine(32, 100), engine(32, 100));
  c.pipeline_stages = 2;
  auto halves = [](const LinearCost& f) {
    return StageCost(
        [f](const IterationBatch& b, std::vector<double>* out) { out->assign(2, f(b) / 2); });
  };
  auto r = simulate_disaggregated({{0, 0.0, 128, 5}}, c, halves(p), halves(d),
                                  [](int64_t) { return 0.01; });
  ASSERT_TRUE(r.ok()) << r.error_text();
  const double chunk = p.a + 32 * p.b, step = d.a + d.c;
  const RequestRecord& rec = r->requests.at(0);
  EXPECT_NEAR(rec.first_token_s, 2.5 * chunk, kTol);
  EXPECT_NEAR(rec.finish_s, 2.5 * chunk + 0.01 + 4 * step, kTol);

  auto refused = simulate_disaggregated({{0, 0.0, 128, 5}}, c, p, d, [](int64_t) { return 0.0; });
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error_text().find("pd.pipeline_stages"), std::string::npos)
      << refused.error_text();
}

// Pools whose replicas step together (wide ep in each pool), a step costing a + c x (tokens of
// the pool's replicas): two requests, one per replica of each pool, prefill in one step of both
// prompts, move their KV, and decode their two remaining tokens in two steps of both.
TEST(PdSimLockstep, EachPoolStepsTogether) {
  const double a = 0.01, c = 1e-3, transfer = 0.05;
  const LockstepCost cost = [&](const std::vector<const IterationBatch*>& batches) {
    double tokens = 0;
    for (const IterationBatch* b : batches)
      if (b != nullptr) tokens += static_cast<double>(b->total_tokens());
    return a + c * tokens;
  };
  auto r = simulate_disaggregated({{0, 0.0, 10, 3}, {1, 0.0, 20, 3}},
                                  pools(2, 2, engine(8192, 100), engine(8192, 100)), cost, cost,
                                  [&](int64_t) { return transfer; });
  ASSERT_TRUE(r.ok()) << r.error_text();
  const double first = a + 30 * c;
  for (const RequestRecord& q : r->requests) {
    EXPECT_NEAR(q.first_token_s, first, kTol) << q.id;
    EXPECT_NEAR(q.finish_s, first + transfer + 2 * (a + 2 * c), kTol) << q.id;
  }
  EXPECT_EQ(r->requests[0].replica, 0);
  EXPECT_EQ(r->requests[1].replica, 1);
}

TEST(PdSimSingle, OneOutputTokenNeverLeavesThePrefillPool) {
  const LinearCost p;
  int transfers = 0, decode_steps = 0;
  auto r = simulate_disaggregated(
      {{0, 0.0, 50, 1}}, pools(1, 1, engine(8192, 100), engine(8192, 100)), p,
      [&](const IterationBatch&) {
        ++decode_steps;
        return 1.0;
      },
      [&](int64_t) {
        ++transfers;
        return 1.0;
      });
  ASSERT_TRUE(r.ok()) << r.error_text();
  EXPECT_EQ(transfers, 0);
  EXPECT_EQ(decode_steps, 0);
  EXPECT_NEAR(r->requests[0].finish_s, p.a + 50 * p.b, kTol);
  EXPECT_EQ(r->tpot_s.count, 0);
}

TEST(PdSimProperty, RandomLoadsLoseNoRequestAndSampleEachTokenOnce) {
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    std::mt19937_64 rng(seed);
    auto uniform = [&](int64_t lo, int64_t hi) {
      return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
    };
    std::vector<Request> reqs;
    double t = 0;
    for (int64_t i = 0; i < 300; ++i) {
      t += std::exponential_distribution<double>(40.0)(rng);
      reqs.push_back({1000 + i, t, uniform(1, 600), uniform(1, 80)});
    }
    std::shuffle(reqs.begin(), reqs.end(), rng);  // any input order
    const int np = static_cast<int>(uniform(1, 3)), nd = static_cast<int>(uniform(1, 3));
    SchedulerConfig pre = engine(uniform(64, 2048), uniform(60, 400), uniform(4, 64));
    SchedulerConfig dec = engine(uniform(64, 2048), uniform(60, 200), uniform(4, 64));
    const LinearCost cost;
    TokenLedger ledger(reqs.size());
    auto xfer = [](int64_t tokens) { return 1e-5 * static_cast<double>(tokens); };
    auto r = simulate_disaggregated(reqs, pools(np, nd, pre, dec), ledger.counting(cost, false),
                                    ledger.counting(cost, true), xfer, {}, true);
    ASSERT_TRUE(r.ok()) << "seed " << seed << ": " << r.error_text();
    ASSERT_EQ(r->requests.size(), reqs.size());
    int64_t gaps = 0;
    for (size_t i = 0; i < reqs.size(); ++i) {
      const Request& q = reqs[i];
      const RequestRecord& rec = r->requests[i];
      SCOPED_TRACE("seed " + std::to_string(seed) + " request " + std::to_string(q.id));
      EXPECT_EQ(rec.id, q.id);
      EXPECT_EQ(ledger.prefill_samples[i], 1);  // the first token, in the prefill pool
      EXPECT_EQ(ledger.decode_samples[i], q.output_len - 1);
      EXPECT_GE(rec.first_scheduled_s, q.arrival_s);
      EXPECT_GT(rec.first_token_s, rec.first_scheduled_s);
      if (q.output_len == 1) {
        EXPECT_EQ(rec.finish_s, rec.first_token_s);
      } else {
        EXPECT_GE(rec.finish_s, rec.first_token_s + xfer(q.prompt_len) + cost.a);
      }
      // Routing: round-robin in arrival order (ids were given in arrival order).
      EXPECT_EQ(rec.prefill_replica, (q.id - 1000) % np);
      EXPECT_EQ(rec.replica, (q.id - 1000) % nd);
      gaps += q.output_len - 1;
    }
    EXPECT_EQ(r->itl_s.count, gaps);
    for (size_t k = 1; k < r->iteration_records.size(); ++k) {
      EXPECT_LE(r->iteration_records[k - 1].start_s, r->iteration_records[k].start_s);
    }
  }
}

// Zero-cost transfer, 2 GPUs either way: a prefill step of 2000 tokens costs 0.2 s, and in a
// colocated engine every decode it shares a step with waits that long for its next token; the
// decode pool of a disaggregated pair runs only decode steps (a + c * running, a few ms).
TEST(PdSimVsColocated, PrefillHeavyLoadDecodesFasterDisaggregated) {
  const LinearCost cost{0.002, 1e-4, 5e-5};
  const std::vector<Request> reqs = poisson_requests(200, 2.0, 2000, 64, 3);
  ServeConfig colocated;
  colocated.scheduler = engine(8192, 4000);
  colocated.replicas = 2;
  auto co = simulate_serving(reqs, colocated, cost);
  auto pd = simulate_disaggregated(reqs, pools(1, 1, engine(8192, 4000), engine(8192, 4000)), cost,
                                   cost, [](int64_t) { return 0.0; });
  ASSERT_TRUE(co.ok()) << co.error_text();
  ASSERT_TRUE(pd.ok()) << pd.error_text();
  // Disaggregated, a token takes one decode step of at most a + c * 256 (< 15 ms), plus once
  // the wait for the step in flight when its KV lands.
  EXPECT_LT(pd->tpot_s.p90, 0.015);
  EXPECT_LT(pd->tpot_s.p90, 0.5 * co->tpot_s.p90)
      << "colocated p90 TPOT " << co->tpot_s.p90 << " s";
  EXPECT_EQ(pd->preemptions, 0);
}

TEST(PdSimPreemption, ADecodePoolPreemptionRecomputesWithTheDecodeCost) {
  // 20 requests of 100 + 100 tokens at once: each needs up to ceil(199 / 16) = 13 blocks, the
  // decode cache holds 30, so running requests outgrow it and the last one is preempted.
  std::vector<Request> reqs;
  for (int64_t i = 0; i < 20; ++i) reqs.push_back({i, 0.0, 100, 100});
  TokenLedger ledger(reqs.size());
  const LinearCost cost;
  // Without prefix caching, so a preempted request recomputes all it had (with caching it
  // resumes from whatever of its blocks survived).
  SchedulerConfig decode = engine(8192, 30);
  decode.enable_prefix_caching = false;
  auto r = simulate_disaggregated(reqs, pools(1, 1, engine(8192, 1000), decode),
                                  ledger.counting(cost, false), ledger.counting(cost, true),
                                  [](int64_t) { return 0.01; });
  ASSERT_TRUE(r.ok()) << r.error_text();
  EXPECT_GT(r->preemptions, 0);
  int64_t recomputed = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(ledger.prefill_samples[i], 1);
    EXPECT_EQ(ledger.decode_samples[i], 99);
    EXPECT_GT(r->requests[i].finish_s, r->requests[i].first_token_s);
    // A preempted request recomputes its prompt and outputs so far (>= 101 tokens) in the
    // decode pool; one never preempted computes no prefill there.
    if (r->requests[i].preemptions == 0) {
      EXPECT_EQ(ledger.decode_prefill_tokens[i], 0);
    } else {
      EXPECT_GE(ledger.decode_prefill_tokens[i], 101);
    }
    recomputed += ledger.decode_prefill_tokens[i];
  }
  EXPECT_GT(recomputed, 0);
}

TEST(PdSimRecords, IterationsCarryTheirPool) {
  std::vector<Request> reqs = poisson_requests(20, 50.0, 64, 8, 1);
  auto r = simulate_disaggregated(
      reqs, pools(2, 1, engine(8192, 100), engine(8192, 100)), LinearCost{}, LinearCost{},
      [](int64_t) { return 0.0; }, {}, true);
  ASSERT_TRUE(r.ok()) << r.error_text();
  int64_t prefill_steps = 0, decode_steps = 0;
  for (const IterationRecord& it : r->iteration_records) {
    if (it.pool == 0) {
      ++prefill_steps;
      EXPECT_EQ(it.decode_tokens, 0);  // prefill engines only compute prompts
    } else {
      ++decode_steps;
      EXPECT_EQ(it.replica, 0);
    }
  }
  EXPECT_GT(prefill_steps, 0);
  EXPECT_GE(decode_steps, 7);
  EXPECT_EQ(prefill_steps + decode_steps, r->iterations);
}

TEST(PdSimErrors, EveryBadInputIsReported) {
  SchedulerConfig bad = engine(8192, 0);
  auto r = simulate_disaggregated({{3, -1.0, 10, 5}}, pools(0, 1, engine(8192, 10), bad),
                                  LinearCost{}, LinearCost{}, [](int64_t) { return 0.0; });
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(has_error(r.errors(), "pd.prefill_replicas: must be >= 1, got 0")) << r.error_text();
  EXPECT_TRUE(has_error(r.errors(), "pd.decode.num_gpu_blocks")) << r.error_text();
  EXPECT_TRUE(has_error(r.errors(), "arrival_s")) << r.error_text();
}

TEST(PdSimErrors, ARequestTooLongForAPoolIsNamedWithThePool) {
  // 100 + 100 tokens need ceil(199 / 16) = 13 blocks in the decode pool, which has 10; the
  // prefill pool needs only ceil(100 / 16) = 7 of its 10.
  auto r =
      simulate_disaggregated({{42, 0.0, 100, 100}}, pools(1, 1, engine(8192, 10), engine(8192, 10)),
                             LinearCost{}, LinearCost{}, [](int64_t) { return 0.0; });
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(has_error(r.errors(), "decode pool): request 42")) << r.error_text();
  EXPECT_FALSE(has_error(r.errors(), "prefill pool")) << r.error_text();
}

TEST(PdSimErrors, ABadTransferTimeIsReported) {
  auto r =
      simulate_disaggregated({{9, 0.0, 10, 5}}, pools(1, 1, engine(8192, 10), engine(8192, 10)),
                             LinearCost{}, LinearCost{}, [](int64_t) { return -1.0; });
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(has_error(r.errors(), "kv transfer time")) << r.error_text();
  EXPECT_TRUE(has_error(r.errors(), "request 9")) << r.error_text();
}

}  // namespace
}  // namespace parallax::serving
