// The CUDA trainer against the CPU executor on a tiny dense model: the same initial parameters
// and data give the same loss every step (within float rounding). Needs a GPU; skips without one.

#include "executor/cuda/cuda_trainer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "executor/cuda/cuda_plan.h"
#include "executor/cuda/cuda_test_shape.h"
#include "executor/model.h"
#include "executor/optimizer.h"

namespace parallax::exec::gpu {
namespace {

#define PX_REQUIRE_GPU()                                                             \
  do {                                                                               \
    const Result<int> px_devices_ = cuda_device_count();                             \
    if (!px_devices_) GTEST_SKIP() << "no usable GPU: " << px_devices_.error_text(); \
  } while (0)

constexpr int64_t kBatch = 2, kSeq = 32, kMicrobatches = 2, kSteps = 20;

ModelShape tiny_shape(bool tied) { return cuda_test_shape(2, tied); }

/// Every step's tokens: kMicrobatches * kBatch rows of kSeq + 1 ids in [0, vocab).
std::vector<std::vector<int32_t>> make_data(int64_t vocab) {
  std::mt19937 rng(42);
  std::vector<std::vector<int32_t>> steps(kSteps);
  for (auto& ids : steps) {
    ids.resize(static_cast<size_t>(kMicrobatches * kBatch * (kSeq + 1)));
    for (int32_t& t : ids) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
  }
  return steps;
}

AdamWConfig adam_config() {
  AdamWConfig c;
  c.lr = 3e-3;
  c.warmup_steps = 5;
  return c;
}

/// The CPU trainer's step on one rank: microbatches accumulate grad_scale = 1 / step tokens,
/// the global norm in double, AdamW with clipping. Returns the mean loss per token.
double cpu_step(const Transformer<float>& model, AdamW& adam, std::vector<float>& params,
                std::vector<float>& grads, const std::vector<int32_t>& ids, int64_t step) {
  std::fill(grads.begin(), grads.end(), 0.0f);
  const double step_tokens = static_cast<double>(kMicrobatches * kBatch * kSeq);
  const auto per = static_cast<size_t>(kBatch * (kSeq + 1));
  double loss = 0;
  for (int64_t mb = 0; mb < kMicrobatches; ++mb)
    loss += model.loss_and_grad(params, std::span<const int32_t>(ids).subspan(mb * per, per),
                                kBatch, kSeq, static_cast<float>(1.0 / step_tokens), grads);
  double sq = 0;
  for (float g : grads) sq += static_cast<double>(g) * g;
  adam.step(params, grads, std::sqrt(sq), step);
  return loss / step_tokens;
}

void expect_same_training(bool tied) {
  const ModelShape shape = tiny_shape(tied);
  const Transformer<float> model(shape);
  std::vector<float> params(static_cast<size_t>(model.num_params()));
  model.init(params, 1234);
  const auto data = make_data(shape.vocab);

  Result<std::unique_ptr<CudaTrainer>> created = CudaTrainer::create(shape, params, adam_config());
  ASSERT_TRUE(created.ok()) << created.error_text();
  CudaTrainer& gpu = *created.value();
  EXPECT_EQ(gpu.num_params(), model.num_params());

  // A forward alone: the first microbatch's summed loss, as Transformer::loss computes it.
  const std::span<const int32_t> first =
      std::span<const int32_t>(data[0]).first(static_cast<size_t>(kBatch * (kSeq + 1)));
  const Result<double> forward = gpu.loss(first, kBatch, kSeq);
  ASSERT_TRUE(forward.ok()) << forward.error_text();
  const double cpu_forward = model.loss(params, first, kBatch, kSeq);
  EXPECT_NEAR(*forward, cpu_forward, 1e-5 * std::abs(cpu_forward));

  AdamW adam(adam_config(), decay_mask(model.layout(), model.num_params()));
  std::vector<float> grads(params.size());
  for (int64_t step = 1; step <= kSteps; ++step) {
    const auto& ids = data[static_cast<size_t>(step - 1)];
    const Result<double> got = gpu.step(ids, kBatch, kSeq, kMicrobatches, step);
    ASSERT_TRUE(got.ok()) << got.error_text();
    const double want = cpu_step(model, adam, params, grads, ids, step);
    EXPECT_NEAR(*got, want, 1e-4 * std::abs(want)) << "step " << step;
  }
  std::vector<float> trained(params.size());
  const Diagnostics d = gpu.download_params(trained);
  ASSERT_TRUE(d.empty()) << d.front().str();
  double max_diff = 0;
  for (size_t i = 0; i < params.size(); ++i)
    max_diff = std::max(max_diff, static_cast<double>(std::abs(trained[i] - params[i])));
  EXPECT_LT(max_diff, 1e-3) << "parameters drifted apart";
  // At least parameters, gradients, both moments and cuBLAS's workspace.
  EXPECT_GE(gpu.peak_device_bytes(), 4 * params.size() * sizeof(float) + kCublasWorkspaceBytes);
}

TEST(CudaTrainer, MatchesTheCpuExecutorUntied) {
  PX_REQUIRE_GPU();
  expect_same_training(false);
}

TEST(CudaTrainer, MatchesTheCpuExecutorTied) {
  PX_REQUIRE_GPU();
  expect_same_training(true);
}

// The shape is checked before any device call, so this runs without a GPU too.
TEST(CudaTrainer, RefusesMoeBeforeTouchingTheDevice) {
  ModelShape moe = tiny_shape(false);
  moe.moe.experts = 4;
  moe.moe.top_k = 2;
  moe.moe.expert_ffn_hidden = 32;
  const Result<std::unique_ptr<CudaTrainer>> refused =
      CudaTrainer::create(moe, std::vector<float>(10), adam_config());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error_text().find("dense models only"), std::string::npos);
  EXPECT_TRUE(cuda_trainer_built());
}

TEST(CudaTrainer, RefusesIdsOutsideTheVocabulary) {
  PX_REQUIRE_GPU();
  const ModelShape shape = tiny_shape(false);
  const Transformer<float> model(shape);
  std::vector<float> params(static_cast<size_t>(model.num_params()));
  model.init(params, 7);
  Result<std::unique_ptr<CudaTrainer>> created = CudaTrainer::create(shape, params, adam_config());
  ASSERT_TRUE(created.ok()) << created.error_text();
  std::vector<int32_t> ids(static_cast<size_t>(kBatch * (kSeq + 1)), 3);
  ids[5] = 200;  // beyond the vocabulary
  const Result<double> bad = created.value()->step(ids, kBatch, kSeq, 1, 1);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error_text().find("token 200 outside [0, 97)"), std::string::npos);
}

}  // namespace
}  // namespace parallax::exec::gpu
