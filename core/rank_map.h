#pragma once
/// RankMap: the one place that maps a global rank to its (dp, pp, cp, tp, ep) coordinates and its
/// process groups, and tells how a group sits on the topology (which members share a scale-up
/// domain). Megatron-LM's order: tp fastest, then cp, then dp, then pp; expert groups fold over
/// the dp x cp x tp ranks of one stage with etp fastest, then ep.

#include <vector>

#include "core/parallel_plan.h"

namespace parallax {

/// kEtpEp: the expert-tensor and expert-parallel ranks together (Megatron's tp_ep_group, over
/// which the allgather MoE dispatcher gathers tokens).
enum class GroupKind { kTp, kCp, kDp, kPp, kEp, kEtp, kExpertDp, kDpCp, kEtpEp };

struct RankCoords {
  int tp = 0, cp = 0, dp = 0, pp = 0;
  int etp = 0, ep = 0, edp = 0;  ///< expert tensor, expert, and expert-data coordinates
};

/// Where a group's members sit: `size` members across `domains` scale-up domains, at most
/// `per_domain` of them in one domain (size == per_domain * domains when spread evenly).
struct GroupShape {
  int size = 1;
  int per_domain = 1;
  int domains = 1;
  bool crosses_domains() const { return domains > 1; }
};

/// The link a ring or pipeline of this group moves data over, as a two-member group: the
/// exchanges of one step run together, so the slowest hop sets the pace, and it crosses
/// domains whenever the group does.
GroupShape neighbour_pair(const GroupShape& g);

class RankMap {
 public:
  RankMap(const ParallelPlan& plan, int scale_up_domain);

  int world_size() const { return world_; }
  RankCoords coords(int rank) const;
  int rank_of(int tp, int cp, int dp, int pp) const;
  /// Members of `rank`'s group of the given kind, in ascending rank order.
  std::vector<int> group(GroupKind kind, int rank) const;
  /// Topology of the group of `rank` (all groups of a kind have the same shape in this layout).
  GroupShape shape(GroupKind kind, int rank = 0) const;
  int group_size(GroupKind kind) const;

 private:
  int stride(GroupKind kind) const;
  ParallelPlan plan_;
  int domain_;
  int world_;
};

}  // namespace parallax
