#pragma once
/// Rendering of a simulated step: a human table, JSON, and a Chrome/Perfetto trace. Pure
/// functions returning text or JSON; writing files is the CLI's job.

#include <string>

#include "core/json_io.h"
#include "simulator/simulate.h"

namespace parallax {

std::string format_table(const StepReport& r);
Json to_json(const StepReport& r);
/// Chrome trace-event JSON: one process per simulated rank, one thread per stream; needs a
/// report simulated with record_trace.
Json chrome_trace(const StepReport& r);

}  // namespace parallax
