#include "simulator/serving/scheduler.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace parallax::serving {
namespace {

SchedulerConfig small_config(int64_t budget, int64_t blocks, int64_t block_size) {
  SchedulerConfig c;
  c.max_num_batched_tokens = budget;
  c.num_gpu_blocks = blocks;
  c.block_size = block_size;
  return c;
}

/// The same without prefix caching: a preempted request recomputes all it had.
SchedulerConfig uncached_config(int64_t budget, int64_t blocks, int64_t block_size) {
  SchedulerConfig c = small_config(budget, blocks, block_size);
  c.enable_prefix_caching = false;
  return c;
}

/// One scheduled seq as (id, new tokens, context before, samples).
struct Seen {
  int64_t id, new_tokens, context_before;
  bool samples;
  bool operator==(const Seen&) const = default;
};

std::vector<Seen> seen(const IterationBatch& b) {
  std::vector<Seen> out;
  for (const auto& q : b.seqs)
    out.push_back({q.request, q.new_tokens, q.context_before, q.samples});
  return out;
}

std::ostream& operator<<(std::ostream& os, const Seen& s) {
  return os << "{" << s.id << "," << s.new_tokens << "," << s.context_before << "," << s.samples
            << "}";
}

TEST(SchedulerStep, PreemptsTheLatestRequestAndRecomputes) {
  // 6 blocks of 1 token; A (id 10) and B (id 11): prompt 2, output 4, peak 5 blocks each.
  // Without prefix caching a preempted request recomputes everything (with it, see
  // SchedulerPrefix.APreemptedRequestResumesFromItsSurvivingBlocks).
  Scheduler s(uncached_config(100, 6, 1));
  s.add({10, 0, 2, 4});
  s.add({11, 0, 2, 4});
  std::vector<int64_t> done;
  // Step 1: both prefill 2 tokens and sample; 4 blocks.
  EXPECT_EQ(seen(s.schedule()), (std::vector<Seen>{{10, 2, 0, true}, {11, 2, 0, true}}));
  EXPECT_EQ(s.blocks_used(), 4);
  s.update_from_output(&done);
  // Step 2: both decode; 6 blocks, the cache is full.
  const auto& b2 = s.schedule();
  EXPECT_EQ(seen(b2), (std::vector<Seen>{{10, 1, 2, true}, {11, 1, 2, true}}));
  EXPECT_EQ(b2.decode_tokens, 2);
  EXPECT_EQ(b2.prefill_tokens, 0);
  EXPECT_EQ(s.blocks_used(), 6);
  s.update_from_output(&done);
  // Step 3: A needs a 4th block: B, the last running, is preempted (its 3 blocks freed).
  const auto& b3 = s.schedule();
  EXPECT_EQ(seen(b3), (std::vector<Seen>{{10, 1, 3, true}}));
  EXPECT_EQ(b3.preempted, std::vector<int64_t>{11});
  EXPECT_EQ(s.blocks_used(), 4);
  EXPECT_EQ(s.num_waiting(), 1);
  s.update_from_output(&done);
  // Step 4: A's last token (5 blocks); B must recompute 2 + 2 = 4 tokens, but 1 block is free.
  EXPECT_EQ(seen(s.schedule()), (std::vector<Seen>{{10, 1, 4, true}}));
  s.update_from_output(&done);
  EXPECT_EQ(done, std::vector<int64_t>{10});
  EXPECT_EQ(s.blocks_used(), 0);
  // Step 5: B recomputes prompt + its 2 outputs in one prefill and samples its 3rd token.
  const auto& b5 = s.schedule();
  EXPECT_EQ(seen(b5), (std::vector<Seen>{{11, 4, 0, true}}));
  EXPECT_EQ(b5.prefill_tokens, 4);
  EXPECT_TRUE(b5.seqs[0].prefill);
  s.update_from_output(&done);
  // Step 6: its 4th and last token.
  EXPECT_EQ(seen(s.schedule()), (std::vector<Seen>{{11, 1, 4, true}}));
  s.update_from_output(&done);
  EXPECT_EQ(done, (std::vector<int64_t>{10, 11}));
  EXPECT_FALSE(s.has_work());
  EXPECT_TRUE(s.schedule().empty());  // nothing planned, nothing to apply
}

TEST(SchedulerStep, ChunkedPrefillSharesTheBudgetWithDecodes) {
  // Budget 10: A (prompt 4, output 3) and B (prompt 20, output 2).
  Scheduler s(small_config(10, 100, 16));
  s.add({0, 0, 4, 3});
  s.add({1, 0, 20, 2});
  EXPECT_EQ(seen(s.schedule()), (std::vector<Seen>{{0, 4, 0, true}, {1, 6, 0, false}}));
  s.update_from_output(nullptr);
  const auto& b2 = s.schedule();
  EXPECT_EQ(seen(b2), (std::vector<Seen>{{0, 1, 4, true}, {1, 9, 6, false}}));
  EXPECT_EQ(b2.prefill_tokens, 9);
  EXPECT_EQ(b2.decode_tokens, 1);
  EXPECT_EQ(b2.sampled, 1);
  EXPECT_EQ(b2.num_prefill_seqs(), 1);
  s.update_from_output(nullptr);
  EXPECT_EQ(seen(s.schedule()), (std::vector<Seen>{{0, 1, 5, true}, {1, 5, 15, true}}));
  std::vector<int64_t> done;
  s.update_from_output(&done);
  EXPECT_EQ(done, std::vector<int64_t>{0});
  EXPECT_EQ(seen(s.schedule()), (std::vector<Seen>{{1, 1, 20, true}}));
  s.update_from_output(&done);
  EXPECT_FALSE(s.has_work());
}

TEST(SchedulerStep, WithoutChunkingAPromptWaitsUntilItFitsWhole) {
  SchedulerConfig c = small_config(10, 100, 16);
  c.enable_chunked_prefill = false;
  Scheduler s(c);
  s.add({0, 0, 8, 2});
  s.add({1, 0, 5, 1});
  // B's 5 tokens do not fit the 2 left: it waits a step rather than take a chunk.
  EXPECT_EQ(seen(s.schedule()), (std::vector<Seen>{{0, 8, 0, true}}));
  s.update_from_output(nullptr);
  EXPECT_EQ(seen(s.schedule()), (std::vector<Seen>{{0, 1, 8, true}, {1, 5, 0, true}}));
  std::vector<int64_t> done;
  s.update_from_output(&done);
  EXPECT_EQ(done, (std::vector<int64_t>{0, 1}));  // B's single output came with its prefill
}

TEST(SchedulerStep, MaxNumSeqsCapsTheRunningList) {
  SchedulerConfig c = small_config(100, 100, 16);
  c.max_num_seqs = 2;
  Scheduler s(c);
  for (int64_t i = 0; i < 3; ++i) s.add({i, 0, 4, i == 0 ? 1 : 3});
  EXPECT_EQ(s.schedule().num_seqs(), 2);
  s.update_from_output(nullptr);  // request 0 finishes: a seat frees
  EXPECT_EQ(seen(s.schedule()), (std::vector<Seen>{{1, 1, 4, true}, {2, 4, 0, true}}));
  s.update_from_output(nullptr);
}

TEST(SchedulerStep, LongPrefillThresholdCapsEachChunk) {
  SchedulerConfig c = small_config(100, 100, 16);
  c.long_prefill_token_threshold = 3;
  Scheduler s(c);
  s.add({0, 0, 7, 2});
  for (int64_t chunk : {3, 3}) {
    const auto& b = s.schedule();
    ASSERT_EQ(b.num_seqs(), 1);
    EXPECT_EQ(b.seqs[0].new_tokens, chunk);
    EXPECT_FALSE(b.seqs[0].samples);
    s.update_from_output(nullptr);
  }
  EXPECT_EQ(seen(s.schedule()), (std::vector<Seen>{{0, 1, 6, true}}));
}

TEST(SchedulerConfigCheck, ReportsEveryProblem) {
  SchedulerConfig c;
  c.max_num_seqs = 0;
  c.max_num_batched_tokens = -1;
  c.block_size = 0;
  c.num_gpu_blocks = 0;
  c.enable_chunked_prefill = false;
  c.long_prefill_token_threshold = 64;
  const Diagnostics d = validate_scheduler_config(c, "serve");
  ASSERT_EQ(d.size(), 5u);
  EXPECT_EQ(d[0].str(), "serve.max_num_seqs: must be >= 1, got 0 (hint: vLLM's default is 256)");
  EXPECT_NE(d[4].str().find("long_prefill_token_threshold: caps prefill chunks"),
            std::string::npos);
}

TEST(SchedulerConfigCheck, NamesARequestThatCanNeverFit) {
  const SchedulerConfig c = small_config(8192, 10, 4);
  // ceil((30 + 20 - 1) / 4) = 13 blocks > 10.
  const Diagnostics d = check_requests_fit({{3, 0, 8, 20}, {7, 0, 30, 20}}, c, "trace.jsonl");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_NE(d[0].str().find("trace.jsonl: request 7: can never fit the KV cache: needs 13 blocks "
                            "(prompt_len 30 + output_len 20 - 1 = 49 tokens at 4 per block), "
                            "got 10 blocks in the cache"),
            std::string::npos)
      << d[0].str();
  EXPECT_EQ(peak_blocks({0, 0, 8, 20}, 4), 7);
}

Request with_prefix(Request r, std::vector<uint64_t> hashes, int64_t hash_block) {
  r.prefix_hashes = std::move(hashes);
  r.hash_block = hash_block;
  return r;
}

TEST(SchedulerPrefix, ASharedPrefixIsComputedOnce) {
  // Blocks of 4 tokens; the first 8 prompt tokens are shared (one hash over 8 tokens).
  Scheduler s(small_config(100, 100, 4));
  s.add(with_prefix({1, 0, 10, 2}, {7}, 8));
  EXPECT_EQ(seen(s.schedule()), (std::vector<Seen>{{1, 10, 0, true}}));
  s.update_from_output(nullptr);
  // B shares the 8 tokens (2 full blocks) with A, which still holds them: 12 - 8 = 4 to compute.
  s.add(with_prefix({2, 0, 12, 2}, {7}, 8));
  // C has another prefix: nothing to reuse.
  s.add(with_prefix({3, 0, 12, 2}, {8}, 8));
  EXPECT_EQ(seen(s.schedule()),
            (std::vector<Seen>{{1, 1, 10, true}, {2, 4, 8, true}, {3, 12, 0, true}}));
  // A: 3 blocks; B: 2 shared + 1; C: 3.
  EXPECT_EQ(s.blocks_used(), 3 + 1 + 3);
  EXPECT_EQ(s.prefix_query_tokens(), 10 + 12 + 12);
  EXPECT_EQ(s.prefix_hit_tokens(), 8);
  s.update_from_output(nullptr);
}

TEST(SchedulerPrefix, AWhollyCachedPromptStillComputesItsLastBlock) {
  // vLLM's max_cache_hit_length is num_tokens - 1: of an 8-token prompt, all of it shared and
  // cached, 1 block (4 tokens) is a hit and 4 tokens are computed so the request samples.
  Scheduler s(small_config(100, 100, 4));
  s.add(with_prefix({1, 0, 8, 3}, {7}, 8));
  s.schedule();
  s.update_from_output(nullptr);
  s.add(with_prefix({2, 0, 8, 3}, {7}, 8));
  EXPECT_EQ(seen(s.schedule()), (std::vector<Seen>{{1, 1, 8, true}, {2, 4, 4, true}}));
  s.update_from_output(nullptr);
}

TEST(SchedulerPrefix, FreedBlocksStayCachedUntilEvictedLastBlockFirst) {
  // 4 blocks of 4 tokens. A (prefix 8, output 1) holds blocks 0 and 1 and frees them in reverse
  // order to the tail of the free queue: [2, 3, 1, 0].
  Scheduler s(small_config(100, 4, 4));
  std::vector<int64_t> done;
  s.add(with_prefix({1, 0, 8, 1}, {7}, 8));
  s.schedule();
  s.update_from_output(&done);
  ASSERT_EQ(done, std::vector<int64_t>{1});
  EXPECT_EQ(s.blocks_used(), 0);  // cached blocks count as free
  // C (no prefix, 2 blocks) takes blocks 2 and 3 from the head and frees them: [1, 0, 3, 2].
  s.add({2, 0, 8, 1});
  s.schedule();
  s.update_from_output(&done);
  // F (one block) takes the head, block 1: A's second block is evicted first.
  s.add({3, 0, 4, 1});
  s.schedule();
  s.update_from_output(&done);
  // B, with A's prefix, finds only A's first block.
  s.add(with_prefix({4, 0, 12, 1}, {7}, 8));
  EXPECT_EQ(seen(s.schedule()), (std::vector<Seen>{{4, 8, 4, true}}));
  s.update_from_output(&done);
  EXPECT_EQ(s.prefix_hit_tokens(), 4);
}

TEST(SchedulerPrefix, APreemptedRequestResumesFromItsSurvivingBlocks) {
  // SchedulerStep.PreemptsTheLatestRequestAndRecomputes with prefix caching on: B (id 11) held
  // 3 one-token blocks when preempted; A's growth then takes 2 blocks from the free queue's
  // head (both never used), so B's first block survives and B recomputes 3 tokens, not 4.
  Scheduler s(small_config(100, 6, 1));
  s.add({10, 0, 2, 4});
  s.add({11, 0, 2, 4});
  std::vector<int64_t> done;
  for (int step = 0; step < 4; ++step) {
    s.schedule();
    s.update_from_output(&done);
  }
  ASSERT_EQ(done, std::vector<int64_t>{10});
  const auto& b5 = s.schedule();
  EXPECT_EQ(seen(b5), (std::vector<Seen>{{11, 3, 1, true}}));
  EXPECT_TRUE(b5.seqs[0].prefill);
  s.update_from_output(&done);
}

/// Random arrivals over a tiny cache and budget: the limits hold on every step, every request
/// samples exactly output_len tokens, nothing is lost and the cache ends empty. With prefix
/// caching (most seeds) and requests sharing one of three prefixes, a request's first step
/// starts at a whole number of blocks inside its shared prefix.
TEST(SchedulerProperty, LimitsHoldAndEveryTokenIsProduced) {
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    std::mt19937_64 rng(seed);
    SchedulerConfig c = small_config(seed % 2 ? 48 : 400, 30, 8);
    c.max_num_seqs = 6;
    c.enable_chunked_prefill = seed % 2 == 1;
    c.long_prefill_token_threshold = seed == 3 ? 20 : 0;
    c.enable_prefix_caching = seed % 4 != 0;
    Scheduler s(c);
    std::map<int64_t, int64_t> want, got, prompt_of, shared_of;
    std::set<int64_t> started;
    int64_t added = 0, steps = 0;
    while (added < 150 || s.has_work()) {
      if (added < 150 && rng() % 3 == 0) {
        const int64_t prompt = 1 + static_cast<int64_t>(rng() % 150);
        const int64_t output = 1 + static_cast<int64_t>(rng() % 80);
        Request r(added, 0, prompt, output);
        shared_of[added] = 0;
        if (rng() % 2 == 0) {
          const auto g = static_cast<uint64_t>(rng() % 3);
          r = with_prefix(r, {g, 10 * g + 1, 10 * g + 2}, 16);
          shared_of[added] = std::min<int64_t>(prompt, 48);
        }
        s.add(r);
        prompt_of[added] = prompt;
        want[added++] = output;
      }
      const IterationBatch& b = s.schedule();
      ASSERT_LE(b.total_tokens(), c.max_num_batched_tokens) << "seed " << seed;
      ASSERT_LE(b.num_seqs(), c.max_num_seqs);
      ASSERT_LE(s.num_running(), c.max_num_seqs);
      ASSERT_LE(s.blocks_used(), c.num_gpu_blocks);
      std::set<int64_t> ids;
      for (const auto& q : b.seqs) {
        ASSERT_TRUE(ids.insert(q.request).second) << "request twice in a step";
        ASSERT_GE(q.new_tokens, 1);
        if (c.long_prefill_token_threshold > 0) {
          ASSERT_LE(q.new_tokens, c.long_prefill_token_threshold);
        }
        // Never past the request's tokens; it samples exactly when it reaches them.
        const int64_t tokens = prompt_of[q.request] + got[q.request];
        ASSERT_LE(q.context_before + q.new_tokens, tokens) << "seed " << seed;
        ASSERT_EQ(q.samples, q.context_before + q.new_tokens == tokens) << "seed " << seed;
        if (started.insert(q.request).second && q.context_before > 0) {
          ASSERT_TRUE(c.enable_prefix_caching) << "seed " << seed;
          ASSERT_EQ(q.context_before % c.block_size, 0);
          ASSERT_LE(q.context_before, shared_of[q.request]) << "seed " << seed;
        }
        got[q.request] += q.samples ? 1 : 0;
      }
      if (!b.empty()) s.update_from_output(nullptr);
      ASSERT_LT(++steps, 100000) << "no progress";
    }
    EXPECT_EQ(got, want) << "seed " << seed;
    EXPECT_EQ(s.blocks_used(), 0);
    if (c.enable_prefix_caching) {
      EXPECT_GT(s.prefix_hit_tokens(), 0) << "seed " << seed;
    } else {
      EXPECT_EQ(s.prefix_query_tokens(), 0);
    }
  }
}

