#pragma once
/// Prediction of measured-run records: runs the simulator on a record's layout and compares on
/// the most direct measurement the record has (step time, tokens/s, then TFLOP/s or MFU counted
/// the record's way).

#include <string>
#include <vector>

#include "core/measured_run.h"
#include "simulator/simulate.h"

namespace parallax {

struct ValidationRow {
  std::string id;
  std::string source;  ///< the record's source, for per-source summaries
  std::string metric;  ///< step_time_s | tokens_per_s_per_gpu | tflops_per_gpu | mfu
  double measured = 0;
  double predicted = 0;
  double error = 0;  ///< signed: (predicted - measured) / measured
  bool fits = true;  ///< the filled plan fits in memory per the simulator
};

/// Errors of the records that share one source.
struct SourceSummary {
  std::string source;
  int n = 0;
  double mape = 0;        ///< mean of |error|
  double mean_error = 0;  ///< mean signed error: the bias of the predictions for this source
};

struct ValidationSummary {
  std::vector<ValidationRow> rows;
  double mape = 0;  ///< mean of |error|
  double max_abs_error = 0;
  std::vector<SourceSummary> by_source;  ///< in order of first appearance
};

/// Predicts one record with the profiles available.
Result<ValidationRow> predict_record(const MeasuredRun& r, const std::vector<HwProfile>& profiles);

ValidationSummary summarize(std::vector<ValidationRow> rows);

}  // namespace parallax
