// The suite and the fit on a synthetic device whose true numbers are known: the fit must
// recover them, and faults (failures, nonsense timings, non-monotone sizes) must be reported
// and kept out of the tables.
#include "calibrate/suite.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "calibrate/fit.h"
#include "core/json_io.h"
#include "core/units.h"
#include "simulator/cost/collective_cost.h"

namespace parallax::calibrate {
namespace {

/// A device with a roofline: GEMMs at `peak` TFLOP/s times k/(k+32) plus 2 us, memory at `bw`
/// GB/s plus 1 us, attention at 40% of peak. Some shapes misbehave on purpose.
class FakeBackend : public ComputeBackend {
 public:
  double peak = 0.1, bw = 20, overhead_s = 1e-6;
  int processors = 0;        ///< host_processors()
  double gemm_batch_s = -1;  ///< the batch_s the last GEMM was timed under
  /// power_capped(): GEMMs then run `throttle` slower once `settle_after_s` of GEMM time has
  /// run (a clock falling to what the power cap allows).
  bool capped = false;
  double throttle = 0.12, settle_after_s = 0.3, gemm_busy_s = 0;
  TimingPolicy last_gemm_policy;
  int host_processors() const override { return processors; }
  bool power_capped() const override { return capped; }
  std::string name() const override { return "fake"; }
  std::string device() const override { return "fake device"; }
  std::string runtime() const override { return "driver 1.2"; }
  double memory_gib() const override { return 16; }
  int activation_bytes() const override { return 4; }
  std::vector<Precision> gemm_precisions() const override { return {Precision::kFp32}; }
  Result<Stats> gemm(int64_t m, int64_t n, int64_t k, Precision, const TimingPolicy& pol) override {
    gemm_batch_s = pol.batch_s;
    last_gemm_policy = pol;
    const double t = 2.0 * m * n * k / (peak * kTera * k / (k + 32.0)) + 2e-6;
    if (capped)
      return time_repeated(
          [&, t] {
            const double slow = gemm_busy_s >= settle_after_s ? 1 / (1 - throttle) : 1;
            gemm_busy_s += t * slow;
            return t * slow;
          },
          pol, "gemm");
    if (m == 128 && n == 128 && k == 128) return time_repeated([] { return 0.0; }, pol, "zero");
    if (m == 64 && n == 64 && k == 64) return time_repeated([] { return -1.0; }, pol, "failing");
    return time_repeated([&, i = 0]() mutable { return t * (1 + 0.01 * (++i % 3)); }, pol, "gemm");
  }
  Result<Stats> memory_kernel(MemoryKernel kernel, int64_t rows, int64_t cols,
                              const TimingPolicy& pol) override {
    const double bytes = memory_kernel_bytes(kernel, rows, cols, 4);
    double t = bytes / (bw * kGB) + overhead_s;
    // The largest softmax "finishes" 100x too fast: a skipped kernel, non-monotone.
    if (kernel == MemoryKernel::kSoftmax && rows == 16384) t /= 100;
    return time_repeated([t] { return t; }, pol, "memory");
  }
  Result<Stats> attention(int64_t bh, int64_t seq, int64_t d, bool bwd,
                          const TimingPolicy& pol) override {
    const double t = attention_flops({bh, seq, d, bwd}) / (0.4 * peak * kTera);
    return time_repeated([t] { return t; }, pol, "attention");
  }
};

/// Four ranks on one node: t = 5 us + factor * S / 8 GB/s per collective.
class FakeComm : public Communicator {
 public:
  std::string name() const override { return "fake"; }
  int rank() const override { return 0; }
  int size() const override { return 4; }
  int local_size() const override { return 4; }
  using Communicator::collective;
  double batch_s = -1;  ///< the batch_s the last collective was timed under
  Result<Stats> collective(CollectiveOp op, double bytes, const TimingPolicy& pol,
                           Grouping g) override {
    batch_s = pol.batch_s;
    if (!valid_grouping(g, 4)) return Diagnostic{"fake", "bad grouping", ""};
    // Groups of 4 ranks 1 apart share the node's fabric; pairs get it to themselves (faster).
    const double bw = g.size == 4 ? 8 : 12;
    const double t = 5e-6 + bus_factor(op, g.size) * bytes / (bw * kGB);
    return time_repeated([t] { return t; }, pol, "collective");
  }
  double max_over_ranks(double v) override { return v; }
};

TimingPolicy fast_policy() {
  TimingPolicy p = quick_policy();
  p.min_time_s = 0;
  return p;
}

/// The quick (or full) CPU grid under fast_policy().
SuiteOptions fake_options(bool quick = true) {
  SuiteOptions o;
  o.grid = default_grid(GridKind::kCpu, quick);
  o.policy = fast_policy();
  return o;
}

CalibrationData run_fake(FakeBackend& b, FakeComm& c, bool quick = true) {
  return run_suite(b, c, fake_options(quick));
}

TEST(CalibrateGrid, CpuGridIsLogSpacedCappedAndMonotone) {
  const Grid g = default_grid(GridKind::kCpu, false);
  // Every shape within the FLOP cap, dims powers of two a factor 2 apart from 64 to 2048.
  std::set<int64_t> dims;
  for (const auto& s : g.gemm) {
    EXPECT_LE(2.0 * s.m * s.n * s.k, 4.3e9);
    dims.insert(s.m);
  }
  EXPECT_EQ(dims, (std::set<int64_t>{64, 128, 256, 512, 1024, 2048}));
  for (size_t i = 1; i < g.collective_bytes.size(); ++i)
    EXPECT_EQ(g.collective_bytes[i], 4 * g.collective_bytes[i - 1]);
  EXPECT_EQ(g.collective_bytes.front(), 16);
  EXPECT_EQ(g.collective_bytes.back(), 256.0 * (1 << 20));
  // The quick grid is a subset, and much smaller.
  const Grid q = default_grid(GridKind::kCpu, true);
  EXPECT_LT(q.gemm.size() * 4, g.gemm.size());
  EXPECT_LT(q.collective_bytes.size(), g.collective_bytes.size());
  // The GPU grid reaches the sizes GPUs train at.
  const Grid gpu = default_grid(GridKind::kGpu, false);
  EXPECT_EQ(gpu.attention.back().seq, 32768);
  EXPECT_EQ(gpu.collective_bytes.back(), 1024.0 * (1 << 20));
}

TEST(CalibrateGrid, FitToMemoryDropsWhatCannotBeAllocated) {
  const Grid g = fit_to_memory(default_grid(GridKind::kCpu, false), 0.5, 4);  // 128 MiB budget
  for (const auto& m : g.memory) EXPECT_LE(3.0 * m.rows * m.cols * 4, 0.125 * kGiB);
  for (double b : g.collective_bytes) EXPECT_LE(2 * b, 0.125 * kGiB);
  EXPECT_FALSE(g.gemm.empty());
}

TEST(CalibrateSuite, CollectiveGroupsCoverTheNodeAndOneRankPerNode) {
  auto shapes = [](int world, int local) {
    std::vector<std::tuple<int, int, LinkClass>> v;
    for (const auto& g : collective_groups(world, local))
      v.emplace_back(g.grouping.size, g.grouping.stride, g.link);
    return v;
  };
  using T = std::vector<std::tuple<int, int, LinkClass>>;
  const LinkClass up = LinkClass::kScaleUp, out = LinkClass::kScaleOut;
  EXPECT_EQ(shapes(16, 8), (T{{2, 1, up}, {4, 1, up}, {8, 1, up}, {2, 8, out}}));
  EXPECT_EQ(shapes(2, 2), (T{{2, 1, up}}));
  EXPECT_EQ(shapes(12, 6), (T{{2, 1, up}, {6, 1, up}, {2, 6, out}}));
  EXPECT_EQ(shapes(4, 1), (T{{2, 1, out}, {4, 1, out}}));  // one rank per node
  EXPECT_TRUE(shapes(1, 1).empty());
  // Every grouping tiles the job, and group_color puts exactly `size` ranks in each group.
  for (const auto& g : collective_groups(16, 8)) {
    EXPECT_TRUE(valid_grouping(g.grouping, 16));
    std::map<int, std::set<int>> members;
    for (int r = 0; r < 16; ++r)
      members[group_color(r, g.grouping)].insert(group_rank(r, g.grouping));
    EXPECT_EQ(members.size(), 16u / g.grouping.size);
    for (const auto& [color, idx] : members)
      EXPECT_EQ(static_cast<int>(idx.size()), g.grouping.size);
  }
  // One rank per node: ranks 3 and 11 of 2 nodes x 8 share a group, as indices 0 and 1.
  const Grouping per_node{2, 8};
  EXPECT_EQ(group_color(3, per_node), group_color(11, per_node));
  EXPECT_EQ(group_rank(11, per_node), 1);
}

TEST(CalibrateSuite, NonMonotoneDropsTheContradictingPoint) {
  // 4 at size 3 is far below its neighbours: it goes, nothing else does.
  EXPECT_EQ(drop_non_monotone({1, 2, 3, 4, 5}, {10, 20, 4, 40, 50}), (std::vector<size_t>{2}));
  // A too-slow small point contradicts every larger one: it goes.
  EXPECT_EQ(drop_non_monotone({1, 2, 3, 4}, {100, 20, 30, 40}), (std::vector<size_t>{0}));
  // Noise within 30% is kept; flat latency-bound times are fine.
  EXPECT_TRUE(drop_non_monotone({1, 2, 3, 4}, {10, 9, 10, 8}).empty());
  EXPECT_TRUE(drop_non_monotone({1}, {1}).empty());
}

TEST(CalibrateSuite, FaultsAreReportedAndLeftOut) {
  FakeBackend b;
  FakeComm c;
  const CalibrationData d = run_fake(b, c, /*quick=*/false);
  auto rejected = [&](const std::string& needle) {
    for (const auto& r : d.rejected)
      if (r.what.find(needle) != std::string::npos) return r.why;
    return std::string();
  };
  EXPECT_NE(rejected("gemm 128x128x128").find("nonsense"), std::string::npos);
  EXPECT_NE(rejected("gemm 64x64x64").find("failed"), std::string::npos);
  EXPECT_NE(rejected("memory softmax").find("non-monotone"), std::string::npos);
  for (const auto& g : d.gemm)
    EXPECT_FALSE(g.shape.m == 128 && g.shape.n == 128 && g.shape.k == 128);
  for (const auto& m : d.memory)
    EXPECT_FALSE(m.shape.kernel == MemoryKernel::kSoftmax && m.shape.rows == 16384);
  EXPECT_EQ(d.rejected.size(), 3u);
  // nccl-tests columns: busbw = algbw x 2(n-1)/n for all-reduce.
  for (const auto& p : d.collectives)
    EXPECT_NEAR(p.busbw_gbps, p.algbw_gbps * bus_factor(p.op, p.ranks), 1e-12);
}

TEST(CalibrateFit, RecoversTheSyntheticDevice) {
  FakeBackend b;
  FakeComm c;
  const CalibrationData d = run_fake(b, c, /*quick=*/false);
  auto f = fit_profile(d, FitOptions{"fake-measured", std::nullopt, "test"});
  ASSERT_TRUE(f.ok()) << f.errors().front().str();
  const HwProfile& p = f->profile;
  EXPECT_TRUE(p.measured);
  EXPECT_EQ(p.driver, "driver 1.2");
  // The best GEMM is the longest K: peak * 2048 / 2080, less the 2 us.
  EXPECT_NEAR(p.fp32_tflops, 0.1 * 2048 / 2080, 0.002);
  EXPECT_DOUBLE_EQ(p.gemm_efficiency, 1.0);
  // Streaming bandwidth and kernel overhead.
  EXPECT_NEAR(p.hbm_bw_gbps * p.hbm_efficiency, 20, 0.05);
  EXPECT_NEAR(p.kernel_overhead_us, 1.0, 0.05);
  // Send/recv t = 5 us + S / 8 GB/s.
  EXPECT_NEAR(p.scale_up_latency_us, 5, 0.05);
  EXPECT_NEAR(p.scale_up_bw_gbps * p.scale_up_efficiency, 8, 0.05);
  EXPECT_EQ(p.scale_up_domain, 4);
  // Both group sizes of the node are in the table, each its own series.
  std::set<int> groups;
  for (const auto& s : p.collective_samples) groups.insert(s.group_size);
  EXPECT_EQ(groups, (std::set<int>{2, 4}));
  EXPECT_NE(p.sources.at("scale_out_bw_gbps").find("not measured"), std::string::npos);
  EXPECT_NE(p.sources.at("fp32_tflops").find("measured by parallax calibrate"), std::string::npos);
  // Every sample of every table is data, with its spread.
  EXPECT_EQ(p.gemm_samples.size(), d.gemm.size());
  EXPECT_EQ(p.collective_samples.size(), d.collectives.size());
  for (const auto& s : p.gemm_samples) EXPECT_GT(s.spread, 0);

  // The simulator, given the profile, reads the measured bus bandwidth at 2 MiB (a sample).
  const CollectiveCost cost(p);
  const double s = 2.0 * (1 << 20);
  EXPECT_NEAR(cost.achieved_bw_gbps(CollectiveOp::kAllReduce, LinkClass::kScaleUp, 4, s),
              2 * 0.75 * s / (5e-6 + 2 * 0.75 * s / (8 * kGB)) / kGB, 0.05);
}

// Four ranks on two processors time-share them: the compute tables are timed in batches (a
// rank's share of a processor), the collectives as always (their ranks must call alike), and
// the profile says so, which `execute` reads to compare such runs.
TEST(CalibrateSuite, RanksOutnumberingTheProcessorsTimeComputeInBatches) {
  FakeBackend b;
  FakeComm c;
  SuiteOptions o = fake_options();
  o.shared_batch_s = 1e-4;
  b.processors = 4;  // one per rank: nothing shared
  CalibrationData d = run_suite(b, c, o);
  EXPECT_EQ(d.shared_processors, 0);
  EXPECT_EQ(b.gemm_batch_s, 0);
  auto f = fit_profile(d, FitOptions{"cpu", std::nullopt, "test"});
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->profile.shared_processors, 0);
  EXPECT_FALSE(to_json(f->profile).contains("shared_processors"));

