// Fuzz target: a hardware profile (core/json_io: parse_json + profile_from_json), then written
// back, as `parallax profiles NAME` does.
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace parallax;
  auto j = fuzz::json_of(data, size);
  if (!j) return 0;
  auto p = profile_from_json(*j, "fuzz:");
  if (p) (void)to_json(p.value()).dump();
  return 0;
}
