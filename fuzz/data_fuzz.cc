// Fuzz target: a training data file for the executor (executor/data.cc): the byte tokenizer and
// the windows of the token stream that become sequences.
#include <limits>
#include <vector>

#include "executor/data.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace parallax;
  // The first two bytes pick the sequence length (1..256) and the vocabulary (the byte vocabulary
  // or a smaller one, which the loader must refuse, not index past).
  if (size < 2) return 0;
  const int64_t length = 1 + data[0];
  const int64_t vocab = data[1] % 2 ? exec::kByteVocab : 1 + data[1];
  const std::string text = fuzz::text_of(data + 2, size - 2);
  auto src = exec::TokenSource::from_tokens(exec::byte_tokens(text), vocab, length, "fuzz");
  if (!src) return 0;
  std::vector<int32_t> seq(static_cast<size_t>(length + 1));  // inputs + 1 target, as executed
  for (int64_t index : {int64_t{0}, int64_t{1}, int64_t{7}, std::numeric_limits<int64_t>::max(),
                        std::numeric_limits<int64_t>::min()})
    src->sequence(index, seq);
  (void)exec::byte_text(seq);
  return 0;
}
