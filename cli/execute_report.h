#pragma once
/// `parallax execute --op-times`: rank 0's time by operator in a typical step, beside the
/// simulator's prediction for the same pipeline stage.

#include "core/json_io.h"
#include "executor/trainer.h"
#include "simulator/simulate.h"

namespace parallax::cli {

/// Rank 0's time by operator in the step closest to the median, beside `predicted` (the
/// simulator's report of the same plan, or null): a table on stdout, or (json) into (*out)
/// ["op_times"].
void print_op_times(const exec::TrainResult& r, const StepReport* predicted, bool json, Json* out);

}  // namespace parallax::cli
