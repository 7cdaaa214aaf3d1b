#pragma once
/// Rendering of a simulated step: a human table, JSON, and a Chrome/Perfetto trace. Pure
/// functions returning text or JSON; writing files is the CLI's job.

#include <string>

#include "core/json_io.h"
#include "simulator/error_bar.h"
#include "simulator/simulate.h"

namespace parallax {

/// With `bar`, the step time and throughput carry the error bar of the prediction.
std::string format_table(const StepReport& r, const ErrorBar* bar = nullptr);
Json to_json(const StepReport& r, const ErrorBar* bar = nullptr);
/// What a trace holds. A step of many microbatches on many stages is too large to open in a
/// browser (a DeepSeek-V3 step on 16 stages: 995 MB), so by default the operators of the first
/// few microbatches of each stage are kept, with the data-parallel, optimizer and memory tracks
/// of the whole step.
struct TraceOptions {
  int microbatches = 4;  ///< per stage; 0: every one
};

/// Chrome trace-event JSON: one process per simulated rank, one thread per stream, and a memory
/// counter per rank (parameter state plus activations, GiB); needs a report simulated with
/// record_trace.
Json chrome_trace(const StepReport& r, const TraceOptions& opt = {});

}  // namespace parallax