  b.processors = 2;
  d = run_suite(b, c, o);
  EXPECT_EQ(d.shared_processors, 2);
  EXPECT_EQ(b.gemm_batch_s, 1e-4);
  EXPECT_EQ(c.batch_s, 0);
  f = fit_profile(d, FitOptions{"cpu", std::nullopt, "test"});
  ASSERT_TRUE(f.ok());
  const HwProfile& p = f->profile;
  EXPECT_EQ(p.shared_processors, 2);
  EXPECT_EQ(p.gpus_per_node, 4);
  EXPECT_NE(p.description.find("4 per host sharing 2 processors"), std::string::npos)
      << p.description;
  EXPECT_NE(p.sources.at("fp32_tflops").find("sharing 2 processors"), std::string::npos);
  // Both survive JSON: the raw data and the profile.
  auto raw = calibration_from_json(to_json(d), "raw");
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(raw->shared_processors, 2);
  auto back = profile_from_json(to_json(p), "p");
  ASSERT_TRUE(back.ok()) << back.errors().front().str();
  EXPECT_EQ(back->shared_processors, 2);
  Json bad = to_json(p);
  bad["shared_processors"]["value"] = -1;
  auto e = profile_from_json(bad, "p.json:");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.errors().front().where, "p.json:/shared_processors");
}

