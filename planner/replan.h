#pragma once
/// The planner's quality bar on measured runs: for each record, the best plan the search finds
/// for the record's model, cluster, batch and sequence (and its precision and overlap settings)
/// against the record's published layout, both simulated.

#include <string>
#include <vector>

#include "core/measured_run.h"
#include "planner/search.h"

namespace parallax {

struct ReplanRow {
  std::string id;
  std::string published_layout, best_layout;
  double published_step_s = 0;  ///< the published layout, simulated (fill rule for unknowns)
  bool published_fits = true;   ///< per the simulator's memory model
  double best_step_s = 0;
  double gain = 0;  ///< published_step_s / best_step_s - 1: > 0 when the planner is faster
};

/// Searches one record's space (top 1), among the layouts the record's own stack runs with its
/// kernels, and simulates its published layout.
Result<ReplanRow> replan_record(const MeasuredRun& r, const std::vector<HwProfile>& profiles,
                                const SearchOptions& opt);

}  // namespace parallax
