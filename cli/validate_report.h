#pragma once
/// `parallax validate`'s output: the table, the classes, the sweeps and the JSON.

#include <string>
#include <vector>

#include "core/json_io.h"
#include "core/measured_run.h"
#include "simulator/validate.h"

namespace parallax::cli {

void print_table(const ValidationSummary& s, size_t rejected, const std::vector<std::string>& by);
Json summary_json(const ValidationSummary& s, const std::vector<std::string>& by,
                  const Diagnostics& rejected);
/// Each rejected record as a warning; an error (exit 2) when no record is left to predict.
int report_rejected(const Diagnostics& rejected, size_t predicted,
                    const std::vector<std::string>& paths);
/// The planner's best plan against each record's published layout.
int print_replan(const std::vector<MeasuredRun>& runs, const std::vector<HwProfile>& profiles,
                 bool json, Diagnostics rejected, const std::vector<std::string>& paths);

}  // namespace parallax::cli
