// Fuzz target: a Hugging Face config.json (core/hf_config: model_from_hf_config).
#include "core/hf_config.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace parallax;
  auto j = fuzz::json_of(data, size);
  if (!j) return 0;
  auto m = model_from_hf_config(*j, "fuzz", "fuzz:");
  if (m) (void)to_json(m.value()).dump();
  return 0;
}
