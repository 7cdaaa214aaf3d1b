#include "executor/cuda/cuda_plan.h"

#include <algorithm>
#include <climits>
#include <string>

namespace parallax::exec::gpu {
namespace {

bool fits_int(int64_t x) { return x > 0 && x <= INT_MAX; }

constexpr int64_t kMaxGridYz = 65535;

/// Appends buffers one after the other, each aligned.
class ArenaCursor {
 public:
  std::size_t take(std::size_t bytes) {
    const std::size_t at = end_;
    end_ = align_up(end_ + std::max<std::size_t>(bytes, 1));
    return at;
  }
  std::size_t floats(int64_t count) { return take(static_cast<std::size_t>(count) * 4); }
  std::size_t end() const { return end_; }

 private:
  std::size_t end_ = 0;
};

}  // namespace

std::size_t align_up(std::size_t bytes) {
  return (bytes + kArenaAlign - 1) / kArenaAlign * kArenaAlign;
}

GemmArgs gemm_args(int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b) {
  PX_CHECK(fits_int(m) && fits_int(n) && fits_int(k),
           "gemm sizes must be positive ints, got m=" << m << " n=" << n << " k=" << k);
  GemmArgs g;
  g.transpose_first = trans_b;
  g.transpose_second = trans_a;
  g.m = static_cast<int>(n);
  g.n = static_cast<int>(m);
  g.k = static_cast<int>(k);
  g.ld_first = static_cast<int>(trans_b ? k : n);   // B stored n x k, or k x n
  g.ld_second = static_cast<int>(trans_a ? m : k);  // A stored k x m, or m x k
  g.ldc = static_cast<int>(n);
  return g;
}

std::vector<uint8_t> decay_mask(std::span<const TensorSlot> layout, int64_t num_params) {
  std::vector<uint8_t> mask(static_cast<std::size_t>(num_params), 1);
  for (const TensorSlot& s : layout) {
    PX_CHECK(s.offset >= 0 && s.offset + s.size() <= num_params,
             "tensor " << s.name << " outside the " << num_params << " parameters");
    if (!decays(s)) std::fill(mask.begin() + s.offset, mask.begin() + s.offset + s.size(), 0);
  }
  return mask;
}

Diagnostics check_cuda_shape(const ModelShape& s, const std::string& where) {
  Diagnostics d;
  if (s.moe.experts > 0)
    d.push_back(
        {where + "/moe",
         "the CUDA backend trains dense models only, got experts=" + std::to_string(s.moe.experts),
         "run MoE models with --backend cpu"});
  if (s.layers <= 0 || s.hidden <= 0 || s.heads <= 0 || s.kv_heads <= 0 || s.head_dim <= 0 ||
      s.ffn_hidden <= 0 || s.vocab <= 0)
    d.push_back({where, "every dimension of the model shape must be positive", ""});
  else if (s.heads % s.kv_heads != 0)
    d.push_back(
        {where + "/kv_heads",
         "kv_heads=" + std::to_string(s.kv_heads) + " must divide heads=" + std::to_string(s.heads),
         ""});
  if (s.head_dim % 2 != 0)
    d.push_back({where + "/head_dim",
                 "rotary embeddings need an even head_dim, got " + std::to_string(s.head_dim), ""});
  return d;
}

Diagnostics check_step(const ModelShape& shape, const StepShape& step,
                       std::span<const int32_t> tokens, std::size_t max_smem_bytes) {
  Diagnostics d;
  const std::string where = "cuda step";
  if (step.batch <= 0 || step.seq <= 0 || step.microbatches <= 0) {
    d.push_back({where,
                 "batch, seq and microbatches must be positive, got batch=" +
                     std::to_string(step.batch) + " seq=" + std::to_string(step.seq) +
                     " microbatches=" + std::to_string(step.microbatches),
                 ""});
    return d;
  }
  const int64_t want = step.microbatches * step.batch * (step.seq + 1);
  if (static_cast<int64_t>(tokens.size()) != want)
    d.push_back({where,
                 "tokens has " + std::to_string(tokens.size()) +
                     " ids, want microbatches * batch * (seq + 1) = " + std::to_string(want),
                 ""});
  const auto bad = std::find_if(tokens.begin(), tokens.end(),
                                [&](int32_t t) { return t < 0 || t >= shape.vocab; });
  if (bad != tokens.end())
    d.push_back(
        {where,
         "token " + std::to_string(*bad) + " outside [0, " + std::to_string(shape.vocab) + ")",
         "the data's vocabulary must match the model's"});
  const int64_t n = step.tokens();
  const int64_t widest =
      std::max({shape.hidden, shape.heads * shape.head_dim, shape.ffn_hidden, shape.vocab});
  if (n > INT_MAX / std::max<int64_t>(widest, 1))
    d.push_back({where,
                 "batch * seq = " + std::to_string(n) + " rows of " + std::to_string(widest) +
                     " values exceed cuBLAS's int sizes",
                 "use a smaller micro batch"});
  // The attention kernels' grids put heads and sequences in y and z.
  if (step.batch > kMaxGridYz || shape.heads > kMaxGridYz)
    d.push_back({where,
                 "batch=" + std::to_string(step.batch) + " and heads=" +
                     std::to_string(shape.heads) + " must be at most " + std::to_string(kMaxGridYz),
                 ""});
  const std::size_t smem = attention_dkdv_smem(step.seq, shape.head_dim);
  if (smem > max_smem_bytes)
    d.push_back({where,
                 "seq=" + std::to_string(step.seq) + " needs " + std::to_string(smem) +
                     " bytes of shared memory per attention block, the device has " +
                     std::to_string(max_smem_bytes),
                 "the simple attention kernels keep a row of scores on chip; use a shorter seq"});
  return d;
}

int64_t logit_chunk_rows(int64_t tokens, int64_t vocab) {
  return std::clamp<int64_t>(kLogitChunk / vocab, 1, tokens);
}

StepBuffers plan_step_buffers(const ModelShape& s, int64_t batch, int64_t seq) {
  PX_CHECK(batch > 0 && seq > 0, "plan_step_buffers: batch=" << batch << " seq=" << seq);
  const int64_t n = batch * seq, h = s.hidden, qc = s.heads * s.head_dim,
                kc = s.kv_heads * s.head_dim, f = s.ffn_hidden;
  StepBuffers b;
  b.tokens = n;
  b.logit_rows = logit_chunk_rows(n, s.vocab);
  ArenaCursor c;
  b.layers.resize(static_cast<std::size_t>(s.layers));
  for (LayerBuffers& l : b.layers) {
    l.x_attn = c.floats(n * h);
    l.x_mlp = c.floats(n * h);
    l.q = c.floats(n * qc);
    l.k = c.floats(n * kc);
    l.v = c.floats(n * kc);
    l.attn = c.floats(n * qc);
    l.gate = c.floats(n * f);
    l.up = c.floats(n * f);
    l.rstd_attn = c.floats(n);
    l.rstd_mlp = c.floats(n);
    l.lse = c.floats(n * s.heads);
  }
  b.inputs = c.take(static_cast<std::size_t>(n) * sizeof(int32_t));
  b.targets = c.take(static_cast<std::size_t>(n) * sizeof(int32_t));
  b.rope_cos = c.floats(seq * (s.head_dim / 2));
  b.rope_sin = c.floats(seq * (s.head_dim / 2));
  for (std::size_t* x : {&b.h, &b.x_final, &b.xf, &b.xn, &b.d_xn}) *x = c.floats(n * h);
  b.rstd_final = c.floats(n);
  b.rstd = c.floats(n);
  b.d_q = c.floats(n * qc);
  b.d_attn = c.floats(n * qc);
  b.d_k = c.floats(n * kc);
  b.d_v = c.floats(n * kc);
  for (std::size_t* x : {&b.act, &b.d_act, &b.d_gate, &b.d_up}) *x = c.floats(n * f);
  b.delta = c.floats(n * s.heads);
  b.logits = c.floats(b.logit_rows * s.vocab);
  b.row_loss = c.take(static_cast<std::size_t>(n) * sizeof(double));
  b.partials = c.take(kReduceBlocks * sizeof(double));
  b.sums = c.take(2 * sizeof(double));
  b.total_bytes = c.end();
  return b;
}

std::size_t persistent_bytes(int64_t num_params) {
  const auto p = static_cast<std::size_t>(num_params);
  return 4 * align_up(p * sizeof(float)) + align_up(p);
}

}  // namespace parallax::exec::gpu
