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
  Scheduler s(small_config(100, 6, 1));
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
  EXPECT_TRUE(s.schedule().empty());
  s.update_from_output(nullptr);
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

/// Random arrivals over a tiny cache and budget: the limits hold on every step, every request
/// samples exactly output_len tokens, nothing is lost and the cache ends empty.
TEST(SchedulerProperty, LimitsHoldAndEveryTokenIsProduced) {
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    std::mt19937_64 rng(seed);
    SchedulerConfig c = small_config(seed % 2 ? 48 : 400, 30, 8);
    c.max_num_seqs = 6;
    c.enable_chunked_prefill = seed % 2 == 1;
    c.long_prefill_token_threshold = seed == 3 ? 20 : 0;
    Scheduler s(c);
    std::map<int64_t, int64_t> want, got;
    int64_t added = 0, steps = 0;
    while (added < 150 || s.has_work()) {
      if (added < 150 && rng() % 3 == 0) {
        const int64_t prompt = 1 + static_cast<int64_t>(rng() % 150);
        const int64_t output = 1 + static_cast<int64_t>(rng() % 80);
        s.add({added, 0, prompt, output});
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
        got[q.request] += q.samples ? 1 : 0;
      }
      s.update_from_output(nullptr);
      ASSERT_LT(++steps, 100000) << "no progress";
    }
    EXPECT_EQ(got, want) << "seed " << seed;
    EXPECT_EQ(s.blocks_used(), 0);
  }
}

}  // namespace
}  // namespace parallax::serving