TEST(SchedulerPipeline, ALongPromptsChunksPipelineButADecodeWaitsForItsToken) {
  // Budget 8 tokens, chunked: A's 20-token prompt goes out in chunks 8, 8, 4 in three steps in
  // flight at once; its first decode must wait until the step with its last chunk is applied.
  Scheduler s(uncached_config(8, 100, 4));
  s.add({1, 0, 20, 3});
  EXPECT_EQ(seen(s.schedule()), (std::vector<Seen>{{1, 8, 0, false}}));
  EXPECT_EQ(seen(s.schedule()), (std::vector<Seen>{{1, 8, 8, false}}));
  EXPECT_EQ(seen(s.schedule()), (std::vector<Seen>{{1, 4, 16, true}}));
  EXPECT_TRUE(s.schedule().empty());  // its token is not out yet
  EXPECT_EQ(s.steps_in_flight(), 3);
  s.update_from_output(nullptr);
  s.update_from_output(nullptr);
  EXPECT_TRUE(s.schedule().empty());
  const IterationBatch& third = s.update_from_output(nullptr);
  EXPECT_EQ(third.sampled, 1);
  EXPECT_EQ(seen(s.schedule()), (std::vector<Seen>{{1, 1, 20, true}}));
  EXPECT_EQ(s.steps_in_flight(), 1);
}

