#pragma once
/// Rendering of a search: the ranked table, JSON, the explanation (what each rule pruned, why the
/// winner beats the runner-up) and the plan file. Pure functions returning text or JSON.

#include <string>
#include <vector>

#include "core/json_io.h"
#include "planner/search.h"
#include "simulator/error_bar.h"

namespace parallax {

/// "parallax-plan/1": the plan file is a scenario (model spec, cluster, layout, settings) plus
/// "format" and "predicted"; `parallax simulate --plan` and `parallax launch --plan` read it.
inline constexpr const char* kPlanFormat = kPlanFileFormat;
Json plan_file_json(const ModelSpec& m, const StepReport& r);

/// The category (not compute or bubble) that costs the critical stage the most exposed time.
CostCategory biggest_exposed_cost(const StepReport& r);

/// "megatron,torchtitan", or "none" for a plan no framework runs.
std::string frameworks_text(const std::vector<LaunchTarget>& f);

std::string format_plan_table(const SearchResult& s, const SearchOptions& opt);
/// With `bars` (plan_error_bars), each plan carries its error bar as `simulate` prints it, and
/// "within_error_bar_of_winner" lists the ranks that fall inside the winner's.
Json plan_search_json(const SearchResult& s, const SearchOptions& opt,
                      const std::vector<ErrorBar>* bars = nullptr);
/// Each ranked plan's error bar (prediction_bar, the stack of the first framework that runs it).
std::vector<ErrorBar> plan_error_bars(const SearchResult& s, const ModelSpec& m,
                                      const HwProfile& hw);
/// The ranks (from 1) of the plans after the winner whose throughput band overlaps the
/// winner's: the model cannot tell them apart from it.
std::vector<int> within_winners_bar(const SearchResult& s, const std::vector<ErrorBar>& bars);
/// One line: the winner's band and which plans fall within it.
std::string format_error_bars(const SearchResult& s, const std::vector<ErrorBar>& bars);

/// Pruning counts per rule, then winner against runner-up: the layout fields that differ and
/// the time categories and memory that make the difference.
std::string explain_search(const SearchResult& s);

}  // namespace parallax
