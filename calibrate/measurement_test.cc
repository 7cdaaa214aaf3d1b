#include "calibrate/measurement.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <thread>

namespace parallax::calibrate {
namespace {

TEST(CalibrateStats, PercentilesInterpolateAndOutliersAreCounted) {
  // 1..8, 10 and one far outlier: median 5.5, p10 = 1.9, p90 = 9.1 (linear between order stats).
  const Stats s = summarize({10, 1, 2, 3, 4, 5, 6, 7, 8, 1000});
  EXPECT_EQ(s.reps, 10);
  EXPECT_DOUBLE_EQ(s.median_s, 5.5);
  EXPECT_NEAR(s.p10_s, 1.9, 1e-12);
  EXPECT_NEAR(s.p90_s, 109, 1e-9);
  EXPECT_DOUBLE_EQ(s.min_s, 1);
  EXPECT_DOUBLE_EQ(s.max_s, 1000);
  EXPECT_EQ(s.outliers, 1);  // 1000 is beyond Q3 + 3 IQR
  EXPECT_NEAR(s.spread(), (109 - 1.9) / 5.5, 1e-12);
  EXPECT_EQ(summarize({2}).median_s, 2);
}

TEST(CalibrateTiming, WarmsUpThenStopsOnceStableOrOutOfTime) {
  TimingPolicy p;
  p.warmup = 2;
  p.min_reps = 5;
  p.max_reps = 100;
  p.min_time_s = 0;
  p.target_spread = 0.05;
  int calls = 0;
  // Constant times: stable at min_reps.
  auto r = time_repeated([&] { return ++calls, 1e-3; }, p, "steady");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->reps, 5);
  EXPECT_EQ(calls, 7);  // 2 warm-up + 5 timed
  // Noisy times never settle: the time budget stops them.
  p.max_time_s = 0.05;
  int i = 0;
  r = time_repeated([&] { return (++i % 2 ? 1e-3 : 3e-3); }, p, "noisy");
  ASSERT_TRUE(r.ok());
  EXPECT_GE(r->reps, 5);
  EXPECT_LE(r->reps, 30);
  // ... or max_reps.
  p.max_time_s = 100;
  p.max_reps = 12;
  r = time_repeated([&] { return (++i % 2 ? 1e-3 : 3e-3); }, p, "capped");
  EXPECT_EQ(r->reps, 12);
}

// A warm-up time keeps warming past the warm-up count: a device that runs 2 ms per call for
// its first 5 calls (its clock settling) and 3 ms after is timed at 3 ms only once 10 ms of
// warm-up has run.
TEST(CalibrateTiming, WarmUpTimeRunsPastTheWarmUpCount) {
  TimingPolicy p;
  p.warmup = 1;
  p.min_reps = 5;
  p.max_reps = 5;
  p.min_time_s = 0;
  int calls = 0;
  auto settling = [&] { return ++calls <= 5 ? 2e-3 : 3e-3; };
  auto r = time_repeated(settling, p, "short warm-up");
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r->median_s, 2e-3);  // one warm-up call: the burst rate is timed
  calls = 0;
  p.warmup_s = 0.0095;
  r = time_repeated(settling, p, "timed warm-up");
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r->median_s, 3e-3);
  EXPECT_EQ(calls, 5 + 5);  // 5 x 2 ms of warm-up, then 5 timed
  // A zero time ends the warm-up (and is reported as nonsense), a negative one fails it.
  EXPECT_FALSE(time_repeated([] { return 0.0; }, p, "zero").ok());
  EXPECT_FALSE(time_repeated([] { return -1.0; }, p, "failing").ok());
}

// Ranks that time-share processors: each call reports 1 ms of its own, but waits 2 ms of wall
// time in all (as if descheduled). Single calls keep the 1 ms; batches count the wall time, and
// the time budget counts it too.
TEST(CalibrateTiming, BatchesCountWallTimeWhenRanksShareProcessors) {
  TimingPolicy p;
  p.warmup = 0;
  p.min_reps = 3;
  p.max_reps = 100;
  p.min_time_s = 0;
  p.max_time_s = 0.0605;
  p.target_spread = -1;  // never stable: only the budget stops
  int calls = 0;
  const auto shared = [&] {
    ++calls;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return 1e-3;
  };
  auto single = time_repeated(shared, p, "single");
  ASSERT_TRUE(single.ok());
  EXPECT_DOUBLE_EQ(single->median_s, 1e-3);
  EXPECT_EQ(single->reps, 61);  // the budget counts the reported 1 ms
  p.batch_s = 0.02;
  calls = 0;
  auto batched = time_repeated(shared, p, "batched");
  ASSERT_TRUE(batched.ok());
  EXPECT_GE(batched->median_s, 2e-3);  // sleep_for waits at least its time
  EXPECT_GE(batched->reps, 3);         // batches of >= 20 ms fill the budget in 3 or 4
  EXPECT_LE(batched->reps, 4);
  // A batch calls until 20 ms have passed: up to 10 calls of 2 ms, fewer when sleeps overrun on
  // a loaded machine, but never one call alone (that would take a 20 ms sleep).
  EXPECT_GE(calls, 2 * batched->reps);
  // A failure inside a batch fails the benchmark.
  int n = 0;
  auto failed = time_repeated([&] { return ++n == 5 ? -1.0 : 1e-3; }, p, "gemm 8x8x8");
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.errors().front().what.find("failed"), std::string::npos);
}

TEST(CalibrateTiming, FailuresAndNonsenseAreErrorsNotData) {
  const TimingPolicy p = quick_policy();
  auto failed = time_repeated([] { return -1.0; }, p, "gemm 8x8x8");
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.errors().front().where, "gemm 8x8x8");
  EXPECT_NE(failed.errors().front().what.find("failed"), std::string::npos);
  for (double bad :
       {0.0, std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
    auto r = time_repeated([bad] { return bad; }, p, "x");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.errors().front().what.find("nonsense"), std::string::npos);
  }
  // A repetition beyond the time-out (here in the warm-up) times the benchmark out.
  TimingPolicy slow = p;
  slow.timeout_s = 1;
  auto timed_out = time_repeated([] { return 2.0; }, slow, "attention bwd");
  ASSERT_FALSE(timed_out.ok());
  EXPECT_NE(timed_out.errors().front().what.find("timed out"), std::string::npos);
  // One nonsense repetition among good ones still fails the benchmark.
  int n = 0;
  auto r = time_repeated([&] { return ++n == 4 ? 0.0 : 1e-3; }, p, "x");
  EXPECT_FALSE(r.ok());
}

}  // namespace
}  // namespace parallax::calibrate