TEST(SchedulerPipeline, APreemptedRequestsTokenInFlightIsDropped) {
  // 1-token blocks, 5 of them. A and B (prompt 2, output 3) prefill together (4 blocks); their
  // decodes go out in the next step (5 blocks needed: B, the last, is preempted before it is
  // planned). Then with A's decode in flight, B is re-admitted, and so on; every request still
  // samples exactly its output_len tokens.
  Scheduler s(uncached_config(100, 5, 1));
  s.add({1, 0, 2, 3});
  s.add({2, 0, 2, 3});
  std::map<int64_t, int64_t> got;
  int64_t preempted = 0, dropped = 0, steps = 0;
  while (s.has_work()) {
    while (s.steps_in_flight() < 2) {
      const IterationBatch& b = s.schedule();
      preempted += static_cast<int64_t>(b.preempted.size());
      if (b.empty()) break;
    }
    if (s.steps_in_flight() == 0) continue;
    const IterationBatch& done = s.update_from_output(nullptr);
    for (const auto& q : done.seqs) got[q.request] += q.samples ? 1 : 0;
    dropped += done.num_seqs() - done.sampled;
    ASSERT_LT(++steps, 1000);
  }
  EXPECT_EQ(got, (std::map<int64_t, int64_t>{{1, 3}, {2, 3}}));
  EXPECT_GT(preempted, 0);
  EXPECT_EQ(s.blocks_used(), 0);
}

