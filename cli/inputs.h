#pragma once
/// What every subcommand shares: reading files, resolving a model and a hardware profile by
/// name or path, the layout flags of `parallax simulate`, and atomic output files.

#include <CLI/CLI.hpp>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "core/json_io.h"
#include "core/parallel_plan.h"

namespace parallax::cli {

/// Exit codes: 0 ok, 1 the answer is negative (e.g. does not fit), 2 bad input.
inline constexpr int kExitBadInput = 2;

/// A flag check: a finite number in [lo, hi]. (CLI::Range lets NaN through: every comparison
/// with NaN is false.) The message names the flag, the range and `why`.
CLI::Validator finite_in(double lo, double hi, const std::string& why = "");
/// A flag check: an integer count in [lo, hi], with `why` in the message.
CLI::Validator count_in(int64_t lo, int64_t hi, const std::string& why = "");

Result<std::string> read_file(const std::string& path);
/// Writes via a temporary file (`path.tmp.PID`) and rename, so readers never see a partial
/// file; first removes the temporaries of `path` that a killed writer left behind.
Result<bool> write_file_atomic(const std::string& path, const std::string& text);
/// Removes every `path.tmp.PID` whose process no longer runs, with a note on stderr.
void remove_stale_temporaries(const std::string& path);

/// Built-in profiles plus every *.json in `extra_dir` (which override by name).
Result<std::vector<HwProfile>> load_profiles(const std::string& extra_dir);

/// A zoo name, a model JSON in our format, or a Hugging Face config.json.
/// Whether an MPI launcher (mpirun, or srun with PMI) started this process.
bool launched_by_mpi();

/// A profile by name (built-in or from `extra_dir`) or from a profile JSON file (a path, or a
/// name ending in .json).
Result<HwProfile> resolve_profile(const std::string& name_or_path, const std::string& extra_dir,
                                  const std::string& where);

Result<ModelSpec> resolve_model(const std::string& name_or_path, const std::string& where);

/// A numeric flag not given on the command line.
inline constexpr int64_t kUnset = std::numeric_limits<int64_t>::min();

/// Flags shared by simulate (and later plan): unset values stay at their sentinel.
struct LayoutFlags {
  std::string model, cluster, scenario, recompute, schedule, precision, cp_comm, attention;
  std::string moe_dispatcher;
  std::string profiles_dir;
  int64_t gpus = kUnset, tp = kUnset, pp = kUnset, dp = kUnset, cp = kUnset, ep = kUnset;
  int64_t etp = kUnset, vpp = kUnset, mbs = kUnset, zero = kUnset, gbs = kUnset, seq = kUnset;
  int sp = -1, fsdp = -1, eager = -1, overlap_tp = -1, overlap_grad = -1, overlap_param = -1,
      pp_scatter_gather = -1, overlap_moe = -1;  ///< 1/0
  int64_t moe_max_nodes = kUnset;
  std::optional<double> moe_imbalance, moe_capacity_factor;
};
void add_layout_flags(CLI::App* cmd, LayoutFlags* f);

struct ResolvedRun {
  ModelSpec model;
  Cluster cluster;
  ParallelPlan plan;
};
/// defaults <- scenario file <- flags; derives dp from gpus when dp is not given. Without
/// `check_layout` (the planner, where layout flags are constraints) the plan is not validated.
Result<ResolvedRun> resolve_run(const LayoutFlags& f, bool check_layout = true);

/// The plan's kernels and overlap switches as stack `name` (stacks/*.json) runs them, except
/// those the flags pin (--attention, --eager, --cp-comm, --pp-scatter-gather, --overlap-*).
Result<ParallelPlan> with_stack(const std::string& name, const LayoutFlags& f, ParallelPlan p);

/// What the serving commands take from their flags: a model (zoo name or file), a profile (name
/// or file, with --profiles-dir) and a precision name; every problem reported.
struct ServingInputs {
  ModelSpec model;
  HwProfile hw;
  Precision precision = Precision::kBf16;
};
Result<ServingInputs> resolve_serving_inputs(const std::string& model, const std::string& cluster,
                                             const std::string& profiles_dir,
                                             const std::string& precision);

/// A message as the terminal gets it: control characters other than line breaks escaped (a name
/// from a file cannot move the cursor or clear the screen), at most about 2,000 bytes.
std::string printable(const std::string& s);

/// Prints diagnostics to stderr, one per line, prefixed "error: ".
int report_errors(const Diagnostics& d);
/// Prints diagnostics to stderr, one per line, prefixed "warning: ".
void report_warnings(const Diagnostics& d);

}  // namespace parallax::cli
