#pragma once
/// Collective communication costs: the ONE function that prices a collective on a group laid
/// over the topology. The simulator and (later) the planner's bounds both call it.

#include "core/hw_profile.h"
#include "core/rank_map.h"
#include "simulator/cost/compute_cost.h"

namespace parallax {

struct CollectiveTime {
  double time_s = 0;
  double bus_bytes = 0;  ///< bytes each rank moves over its busiest link class
  bool crosses_domains = false;
};

class CollectiveCost {
 public:
  /// `use`, when given, counts where each cost came from.
  explicit CollectiveCost(const HwProfile& hw, TableUse* use = nullptr) : hw_(hw), use_(use) {}

  /// Time of `op` on a group of shape `g`. `bytes` follows the nccl-tests convention: the full
  /// buffer per rank (the all-reduce input, the all-gather output, the reduce-scatter input,
  /// the all-to-all send buffer, the point-to-point message).
  ///
  /// Inside one scale-up domain (n ranks, bandwidth B, latency a, and L = min(n-1, 2 ceil(log2 n))
  /// latency steps: a ring's, capped by a tree's for large groups):
  ///   all-reduce      t = 2 L a + 2 (n-1)/n * S / B
  ///   all-gather/RS   t = L a + (n-1)/n * S / B
  ///   all-to-all      t = (n-1)/max(1, log2 n) a + (n-1)/n * S / B  (pairwise exchanges in flight)
  /// Across domains (k members per domain, D domains, each GPU with its own NIC of bandwidth N):
  /// hierarchical (NCCL tree / NVLS-tree): reduce-scatter inside the domain, the collective on
  /// S/k across domains over the NICs, all-gather inside; latency of the inter-domain part is the
  /// smaller of a ring's (D-1) steps and a tree's 2 log2(D). All-to-all crosses the NICs with the
  /// (n-k)/n share of its data.
  CollectiveTime time(CollectiveOp op, double bytes, const GroupShape& g) const;

  /// An all-reduce as inference engines run it (vLLM's and TensorRT-LLM's custom all-reduce):
  /// inside one scale-up domain, besides NCCL's algorithms (time()), a one-shot exchange in
  /// which every rank reads each peer's buffer over the fabric and sums, with two barriers:
  ///   t = 2 a + (n-1) S / B,
  /// taken when it is faster (small messages: it pays no ring or tree latency). Across domains,
  /// time(kAllReduce).
  CollectiveTime engine_all_reduce(double bytes, const GroupShape& g) const;

  /// Bandwidth (GB/s) achieved by `op` within one link class: from the measured table (the
  /// nearest group size of that op and link class, interpolated in log(bytes) between the two
  /// sizes around `bytes`) when the table's sizes bracket `bytes`; else nominal times
  /// efficiency, and `src` says whether that is because the table stops short of this size
  /// (kOutsideTable) or has no such op (kAnalytical). The measured path's time has no separate
  /// latency term: a measured bus bandwidth already holds it.
  double achieved_bw_gbps(CollectiveOp op, LinkClass link, int group_size, double bytes,
                          CostSource* src = nullptr) const;

  /// DeepEP's expert-parallel dispatch or combine (deepseek-ai/DeepEP; docs/legacy.md for its
  /// V1 kernels, which Megatron-LM's flex dispatcher calls). Normal kernels send each token once
  /// per destination node over RDMA (`scale_out_bytes` per rank) and forward it over NVLink to
  /// the destination ranks inside that node (`scale_up_bytes` per rank), both pipelined:
  ///   t = max(scale_out_bytes / N, scale_up_bytes / B) + a_out + a_up,
  /// N and B the links' achieved all-to-all rates (achieved_bw_gbps: the measured table, else
  /// nominal times efficiency), a the links' latencies (one notify round). DeepEP's README
  /// measures its normal kernels on H800 at 153-158 GB/s of NVLink inside a node (of ~160) and
  /// 43-58 GB/s of RDMA across 2-8 nodes (of ~50, counting the tokens that stay in the node): the
  /// rates of the links, as the profile's efficiencies give them. Low-latency kernels (decode)
  /// send every copy straight over RDMA: t = scale_out_bytes / N + a_out, all copies counted in
  /// scale_out_bytes (the README's EP 64: 173 us for 128 tokens x 8 copies x 7168 fp8 at 43
  /// GB/s).
  enum class DeepEpKernel { kNormal, kLowLatency };
  CollectiveTime deepep(DeepEpKernel kernel, double scale_out_bytes, double scale_up_bytes,
                        const GroupShape& g) const;

  /// Fraction by which compute slows while a collective runs beside it: the SMs the
  /// communication kernels occupy (one thread block per channel), comm_sms / sm_count.
  double overlap_slowdown() const;

 private:
  double flat(CollectiveOp op, double bytes, int n, LinkClass link) const;
  const HwProfile& hw_;
  TableUse* use_ = nullptr;
};

}  // namespace parallax
