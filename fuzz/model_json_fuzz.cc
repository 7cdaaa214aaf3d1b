// Fuzz target: a model in our JSON format (core/json_io: parse_json + model_from_json), then
// written back, as `parallax models` and plan files do.
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace parallax;
  auto j = fuzz::json_of(data, size);
  if (!j) return 0;
  // A model file may hold the model at the top or under "model" (cli/inputs.cc resolve_model).
  const Json& m =
      j->is_object() && j->contains("model") && (*j)["model"].is_object() ? (*j)["model"] : *j;
  auto model = model_from_json(m, "fuzz:");
  if (model) (void)to_json(model.value()).dump();
  return 0;
}
