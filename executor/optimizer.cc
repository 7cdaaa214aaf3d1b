#include "executor/optimizer.h"

#include <algorithm>
#include <cmath>

#include "core/result.h"

namespace parallax::exec {

AdamW::AdamW(const AdamWConfig& config, std::vector<uint8_t> decay)
    : config_(config), decay_(std::move(decay)), m_(decay_.size(), 0.0f), v_(decay_.size(), 0.0f) {}

double AdamW::step(std::span<float> params, std::span<const float> grads, double grad_norm,
                   int64_t step) {
  PX_CHECK(params.size() == decay_.size() && grads.size() == decay_.size(),
           "AdamW over " << decay_.size() << " parameters got " << params.size() << " and "
                         << grads.size());
  return step_part(params, grads, grad_norm, step, 0);
}

double AdamW::step_part(std::span<float> params, std::span<const float> grads, double grad_norm,
                        int64_t step, size_t at) {
  PX_CHECK(grads.size() == params.size() && at + params.size() <= decay_.size(),
           "AdamW over " << decay_.size() << " parameters got " << params.size() << " at " << at
                         << " and " << grads.size() << " gradients");
  PX_CHECK(step >= 1, "AdamW steps count from 1, got " << step);
  const double clip =
      config_.clip_norm > 0 && grad_norm > config_.clip_norm ? config_.clip_norm / grad_norm : 1.0;
  const double lr =
      config_.warmup_steps > 0
          ? config_.lr * std::min(1.0, static_cast<double>(step) / config_.warmup_steps)
          : config_.lr;
  // Bias corrections of Adam (Kingma & Ba 2015, Algorithm 1), folded into one step size.
  const double c1 = 1 - std::pow(config_.beta1, static_cast<double>(step));
  const double c2 = 1 - std::pow(config_.beta2, static_cast<double>(step));
  const float b1 = static_cast<float>(config_.beta1), b2 = static_cast<float>(config_.beta2);
  const float g_scale = static_cast<float>(clip);
  const float step_size = static_cast<float>(lr / c1);
  const float inv_c2 = static_cast<float>(1 / c2);
  const float eps = static_cast<float>(config_.eps);
  // Decoupled weight decay (Loshchilov & Hutter 2019): p -= lr * wd * p, apart from Adam.
  const float decay = static_cast<float>(lr * config_.weight_decay);
  float* __restrict p = params.data();
  const float* __restrict g = grads.data();
  float* __restrict m = m_.data() + at;
  float* __restrict v = v_.data() + at;
  const uint8_t* __restrict d = decay_.data() + at;
  const size_t n = params.size();
  // fp32 throughout, branch-free, so that the loop vectorises (the update is memory-bound).
  for (size_t i = 0; i < n; ++i) {
    const float gi = g[i] * g_scale;
    const float mi = b1 * m[i] + (1 - b1) * gi;
    const float vi = b2 * v[i] + (1 - b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    const float pi = p[i] - decay * static_cast<float>(d[i]) * p[i];
    p[i] = pi - step_size * mi / (std::sqrt(vi * inv_c2) + eps);
  }
  return clip;
}

}  // namespace parallax::exec
