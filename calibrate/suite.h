#pragma once
/// The calibration suite: which shapes and sizes each table measures (the grids), running them
/// on a backend and a communicator, and the raw results with their spread and what was left
/// out and why. fit.h turns a CalibrationData into a hardware profile.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "calibrate/backend.h"
#include "calibrate/measurement.h"
#include "core/hw_profile.h"
#include "core/json_io.h"

namespace parallax::calibrate {

/// The tables a run measures.
enum class Table { kGemm, kMemory, kAttention, kCollectives };
const char* to_string(Table t);

/// What the grids are sized for: a CPU core (Eigen, fp32 math) or a GPU.
enum class GridKind { kCpu, kGpu };

struct GemmShape3 {
  int64_t m = 0, n = 0, k = 0;
};
struct MemoryShape {
  MemoryKernel kernel = MemoryKernel::kCopy;
  int64_t rows = 0, cols = 0;
};
struct AttentionShape {
  int64_t batch_heads = 0, seq = 0, head_dim = 0;
  bool backward = false;
};

/// Every shape and size one run measures. Sizes grow monotonically within each series.
struct Grid {
  std::vector<GemmShape3> gemm;
  std::vector<MemoryShape> memory;
  std::vector<AttentionShape> attention;
  std::vector<CollectiveOp> collective_ops;
  std::vector<double> collective_bytes;
};

/// The grid for a device kind; `quick` is the sparse one behind `calibrate --quick`.
/// GEMM: the token and feature sizes transformer layers lower to, m, n, k on a log2 grid
/// (a factor 2 apart in the full grid, 4 in the quick one, so that every shape inside the grid
/// has a sample within the simulator's matching distance), capped in FLOPs so one repetition
/// stays short on the device. Memory: the five kernels over activations of `cols` = 4096 from
/// 16 KiB up to the largest size the device kind streams. Attention: causal, head sizes 32 (CPU
/// only), 64 and 128, sequence lengths doubling from 64 (CPU) or 512 (GPU). Collectives: message
/// sizes from 16 B up, a factor 4 apart (16 in the quick grid).
Grid default_grid(GridKind kind, bool quick);

/// Shapes of a grid that fit `memory_gib` of device memory (less a quarter for the runtime).
Grid fit_to_memory(Grid g, double memory_gib, int activation_bytes);

/// A sample of a profile to re-measure for `calibrate --check`: up to `per_table` entries of
/// each measured table, spread evenly over it.
Grid check_grid(const HwProfile& profile, int per_table, int activation_bytes);

struct GemmPoint {
  GemmShape3 shape;
  Precision precision = Precision::kBf16;
  Stats stats;
  double tflops = 0;
};
struct MemoryPoint {
  MemoryShape shape;
  double bytes = 0;  ///< reads + writes
  Stats stats;
  double gbps = 0;
};
struct AttentionPoint {
  AttentionShape shape;
  double flops = 0;  ///< causal: half the square; backward 2.5x forward
  Stats stats;
  double tflops = 0;
};
struct CollectivePoint {
  CollectiveOp op = CollectiveOp::kAllReduce;
  LinkClass link = LinkClass::kScaleUp;
  int ranks = 0;   ///< ranks in one group
  int stride = 1;  ///< between the group's ranks (ranks per node for one rank per node)
  double bytes = 0;
  Stats stats;            ///< the slowest rank's
  double algbw_gbps = 0;  ///< nccl-tests: bytes / time
  double busbw_gbps = 0;  ///< nccl-tests: algbw x the op's bus factor
};

/// A benchmark that failed, timed out or gave nonsense: reported, never data.
struct Rejected {
  std::string table;  ///< "gemm", "memory", "attention", "collectives"
  std::string what;   ///< the benchmark, e.g. "gemm 1024x1024x1024 bf16"
  std::string why;
};

struct CalibrationData {
  std::string backend, device, communicator, date, driver;
  int ranks = 1, local_size = 1;
  /// The host's processors when its local_size ranks outnumbered them (they time-shared them,
  /// and the compute tables count the share a rank got: TimingPolicy::batch_s); else 0.
  int shared_processors = 0;
  /// The settling run of a power-capped backend: its length and the GEMM rate of its first and
  /// last window, in TFLOP/s; 0 when the backend is not power-capped.
  double settle_s = 0, settle_first_tflops = 0, settle_last_tflops = 0;
  double memory_gib = 0;
  /// Resident memory of the calibrating process before any benchmark buffer (the runtime's own:
  /// binary, libraries, MPI), in GiB; 0 where unknown.
  double baseline_gib = 0;
  int activation_bytes = 4;
  /// ComputeBackend::attention_is_representative(): whether the attention table may go into a
  /// profile.
  bool attention_representative = true;
  bool quick = false;
  double seconds = 0;  ///< wall time of the run
  std::vector<GemmPoint> gemm;
  std::vector<MemoryPoint> memory;
  std::vector<AttentionPoint> attention;
  std::vector<CollectivePoint> collectives;
  std::vector<Rejected> rejected;
};

/// nccl-tests' bus bandwidth factor of `op` on n ranks: all-reduce 2(n-1)/n, all-gather,
/// reduce-scatter and all-to-all (n-1)/n, send/recv 1.
double bus_factor(CollectiveOp op, int n);

/// The groups a job of `world` ranks, `local` per node, measures collectives in: consecutive
/// groups of 2, 4, ... up to a node (scale-up), and with two or more nodes, one rank per node in
/// groups of 2, 4, ... up to every node (scale-out: each rank on its own NIC, as the
/// simulator's inter-domain step runs). Ranks are assumed placed by node in blocks.
struct GroupPlan {
  Grouping grouping;
  LinkClass link = LinkClass::kScaleUp;
};
std::vector<GroupPlan> collective_groups(int world, int local);

/// FLOPs of causal flash attention: forward 2 bh s^2 2d / 2, backward 2.5x forward.
double attention_flops(const AttentionShape& a);

struct SuiteOptions {
  Grid grid;
  TimingPolicy policy;
  std::vector<Table> tables = {Table::kGemm, Table::kMemory, Table::kAttention,
                               Table::kCollectives};
  /// Progress, one line per finished series (rank 0 only); may be empty.
  std::function<void(const std::string&)> progress;
  /// TimingPolicy::batch_s of the compute tables when this host's ranks outnumber its
  /// processors: several Linux scheduler slices (a few ms each with a handful of runnable tasks
  /// per core).
  double shared_batch_s = 0.05;
  /// Power-capped backends (ComputeBackend::power_capped): GEMMs of settle_gemm in windows of
  /// settle_window_s for at least settle_min_s (a GPU holds part of its boost for a while under
  /// load), then until a window runs no more than 0.5% slower than the one before (the clock has
  /// stopped falling), for at most settle_max_s; then each compute benchmark warms up for
  /// sustained_warmup_s and is timed for at least sustained_min_time_s.
  GemmShape3 settle_gemm = {8192, 8192, 8192};
  double settle_window_s = 0.25, settle_min_s = 2, settle_max_s = 20;
  double sustained_warmup_s = 0.1, sustained_min_time_s = 0.2;
};

/// Runs every table of `opt` on `backend` (every rank runs the compute tables at once, as in
/// training; each point keeps the slowest rank's median; ranks that outnumber the host's
/// processors time their compute in batches, opt.shared_batch_s) and on `comm` (collectives need 2
/// or more ranks). Failures and nonsense are moved to `rejected`; then each series is checked for
/// times that fall as sizes grow (non-monotone: see drop_non_monotone).
CalibrationData run_suite(ComputeBackend& backend, Communicator& comm, const SuiteOptions& opt);

/// Within one series (sizes ascending), a point whose time is below 0.7x the time of a smaller
/// size, or above 1/0.7x that of a larger one, contradicts the others. The point that
/// contradicts the most others is dropped (returned) until none remain. `sizes` and `times`
/// are parallel; the result holds the indices dropped.
std::vector<size_t> drop_non_monotone(const std::vector<double>& sizes,
                                      const std::vector<double>& times);

/// The raw results as JSON (`calibrate --raw`), and back.
Json to_json(const CalibrationData& d);
Result<CalibrationData> calibration_from_json(const Json& j, const std::string& where);

}  // namespace parallax::calibrate
