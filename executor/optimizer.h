#pragma once
/// AdamW with decoupled weight decay and global-norm gradient clipping, over a range of a flat
/// parameter buffer (the whole buffer on one rank; a shard of it under a distributed optimizer).

#include <cstdint>
#include <span>
#include <vector>

namespace parallax::exec {

struct AdamWConfig {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double weight_decay = 0.1;  ///< on matrices; norm weights are not decayed
  double clip_norm = 1.0;     ///< 0: no clipping
  int64_t warmup_steps = 0;   ///< linear warm-up of the learning rate
};

class AdamW {
 public:
  /// `decay[i]` says whether parameter i of the range decays.
  AdamW(const AdamWConfig& config, std::vector<uint8_t> decay);

  /// One step (1-based `step`) on `params` given `grads` (same range). `grad_norm` is the L2
  /// norm of the WHOLE gradient (over every rank's range), so that every shard clips alike:
  /// grads are scaled by min(1, clip_norm / grad_norm). Returns that scale.
  double step(std::span<float> params, std::span<const float> grads, double grad_norm,
              int64_t step);

  /// The same on the part [at, at + params.size()) of the range only: for a shard whose values
  /// lie in pieces of the flat buffer, one call a piece (each with the same grad_norm).
  double step_part(std::span<float> params, std::span<const float> grads, double grad_norm,
                   int64_t step, size_t at);

  /// Moments, for checkpoints (and, mutable, for restoring them).
  std::span<const float> first_moment() const { return m_; }
  std::span<const float> second_moment() const { return v_; }
  std::span<float> first_moment() { return m_; }
  std::span<float> second_moment() { return v_; }

 private:
  AdamWConfig config_;
  std::vector<uint8_t> decay_;
  std::vector<float> m_, v_;
};

}  // namespace parallax::exec