TEST(CalibrateFit, DatasheetBaseKeepsPeaksAndRejectsTheImpossible) {
  FakeBackend b;
  b.peak = 0.2;  // faster than the "datasheet" below for every large GEMM
  FakeComm c;
  CalibrationData d = run_fake(b, c);
  HwProfile base;
  base.name = "datasheet";
  base.bf16_tflops = 1;
  base.fp32_tflops = 0.15;
  base.sm_count = 4;
  base.gemm_efficiency = 0.5;
  base.attention_fwd_efficiency = base.attention_bwd_efficiency = 0.5;
  base.hbm_gib = 16;
  base.hbm_bw_gbps = 40;
  base.hbm_efficiency = 0.9;
  base.gpus_per_node = base.scale_up_domain = 4;
  base.scale_up_bw_gbps = 16;
  base.scale_up_efficiency = 0.9;
  base.scale_out_bw_gbps = 1;
  base.scale_out_efficiency = 0.9;
  auto f = fit_profile(d, FitOptions{"x", base, ""});
  ASSERT_TRUE(f.ok()) << f.errors().front().str();
  EXPECT_DOUBLE_EQ(f->profile.fp32_tflops, 0.15);          // the datasheet stays
  EXPECT_NEAR(f->profile.hbm_efficiency, 0.5, 0.01);       // 20 of 40 GB/s
  EXPECT_NEAR(f->profile.scale_up_efficiency, 0.5, 0.01);  // 8 of 16
  EXPECT_DOUBLE_EQ(f->profile.scale_out_bw_gbps, 1);       // not measured: the base's
  // GEMMs above 1.05 x the fp32 datasheet peak are nonsense, not data.
  EXPECT_FALSE(f->rejected.empty());
  for (const auto& s : f->profile.gemm_samples) EXPECT_LE(s.tflops, 1.05 * 0.15);
}

