// Fuzz target: a serving request trace, JSON Lines or CSV (simulator/serving/workload.cc).
#include "fuzz/fuzz_support.h"
#include "simulator/serving/workload.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace parallax;
  // The first byte picks the prefix-cache block size (the CLI's --hash-block, >= 1).
  if (size == 0) return 0;
  const int64_t hash_block = 1 + data[0] % 64 * 16;
  (void)serving::parse_requests(fuzz::text_of(data + 1, size - 1), "fuzz", hash_block);
  return 0;
}
