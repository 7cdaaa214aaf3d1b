#pragma once
/// The ranks a training job runs on and the collectives it needs (sums of gradients and losses),
/// behind one small interface: one process alone, or MPI_COMM_WORLD under mpirun.

#include <memory>
#include <span>
#include <vector>

#include "core/rank_map.h"
#include "core/result.h"

namespace parallax::exec {

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// The ranks of the job on this rank's host (MPI's shared-memory split of the world); 1 for a
  /// single process and for sub-groups.
  virtual int local_size() const { return 1; }
  /// Sums `data` element-wise over every rank, in place (every rank calls it alike).
  virtual Diagnostics all_reduce_sum(std::span<float> data) = 0;
  virtual Diagnostics all_reduce_sum(std::span<double> data) = 0;
  /// Sums `data` (size() equal chunks) over the ranks and leaves chunk rank() of the sum in
  /// `out` (data.size() / size() elements).
  virtual Diagnostics reduce_scatter_sum(std::span<const float> data, std::span<float> out) = 0;
  /// Every rank's `chunk`, in rank order, into `out` (size() * chunk.size() elements).
  virtual Diagnostics all_gather(std::span<const float> chunk, std::span<float> out) = 0;
  /// Unequal blocks: rank r contributes counts[r] values (this rank's `mine`), and every rank
  /// receives all of them in rank order in `out` (the sum of the counts). ZeRO-3 gathers a unit
  /// of parameters this way from the slices that overlap it.
  virtual Diagnostics all_gather(std::span<const float> mine, std::span<const int64_t> counts,
                                 std::span<float> out) = 0;
  /// Sums `data` over the ranks and leaves rank r's block of it (counts[r] values after the
  /// earlier ranks' blocks) in `out` on rank r: a unit's gradients to the slices that own them.
  virtual Diagnostics reduce_scatter_sum(std::span<const float> data,
                                         std::span<const int64_t> counts, std::span<float> out) = 0;
  /// The largest `v` over the ranks.
  virtual double max(double v) = 0;
  virtual void barrier() = 0;
  /// Sends send_counts[r] values of `send` (in rank order) to each rank r and receives
  /// recv_counts[r] values from each into `recv` (in rank order): the expert dispatch.
  virtual Diagnostics all_to_all(std::span<const float> send, std::span<const int64_t> send_counts,
                                 std::span<float> recv, std::span<const int64_t> recv_counts) = 0;
  /// The same with `per_rank` int64 values to and from every rank (counts ahead of a dispatch).
  virtual Diagnostics all_to_all(std::span<const int64_t> send, std::span<int64_t> recv) = 0;
  /// Sends a copy of `data` to rank `dest` of this group and returns without waiting for it to
  /// be received (the pipeline's activations and gradients).
  virtual Diagnostics send(std::span<const float> data, int dest, int tag) = 0;
  /// Receives exactly data.size() values sent by rank `src` with `tag`; waits for them.
  virtual Diagnostics recv(std::span<float> data, int src, int tag) = 0;
  /// Waits until every send() so far has been delivered.
  virtual Diagnostics wait_sends() = 0;
  /// The sub-group of the ranks that pass the same `color` (every rank calls it alike), ranked
  /// by `key`: the tensor- or data-parallel group of a layout.
  virtual Result<std::unique_ptr<ProcessGroup>> split(int color, int key) = 0;
};

/// A rank's coordinates in a tp x cp x dp x pp layout (core's RankMap: tp fastest) and its
/// groups: tensor-, context- and pipeline-parallel, and the data group (dp x cp), which reduces
/// gradients and shards a distributed optimizer, as Megatron's does.
struct RankGroups {
  RankCoords me;
  int dp = 1;
  std::unique_ptr<ProcessGroup> tp, cp, data, pp;
};

/// Splits `world` (tp * cp * dp * pp ranks; tp * cp * pp must divide its size).
Result<RankGroups> split_groups(ProcessGroup& world, int tp, int cp, int pp);

/// One process, no communication.
std::unique_ptr<ProcessGroup> make_local_group();
/// Every rank of an MPI job (initialises MPI when needed, finalises it at exit); fails when
/// built without MPI. Every collective, receive and wait for sends (of this group or of any
/// group split from it) is non-blocking and polled against a deadline: one that has not
/// completed after `timeout_s` seconds is reported on stderr, naming the ranks of the job that
/// do not answer (stopped, even by a signal in the middle of the collective, or busy outside
/// MPI) and the members that have not arrived, and the job is aborted (exit code 3) within a
/// few seconds more instead of hanging.
Result<std::unique_ptr<ProcessGroup>> make_mpi_world(double timeout_s = 300);

}  // namespace parallax::exec
