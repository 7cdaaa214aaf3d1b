#include "calibrate/measurement.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

namespace parallax::calibrate {
namespace {

/// The q-quantile of sorted values, interpolating linearly between order statistics.
double quantile(const std::vector<double>& sorted, double q) {
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(sorted.size() - 1, lo + 1);
  const double w = pos - static_cast<double>(lo);
  return sorted[lo] * (1 - w) + sorted[hi] * w;
}

}  // namespace

TimingPolicy quick_policy() {
  TimingPolicy p;
  p.warmup = 1;
  p.min_reps = 3;
  p.max_reps = 20;
  p.min_time_s = 0.005;
  p.max_time_s = 0.1;
  p.target_spread = 0.1;
  p.timeout_s = 5;
  return p;
}

TimingPolicy full_policy() { return TimingPolicy{}; }

Stats summarize(std::vector<double> times) {
  std::sort(times.begin(), times.end());
  Stats s;
  s.reps = static_cast<int>(times.size());
  s.min_s = times.front();
  s.max_s = times.back();
  s.median_s = quantile(times, 0.5);
  s.p10_s = quantile(times, 0.1);
  s.p90_s = quantile(times, 0.9);
  const double q1 = quantile(times, 0.25), q3 = quantile(times, 0.75), iqr = q3 - q1;
  for (double t : times) s.outliers += (t < q1 - 3 * iqr || t > q3 + 3 * iqr) ? 1 : 0;
  return s;
}

Result<Stats> time_repeated(const std::function<double()>& once, const TimingPolicy& policy,
                            const std::string& what) {
  auto check = [&](double t) -> std::optional<Diagnostic> {
    if (t < 0) return Diagnostic{what, "the benchmark failed on the device", ""};
    if (!std::isfinite(t) || t == 0)
      return Diagnostic{what, "nonsense timing (" + std::to_string(t) + " s)",
                        "left out of the tables and the fit"};
    if (t > policy.timeout_s)
      return Diagnostic{what,
                        "timed out: one repetition took " + std::to_string(t) + " s, over " +
                            std::to_string(policy.timeout_s) + " s",
                        "left out of the tables and the fit"};
    return std::nullopt;
  };
  // One repetition: a single call, or under policy.batch_s calls until that much wall time has
  // passed, their wall time over their count (a call that check() refuses is returned as it is);
  // `spent` is the repetition's time, which the time budget counts.
  struct Repetition {
    double seconds, spent;
  };
  auto repetition = [&]() -> Repetition {
    if (policy.batch_s <= 0) {
      const double t = once();
      return {t, t};
    }
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    int calls = 0;
    double wall = 0;
    do {
      const double t = once();
      if (check(t)) return {t, t};
      ++calls;
      wall = std::chrono::duration<double>(Clock::now() - start).count();
    } while (wall < policy.batch_s);
    return {wall / calls, wall};
  };
  // Warm-up timings are not data, but a failure or time-out there is still one. A zero or
  // nonsense time ends the warm-up (the timed repetitions report it).
  double warm = 0;
  for (int i = 0; i < policy.warmup || (warm < policy.warmup_s && i < policy.max_reps); ++i) {
    const auto [t, spent] = repetition();
    if (t < 0 || t > policy.timeout_s) {
      if (auto d = check(t)) return *d;
    }
    if (!(spent > 0) || !std::isfinite(spent)) break;
    warm += spent;
  }
  std::vector<double> times;
  double total = 0;
  while (static_cast<int>(times.size()) < policy.max_reps) {
    const auto [t, spent] = repetition();
    if (auto d = check(t)) return *d;
    times.push_back(t);
    total += spent;
    const int n = static_cast<int>(times.size());
    if (n < policy.min_reps || total < policy.min_time_s) continue;
    if (total >= policy.max_time_s) break;
    if (summarize(times).spread() <= policy.target_spread) break;
  }
  return summarize(std::move(times));
}

}  // namespace parallax::calibrate
