#include "executor/optimizer.h"

#include <gtest/gtest.h>

#include <cmath>

namespace parallax::exec {
namespace {

TEST(ExecAdamW, FirstStepMovesEachWeightByTheLearningRate) {
  // Step 1: m = (1-b1) g, v = (1-b2) g^2; bias-corrected m/c1 = g, v/c2 = g^2, so the update is
  // lr * g / (|g| + eps) = lr * sign(g), plus decoupled decay lr * wd * p where it applies.
  AdamWConfig c;
  c.lr = 0.01;
  c.weight_decay = 0.1;
  c.clip_norm = 0;
  AdamW adam(c, {1, 0, 1});
  std::vector<float> p = {1.0f, 1.0f, -2.0f};
  const std::vector<float> g = {0.5f, -3.0f, 2.0f};
  EXPECT_EQ(adam.step(p, g, 0, 1), 1.0);
  EXPECT_NEAR(p[0], 1.0 - 0.01 * 0.1 * 1.0 - 0.01, 1e-6);
  EXPECT_NEAR(p[1], 1.0 + 0.01, 1e-6);  // not decayed
  EXPECT_NEAR(p[2], -2.0 + 0.01 * 0.1 * 2.0 - 0.01, 1e-6);
}

TEST(ExecAdamW, ClipsByTheGlobalNormAndWarmsUp) {
  AdamWConfig c;
  c.lr = 1.0;
  c.weight_decay = 0;
  c.clip_norm = 1.0;
  c.warmup_steps = 4;
  AdamW adam(c, {0});
  std::vector<float> p = {0.0f};
  // A global norm of 10 (over every rank's shard) scales this shard's gradients by 0.1.
  EXPECT_DOUBLE_EQ(adam.step(p, std::vector<float>{2.0f}, 10.0, 1), 0.1);
  // Warm-up: step 1 of 4 runs at lr / 4; the first update is lr * sign(g).
  EXPECT_NEAR(p[0], -0.25, 1e-6);
  EXPECT_NEAR(adam.first_moment()[0], 0.1 * 0.2, 1e-7);
  EXPECT_NEAR(adam.second_moment()[0], 0.05 * 0.04, 1e-8);
}

TEST(ExecAdamW, MinimisesAQuadratic) {
  AdamWConfig c;
  c.lr = 0.05;
  c.weight_decay = 0;
  AdamW adam(c, {0, 0});
  std::vector<float> p = {3.0f, -2.0f};
  for (int step = 1; step <= 500; ++step) {
    const std::vector<float> g = {2 * (p[0] - 1), 2 * (p[1] + 1)};  // (x-1)^2 + (y+1)^2
    adam.step(p, g, std::hypot(g[0], g[1]), step);
  }
  EXPECT_NEAR(p[0], 1.0, 0.02);
  EXPECT_NEAR(p[1], -1.0, 0.02);
}

// A shard whose values lie in pieces of the flat buffer: stepping each piece at its place in
// the state is stepping the whole range, moments included, over several steps.
TEST(ExecAdamW, StepsInPiecesAsOnTheWholeRange) {
  AdamWConfig c;
  c.lr = 0.01;
  AdamW whole(c, {1, 0, 1, 1, 0}), pieces(c, {1, 0, 1, 1, 0});
  std::vector<float> a = {0.5f, -1.0f, 2.0f, 0.25f, -0.75f}, b = a;
  for (int step = 1; step <= 3; ++step) {
    const std::vector<float> g = {0.1f * step, -0.2f, 0.3f, -0.4f * step, 0.5f};
    whole.step(a, g, 2.0, step);
    const std::span<float> pb(b);
    const std::span<const float> gs(g);
    pieces.step_part(pb.subspan(3, 2), gs.subspan(3, 2), 2.0, step, 3);
    pieces.step_part(pb.first(3), gs.first(3), 2.0, step, 0);
  }
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i], b[i]) << i;
    EXPECT_EQ(whole.first_moment()[i], pieces.first_moment()[i]) << i;
    EXPECT_EQ(whole.second_moment()[i], pieces.second_moment()[i]) << i;
  }
}

}  // namespace
}  // namespace parallax::exec
