#include "executor/data.h"

#include <numeric>

namespace parallax::exec {
namespace {

/// SplitMix64: a well-mixed 64-bit hash, so that draws do not depend on a library's engine.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

std::vector<int32_t> byte_tokens(std::string_view text) {
  std::vector<int32_t> out(text.size());
  for (size_t i = 0; i < text.size(); ++i) out[i] = static_cast<unsigned char>(text[i]);
  return out;
}

std::string byte_text(std::span<const int32_t> tokens) {
  std::string s(tokens.size(), '\0');
  for (size_t i = 0; i < tokens.size(); ++i) s[i] = static_cast<char>(tokens[i] & 0xff);
  return s;
}

TokenSource TokenSource::synthetic(int64_t vocab, uint64_t seed) {
  TokenSource t;
  t.vocab_ = vocab;
  t.seed_ = seed;
  return t;
}

Result<TokenSource> TokenSource::from_tokens(std::vector<int32_t> tokens, int64_t vocab,
                                             int64_t length, const std::string& where) {
  if (static_cast<int64_t>(tokens.size()) < length + 1)
    return Diagnostic{where,
                      "holds " + std::to_string(tokens.size()) +
                          " tokens, fewer than one sequence of " + std::to_string(length) + " + 1",
                      "a longer text, or a shorter --seq"};
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] >= vocab)
      return Diagnostic{where,
                        "token " + std::to_string(tokens[i]) + " at " + std::to_string(i) +
                            " is outside the model's vocabulary of " + std::to_string(vocab),
                        "byte-level text needs a vocabulary of at least 256"};
  TokenSource t;
  t.vocab_ = vocab;
  t.tokens_ = std::move(tokens);
  return t;
}

void TokenSource::sequence(int64_t index, std::span<int32_t> out) const {
  const int64_t len = static_cast<int64_t>(out.size());
  if (tokens_.empty()) {
    const uint64_t h = mix(seed_ ^ mix(static_cast<uint64_t>(index)));
    const int64_t a = static_cast<int64_t>(h % static_cast<uint64_t>(vocab_));
    const int64_t b = 1 + static_cast<int64_t>((h >> 32) % 8);
    for (int64_t t = 0; t < len; ++t) out[t] = static_cast<int32_t>((a + b * t) % vocab_);
    return;
  }
  const int64_t span = static_cast<int64_t>(tokens_.size()) - len + 1;  // >= 1 start offsets
  // A stride co-prime with the number of starts visits every start before repeating.
  int64_t stride = len;
  while (std::gcd(stride, span) != 1) ++stride;
  // (index * stride) mod span without overflow for streams under 2^32 tokens.
  const uint64_t n = static_cast<uint64_t>(span);
  const int64_t start = static_cast<int64_t>((static_cast<uint64_t>(index) % n) *
                                             (static_cast<uint64_t>(stride) % n) % n);
  for (int64_t t = 0; t < len; ++t) out[t] = tokens_[start + t];
}

}  // namespace parallax::exec
