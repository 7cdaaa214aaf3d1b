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
  PX_CHECK(step >= 1, "AdamW steps count from 1, got " << step);
  const double clip =
      config_.clip_norm > 0 && grad_norm > config_.clip_norm ? config_.clip_norm / grad_norm : 1.0;
  const double lr =
      config_.warmup_steps > 0
          ? config_.lr * std::min(1.0, static_cast<double>(step) / config_.warmup_steps)
          : config_.lr;
  const double b1 = config_.beta1, b2 = config_.beta2;
  // Bias corrections of Adam (Kingma & Ba 2015, Algorithm 1).
  const double c1 = 1 - std::pow(b1, static_cast<double>(step));
  const double c2 = 1 - std::pow(b2, static_cast<double>(step));
  for (size_t i = 0; i < params.size(); ++i) {
    const double g = grads[i] * clip;
    const double m = b1 * m_[i] + (1 - b1) * g;
    const double v = b2 * v_[i] + (1 - b2) * g * g;
    m_[i] = static_cast<float>(m);
    v_[i] = static_cast<float>(v);
    double p = params[i];
    // Decoupled weight decay (Loshchilov & Hutter 2019): p -= lr * wd * p, apart from Adam.
    if (decay_[i]) p -= lr * config_.weight_decay * p;
    p -= lr * (m / c1) / (std::sqrt(v / c2) + config_.eps);
    params[i] = static_cast<float>(p);
  }
  return clip;
}

}  // namespace parallax::exec
