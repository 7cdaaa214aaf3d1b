#include "simulator/serving/step_shape.h"

namespace parallax::serving {

StepShape step_shape(const IterationBatch& b) {
  StepShape s;
  for (const ScheduledSeq& q : b.seqs) {
    if (q.prefill) {
      s.prefills.push_back({q.new_tokens, q.context_before});
    } else {
      ++s.decodes;
      s.decode_context += static_cast<double>(q.context_before + 1);
    }
  }
  s.sampled = b.sampled;
  return s;
}

StageCost stage_cost(const StepCost& cost) {
  return [&cost](const IterationBatch& b, std::vector<double>* stage_s) {
    cost.stage_times(step_shape(b), stage_s);
  };
}

LockstepCost lockstep_cost(const StepCost& cost) {
  return [&cost, shapes = std::vector<StepShape>()](
             const std::vector<const IterationBatch*>& batches) mutable {
    shapes.resize(batches.size());
    for (size_t r = 0; r < batches.size(); ++r)
      shapes[r] = batches[r] != nullptr ? step_shape(*batches[r]) : StepShape{};
    return cost.lockstep_time_s(shapes);
  };
}

ServeConfig engine_config(const Deployment& d, int64_t num_gpu_blocks, bool chunked_prefill,
                          int64_t long_prefill_token_threshold) {
  ServeConfig c;
  c.replicas = d.dp;
  c.pipeline_stages = d.pp;
  c.scheduler.max_num_seqs = d.max_num_seqs;
  c.scheduler.max_num_batched_tokens = d.max_num_batched_tokens;
  c.scheduler.block_size = d.block_size;
  c.scheduler.num_gpu_blocks = num_gpu_blocks;
  c.scheduler.enable_chunked_prefill = chunked_prefill;
  c.scheduler.long_prefill_token_threshold = long_prefill_token_threshold;
  c.scheduler.enable_prefix_caching = d.enable_prefix_caching;
  return c;
}

PdConfig pd_config(const Deployment& d, int64_t num_gpu_blocks, int prefill_replicas,
                   int decode_replicas) {
  PdConfig c;
  c.prefill = engine_config(d, num_gpu_blocks).scheduler;
  c.decode = c.prefill;
  c.prefill_replicas = prefill_replicas;
  c.decode_replicas = decode_replicas;
  c.pipeline_stages = d.pp;
  return c;
}

}  // namespace parallax::serving
