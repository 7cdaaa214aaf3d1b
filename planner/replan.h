#pragma once
/// The planner on measured runs: completing a record's layout where its source leaves degrees
/// out, and its quality bar: for each record, the best plan the search finds for the record's
/// model, cluster, batch and sequence (and its precision and overlap settings) against the
/// record's published layout, both simulated.

#include <optional>
#include <string>
#include <vector>

#include "core/measured_run.h"
#include "planner/search.h"

namespace parallax {

/// The framework whose layout rules a record's run follows (record_stack: Megatron-LM, NeMo
/// and Megatron-DeepSpeed: Megatron-LM; TorchTitan and plain FSDP: TorchTitan; DeepSpeed:
/// DeepSpeed); nullopt for a stack the planner has no rules for (nanotron, MaxText, ...).
std::optional<LaunchTarget> record_framework(const MeasuredRun& r);

/// The best layout (per the simulator) consistent with every field the record gives, among the
/// layouts its framework runs with the record's kernels: known degrees, dp, vpp, micro_batch,
/// recompute, sequence parallelism and sharding are pinned, the rest searched. For records with
/// unknown degrees (unknown_degrees); fails, located, when no such layout fits.
Result<ParallelPlan> complete_layout(const MeasuredRun& r, const HwProfile& hw,
                                     const SearchOptions& opt = {});

struct ReplanRow {
  std::string id;
  std::string published_layout, best_layout;
  double published_step_s = 0;  ///< the published layout, simulated (fill rule for unknowns)
  bool published_fits = true;   ///< per the simulator's memory model
  double best_step_s = 0;
  double gain = 0;  ///< published_step_s / best_step_s - 1: > 0 when the planner is faster
};

/// Searches one record's space (top 1), among the layouts the record's own stack runs with its
/// kernels, and simulates its published layout (completed first when degrees are unknown).
Result<ReplanRow> replan_record(const MeasuredRun& r, const std::vector<HwProfile>& profiles,
                                const SearchOptions& opt);

}  // namespace parallax