TEST(CalibrateFit, UnrepresentativeAttentionStaysOutOfTheProfile) {
  FakeBackend b;
  FakeComm c;
  CalibrationData d = run_fake(b, c);
  ASSERT_FALSE(d.attention.empty());
  d.attention_representative = false;
  auto f = fit_profile(d, FitOptions{"x", std::nullopt, ""});
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(f->profile.attention_samples.empty());
  EXPECT_DOUBLE_EQ(f->profile.attention_fwd_efficiency, f->profile.gemm_efficiency);
  bool noted = false;
  for (const auto& n : f->notes) noted |= n.find("reference kernel") != std::string::npos;
  EXPECT_TRUE(noted);
}

TEST(CalibrateFit, LatencyBandwidthFitAndItsFailures) {
  std::vector<double> x = {1e3, 1e4, 1e5, 1e6, 1e7}, t;
  for (double b : x) t.push_back(2e-6 + b / 10e9);
  auto f = fit_latency_bandwidth(x, t);
  ASSERT_TRUE(f);
  EXPECT_NEAR(f->latency_s, 2e-6, 1e-9);
  EXPECT_NEAR(f->bandwidth_gbps, 10, 1e-6);
  EXPECT_LT(f->rms_rel_error, 1e-9);
  EXPECT_FALSE(fit_latency_bandwidth({1e3}, {1e-6}));             // one size
  EXPECT_FALSE(fit_latency_bandwidth({1e3, 1e6}, {1e-3, 1e-6}));  // time falls with size
}

