// Fuzz target: a plan file ("parallax-plan/1", written by `plan --out`) or scenario given to
// `simulate --plan` / `launch --plan`: read, merged with the default layout and checked against
// the model and the cluster by cli/inputs.cc's resolve_run, the way those commands start.
#include <cstdio>

#include "cli/inputs.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace parallax;
  cli::LayoutFlags flags;
  flags.scenario = fuzz::write_input(data, size, ".json");
  auto run = cli::resolve_run(flags);
  if (run) (void)plan_to_json(run->plan).dump();
  std::remove(flags.scenario.c_str());
  return 0;
}