/// Random loads with 2-4 steps in flight: a request is never planned while a step carrying its
/// previous token is in flight (unless it was preempted since), its context always continues
/// from its last planned tokens, and every request samples exactly output_len tokens.
TEST(SchedulerPipeline, RandomLoadsKeepEveryInvariant) {
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    std::mt19937_64 rng(seed);
    SchedulerConfig c = small_config(seed % 2 ? 48 : 300, 40, 8);
    c.max_num_seqs = 8;
    c.enable_chunked_prefill = seed % 3 != 0;
    if (!c.enable_chunked_prefill) c.max_num_batched_tokens = 300;  // a whole prompt fits a step
    c.enable_prefix_caching = false;
    const int64_t depth = 2 + static_cast<int64_t>(seed % 3);
    Scheduler s(c);
    std::map<int64_t, int64_t> want, got, planned, prompt_of;
    std::set<int64_t> awaiting;
    int64_t added = 0, steps = 0;
    while (added < 120 || s.has_work()) {
      if (added < 120 && rng() % 2 == 0) {
        const int64_t prompt = 1 + static_cast<int64_t>(rng() % 100);
        const int64_t output = 1 + static_cast<int64_t>(rng() % 40);
        s.add({added, 0, prompt, output});
        prompt_of[added] = prompt;
        want[added++] = output;
      }
      while (s.steps_in_flight() < depth) {
        const IterationBatch& b = s.schedule();
        for (int64_t id : b.preempted) {
          awaiting.erase(id);
          planned[id] = 0;
        }
        if (b.empty()) break;
        for (const auto& q : b.seqs) {
          ASSERT_FALSE(awaiting.count(q.request)) << "seed " << seed << " request " << q.request;
          ASSERT_EQ(q.context_before, planned[q.request]) << "seed " << seed;
          planned[q.request] += q.new_tokens;
          ASSERT_LE(planned[q.request], prompt_of[q.request] + got[q.request]);
          if (q.samples) awaiting.insert(q.request);
        }
      }
      if (s.steps_in_flight() > 0) {
        const IterationBatch& done = s.update_from_output(nullptr);
        for (const auto& q : done.seqs) {
          if (!q.samples) continue;
          ++got[q.request];
          awaiting.erase(q.request);
        }
      }
      ASSERT_LT(++steps, 100000) << "no progress";
    }
    EXPECT_EQ(got, want) << "seed " << seed;
    EXPECT_EQ(s.blocks_used(), 0);
  }
}

}  // namespace
}  // namespace parallax::serving
