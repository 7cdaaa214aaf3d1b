// ComputeCost::grouped_gemm: the expert GEMMs of an MoE layer (see compute_cost.h).

#include <algorithm>

#include "core/units.h"
#include "simulator/cost/compute_cost.h"

namespace parallax {
namespace {

/// Transformer Engine's compute streams for grouped GEMMs (transformer_engine/common/util/
/// multi_stream.cpp, get_num_compute_streams: `static constexpr int num_compute_streams = 4`).
constexpr int64_t kTeGroupedGemmStreams = 4;

}  // namespace

KernelTime ComputeCost::grouped_gemm(const GemmShape& s, Precision p) const {
  const int64_t groups = std::max<int64_t>(1, s.batch);
  const KernelTime one = gemm(GemmShape{s.m, s.n, s.k, 1}, p);
  KernelTime t = one;
  t.flops = one.flops * static_cast<double>(groups);
  t.bytes = one.bytes * static_cast<double>(groups);
  if (groups == 1) return t;
  const double streams_s =
      static_cast<double>(ceil_div(groups, kTeGroupedGemmStreams)) * one.time_s;
  const int64_t tile = std::max(1, std::min(hw_.gemm_tile_m, hw_.gemm_tile_n));
  const KernelTime all = gemm(GemmShape{groups * ceil_div(s.m, tile) * tile, s.n, s.k, 1}, p);
  t.time_s = std::max(streams_s, all.time_s);
  return t;
}

}  // namespace parallax
