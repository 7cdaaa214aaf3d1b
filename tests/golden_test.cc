// Golden scenarios. Each tests/golden/*.json holds
//   "description": what the scenario covers,
//   "scenario":    the inputs, in the scenario-file format of core/json_io.h (model by zoo name,
//                  cluster gpu and num_gpus, and every layout field including dp),
//   "expected":    to_json() of the StepReport that simulate() returned for it.
// The test simulates every scenario and compares the report with "expected" field by field:
// numbers to a relative tolerance of 1e-6, strings, booleans and key sets exactly. It never
// diffs text.
//
// When the cost model changes on purpose, regenerate the expected outputs with
//
//   PARALLAX_UPDATE_GOLDEN=1 build/release/tests/parallax_tests --gtest_filter='Golden*'
//
// which rewrites the "expected" block of every golden file from the current output (keeping
// "description" and "scenario") and prints each file it rewrote. Review the diff before
// committing it. To add a scenario, write a file with "description" and "scenario" and an empty
// "expected": {}, then run the command above.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "core/json_io.h"
#include "core/model_zoo.h"
#include "simulator/report.h"
#include "simulator/simulate.h"
#include "tests/test_support.h"

namespace parallax {
namespace {

namespace fs = std::filesystem;

constexpr double kRelTolerance = 1e-6;
// Values that are zero up to rounding (e.g. a bubble of 4e-16 s) compare equal to zero.
constexpr double kAbsTolerance = 1e-12;

bool UpdateMode() {
  const char* v = std::getenv("PARALLAX_UPDATE_GOLDEN");
  return v != nullptr && std::string(v) == "1";
}

std::vector<std::string> GoldenFiles() {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(PARALLAX_SOURCE_DIR "/tests/golden", ec))
    if (e.path().extension() == ".json") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

/// Compares `got` with `want` recursively; appends one line per difference, named by its JSON
/// pointer under `path`.
void CompareJson(const Json& want, const Json& got, const std::string& path,
                 std::vector<std::string>* diffs) {
  const std::string where = path.empty() ? "/" : path;
  if (want.is_number() && got.is_number()) {
    const double w = want.get<double>(), g = got.get<double>();
    const double tol = std::max(kRelTolerance * std::max(std::abs(w), std::abs(g)), kAbsTolerance);
    if (!(std::abs(w - g) <= tol)) {
      std::ostringstream os;
      os.precision(17);
      os << where << ": want " << w << ", got " << g << " (relative difference "
         << (w != 0 ? (g - w) / w : g) << ")";
      diffs->push_back(os.str());
    }
    return;
  }
  if (want.type() != got.type()) {
    diffs->push_back(where + ": want " + want.type_name() + " " + want.dump() + ", got " +
                     got.type_name() + " " + got.dump());
    return;
  }
  if (want.is_object()) {
    for (const auto& [key, w] : want.items()) {
      if (!got.contains(key))
        diffs->push_back(path + "/" + key + ": missing from the output");
      else
        CompareJson(w, got.at(key), path + "/" + key, diffs);
    }
    for (const auto& [key, g] : got.items())
      if (!want.contains(key))
        diffs->push_back(path + "/" + key + ": in the output but not in the golden file");
    return;
  }
  if (want.is_array()) {
    if (want.size() != got.size())
      diffs->push_back(where + ": want " + std::to_string(want.size()) + " elements, got " +
                       std::to_string(got.size()));
    for (size_t i = 0; i < std::min(want.size(), got.size()); ++i)
      CompareJson(want[i], got[i], path + "/" + std::to_string(i), diffs);
    return;
  }
  if (want != got) diffs->push_back(where + ": want " + want.dump() + ", got " + got.dump());
}

/// Simulates the "scenario" block of a golden file; the report as JSON.
Result<Json> SimulateScenario(const Json& scenario, const std::string& where) {
  auto s = scenario_from_json(scenario, where, ParallelPlan{});
  if (!s) return s.errors();
  if (!s->model_name || !s->gpu || !s->num_gpus || !s->dp_given)
    return Diagnostic{where, "a golden scenario names its model, cluster gpu and num_gpus, and dp",
                      "so that it does not depend on the CLI's defaults"};
  auto model = find_zoo_model(*s->model_name, where + "/model");
  if (!model) return model.errors();
  auto profiles = builtin_profiles();
  if (!profiles) return profiles.errors();
  auto hw = find_profile(profiles.value(), *s->gpu, where + "/cluster/gpu");
  if (!hw) return hw.errors();
  auto report = simulate(model.value(), Cluster{hw.value(), *s->num_gpus}, s->plan);
  if (!report) return report.errors();
  return to_json(report.value());
}

// ---- the comparison itself --------------------------------------------------------------------

TEST(GoldenCompare, NumbersWithinTheRelativeToleranceAreEqual) {
  std::vector<std::string> diffs;
  CompareJson(Json{{"t", 10.0}}, Json{{"t", 10.0 * (1 + 5e-7)}}, "", &diffs);
  CompareJson(Json{{"t", 0.0}}, Json{{"t", 4.4e-16}}, "", &diffs);
  CompareJson(Json{{"n", 3}}, Json{{"n", 3.0}}, "", &diffs);
  EXPECT_TRUE(diffs.empty()) << diffs.front();
}

TEST(GoldenCompare, EveryDifferenceIsNamedByItsPath) {
  const Json want = {{"step_time_s", 10.0},
                     {"fits", true},
                     {"breakdown", {{"bubble_s", 1.0}}},
                     {"stages", Json::array({{{"total", 50.0}}, {{"total", 60.0}}})},
                     {"model", "llama"},
                     {"gone", 1}};
  const Json got = {{"step_time_s", 10.0 * (1 + 2e-6)},
                    {"fits", false},
                    {"breakdown", {{"bubble_s", "1.0"}}},
                    {"stages", Json::array({{{"total", 50.0}}})},
                    {"model", "llama"},
                    {"new", 2}};
  std::vector<std::string> diffs;
  CompareJson(want, got, "", &diffs);
  const std::string all = [&] {
    std::string s;
    for (const auto& d : diffs) s += d + "\n";
    return s;
  }();
  EXPECT_EQ(diffs.size(), 6u) << all;
  for (const char* needle : {"/step_time_s: want 10", "/fits: want true", "/breakdown/bubble_s",
                             "/stages: want 2 elements, got 1", "/gone: missing",
                             "/new: in the output but not in the golden file"})
    EXPECT_NE(all.find(needle), std::string::npos) << needle << "\n" << all;
}

// ---- the golden scenarios ---------------------------------------------------------------------

TEST(GoldenFiles, CoverTheMainLayouts) {
  const std::vector<std::string> files = GoldenFiles();
  ASSERT_GE(files.size(), 5u) << "tests/golden holds " << files.size() << " scenarios";
  bool tp_sp = false, interleaved = false, fsdp = false, ep = false, cp = false, fp8 = false;
  for (const auto& f : files) {
    auto j = parse_json(testing::read_file(f).value_or(""), f);
    ASSERT_TRUE(j.ok()) << j.error_text();
    auto s = scenario_from_json(j->at("scenario"), f + ":/scenario", ParallelPlan{});
    ASSERT_TRUE(s.ok()) << s.error_text();
    const ParallelPlan& p = s->plan;
    tp_sp |= p.tp > 1 && p.sequence_parallel && p.pp > 1 && p.schedule == ScheduleKind::k1F1B;
    interleaved |= p.schedule == ScheduleKind::kInterleaved1F1B;
    fsdp |= p.fsdp;
    ep |= p.ep > 1;
    cp |= p.cp > 1;
    fp8 |= p.precision == Precision::kFp8;
  }
  EXPECT_TRUE(tp_sp) << "no 1F1B scenario with TP+SP and pp > 1";
  EXPECT_TRUE(interleaved) << "no interleaved-pipeline scenario";
  EXPECT_TRUE(fsdp) << "no FSDP scenario";
  EXPECT_TRUE(ep) << "no expert-parallel scenario";
  EXPECT_TRUE(cp) << "no context-parallel scenario";
  EXPECT_TRUE(fp8) << "no fp8 scenario";
}

class GoldenScenario : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenScenario, MatchesTheSimulation) {
  const std::string path = GetParam();
  const std::string name = fs::path(path).filename().string();
  const std::optional<std::string> content = testing::read_file(path);
  ASSERT_TRUE(content.has_value()) << "cannot open " << path;
  auto file = parse_json(*content, name);
  ASSERT_TRUE(file.ok()) << file.error_text();
  Json golden = file.value();
  ASSERT_TRUE(golden.is_object() && golden.contains("scenario")) << name << ": no \"scenario\"";

