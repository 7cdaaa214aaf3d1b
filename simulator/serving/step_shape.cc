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

ServeConfig engine_config(const Deployment& d, int64_t num_gpu_blocks, bool chunked_prefill,
                          int64_t long_prefill_token_threshold) {
  ServeConfig c;
  c.replicas = d.dp;
  c.scheduler.max_num_seqs = d.max_num_seqs;
  c.scheduler.max_num_batched_tokens = d.max_num_batched_tokens;
  c.scheduler.block_size = d.block_size;
  c.scheduler.num_gpu_blocks = num_gpu_blocks;
  c.scheduler.enable_chunked_prefill = chunked_prefill;
  c.scheduler.long_prefill_token_threshold = long_prefill_token_threshold;
  return c;
}

}  // namespace parallax::serving
