#include "core/rank_map.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "core/parallel_plan.h"

namespace parallax {
namespace {

ParallelPlan plan(int tp, int cp, int dp, int pp, int ep = 1, int etp = 1) {
  ParallelPlan p;
  p.tp = tp;
  p.cp = cp;
  p.dp = dp;
  p.pp = pp;
  p.ep = ep;
  p.etp = etp;
  return p;
}

TEST(RankMap, MegatronOrderRoundTrip) {
  // tp fastest, then cp, dp, pp: rank = tp + T (cp + C (dp + D pp)).
  const ParallelPlan p = plan(2, 2, 2, 2);
  const RankMap map(p, 8);
  ASSERT_EQ(map.world_size(), 16);
  for (int r = 0; r < map.world_size(); ++r) {
    const RankCoords c = map.coords(r);
    EXPECT_EQ(c.tp, r % 2) << r;
    EXPECT_EQ(c.cp, (r / 2) % 2) << r;
    EXPECT_EQ(c.dp, (r / 4) % 2) << r;
    EXPECT_EQ(c.pp, r / 8) << r;
    EXPECT_EQ(map.rank_of(c.tp, c.cp, c.dp, c.pp), r) << r;
    EXPECT_EQ(c.tp + 2 * (c.cp + 2 * (c.dp + 2 * c.pp)), r) << r;
  }
  // A worked case: rank 13 = 1 + 2 * (0 + 2 * (1 + 2 * 1)).
  const RankCoords c = map.coords(13);
  EXPECT_EQ(c.tp, 1);
  EXPECT_EQ(c.cp, 0);
  EXPECT_EQ(c.dp, 1);
  EXPECT_EQ(c.pp, 1);
}

/// Ranks that agree with `rank` on every coordinate that `same` compares, in ascending order.
std::vector<int> brute(const RankMap& map, int rank,
                       const std::function<bool(const RankCoords&, const RankCoords&)>& same) {
  std::vector<int> out;
  const RankCoords me = map.coords(rank);
  for (int q = 0; q < map.world_size(); ++q) {
    if (same(me, map.coords(q))) out.push_back(q);
  }
  return out;
}

TEST(RankMap, GroupsHoldTheRanksThatDifferInOneCoordinate) {
  const RankMap map(plan(2, 2, 2, 2), 8);
  using C = const RankCoords&;
  const struct {
    GroupKind kind;
    const char* name;
    std::function<bool(C, C)> same;  // the coordinates a group member shares with the rank
  } kinds[] = {
      {GroupKind::kTp, "tp", [](C a, C b) { return a.cp == b.cp && a.dp == b.dp && a.pp == b.pp; }},
      {GroupKind::kCp, "cp", [](C a, C b) { return a.tp == b.tp && a.dp == b.dp && a.pp == b.pp; }},
      {GroupKind::kDp, "dp", [](C a, C b) { return a.tp == b.tp && a.cp == b.cp && a.pp == b.pp; }},
      {GroupKind::kPp, "pp", [](C a, C b) { return a.tp == b.tp && a.cp == b.cp && a.dp == b.dp; }},
      {GroupKind::kDpCp, "dp-cp", [](C a, C b) { return a.tp == b.tp && a.pp == b.pp; }},
  };
  for (const auto& k : kinds) {
    for (int r = 0; r < map.world_size(); ++r) {
      const std::vector<int> g = map.group(k.kind, r);
      EXPECT_EQ(g, brute(map, r, k.same)) << k.name << " group of rank " << r;
      EXPECT_EQ(static_cast<int>(g.size()), map.group_size(k.kind)) << k.name;
    }
  }
  // Worked cases for rank 5 = (tp 1, cp 0, dp 1, pp 0).
  EXPECT_EQ(map.group(GroupKind::kTp, 5), (std::vector<int>{4, 5}));
  EXPECT_EQ(map.group(GroupKind::kCp, 5), (std::vector<int>{5, 7}));
  EXPECT_EQ(map.group(GroupKind::kDp, 5), (std::vector<int>{1, 5}));
  EXPECT_EQ(map.group(GroupKind::kPp, 5), (std::vector<int>{5, 13}));
  EXPECT_EQ(map.group(GroupKind::kDpCp, 5), (std::vector<int>{1, 3, 5, 7}));
}

TEST(RankMap, ExpertGroupsFoldOverOneStage) {
  // tp 2, dp 4, pp 2; ep 4, etp 2 over the 8 ranks of a stage: etp fastest, then ep, then edp.
  const ParallelPlan p = plan(2, 1, 4, 2, /*ep=*/4, /*etp=*/2);
  const RankMap map(p, 8);
  EXPECT_EQ(map.group_size(GroupKind::kExpertDp), 2 * 4 / (4 * 2));
  using C = const RankCoords&;
  for (int r = 0; r < map.world_size(); ++r) {
    const RankCoords c = map.coords(r);
    const int local = r % 8;
    EXPECT_EQ(c.etp, local % 2) << r;
    EXPECT_EQ(c.ep, (local / 2) % 4) << r;
    EXPECT_EQ(c.edp, local / 8) << r;
    EXPECT_EQ(
        map.group(GroupKind::kEp, r),
        brute(map, r, [](C a, C b) { return a.pp == b.pp && a.etp == b.etp && a.edp == b.edp; }))
        << r;
    EXPECT_EQ(
        map.group(GroupKind::kEtp, r),
        brute(map, r, [](C a, C b) { return a.pp == b.pp && a.ep == b.ep && a.edp == b.edp; }))
        << r;
  }
  EXPECT_EQ(map.group(GroupKind::kEp, 11), (std::vector<int>{9, 11, 13, 15}));
}

TEST(RankMap, GroupShapeOnScaleUpDomains) {
  // tp 8 on 8-GPU domains: the whole group is one domain.
  const GroupShape tp8 = RankMap(plan(8, 1, 4, 1), 8).shape(GroupKind::kTp);
  EXPECT_EQ(tp8.size, 8);
  EXPECT_EQ(tp8.per_domain, 8);
  EXPECT_EQ(tp8.domains, 1);
  EXPECT_FALSE(tp8.crosses_domains());

  // dp of tp 8 x dp 4: stride 8, members 0, 8, 16, 24, one in each of 4 domains.
  const GroupShape dp4 = RankMap(plan(8, 1, 4, 1), 8).shape(GroupKind::kDp);
  EXPECT_EQ(dp4.size, 4);
  EXPECT_EQ(dp4.per_domain, 1);
  EXPECT_EQ(dp4.domains, 4);
  EXPECT_TRUE(dp4.crosses_domains());

  // dp of tp 2 x dp 8: stride 2, members 0, 2, ..., 14: ranks 0-7 form domain 0 and 8-15
  // domain 1, so 4 members in each of 2 domains. Rank 1's group (1, 3, ..., 15) sits the same.
  const RankMap tp2dp8(plan(2, 1, 8, 1), 8);
  EXPECT_EQ(tp2dp8.group(GroupKind::kDp, 0), (std::vector<int>{0, 2, 4, 6, 8, 10, 12, 14}));
  for (int rank : {0, 1}) {
    const GroupShape g = tp2dp8.shape(GroupKind::kDp, rank);
    EXPECT_EQ(g.size, 8);
    EXPECT_EQ(g.per_domain, 4);
    EXPECT_EQ(g.domains, 2);
  }

  // pp of tp 2 x dp 4 x pp 2 on 8-GPU domains: each stage fills one domain.
  const GroupShape pp2 = RankMap(plan(2, 1, 4, 2), 8).shape(GroupKind::kPp);
  EXPECT_EQ(pp2.per_domain, 1);
  EXPECT_EQ(pp2.domains, 2);
}

// A ring or pipeline hop crosses domains whenever its group does: the slowest hop sets the pace.
TEST(RankMap, NeighbourPairCrossesWhenTheGroupDoes) {
  ParallelPlan p;
  p.tp = 4;
  p.cp = 4;
  const RankMap map(p, 8);
  const GroupShape cp = map.shape(GroupKind::kCp);  // ranks 0, 4, 8, 12: two per domain
  EXPECT_EQ(cp.domains, 2);
  EXPECT_EQ(cp.per_domain, 2);
  const GroupShape hop = neighbour_pair(cp);
  EXPECT_EQ(hop.size, 2);
  EXPECT_TRUE(hop.crosses_domains());
  EXPECT_FALSE(neighbour_pair(map.shape(GroupKind::kTp)).crosses_domains());
}

// Domains need not hold equal shares of a group: per_domain is the most crowded one.
TEST(RankMap, PerDomainIsTheMostCrowdedDomain) {
  ParallelPlan p;
  p.dp = 12;
  const RankMap map(p, 8);  // ranks 0..11: 8 in domain 0, 4 in domain 1
  const GroupShape g = map.shape(GroupKind::kDp);
  EXPECT_EQ(g.domains, 2);
  EXPECT_EQ(g.per_domain, 8);
}

}  // namespace
}  // namespace parallax
