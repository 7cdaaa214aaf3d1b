// Fuzz target: cli/inputs.cc reading a model file (ours or a Hugging Face config.json, told
// apart by its keys) and a hardware profile file, as --model and --cluster do given a path.
#include <cstdio>

#include "cli/inputs.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace parallax;
  const std::string path = fuzz::write_input(data, size, ".json");
  auto m = cli::resolve_model(path, "--model");
  if (m) (void)to_json(m.value()).dump();
  auto p = cli::resolve_profile(path, "", "--cluster");
  if (p) (void)to_json(p.value()).dump();
  std::remove(path.c_str());
  return 0;
}
