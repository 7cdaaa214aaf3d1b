#pragma once
/// What a calibration backend measures. A ComputeBackend times kernels on one device (a CPU core
/// with Eigen, a GPU with cuBLASLt and our kernels); a Communicator times collectives across the
/// ranks of a job (MPI on CPUs, NCCL on GPUs). The suite (suite.h) drives them over shape and
/// size grids; fit.h turns the results into a hardware profile.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "calibrate/measurement.h"
#include "core/hw_profile.h"
#include "core/result.h"

namespace parallax::calibrate {

/// The memory-bound kernels of a transformer layer, over a rows x cols activation:
///   kCopy     y = x                       (read 1, write 1)
///   kTriad    a = b + s * c               (read 2, write 1; STREAM triad)
///   kRmsNorm  y = x / rms(x) * w          (read 1, write 1, per row)
///   kSwiglu   y = silu(g) * u             (read 2, write 1; g and u are rows x cols each)
///   kSoftmax  y = softmax(x) per row      (read 1, write 1)
enum class MemoryKernel { kCopy, kTriad, kRmsNorm, kSwiglu, kSoftmax };
const char* to_string(MemoryKernel k);
/// The kernel `to_string` names `s`, if any.
std::optional<MemoryKernel> parse_memory_kernel(const std::string& s);
/// Bytes the kernel moves for a rows x cols input of `element_bytes` elements (the counts above).
double memory_kernel_bytes(MemoryKernel k, int64_t rows, int64_t cols, int element_bytes);

class ComputeBackend {
 public:
  virtual ~ComputeBackend() = default;
  virtual std::string name() const = 0;    ///< "cpu-eigen", "cuda"
  virtual std::string device() const = 0;  ///< the part, as the runtime names it
  /// Library and driver versions the numbers were measured under ("Eigen 3.4.0, GCC 12.2").
  virtual std::string runtime() const { return {}; }
  virtual double memory_gib() const = 0;  ///< memory of one device (or one rank's share)
  /// Element size the memory-bound kernels and attention use (4 on CPU fp32, 2 on GPU bf16).
  virtual int activation_bytes() const = 0;
  /// Precisions it can run GEMMs in.
  virtual std::vector<Precision> gemm_precisions() const = 0;
  /// One (m x k) x (k x n) GEMM.
  virtual Result<Stats> gemm(int64_t m, int64_t n, int64_t k, Precision p,
                             const TimingPolicy& policy) = 0;
  virtual Result<Stats> memory_kernel(MemoryKernel kernel, int64_t rows, int64_t cols,
                                      const TimingPolicy& policy) = 0;
  /// Whether attention() runs the kind of kernel training runs (true for the CPU's, which is
  /// what a CPU executor runs). The CUDA backend's own kernel uses CUDA cores, not tensor cores:
  /// its numbers are reported but do not go into a profile.
  virtual bool attention_is_representative() const { return true; }
  /// Whether the device's clock falls under sustained load (a GPU held at its power cap, which
  /// training keeps it at): the suite then settles it with a run of large GEMMs before the
  /// compute tables and warms each benchmark up for a while, so that the tables hold the rate
  /// training sustains rather than a burst at the boost clock.
  virtual bool power_capped() const { return false; }
  /// Processors of this host that its ranks' computations run on (the CPU's cores); 0 when each
  /// rank has a device of its own (a GPU). Ranks beyond it time-share the processors.
  virtual int host_processors() const { return 0; }
  /// Causal attention over `batch_heads` heads of `seq` tokens of `head_dim`, forward or
  /// backward (no seq x seq matrix kept).
  virtual Result<Stats> attention(int64_t batch_heads, int64_t seq, int64_t head_dim, bool backward,
                                  const TimingPolicy& policy) = 0;
};

/// Which ranks form one group of a collective: `size` ranks `stride` apart. Rank r belongs to
/// the group of block r / (size * stride) and lane r % stride; its index in the group is
/// (r % (size * stride)) / stride. {n, 1} with n = the world is every rank; {g, 1} consecutive
/// groups (inside a node when g divides the ranks per node); {nodes, ranks per node} one rank of
/// each node per group. All groups run at once, as the TP or DP groups of a job do.
struct Grouping {
  int size = 0;
  int stride = 1;
};
/// The key that puts ranks of one group together (an MPI_Comm_split color).
inline int group_color(int rank, Grouping g) {
  const int block = g.size * g.stride;
  return (rank / block) * g.stride + rank % g.stride;
}
/// This rank's index within its group.
inline int group_rank(int rank, Grouping g) { return (rank % (g.size * g.stride)) / g.stride; }
/// Whether `g` tiles `world` ranks: size >= 2, stride >= 1, size * stride divides the world.
inline bool valid_grouping(Grouping g, int world) {
  return g.size >= 2 && g.stride >= 1 && world % (g.size * g.stride) == 0;
}

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual std::string name() const = 0;  ///< "mpi", "nccl", "single"
  /// Library version ("Open MPI v4.1.4", "NCCL 2.28.3"); empty when none.
  virtual std::string runtime() const { return {}; }
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// Ranks that share this rank's node (its scale-up domain for the fit). Ranks are assumed
  /// placed by node in blocks (mpirun's default --map-by core/slot).
  virtual int local_size() const = 0;
  /// One collective in every group of `group` at once (all ranks call it with the same
  /// arguments). `bytes` is the nccl-tests size within a group: the buffer of all-reduce, the
  /// gathered output of all-gather, the input of reduce-scatter, the whole send buffer of
  /// all-to-all, one message of send/recv (pairs of group ranks 2i <-> 2i+1, both directions at
  /// once). The returned stats are the slowest rank's over all groups, so every rank agrees.
  /// Fails (on every rank) when `group` does not tile the ranks.
  virtual Result<Stats> collective(CollectiveOp op, double bytes, const TimingPolicy& policy,
                                   Grouping group) = 0;
  /// The collective over every rank.
  Result<Stats> collective(CollectiveOp op, double bytes, const TimingPolicy& policy) {
    return collective(op, bytes, policy, Grouping{size(), 1});
  }
  /// The largest of `v` over all ranks (every rank gets it).
  virtual double max_over_ranks(double v) = 0;
};

/// Eigen on one CPU core (fp32, and bf16 through Eigen's bfloat16).
std::unique_ptr<ComputeBackend> make_cpu_backend();
/// A communicator of one rank (no collectives to time).
std::unique_ptr<Communicator> make_single_communicator();
/// MPI_COMM_WORLD; fails when built without MPI. Initialises MPI if needed.
Result<std::unique_ptr<Communicator>> make_mpi_communicator(int* argc, char*** argv);
/// cuBLASLt / kernels on GPU `device`; fails when built without CUDA or when no GPU is present.
Result<std::unique_ptr<ComputeBackend>> make_cuda_backend(int device);
/// NCCL over one process per GPU, bootstrapped through MPI when launched with mpirun, else over
/// every visible GPU of this process; fails without CUDA/NCCL or GPUs.
Result<std::unique_ptr<Communicator>> make_nccl_communicator(int* argc, char*** argv);

}  // namespace parallax::calibrate