  auto got = SimulateScenario(golden["scenario"], name + ":/scenario");
  ASSERT_TRUE(got.ok()) << got.error_text();

  if (UpdateMode()) {
    // Written in reading order: what the scenario is, its inputs, then the expected output.
    golden["expected"] = got.value();
    nlohmann::ordered_json ordered;
    for (const char* key : {"description", "scenario", "expected"})
      if (golden.contains(key)) ordered[key] = nlohmann::ordered_json::parse(golden[key].dump());
    for (const auto& [key, v] : golden.items())
      if (!ordered.contains(key)) ordered[key] = nlohmann::ordered_json::parse(v.dump());
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << ordered.dump(2) << "\n";
    out.close();
    ASSERT_TRUE(out) << "cannot write " << path;
    std::cout << "[golden] rewrote " << path << std::endl;
    return;
  }

  ASSERT_TRUE(golden.contains("expected") && golden["expected"].is_object())
      << name << ": no \"expected\" block; run with PARALLAX_UPDATE_GOLDEN=1 to write it";
  std::vector<std::string> diffs;
  CompareJson(golden["expected"], got.value(), "", &diffs);
  for (const auto& d : diffs) ADD_FAILURE() << name << ":/expected" << d;
  if (!diffs.empty())
    std::cout << "[golden] " << name << ": " << diffs.size() << " difference(s); if the change is "
              << "intended, rerun with PARALLAX_UPDATE_GOLDEN=1 and review the diff\n";
}

std::string ScenarioName(const ::testing::TestParamInfo<std::string>& info) {
  std::string s = fs::path(info.param).stem().string();
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(Golden, GoldenScenario, ::testing::ValuesIn(GoldenFiles()), ScenarioName);

}  // namespace
}  // namespace parallax
