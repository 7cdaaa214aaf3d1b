#pragma once
/// Training data for the executor: a byte-level tokenizer over a text file, or synthetic
/// sequences with a learnable pattern. Sequence number i of a run is the same whatever the
/// layout, so runs under different layouts see the same tokens.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace parallax::exec {

/// Byte-level tokenizer: every byte is one token id in [0, 256).
inline constexpr int64_t kByteVocab = 256;
std::vector<int32_t> byte_tokens(std::string_view text);
std::string byte_text(std::span<const int32_t> tokens);

class TokenSource {
 public:
  /// Sequences x_t = (a + b t) mod vocab with a, b drawn per sequence from `seed` and its index
  /// (b in [1, 8]): random, yet predictable from the previous tokens, so that loss falls.
  static TokenSource synthetic(int64_t vocab, uint64_t seed);
  /// Windows of a token stream: sequence i starts at (i * stride) mod (n - length), stride
  /// co-prime with the stream so that windows spread over it. Fails when the stream is shorter
  /// than `length` + 1 tokens or holds an id >= vocab.
  static Result<TokenSource> from_tokens(std::vector<int32_t> tokens, int64_t vocab, int64_t length,
                                         const std::string& where);

  /// Writes sequence `index` (`out.size()` tokens: seq inputs + 1 target).
  void sequence(int64_t index, std::span<int32_t> out) const;
  int64_t vocab() const { return vocab_; }
  bool synthetic() const { return tokens_.empty(); }

 private:
  int64_t vocab_ = 0;
  uint64_t seed_ = 0;
  std::vector<int32_t> tokens_;
};

}  // namespace parallax::exec
