#pragma once
/// The MoE keys of the scenario and plan-file format:
///   "moe": {"dispatcher": "alltoall" | "allgather" | "flex", "max_nodes": int,
///           "capacity_factor": number}, and "overlap": {"moe_comm": bool}.
/// Private to json_io.cc.

#include "core/json_io.h"

namespace parallax::detail {

/// The "moe" object of a scenario, if present; absent keys keep the plan's values.
void read_moe_plan(JsonFields& f, const std::string& where, Diagnostics* d, ParallelPlan* p);
/// Writes the "moe" object and "overlap"/"moe_comm", each key only when it is not the default.
void write_moe_plan(const ParallelPlan& p, Json* j);

}  // namespace parallax::detail
