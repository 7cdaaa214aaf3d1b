#pragma once
/// What `parallax plan` and `parallax whatif` share: the search flags and the request built from
/// them and the layout flags (which pin dimensions instead of setting them).

#include <CLI/CLI.hpp>
#include <string>

#include "cli/inputs.h"
#include "planner/search.h"

namespace parallax::cli {

struct PlanFlags {
  std::string objective = "throughput", framework, memory_headroom;
  double tokens = 0, max_days = 0;
  int max_tp = 0, max_pp = 0, max_cp = 0, max_vpp = 0, max_mbs = 0, threads = 0;
  bool tp_across_domains = false;
};
void add_plan_flags(CLI::App* cmd, PlanFlags* f);

struct ResolvedPlanRequest {
  PlanRequest request;
};
/// Model, cluster, batch and settings as `simulate` resolves them; layout flags become pins.
Result<ResolvedPlanRequest> resolve_plan_request(const LayoutFlags& layout, const PlanFlags& f);
/// Objective and budget (the request has already been checked).
SearchOptions search_options(const PlanFlags& f);

}  // namespace parallax::cli
