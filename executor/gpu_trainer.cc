// train_on_gpu: the training loop of the CUDA backend (one GPU), over gpu::CudaTrainer. The data
// order, the loss and the step record are the CPU trainer's on one rank, so the two backends'
// curves compare step for step.

#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "core/units.h"
#include "executor/cuda/cuda_trainer.h"
#include "executor/trainer.h"

namespace parallax::exec {

Result<TrainResult> train_on_gpu(const ModelShape& shape, const TokenSource& data,
                                 const TrainOptions& o,
                                 const std::function<void(const StepRecord&)>& on_step) {
  Diagnostics bad = check_training(shape, o, 1, &data);
  auto refuse = [&](const char* field, bool used, const std::string& what) {
    if (used)
      bad.push_back({field, what + " is not executed on the CUDA backend yet",
                     "--backend cpu, or one GPU without it"});
  };
  refuse("--tp", o.tp > 1 || o.pp > 1 || o.cp > 1 || o.ep > 1,
         "parallelism (tp, pp, cp, ep above 1)");
  refuse("--zero", o.shard_optimizer || o.shard_gradients || o.shard_parameters,
         "a sharded optimizer");
  refuse("--checkpoint-dir", !o.checkpoint_dir.empty() || o.resume, "checkpointing");
  if (!bad.empty()) return bad;
  const Transformer<float> model(shape);
  std::vector<float> params(static_cast<size_t>(model.num_params()));
  model.init(params, o.seed);
  auto trainer = gpu::CudaTrainer::create(shape, params, o.adam);
  if (!trainer) return trainer.errors();

  const int64_t len = o.seq + 1, micro = o.global_batch / o.micro_batch;
  const double step_tokens = static_cast<double>(o.global_batch) * o.seq;
  std::vector<int32_t> tokens(static_cast<size_t>(o.global_batch * len));
  TrainResult result;
  result.params = model.num_params();
  for (int64_t step = 1; step <= o.steps; ++step) {
    // Sequence (step - 1) * gbs + i of the run, as the CPU trainer's one replica reads them.
    for (int64_t i = 0; i < o.global_batch; ++i)
      data.sequence((step - 1) * o.global_batch + i,
                    std::span<int32_t>(tokens).subspan(static_cast<size_t>(i * len),
                                                       static_cast<size_t>(len)));
    const auto t0 = std::chrono::steady_clock::now();
    auto loss = (*trainer)->step(tokens, o.micro_batch, o.seq, micro, step);
    if (!loss) return loss.errors();
    StepRecord r;
    r.step = step;
    r.loss = loss.value();
    r.grad_norm = (*trainer)->last_grad_norm();
    // The device step has applied its update already (no checkpoints on this backend yet):
    // stop at the first non-finite value, as the CPU trainer does.
    if (!std::isfinite(r.loss) || !std::isfinite(r.grad_norm)) {
      const bool loss_bad = !std::isfinite(r.loss);
      result.stopped =
          NonFinite{step, loss_bad ? "loss" : "gradient norm", loss_bad ? r.loss : r.grad_norm};
      break;
    }
    r.time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.tokens_per_s = step_tokens / r.time_s;
    r.peak_memory_gib = static_cast<double>((*trainer)->peak_device_bytes()) / kGiB;
    result.steps.push_back(r);
    if (on_step) on_step(r);
  }
  summarise_steps(&result, step_tokens);
  return result;
}

}  // namespace parallax::exec
