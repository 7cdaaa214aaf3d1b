#include "core/rank_map.h"

#include <algorithm>

namespace parallax {

RankMap::RankMap(const ParallelPlan& plan, int scale_up_domain)
    : plan_(plan), domain_(std::max(1, scale_up_domain)), world_(plan.gpus()) {}

int RankMap::rank_of(int tp, int cp, int dp, int pp) const {
  return tp + plan_.tp * (cp + plan_.cp * (dp + plan_.dp * pp));
}

RankCoords RankMap::coords(int rank) const {
  RankCoords c;
  int r = rank;
  c.tp = r % plan_.tp;
  r /= plan_.tp;
  c.cp = r % plan_.cp;
  r /= plan_.cp;
  c.dp = r % plan_.dp;
  r /= plan_.dp;
  c.pp = r;
  const int local = rank % (plan_.tp * plan_.cp * plan_.dp);  // index within the stage
  c.etp = local % plan_.etp;
  c.ep = (local / plan_.etp) % plan_.ep;
  c.edp = local / (plan_.etp * plan_.ep);
  return c;
}

int RankMap::group_size(GroupKind kind) const {
  switch (kind) {
    case GroupKind::kTp:
      return plan_.tp;
    case GroupKind::kCp:
      return plan_.cp;
    case GroupKind::kDp:
      return plan_.dp;
    case GroupKind::kPp:
      return plan_.pp;
    case GroupKind::kEtp:
      return plan_.etp;
    case GroupKind::kEp:
      return plan_.ep;
    case GroupKind::kExpertDp:
      return plan_.tp * plan_.cp * plan_.dp / (plan_.ep * plan_.etp);
    case GroupKind::kDpCp:
      return plan_.dp * plan_.cp;
    case GroupKind::kEtpEp:
      return plan_.etp * plan_.ep;
  }
  return 1;
}

int RankMap::stride(GroupKind kind) const {
  switch (kind) {
    case GroupKind::kTp:
      return 1;
    case GroupKind::kCp:
      return plan_.tp;
    case GroupKind::kDp:
      return plan_.tp * plan_.cp;
    case GroupKind::kPp:
      return plan_.tp * plan_.cp * plan_.dp;
    case GroupKind::kEtp:
      return 1;
    case GroupKind::kEp:
      return plan_.etp;
    case GroupKind::kExpertDp:
      return plan_.etp * plan_.ep;
    case GroupKind::kDpCp:
      return plan_.tp;
    case GroupKind::kEtpEp:
      return 1;
  }
  return 1;
}

std::vector<int> RankMap::group(GroupKind kind, int rank) const {
  const int n = group_size(kind), s = stride(kind);
  // The group is {base + i*s}; base is rank with its coordinate along this axis set to zero.
  const int block = n * s;
  const int base = (rank / block) * block + rank % s;
  std::vector<int> members(n);
  for (int i = 0; i < n; ++i) members[i] = base + i * s;
  return members;
}

GroupShape neighbour_pair(const GroupShape& g) {
  GroupShape p;
  p.size = 2;
  p.domains = g.crosses_domains() ? 2 : 1;
  p.per_domain = p.size / p.domains;
  return p;
}

GroupShape RankMap::shape(GroupKind kind, int rank) const {
  const int n = group_size(kind), s = stride(kind);
  const int block = n * s;
  const int base = (rank / block) * block + rank % s;
  GroupShape g;
  g.size = n;
  // Regular cases in closed form: a stride of a whole domain or more puts every member in its
  // own domain; a stride dividing the domain fills aligned domains evenly.
  if (s >= domain_) {
    g.domains = n;
    g.per_domain = 1;
    return g;
  }
  if (domain_ % s == 0 && base % domain_ < s) {
    const int per = domain_ / s;
    g.per_domain = std::min(n, per);
    g.domains = (n + per - 1) / per;
    return g;
  }
  // Otherwise count: members base + i*s rise with i, so each domain's are consecutive i.
  g.domains = g.per_domain = 0;
  int run = 0, current = -1;
  for (int i = 0; i < n; ++i) {
    const int domain = (base + i * s) / domain_;
    if (domain != current) {
      ++g.domains;
      current = domain;
      run = 0;
    }
    // The most crowded domain bounds the intra-domain phase (domains need not hold equal shares).
    g.per_domain = std::max(g.per_domain, ++run);
  }
  return g;
}

}  // namespace parallax
