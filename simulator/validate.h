#pragma once
/// Prediction of measured-run records: runs the simulator on a record's layout and compares on
/// the most direct measurement the record has (step time, tokens/s, then TFLOP/s or MFU counted
/// the record's way); error summaries by class and rank correlation within published sweeps.

#include <optional>
#include <string>
#include <vector>

#include "core/measured_run.h"
#include "simulator/simulate.h"

namespace parallax {

struct ValidationRow {
  std::string id;
  std::string metric;  ///< step_time_s | tokens_per_s_per_gpu | tflops_per_gpu | mfu
  double measured = 0;
  double predicted = 0;
  double error = 0;  ///< signed: (predicted - measured) / measured
  bool fits = true;  ///< the filled plan fits in memory per the simulator
  /// The layout the planner completed for a record with unknown degrees ("tp8 pp4 ..."), empty
  /// when the record gives its layout.
  std::string completed;
  /// Throughput per GPU implied by the measurement and by the prediction (tokens/s/GPU): the
  /// same quantity whatever the record measured, for ranking within a sweep.
  double measured_throughput = 0, predicted_throughput = 0;
  std::string sweep;  ///< the record's sweep, empty when none
  /// The record's class in each dimension of class_dimensions(), in that order.
  std::vector<std::string> classes;
};

/// The dimensions rows are classed by: source, part, kind, precision, scale, stack.
const std::vector<std::string>& class_dimensions();
/// "source, part, kind, precision, scale, stack"
std::string class_dimension_names();

/// The classes of a prediction in the order of class_dimensions(): `source` (empty for a new
/// prediction), the part, "dense" or "moe", the precision, the scale bucket of `gpus` and the
/// stack's framework ("unstated" when empty).
std::vector<std::string> prediction_classes(const std::string& source, const ModelSpec& m,
                                            const std::string& part, Precision precision, int gpus,
                                            const std::string& stack);

/// Errors of the rows of one class.
struct ClassSummary {
  std::string name;
  int n = 0;
  double mape = 0;  ///< mean of |error|
  double max_abs_error = 0;
  double mean_error = 0;  ///< mean signed error: the bias of the predictions in this class
};

/// Rank agreement within one published sweep (records sharing `sweep`).
struct SweepRank {
  std::string sweep;
  int n = 0;
  double spearman = 0;  ///< between predicted and measured throughput, -1..1
};

struct ValidationSummary {
  std::vector<ValidationRow> rows;
  double mape = 0;  ///< mean of |error|
  double max_abs_error = 0;
  double mean_error = 0;
  int completed = 0;              ///< rows whose layout the planner completed
  std::vector<SweepRank> sweeps;  ///< sweeps of 3 or more rows, in order of first appearance
  double mean_spearman = 0;       ///< over `sweeps`; 0 when there is none
  /// Rows whose measured throughput falls inside the error bar built from the other sources'
  /// rows (error_bar.h, leave one source out), of the rows that got a bar.
  int bar_inside = 0, bar_checked = 0;
};

/// Predicts one record with the profiles available, on `completed` when given (the layout
/// complete_layout found for a record with unknown degrees); a record with unknown degrees and
/// no completed layout is refused.
Result<ValidationRow> predict_record(const MeasuredRun& r, const std::vector<HwProfile>& profiles,
                                     const std::optional<ParallelPlan>& completed = std::nullopt);

ValidationSummary summarize(std::vector<ValidationRow> rows);

/// The rows' errors per class of `dimension` (one of class_dimensions()), in order of first
/// appearance; empty for an unknown dimension.
std::vector<ClassSummary> summarize_by(const std::vector<ValidationRow>& rows,
                                       const std::string& dimension);

/// Spearman's rank correlation of two equally long series (ties share their mean rank); 0 when
/// either series is constant or shorter than 2.
double spearman(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace parallax
