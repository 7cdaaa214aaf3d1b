#pragma once
/// The planner's search: enumerate the plan space, prune with the simulator's exact memory and
/// its step-time lower bound (step_bounds), then simulate the survivors in parallel, best bound
/// first, until no unsimulated candidate can enter the top K. Deterministic: candidates are
/// bounded and simulated in fixed batches, and ties are broken by the layout, so the ranking does
/// not depend on the thread count.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/result.h"
#include "planner/plan_space.h"
#include "simulator/simulate.h"

namespace parallax {

/// What "best" means.
///  kThroughput:  most tokens/s on the given GPUs.
///  kTimeToTrain: least wall time to train `token_budget` tokens on the given GPUs (the same
///                order as throughput; the report gives days).
///  kCost:        least GPU-hours for `token_budget` tokens, using the given GPUs or a power-of-two
///                fraction of them (fewer GPUs at better efficiency can cost less).
enum class Objective { kThroughput, kTimeToTrain, kCost };
const char* to_string(Objective o);

struct SearchOptions {
  int top_k = 5;
  Objective objective = Objective::kThroughput;
  double token_budget = 0;  ///< tokens to train, for time-to-train and cost
  /// With a token budget: keep only plans that train it within this many days (0: no
  /// deadline). The cost objective otherwise may pick a plan on a few GPUs that takes years.
  double max_days = 0;
  int threads = 0;  ///< 0: TBB's default
  /// Called from the searching thread with the phase ("bounding", "simulating") and how many of
  /// its candidates are done; may be empty.
  std::function<void(const char* phase, int64_t done, int64_t total)> progress;
};

struct RankedPlan {
  StepReport report;
  double objective_value = 0;     ///< seconds/token (throughput, time) or GPU-seconds/token (cost)
  double time_to_train_days = 0;  ///< for the token budget, when given
  double gpu_hours = 0;           ///< for the token budget, when given
  /// The frameworks that run this plan as simulated (frameworks_running); empty only under
  /// `--framework none`, for a layout no framework runs.
  std::vector<LaunchTarget> frameworks;
};

struct SearchStats {
  int64_t layouts_considered = 0, layouts_kept = 0;
  int64_t candidates = 0;          ///< layout x settings after the enumeration rules
  std::vector<PruneCount> pruned;  ///< enumeration rules, then the memory and time bounds
  int64_t bounded = 0, simulated = 0;
  /// Simulated plans left out of the ranking because a better-ranked one has the same
  /// objective and peak memory (e.g. ZeRO-2 vs ZeRO-1 under pipelining).
  int64_t equivalent = 0;
  std::vector<int> gpu_counts;  ///< the GPU counts searched
  double headroom = 0;          ///< the fraction of HBM left free (PlanConstraints)
};

struct SearchResult {
  std::vector<RankedPlan> top;  ///< best first
  SearchStats stats;
};

/// Fails when the request is invalid, or with the pruning counts when no candidate fits.
Result<SearchResult> search_plans(const PlanRequest& request, const SearchOptions& options = {});

/// Orders plans for a deterministic tie-break: the layout tuple (tp, pp, dp, cp, ep, etp, vpp,
/// mbs, ...).
bool layout_less(const ParallelPlan& a, const ParallelPlan& b);

/// "tp8 pp4 dp2 cp1 vpp5 mbs1 sp selective zero1 interleaved" and the like.
std::string layout_label(const ParallelPlan& p);

}  // namespace parallax
