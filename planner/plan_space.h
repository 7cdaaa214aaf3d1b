#pragma once
/// PlanSpace: every layout of a model on a cluster for one batch and sequence length, with the
/// rules real frameworks enforce applied during enumeration, each counting what it rejected.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/model_spec.h"
#include "core/parallel_plan.h"
#include "planner/launch/launch.h"

namespace parallax {

/// What the user pins or bounds. 0 (or nullopt) leaves a dimension free.
struct PlanConstraints {
  int tp = 0, pp = 0, dp = 0, cp = 0, ep = 0, etp = 0, vpp = 0, mbs = 0;
  std::optional<int> zero;
  std::optional<bool> fsdp, sequence_parallel;
  std::optional<Recompute> recompute;
  std::optional<ScheduleKind> schedule;
  std::optional<CpComm> cp_comm;
  int max_tp = 0, max_pp = 0, max_cp = 0, max_vpp = 0, max_mbs = 0;  ///< 0: no limit
  bool tp_across_domains = false;         ///< allow tp beyond one NVLink (scale-up) domain
  double memory_headroom = 0;             ///< fraction of HBM to leave free, 0..0.9
  std::optional<LaunchTarget> framework;  ///< keep only what this framework can run
};

/// The question: train `model` on `cluster` with this batch and sequence. `settings` carries
/// what is not searched (precision, attention kernel, overlap switches); its layout fields are
/// ignored.
struct PlanRequest {
  ModelSpec model;
  Cluster cluster;
  int64_t global_batch = 0;  ///< sequences per step
  int64_t seq_len = 0;
  ParallelPlan settings;
  PlanConstraints constraints;
};

/// Why a layout or a candidate was left out; `count` of them. Structural rules reject degree
/// combinations (tp x cp x pp x dp x ep x etp); setting rules reject full candidates.
struct PruneCount {
  std::string rule;
  int64_t count = 0;
};

struct PlanSpaceResult {
  std::vector<ParallelPlan> candidates;  ///< in a fixed order (deterministic)
  int64_t layouts_considered = 0;        ///< degree combinations before the structural rules
  int64_t layouts_kept = 0;
  std::vector<PruneCount> pruned;  ///< rules in the order they are applied, zero counts omitted
};

/// Checks the request itself (GPU count, batch, sequence, constraint ranges); every problem.
Diagnostics validate_request(const PlanRequest& r);

/// Enumerates the space. The request must be valid (validate_request).
PlanSpaceResult enumerate_plans(const PlanRequest& r);

}  // namespace parallax