TEST(CalibrateFit, FailsWithoutGemmData) {
  CalibrationData d;
  d.backend = "fake";
  auto f = fit_profile(d, FitOptions{"empty", std::nullopt, ""});
  ASSERT_FALSE(f.ok());
}

// A device whose GEMMs fall 12% slower after 0.3 s of load (its clock settling at the power cap):
// the suite runs GEMMs for the settling time and until they stop slowing, then times every
// point at the settled rate, each warmed up and timed for the sustained times. A device without
// a cap is timed as before.
TEST(CalibrateSuite, PowerCappedDevicesAreTimedAtTheirSettledRate) {
  FakeBackend b;
  FakeComm c;
  SuiteOptions o = fake_options();
  o.settle_gemm = {256, 256, 256};
  o.settle_window_s = 0.1;
  o.settle_min_s = 0.5;
  o.sustained_warmup_s = 0.01;
  o.sustained_min_time_s = 0.02;
  CalibrationData free_run = run_suite(b, c, o);
  EXPECT_EQ(free_run.settle_s, 0);
  EXPECT_EQ(b.last_gemm_policy.warmup_s, 0);

  b.capped = true;
  const CalibrationData d = run_suite(b, c, o);
  // Windows of 0.1 s: the 4th is the first slow one; the 5th, no slower, ends the settling time.
  EXPECT_NEAR(d.settle_s, 0.5, 1e-12);
  EXPECT_NEAR(d.settle_last_tflops / d.settle_first_tflops, 1 - b.throttle, 1e-9);
  EXPECT_EQ(b.last_gemm_policy.warmup_s, 0.01);
  EXPECT_EQ(b.last_gemm_policy.min_time_s, 0.02);
  size_t compared = 0;
  for (const auto& point : d.gemm)
    for (const auto& free_point : free_run.gemm)
      if (point.shape.m == free_point.shape.m && point.shape.n == free_point.shape.n &&
          point.shape.k == free_point.shape.k) {
        EXPECT_NEAR(point.tflops / free_point.tflops, 1 - b.throttle, 0.02)
            << point.shape.m << "x" << point.shape.n << "x" << point.shape.k;
        ++compared;
      }
  EXPECT_GE(compared, free_run.gemm.size() - 1);
  auto back = calibration_from_json(to_json(d), "raw");
  ASSERT_TRUE(back.ok()) << back.errors().front().str();
  EXPECT_EQ(back->settle_s, d.settle_s);
  EXPECT_EQ(back->settle_first_tflops, d.settle_first_tflops);
  EXPECT_EQ(back->settle_last_tflops, d.settle_last_tflops);
}

