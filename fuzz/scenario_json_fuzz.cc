// Fuzz target: a scenario or plan file ("parallax-plan/1" is a scenario) read by
// core/json_io's scenario_from_json, then its plan written back as plan files do.
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace parallax;
  auto j = fuzz::json_of(data, size);
  if (!j) return 0;
  auto s = scenario_from_json(*j, "fuzz:", ParallelPlan{});
  if (!s) return 0;
  (void)plan_to_json(s->plan).dump();
  if (s->model) (void)to_json(*s->model).dump();
  return 0;
}
