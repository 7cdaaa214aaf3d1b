// Fuzz target: validation records, JSON Lines (core/measured_run), read line by line as
// `parallax validate` reads them, each record then filled into the plan and model it runs.
#include <sstream>

#include "core/measured_run.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace parallax;
  std::istringstream in(fuzz::text_of(data, size));
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    auto j = parse_json(line, "fuzz", n);
    if (!j) continue;
    auto r = measured_run_from_json(j.value(), "fuzz:" + std::to_string(n) + ":");
    if (!r) continue;
    (void)plan_to_json(to_plan(r.value())).dump();
    (void)to_json(to_model(r.value())).dump();
    (void)arxiv_number(r->source_url);
  }
  return 0;
}
