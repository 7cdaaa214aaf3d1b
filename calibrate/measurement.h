#pragma once
/// Timing done right, independent of the device: warm-up, repetitions until the median is
/// stable (or the time budget is spent), and a summary that keeps the spread and the outliers.
/// A device supplies one repetition's duration, measured its own way (a steady clock on a CPU,
/// events on a GPU); clocks are left alone.

#include <functional>
#include <string>
#include <vector>

#include "core/result.h"

namespace parallax::calibrate {

struct TimingPolicy {
  int warmup = 2;  ///< repetitions run and discarded first
  /// ... and warm-up goes on until this much time has passed too: a GPU settled at its power
  /// cap climbs back towards its boost clock while it idles between benchmarks.
  double warmup_s = 0;
  int min_reps = 5;          ///< at least this many timed repetitions
  int max_reps = 200;        ///< at most this many
  double min_time_s = 0.02;  ///< keep repeating until this much timed time has passed ...
  double max_time_s = 0.5;   ///< ... but never beyond this (after min_reps)
  /// Stop early once the interdecile spread (p90 - p10) / median falls below this.
  double target_spread = 0.05;
  /// One repetition (warm-up included) longer than this times the benchmark out: it is
  /// reported and left out. A running kernel is not interrupted; the next one is not started.
  double timeout_s = 20;
  /// When positive, one repetition calls the benchmark back to back until this much wall time
  /// has passed and counts the wall time over the calls. Ranks that outnumber a host's
  /// processors time-share them: one call is timed either alone on a processor or across a wait
  /// for one, so the median of single calls would keep the unshared speed; a batch spanning
  /// several scheduler slices counts the share a rank really gets. The time budget (min_time_s,
  /// max_time_s) counts the batches' wall time. Only for benchmarks without a collective inside:
  /// ranks may make different numbers of calls.
  double batch_s = 0;
};

/// A quick policy (calibrate --quick) and the full one.
TimingPolicy quick_policy();
TimingPolicy full_policy();

/// Summary of repeated timings of one benchmark, in seconds.
struct Stats {
  int reps = 0;
  double median_s = 0, p10_s = 0, p90_s = 0, min_s = 0, max_s = 0;
  int outliers = 0;  ///< outside [Q1 - 3 IQR, Q3 + 3 IQR] (kept in the percentiles, reported)
  /// (p90 - p10) / median: what each table records as its spread.
  double spread() const { return median_s > 0 ? (p90_s - p10_s) / median_s : 0; }
};

/// Percentiles by linear interpolation between order statistics. `times` must be non-empty.
Stats summarize(std::vector<double> times);

/// Runs `once` under `policy`. `once` returns one repetition's seconds, or a negative value when
/// the device failed (the error is then `what` + "failed"). A zero, NaN or infinite duration is
/// nonsense and one beyond policy.timeout_s a time-out: either fails the benchmark, which is
/// reported, never kept as data. The stopping decisions depend only on the values `once`
/// returns, so ranks that agree on each value (the slowest rank's) stop together.
Result<Stats> time_repeated(const std::function<double()>& once, const TimingPolicy& policy,
                            const std::string& what);

}  // namespace parallax::calibrate
