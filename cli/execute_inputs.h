#pragma once
/// The flags of `parallax execute` and their checks at the edge: every numeric flag is refused
/// with its name when it is out of range (sign, NaN or infinity, a plausible bound with the
/// reason), before any rank allocates or trains.

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cli/inputs.h"

namespace parallax::cli {

/// Exit codes of `execute` beyond kExitBadInput: a job stopped by the process group's
/// watchdog (executor/process_group.h), and a run stopped at a non-finite loss or gradient norm.
inline constexpr int kExitAborted = 3;
inline constexpr int kExitNonFinite = 4;

/// The most steps a run may count to: checkpoint directories carry the step in 8 digits.
inline constexpr int64_t kMaxSteps = 99'999'999;

struct ExecuteFlags {
  LayoutFlags layout;
  std::string backend = "cpu", data = "synthetic", format = "table";
  int64_t steps = 10;
  uint64_t seed = 1234;
  double lr = 1e-3;
  int64_t warmup = 0;
  bool compare = false;
  bool op_times = false;
  std::string checkpoint_dir;
  std::string mode = "train", prompt = "Four score and seven years ago";
  int64_t max_new_tokens = 32;
  double temperature = 0;
  double timeout_s = 300;
  int64_t save_every = 0;
  int64_t keep_last = 3;  ///< complete checkpoints kept in checkpoint_dir; 0: all
  bool resume = false;
  bool fit = false;
  bool async_save = false;
  /// The memory --fit fits into (all ranks); unset: 80% of what is available.
  std::optional<double> fit_gib;
};

/// Registers the flags of `execute` (all but the layout flags) on `cmd`.
void add_execute_flags(CLI::App* cmd, ExecuteFlags* f);

/// Every flag out of its range, each naming the flag, the value and the range (with the reason
/// where the range is a choice). Empty when all are usable.
Diagnostics check_execute_flags(const ExecuteFlags& f);

/// Settings that are valid but do less than they may seem to (a warm-up longer than the run, a
/// save interval the run never reaches): one line each, for stderr.
std::vector<std::string> execute_flag_notes(const ExecuteFlags& f);

}  // namespace parallax::cli
