#include "simulator/cost/collective_cost.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/hw_profile.h"
#include "core/rank_map.h"
#include "core/units.h"
#include "tests/test_support.h"

namespace parallax {
namespace {

using testing::expect_rel;
using testing::round_profile;

// round_profile(): NVLink 100 GB/s, NIC 10 GB/s per GPU, both at full efficiency, no latency.
constexpr double kUpBps = 100 * kGB;  // B: scale-up bandwidth, bytes/s
constexpr double kNicBps = 10 * kGB;  // N: scale-out bandwidth per GPU, bytes/s
constexpr double kS = 1e9;            // S: message bytes (nccl-tests convention)

GroupShape in_domain(int n) { return GroupShape{n, n, 1}; }
GroupShape across(int per_domain, int domains) {
  return GroupShape{per_domain * domains, per_domain, domains};
}

TEST(CollectiveCost, RingAllReduceInsideADomain) {
  const HwProfile hw = round_profile();
  const CollectiveCost cost(hw);
  // t = 2 (n-1)/n * S / B; n = 8: 2 * 7/8 * 1e9 / 100e9 = 17.5 ms.
  for (int n : {2, 4, 8}) {
    const CollectiveTime t = cost.time(CollectiveOp::kAllReduce, kS, in_domain(n));
    expect_rel(t.time_s, 2.0 * (n - 1) / n * kS / kUpBps);
    EXPECT_FALSE(t.crosses_domains);
  }
  expect_rel(cost.time(CollectiveOp::kAllReduce, kS, in_domain(8)).time_s, 17.5e-3);
}

TEST(CollectiveCost, AllReduceLatencyIsTheRingsCappedByATree) {
  HwProfile hw = round_profile();
  const double a = 5 * kUs;
  hw.scale_up_latency_us = 5;
  const CollectiveCost cost(hw);
  // t = 2 * min(n-1, 2 ceil(log2 n)) * a + 2 (n-1)/n * S / B
  //   n = 4: min(3, 4) = 3 ring steps; n = 8: min(7, 6) = 6; n = 16: min(15, 8) = 8.
  const struct { int n, steps; } cases[] = {{2, 1}, {4, 3}, {8, 6}, {16, 8}};
  for (const auto& c : cases) {
    const double steps =
        std::min<double>(c.n - 1, 2 * std::ceil(std::log2(static_cast<double>(c.n))));
    ASSERT_EQ(steps, c.steps);
    expect_rel(cost.time(CollectiveOp::kAllReduce, kS, in_domain(c.n)).time_s,
               2 * c.steps * a + 2.0 * (c.n - 1) / c.n * kS / kUpBps);
    // All-gather and reduce-scatter pay half the steps: min(n-1, 2 ceil(log2 n)) * a.
    expect_rel(cost.time(CollectiveOp::kAllGather, kS, in_domain(c.n)).time_s,
               c.steps * a + static_cast<double>(c.n - 1) / c.n * kS / kUpBps);
  }
}

// Inference engines' all-reduce: a one-shot exchange, t = 2 a + (n-1) S / B, where it beats
// NCCL's ring or tree (small messages); NCCL's time otherwise and across domains.
TEST(CollectiveCost, EngineAllReduceIsOneShotForSmallMessages) {
  HwProfile hw = round_profile();
  hw.scale_up_latency_us = 5;
  const double a = 5 * kUs;
  const CollectiveCost cost(hw);
  const double small = 64 * 1024;  // 8 ranks: 10 us + 7 * 64 KiB / 100 GB/s = 14.6 us
  expect_rel(cost.engine_all_reduce(small, in_domain(8)).time_s, 2 * a + 7 * small / kUpBps);
  EXPECT_LT(cost.engine_all_reduce(small, in_domain(8)).time_s,
            cost.time(CollectiveOp::kAllReduce, small, in_domain(8)).time_s);
  expect_rel(cost.engine_all_reduce(kS, in_domain(8)).time_s,
             cost.time(CollectiveOp::kAllReduce, kS, in_domain(8)).time_s);
  expect_rel(cost.engine_all_reduce(small, across(8, 2)).time_s,
             cost.time(CollectiveOp::kAllReduce, small, across(8, 2)).time_s);
}

TEST(CollectiveCost, AllGatherAndReduceScatterInsideADomain) {
  const HwProfile hw = round_profile();
  const CollectiveCost cost(hw);
  // t = (n-1)/n * S / B; n = 8: 7/8 * 10 ms = 8.75 ms.
  for (CollectiveOp op : {CollectiveOp::kAllGather, CollectiveOp::kReduceScatter}) {
    for (int n : {2, 4, 8}) {
      const CollectiveTime t = cost.time(op, kS, in_domain(n));
      expect_rel(t.time_s, static_cast<double>(n - 1) / n * kS / kUpBps);
      EXPECT_DOUBLE_EQ(t.bus_bytes, kS);
    }
  }
  // All-to-all inside a domain follows the same bandwidth term: (n-1)/n * S / B.
  expect_rel(cost.time(CollectiveOp::kAllToAll, kS, in_domain(8)).time_s, 7.0 / 8 * kS / kUpBps);
}

TEST(CollectiveCost, SingleRankGroupOrEmptyMessageCostsNothing) {
  HwProfile hw = round_profile();
  hw.scale_up_latency_us = 5;
  hw.scale_out_latency_us = 10;
  const CollectiveCost cost(hw);
  for (CollectiveOp op :
       {CollectiveOp::kAllReduce, CollectiveOp::kAllGather, CollectiveOp::kReduceScatter,
        CollectiveOp::kAllToAll, CollectiveOp::kSendRecv}) {
    EXPECT_EQ(cost.time(op, kS, in_domain(1)).time_s, 0) << to_string(op);
    EXPECT_EQ(cost.time(op, 0, in_domain(8)).time_s, 0) << to_string(op);
    EXPECT_EQ(cost.time(op, 0, across(8, 2)).time_s, 0) << to_string(op);
  }
}

TEST(CollectiveCost, HierarchicalAllReduceAcrossDomains) {
  const HwProfile hw = round_profile();
  const CollectiveCost cost(hw);
  // k = 8 per domain, D = 2 domains. Reduce-scatter inside the domain, all-reduce of S/k across
  // domains over the NICs, all-gather inside:
  //   t = (k-1)/k S/B + 2 (D-1)/D (S/k)/N + (k-1)/k S/B
  //     = 8.75 ms + 12.5 ms + 8.75 ms = 30 ms.
  const int k = 8, d = 2;
  const double expected = static_cast<double>(k - 1) / k * kS / kUpBps +
                          2.0 * (d - 1) / d * (kS / k) / kNicBps +
                          static_cast<double>(k - 1) / k * kS / kUpBps;
  const CollectiveTime t = cost.time(CollectiveOp::kAllReduce, kS, across(k, d));
  expect_rel(t.time_s, expected);
  expect_rel(t.time_s, 30e-3);
  EXPECT_TRUE(t.crosses_domains);
  // Over the NICs each rank moves 2 (D-1)/D * S/k.
  expect_rel(t.bus_bytes, 2.0 * (d - 1) / d * kS / k);
}

TEST(CollectiveCost, HierarchicalLatencyUsesEachFabricsOwn) {
  HwProfile hw = round_profile();
  hw.scale_up_latency_us = 2;
  hw.scale_out_latency_us = 10;
  const CollectiveCost cost(hw);
  // k = 4, D = 8. Inside: RS and AG each min(3, 4) = 3 steps of a_up; across: all-reduce with
  // 2 * min(D-1, 2 ceil(log2 D)) = 2 * min(7, 6) = 12 steps of a_out.
  const int k = 4, d = 8;
  const double expected = 3 * 2 * kUs + static_cast<double>(k - 1) / k * kS / kUpBps +
                          12 * 10 * kUs + 2.0 * (d - 1) / d * (kS / k) / kNicBps + 3 * 2 * kUs +
                          static_cast<double>(k - 1) / k * kS / kUpBps;
  expect_rel(cost.time(CollectiveOp::kAllReduce, kS, across(k, d)).time_s, expected);
}

TEST(CollectiveCost, HierarchicalAllGatherAndReduceScatter) {
  const HwProfile hw = round_profile();
  const CollectiveCost cost(hw);
  // across D domains on each rail's share S/k, then inside on the full buffer:
  //   t = (D-1)/D (S/k)/N + (k-1)/k S/B.
  const int k = 8, d = 4;
  const double expected = static_cast<double>(d - 1) / d * (kS / k) / kNicBps +
                          static_cast<double>(k - 1) / k * kS / kUpBps;
  for (CollectiveOp op : {CollectiveOp::kAllGather, CollectiveOp::kReduceScatter}) {
    const CollectiveTime t = cost.time(op, kS, across(k, d));
    expect_rel(t.time_s, expected);
    expect_rel(t.bus_bytes, static_cast<double>(d - 1) / d * kS / k);
  }
}

TEST(CollectiveCost, AllToAllAcrossDomainsIsBoundByTheNicShare) {
  const HwProfile hw = round_profile();
  const CollectiveCost cost(hw);
  // n = 16 ranks, k = 8 per domain: (n-k)/n of the send buffer leaves through the NIC,
  // (k-1)/n stays on NVLink; t = max((n-k)/n S / N, (k-1)/n S / B) = 0.5 * 1e9 / 10e9 = 50 ms.
  const int k = 8, d = 2, n = k * d;
  const double nic_s = static_cast<double>(n - k) / n * kS / kNicBps;
  const double nvl_s = static_cast<double>(k - 1) / n * kS / kUpBps;
  ASSERT_GT(nic_s, nvl_s);
  const CollectiveTime t = cost.time(CollectiveOp::kAllToAll, kS, across(k, d));
  expect_rel(t.time_s, nic_s);
  expect_rel(t.bus_bytes, static_cast<double>(n - k) / n * kS);
  // Much slower than the same group inside one domain would be.
  EXPECT_GT(t.time_s, cost.time(CollectiveOp::kAllToAll, kS, in_domain(n)).time_s);
}

TEST(CollectiveCost, MeasuredSamplesInterpolateInLogBytes) {
  HwProfile hw = round_profile();
  const double mib = 1024.0 * 1024.0;
  // All-reduce on 8 ranks inside a domain: 40 GB/s bus bandwidth at 1 MiB, 80 GB/s at 4 MiB.
  hw.collective_samples.push_back({CollectiveOp::kAllReduce, LinkClass::kScaleUp, 8, 1 * mib, 40});
  hw.collective_samples.push_back({CollectiveOp::kAllReduce, LinkClass::kScaleUp, 8, 4 * mib, 80});
  const CollectiveCost cost(hw);
  // 2 MiB: w = ln(2/1) / ln(4/1) = 1/2, busbw = 40 + w (80 - 40) = 60 GB/s.
  EXPECT_NEAR(cost.achieved_bw_gbps(CollectiveOp::kAllReduce, LinkClass::kScaleUp, 8, 2 * mib), 60,
              1e-9);
  // nccl-tests: busbw = algbw * 2(n-1)/n, so t = 2 (n-1)/n * S / busbw.
  expect_rel(cost.time(CollectiveOp::kAllReduce, 2 * mib, in_domain(8)).time_s,
             2.0 * 7 / 8 * 2 * mib / (60 * kGB));
  // On a sample exactly: the sample, measured.
  CostSource src = CostSource::kAnalytical;
  EXPECT_DOUBLE_EQ(
      cost.achieved_bw_gbps(CollectiveOp::kAllReduce, LinkClass::kScaleUp, 8, 1 * mib, &src), 40);
  EXPECT_EQ(src, CostSource::kMeasured);
  // Beyond the table's edges: the analytical model (nominal 100 x efficiency), and it says so.
  EXPECT_DOUBLE_EQ(
      cost.achieved_bw_gbps(CollectiveOp::kAllReduce, LinkClass::kScaleUp, 8, 64 * mib, &src), 100);
  EXPECT_EQ(src, CostSource::kOutsideTable);
  EXPECT_DOUBLE_EQ(
      cost.achieved_bw_gbps(CollectiveOp::kAllReduce, LinkClass::kScaleUp, 8, 1024, &src), 100);
  EXPECT_EQ(src, CostSource::kOutsideTable);
  // The measured path has no latency term of its own; the analytical one keeps it.
  HwProfile slow = hw;
  slow.scale_up_latency_us = 10;
  TableUse use;
  const CollectiveCost with_latency(slow, &use);
  expect_rel(with_latency.time(CollectiveOp::kAllReduce, 2 * mib, in_domain(8)).time_s,
             2.0 * 7 / 8 * 2 * mib / (60 * kGB));
  EXPECT_GT(with_latency.time(CollectiveOp::kAllReduce, 64 * mib, in_domain(8)).time_s,
            2.0 * 7 / 8 * 64 * mib / (100 * kGB));
  EXPECT_EQ(use.n[TableUse::kCollective][static_cast<int>(CostSource::kMeasured)], 1);
  EXPECT_EQ(use.n[TableUse::kCollective][static_cast<int>(CostSource::kOutsideTable)], 1);
  EXPECT_NE(use.summary("x").find("1 outside its range"), std::string::npos);
  // Other ops and link classes keep nominal bandwidth times efficiency.
  EXPECT_DOUBLE_EQ(cost.achieved_bw_gbps(CollectiveOp::kAllGather, LinkClass::kScaleUp, 8, 2 * mib),
                   100);
  EXPECT_DOUBLE_EQ(
      cost.achieved_bw_gbps(CollectiveOp::kAllReduce, LinkClass::kScaleOut, 8, 2 * mib), 10);
}

// DeepEP: normal kernels pipeline the RDMA sends (once per destination node) with the NVLink
// forwarding inside the node, t = max(out / N, up / B) + a_out + a_up; inside one node NVLink
// alone carries the tokens; low-latency kernels send every copy over RDMA, t = out / N + a_out.
TEST(CollectiveCost, DeepEpPipelinesRdmaWithNvlinkForwarding) {
  HwProfile hw = round_profile();
  hw.scale_out_latency_us = 6;
  hw.scale_up_latency_us = 3;
  const CollectiveCost cost(hw);
  using K = CollectiveCost::DeepEpKernel;
  const double us = 1e-6;
  expect_rel(cost.deepep(K::kNormal, 0.1 * kS, kS, across(8, 8)).time_s,
             std::max(0.1 * kS / kNicBps + 6 * us, kS / kUpBps) + 3 * us);
  expect_rel(cost.deepep(K::kNormal, kS, kS, across(8, 8)).time_s, kS / kNicBps + 6 * us + 3 * us);
  expect_rel(cost.deepep(K::kNormal, 0, kS, in_domain(8)).time_s, kS / kUpBps + 3 * us);
  expect_rel(cost.deepep(K::kLowLatency, kS, 0, across(8, 8)).time_s, kS / kNicBps + 6 * us);
  EXPECT_EQ(cost.deepep(K::kNormal, kS, kS, in_domain(1)).time_s, 0);
}

}  // namespace
}  // namespace parallax
