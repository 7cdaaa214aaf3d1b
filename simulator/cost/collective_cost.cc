#include "simulator/cost/collective_cost.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/units.h"

namespace parallax {

double CollectiveCost::achieved_bw_gbps(CollectiveOp op, LinkClass link, int group_size,
                                        double bytes, CostSource* src) const {
  // Measured: interpolate bus bandwidth in log(size) between the two nearest samples of the same
  // op, link class and group size (nearest group size if no exact one).
  const CollectiveSample* lo = nullptr;
  const CollectiveSample* hi = nullptr;
  int best_group = -1;
  for (const auto& s : hw_.collective_samples) {
    if (s.op != op || s.link != link) continue;
    if (best_group < 0 || std::abs(s.group_size - group_size) < std::abs(best_group - group_size))
      best_group = s.group_size;
  }
  for (const auto& s : hw_.collective_samples) {
    if (s.op != op || s.link != link || s.group_size != best_group) continue;
    if (s.bytes <= bytes && (!lo || s.bytes > lo->bytes)) lo = &s;
    if (s.bytes >= bytes && (!hi || s.bytes < hi->bytes)) hi = &s;
  }
  CostSource source = CostSource::kAnalytical;
  double bw = link == LinkClass::kScaleUp ? hw_.scale_up_bw_gbps * hw_.scale_up_efficiency
                                          : hw_.scale_out_bw_gbps * hw_.scale_out_efficiency;
  if (lo && hi) {
    source = CostSource::kMeasured;
    bw = interpolate_log(bytes, lo->bytes, lo->busbw_gbps, hi->bytes, hi->busbw_gbps);
  } else if (lo || hi) {
    source = CostSource::kOutsideTable;  // the table has this op, but not this size
  }
  if (src) *src = source;
  return bw;
}

double CollectiveCost::flat(CollectiveOp op, double bytes, int n, LinkClass link) const {
  if (n <= 1 || bytes <= 0) return 0;
  CostSource source = CostSource::kAnalytical;
  const double bw = achieved_bw_gbps(op, link, n, bytes, &source) * kGB;
  if (use_) use_->add(TableUse::kCollective, source);
  // A measured bus bandwidth already holds the latency (nccl-tests: busbw = factor * S / t).
  const double lat =
      source == CostSource::kMeasured
          ? 0.0
          : (link == LinkClass::kScaleUp ? hw_.scale_up_latency_us : hw_.scale_out_latency_us) *
                kUs;
  const double frac = static_cast<double>(n - 1) / n;
  // Ring latency, capped by a tree's for large groups.
  const double steps = std::min<double>(n - 1, 2.0 * std::ceil(std::log2(static_cast<double>(n))));
  switch (op) {
    case CollectiveOp::kAllReduce:
      return 2 * steps * lat + 2 * frac * bytes / bw;
    case CollectiveOp::kAllGather:
    case CollectiveOp::kReduceScatter:
      return steps * lat + frac * bytes / bw;
    case CollectiveOp::kAllToAll:
      return (n - 1) * lat / std::max(1.0, std::log2(n)) + frac * bytes / bw;
    case CollectiveOp::kSendRecv:
      return lat + bytes / bw;
  }
  return 0;
}

CollectiveTime CollectiveCost::engine_all_reduce(double bytes, const GroupShape& g) const {
  CollectiveTime t = time(CollectiveOp::kAllReduce, bytes, g);
  if (g.size <= 1 || g.crosses_domains() || bytes <= 0) return t;
  const double bw = hw_.scale_up_bw_gbps * hw_.scale_up_efficiency * kGB;
  const double one_shot =
      2 * hw_.scale_up_latency_us * kUs + static_cast<double>(g.size - 1) * bytes / bw;
  if (bw > 0 && one_shot < t.time_s) {
    t.time_s = one_shot;
    t.bus_bytes = static_cast<double>(g.size - 1) * bytes;
  }
  return t;
}

CollectiveTime CollectiveCost::deepep(DeepEpKernel kernel, double scale_out_bytes,
                                      double scale_up_bytes, const GroupShape& g) const {
  CollectiveTime t;
  t.crosses_domains = g.crosses_domains();
  if (g.size <= 1) return t;
  const double total = scale_out_bytes + scale_up_bytes;
  const double nic =
      achieved_bw_gbps(CollectiveOp::kAllToAll, LinkClass::kScaleOut, g.size, total) * kGB;
  const double nvl =
      achieved_bw_gbps(CollectiveOp::kAllToAll, LinkClass::kScaleUp, g.per_domain, total) * kGB;
  const double a_out = hw_.scale_out_latency_us * kUs, a_up = hw_.scale_up_latency_us * kUs;
  if (kernel == DeepEpKernel::kLowLatency) {
    t.time_s = scale_out_bytes / nic + a_out;
    t.bus_bytes = scale_out_bytes;
    return t;
  }
  // Inside one domain only NVLink carries the tokens.
  const double out_s = g.crosses_domains() ? scale_out_bytes / nic + a_out : 0.0;
  t.time_s = std::max(out_s, scale_up_bytes / nvl) + a_up;
  t.bus_bytes = g.crosses_domains() ? scale_out_bytes : scale_up_bytes;
  return t;
}

double CollectiveCost::overlap_slowdown() const {
  return hw_.sm_count > 0 ? std::min(1.0, static_cast<double>(hw_.comm_sms) / hw_.sm_count) : 0.0;
}

CollectiveTime CollectiveCost::time(CollectiveOp op, double bytes, const GroupShape& g) const {
  CollectiveTime t;
  t.crosses_domains = g.crosses_domains();
  if (g.size <= 1 || bytes <= 0) return t;
  if (!g.crosses_domains()) {
    t.time_s = flat(op, bytes, g.size, LinkClass::kScaleUp);
    t.bus_bytes = bytes;
    return t;
  }
  const int k = g.per_domain, d = g.domains;
  switch (op) {
    case CollectiveOp::kAllReduce:
      t.time_s = flat(CollectiveOp::kReduceScatter, bytes, k, LinkClass::kScaleUp) +
                 flat(CollectiveOp::kAllReduce, bytes / k, d, LinkClass::kScaleOut) +
                 flat(CollectiveOp::kAllGather, bytes, k, LinkClass::kScaleUp);
      t.bus_bytes = 2.0 * (d - 1) / d * bytes / k;
      break;
    case CollectiveOp::kAllGather:
    case CollectiveOp::kReduceScatter:
      // Across domains on the per-rail share, then inside the domain on the full buffer.
      t.time_s =
          flat(op, bytes / k, d, LinkClass::kScaleOut) + flat(op, bytes, k, LinkClass::kScaleUp);
      t.bus_bytes = static_cast<double>(d - 1) / d * bytes / k;
      break;
    case CollectiveOp::kAllToAll: {
      const double n = g.size;
      const double out_bytes = bytes * (n - k) / n;
      const double in_bytes = bytes * (k - 1) / n;
      const double nic = achieved_bw_gbps(op, LinkClass::kScaleOut, g.size, bytes) * kGB;
      const double nvl = achieved_bw_gbps(op, LinkClass::kScaleUp, k, bytes) * kGB;
      t.time_s = std::max(out_bytes / nic, in_bytes / nvl) +
                 (d - 1) * hw_.scale_out_latency_us * kUs / std::max(1.0, std::log2(d));
      t.bus_bytes = out_bytes;
      break;
    }
    case CollectiveOp::kSendRecv:
      t.time_s = flat(op, bytes, 2, LinkClass::kScaleOut);
      t.bus_bytes = bytes;
      break;
  }
  return t;
}

}  // namespace parallax
