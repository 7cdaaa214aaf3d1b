#pragma once
/// What the serving simulator's tests share: a fake engine whose step cost is a closed form.

#include "simulator/serving/scheduler.h"

namespace parallax::serving::testing {

/// A step costs a + b * prefill_tokens + c * decode_tokens seconds.
struct LinearCost {
  double a = 0.01, b = 1e-4, c = 1e-3;
  double operator()(const IterationBatch& batch) const {
    return a + b * static_cast<double>(batch.prefill_tokens) +
           c * static_cast<double>(batch.decode_tokens);
  }
};

}  // namespace parallax::serving::testing