TEST(CalibrateJson, RawDataAndProfileRoundTrip) {
  FakeBackend b;
  FakeComm c;
  const CalibrationData d = run_fake(b, c);
  auto back = calibration_from_json(to_json(d), "raw");
  ASSERT_TRUE(back.ok()) << back.errors().front().str();
  EXPECT_EQ(back->gemm.size(), d.gemm.size());
  EXPECT_EQ(back->collectives.size(), d.collectives.size());
  EXPECT_EQ(back->rejected.size(), d.rejected.size());
  EXPECT_NEAR(back->collectives.back().busbw_gbps, d.collectives.back().busbw_gbps, 1e-9);
  // Refitting the saved run gives the same profile.
  auto f1 = fit_profile(d, FitOptions{"p", std::nullopt, ""});
  auto f2 = fit_profile(*back, FitOptions{"p", std::nullopt, ""});
  ASSERT_TRUE(f1.ok() && f2.ok());
  EXPECT_EQ(to_json(f1->profile).dump(), to_json(f2->profile).dump());
  // The profile's tables survive JSON.
  auto p = profile_from_json(to_json(f1->profile), "p");
  ASSERT_TRUE(p.ok()) << p.errors().front().str();
  EXPECT_EQ(p->memory_samples.size(), f1->profile.memory_samples.size());
  EXPECT_EQ(p->attention_samples.size(), f1->profile.attention_samples.size());
  EXPECT_EQ(p->date, d.date);
  EXPECT_EQ(to_json(*p).dump(), to_json(f1->profile).dump());

  // A point with a nonsense time in a raw file is an error that says where.
  Json bad = to_json(d);
  bad["gemm"][0]["stats"]["median_s"] = 0;
  auto e = calibration_from_json(bad, "raw.json:");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.errors().front().where.find("raw.json:/gemm/0/stats"), std::string::npos);
}

// A table that is not a list (found by calibration_json_fuzz: indexing an object or a string by
// position threw nlohmann's type_error out of the loader) is reported where it is.
TEST(CalibrateJson, TablesThatAreNotListsAreReported) {
  FakeBackend b;
  FakeComm c;
  Json bad = to_json(run_fake(b, c));
  bad["gemm"] = {{"a", {{"stats", {{"median_s", 1}}}}}};
  bad["memory"] = "x";
  bad["rejected"] = 7;
  auto e = calibration_from_json(bad, "raw.json:");
  ASSERT_FALSE(e.ok());
  const std::string text = e.error_text();
  EXPECT_NE(text.find("raw.json:/gemm: expected an array, got {"), std::string::npos) << text;
  EXPECT_NE(text.find("raw.json:/memory: expected an array, got \"x\""), std::string::npos) << text;
  EXPECT_NE(text.find("raw.json:/rejected: expected an array, got 7"), std::string::npos) << text;
}

TEST(CalibrateCheck, ComparesMatchingPoints) {
  FakeBackend b;
  FakeComm c;
  const CalibrationData d = run_fake(b, c);
  auto f = fit_profile(d, FitOptions{"p", std::nullopt, ""});
  ASSERT_TRUE(f.ok());
  // The same machine: no deviation.
  CheckReport same = compare_to_profile(f->profile, d);
  EXPECT_GT(same.rows.size(), 10u);
  EXPECT_LT(same.median_deviation, 0.02);
  // A machine with half the memory bandwidth: memory rows are ~half.
  b.bw = 10;
  SuiteOptions o;
  o.grid = check_grid(f->profile, 4, 4);
  o.policy = fast_policy();
  o.tables = {Table::kMemory};
  const CalibrationData slow = run_suite(b, c, o);
  CheckReport r = compare_to_profile(f->profile, slow);
  ASSERT_FALSE(r.rows.empty());
  EXPECT_TRUE(r.unmatched.empty());
  EXPECT_GT(r.max_deviation, 0.3);
}

}  // namespace
}  // namespace parallax::calibrate
