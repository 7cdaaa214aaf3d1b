// One microbatch through the model on the GPU: the same sequence of operators as
// executor/model.cc's Pass (whole model, no parallelism), GEMMs through cuBLAS in fp32 and the
// rest through our kernels (kernels.h). Buffers live in the step arena planned by cuda_plan.h.

#include <cmath>
#include <cstring>
#include <vector>

#include "executor/cuda/cuda_check.h"
#include "executor/cuda/cuda_state.h"
#include "executor/cuda/kernels.h"

namespace parallax::exec::gpu {
namespace {

/// Row-major C[m x n] = op(A) op(B) + beta C (beta 0 or 1), through column-major cuBLAS.
Diagnostics gemm(const CudaTrainer::State& s, const float* a, const float* b, float* c, int64_t m,
                 int64_t n, int64_t k, bool trans_a, bool trans_b, float beta) {
  const GemmArgs g = gemm_args(m, n, k, trans_a, trans_b);
  const float alpha = 1.0f;
  PX_EXEC_CUBLAS_TRY(cublasSgemm(s.blas, g.transpose_first ? CUBLAS_OP_T : CUBLAS_OP_N,
                                 g.transpose_second ? CUBLAS_OP_T : CUBLAS_OP_N, g.m, g.n, g.k,
                                 &alpha, b, g.ld_first, a, g.ld_second, &beta, c, g.ldc));
  return {};
}

/// The microbatch's pass; reads and writes the state's buffers.
class DevicePass {
 public:
  DevicePass(CudaTrainer::State& s) : s_(s), p_(s.plan), n_(s.plan.tokens) {}

  Diagnostics forward();
  /// The loss of every row into row_loss; with `train`, the output layer's gradient and d_xn.
  Diagnostics head(bool train, float grad_scale);
  Diagnostics backward();

 private:
  const float* param(const TensorSlot& t) const { return s_.params + t.offset; }
  float* grad(const TensorSlot& t) const { return s_.grads + t.offset; }
  float* buf(std::size_t offset) const { return s_.buf<float>(offset); }
  const int32_t* inputs() const { return s_.buf<int32_t>(p_.inputs); }
  float eps() const { return static_cast<float>(s_.shape.norm_eps); }
  Diagnostics copy(float* dst, std::size_t src_offset, int64_t count) const {
    PX_EXEC_CUDA_TRY(cudaMemcpyAsync(dst, buf(src_offset), static_cast<std::size_t>(count) * 4,
                                     cudaMemcpyDeviceToDevice, s_.stream));
    return {};
  }
  Diagnostics rotate(std::size_t x, int64_t heads, bool inverse) const {
    PX_EXEC_CUDA_TRY(launch_rotary(buf(x), buf(p_.rope_cos), buf(p_.rope_sin), n_, s_.plan_seq,
                                   heads, s_.shape.head_dim, inverse, s_.stream));
    return {};
  }
  AttentionArgs attention(const LayerBuffers& l) const {
    const ModelShape& m = s_.shape;
    AttentionArgs a;
    a.q = buf(l.q);
    a.k = buf(l.k);
    a.v = buf(l.v);
    a.out = buf(l.attn);
    a.lse = buf(l.lse);
    a.dout = buf(p_.d_attn);
    a.delta = buf(p_.delta);
    a.dq = buf(p_.d_q);
    a.dk = buf(p_.d_k);
    a.dv = buf(p_.d_v);
    a.batch = s_.plan_batch;
    a.seq = s_.plan_seq;
    a.heads = m.heads;
    a.kv_heads = m.kv_heads;
    a.head_dim = m.head_dim;
    return a;
  }
  Diagnostics forward_block(const BlockTensors& b, const LayerBuffers& l);
  Diagnostics backward_mlp(const BlockTensors& b, const LayerBuffers& l);
  Diagnostics backward_attention(const BlockTensors& b, const LayerBuffers& l);

  CudaTrainer::State& s_;
  const StepBuffers& p_;
  const int64_t n_;
};

Diagnostics DevicePass::forward() {
  const int64_t h = s_.shape.hidden;
  PX_EXEC_CUDA_TRY(
      launch_embedding_forward(param(s_.embed), inputs(), buf(p_.h), n_, h, s_.stream));
  for (std::size_t i = 0; i < s_.blocks.size(); ++i)
    PX_EXEC_DIAG_TRY(forward_block(s_.blocks[i], p_.layers[i]));
  PX_EXEC_DIAG_TRY(copy(buf(p_.x_final), p_.h, n_ * h));
  PX_EXEC_CUDA_TRY(launch_rms_norm_forward(buf(p_.h), param(s_.final_norm), eps(), buf(p_.xf),
                                           buf(p_.rstd_final), n_, h, s_.stream));
  return {};
}

// h += attention(rope(norm(h) wq), rope(norm(h) wk), norm(h) wv) wo;
// h += swiglu(norm(h) w_gate, norm(h) w_up) w_down.
Diagnostics DevicePass::forward_block(const BlockTensors& b, const LayerBuffers& l) {
  const ModelShape& m = s_.shape;
  const int64_t h = m.hidden, qc = m.heads * m.head_dim, kc = m.kv_heads * m.head_dim,
                f = m.ffn_hidden;
  float* xn = buf(p_.xn);
  PX_EXEC_DIAG_TRY(copy(buf(l.x_attn), p_.h, n_ * h));
  PX_EXEC_CUDA_TRY(launch_rms_norm_forward(buf(p_.h), param(b.attn_norm), eps(), xn,
                                           buf(l.rstd_attn), n_, h, s_.stream));
  PX_EXEC_DIAG_TRY(gemm(s_, xn, param(b.wq), buf(l.q), n_, qc, h, false, false, 0));
  PX_EXEC_DIAG_TRY(gemm(s_, xn, param(b.wk), buf(l.k), n_, kc, h, false, false, 0));
  PX_EXEC_DIAG_TRY(gemm(s_, xn, param(b.wv), buf(l.v), n_, kc, h, false, false, 0));
  PX_EXEC_DIAG_TRY(rotate(l.q, m.heads, false));
  PX_EXEC_DIAG_TRY(rotate(l.k, m.kv_heads, false));
  PX_EXEC_CUDA_TRY(launch_attention_forward(attention(l), s_.stream));
  PX_EXEC_DIAG_TRY(gemm(s_, buf(l.attn), param(b.wo), buf(p_.h), n_, h, qc, false, false, 1));

  PX_EXEC_DIAG_TRY(copy(buf(l.x_mlp), p_.h, n_ * h));
  PX_EXEC_CUDA_TRY(launch_rms_norm_forward(buf(p_.h), param(b.mlp_norm), eps(), xn, buf(l.rstd_mlp),
                                           n_, h, s_.stream));
  PX_EXEC_DIAG_TRY(gemm(s_, xn, param(b.w_gate), buf(l.gate), n_, f, h, false, false, 0));
  PX_EXEC_DIAG_TRY(gemm(s_, xn, param(b.w_up), buf(l.up), n_, f, h, false, false, 0));
  PX_EXEC_CUDA_TRY(launch_swiglu_forward(buf(l.gate), buf(l.up), buf(p_.act), n_ * f, s_.stream));
  PX_EXEC_DIAG_TRY(gemm(s_, buf(p_.act), param(b.w_down), buf(p_.h), n_, h, f, false, false, 1));
  return {};
}

// Logits in chunks of rows: tied, z = x embed^T (embed is vocab x hidden); else z = x W.
Diagnostics DevicePass::head(bool train, float grad_scale) {
  const bool tied = s_.shape.tied_embeddings;
  const int64_t h = s_.shape.hidden, vocab = s_.shape.vocab;
  const TensorSlot& w = tied ? s_.embed : s_.output;
  float* z = buf(p_.logits);
  for (int64_t r0 = 0; r0 < n_; r0 += p_.logit_rows) {
    const int64_t rows = std::min(p_.logit_rows, n_ - r0);
    const float* x = buf(p_.xf) + r0 * h;
    PX_EXEC_DIAG_TRY(gemm(s_, x, param(w), z, rows, vocab, h, false, tied, 0));
    PX_EXEC_CUDA_TRY(launch_cross_entropy(z, s_.buf<int32_t>(p_.targets) + r0,
                                          s_.buf<double>(p_.row_loss) + r0, rows, vocab, grad_scale,
                                          train, s_.stream));
    if (!train) continue;  // z now holds dlogits
    float* d_xn = buf(p_.d_xn) + r0 * h;
    if (tied) {  // g_embed += z^T x;  d_xn = z embed
      PX_EXEC_DIAG_TRY(gemm(s_, z, x, grad(w), vocab, h, rows, true, false, 1));
      PX_EXEC_DIAG_TRY(gemm(s_, z, param(w), d_xn, rows, h, vocab, false, false, 0));
    } else {  // g_W += x^T z;  d_xn = z W^T
      PX_EXEC_DIAG_TRY(gemm(s_, x, z, grad(w), h, vocab, rows, true, false, 1));
      PX_EXEC_DIAG_TRY(gemm(s_, z, param(w), d_xn, rows, h, vocab, false, true, 0));
    }
  }
  return {};
}

Diagnostics DevicePass::backward() {
  const int64_t h = s_.shape.hidden;
  // From here on, h is d(loss)/d(residual stream).
  PX_EXEC_CUDA_TRY(cudaMemsetAsync(buf(p_.h), 0, static_cast<std::size_t>(n_ * h) * 4, s_.stream));
  PX_EXEC_CUDA_TRY(launch_rms_norm_backward(buf(p_.x_final), param(s_.final_norm),
                                            buf(p_.rstd_final), buf(p_.d_xn), buf(p_.h), n_, h,
                                            s_.stream));
  PX_EXEC_CUDA_TRY(launch_rms_norm_weight_grad(buf(p_.x_final), buf(p_.rstd_final), buf(p_.d_xn),
                                               grad(s_.final_norm), n_, h, s_.stream));
  for (std::size_t i = s_.blocks.size(); i-- > 0;) {
    PX_EXEC_DIAG_TRY(backward_mlp(s_.blocks[i], p_.layers[i]));
    PX_EXEC_DIAG_TRY(backward_attention(s_.blocks[i], p_.layers[i]));
  }
  PX_EXEC_CUDA_TRY(
      launch_embedding_backward(buf(p_.h), inputs(), grad(s_.embed), n_, h, s_.stream));
  return {};
}

Diagnostics DevicePass::backward_mlp(const BlockTensors& b, const LayerBuffers& l) {
  const int64_t h = s_.shape.hidden, f = s_.shape.ffn_hidden;
  float *xn = buf(p_.xn), *dh = buf(p_.h), *d_xn = buf(p_.d_xn);
  float *act = buf(p_.act), *d_act = buf(p_.d_act), *d_gate = buf(p_.d_gate), *d_up = buf(p_.d_up);
  // The norm's output and SwiGLU are recomputed rather than kept, as on the CPU.
  PX_EXEC_CUDA_TRY(launch_rms_norm_forward(buf(l.x_mlp), param(b.mlp_norm), eps(), xn, buf(p_.rstd),
                                           n_, h, s_.stream));
  PX_EXEC_CUDA_TRY(launch_swiglu_forward(buf(l.gate), buf(l.up), act, n_ * f, s_.stream));
  PX_EXEC_DIAG_TRY(gemm(s_, act, dh, grad(b.w_down), f, h, n_, true, false, 1));
  PX_EXEC_DIAG_TRY(gemm(s_, dh, param(b.w_down), d_act, n_, f, h, false, true, 0));
  PX_EXEC_CUDA_TRY(
      launch_swiglu_backward(buf(l.gate), buf(l.up), d_act, d_gate, d_up, n_ * f, s_.stream));
  PX_EXEC_DIAG_TRY(gemm(s_, xn, d_gate, grad(b.w_gate), h, f, n_, true, false, 1));
  PX_EXEC_DIAG_TRY(gemm(s_, xn, d_up, grad(b.w_up), h, f, n_, true, false, 1));
  PX_EXEC_DIAG_TRY(gemm(s_, d_gate, param(b.w_gate), d_xn, n_, h, f, false, true, 0));
  PX_EXEC_DIAG_TRY(gemm(s_, d_up, param(b.w_up), d_xn, n_, h, f, false, true, 1));
  PX_EXEC_CUDA_TRY(launch_rms_norm_backward(buf(l.x_mlp), param(b.mlp_norm), buf(l.rstd_mlp), d_xn,
                                            dh, n_, h, s_.stream));
  PX_EXEC_CUDA_TRY(launch_rms_norm_weight_grad(buf(l.x_mlp), buf(l.rstd_mlp), d_xn,
                                               grad(b.mlp_norm), n_, h, s_.stream));
  return {};
}

Diagnostics DevicePass::backward_attention(const BlockTensors& b, const LayerBuffers& l) {
  const ModelShape& m = s_.shape;
  const int64_t h = m.hidden, qc = m.heads * m.head_dim, kc = m.kv_heads * m.head_dim;
  float *xn = buf(p_.xn), *dh = buf(p_.h), *d_xn = buf(p_.d_xn);
  float *d_q = buf(p_.d_q), *d_k = buf(p_.d_k), *d_v = buf(p_.d_v);
  PX_EXEC_DIAG_TRY(gemm(s_, buf(l.attn), dh, grad(b.wo), qc, h, n_, true, false, 1));
  PX_EXEC_DIAG_TRY(gemm(s_, dh, param(b.wo), buf(p_.d_attn), n_, qc, h, false, true, 0));
  PX_EXEC_CUDA_TRY(launch_attention_backward(attention(l), s_.stream));
  PX_EXEC_DIAG_TRY(rotate(p_.d_q, m.heads, true));
  PX_EXEC_DIAG_TRY(rotate(p_.d_k, m.kv_heads, true));
  PX_EXEC_CUDA_TRY(launch_rms_norm_forward(buf(l.x_attn), param(b.attn_norm), eps(), xn,
                                           buf(p_.rstd), n_, h, s_.stream));
  PX_EXEC_DIAG_TRY(gemm(s_, xn, d_q, grad(b.wq), h, qc, n_, true, false, 1));
  PX_EXEC_DIAG_TRY(gemm(s_, xn, d_k, grad(b.wk), h, kc, n_, true, false, 1));
  PX_EXEC_DIAG_TRY(gemm(s_, xn, d_v, grad(b.wv), h, kc, n_, true, false, 1));
  PX_EXEC_DIAG_TRY(gemm(s_, d_q, param(b.wq), d_xn, n_, h, qc, false, true, 0));
  PX_EXEC_DIAG_TRY(gemm(s_, d_k, param(b.wk), d_xn, n_, h, kc, false, true, 1));
  PX_EXEC_DIAG_TRY(gemm(s_, d_v, param(b.wv), d_xn, n_, h, kc, false, true, 1));
  PX_EXEC_CUDA_TRY(launch_rms_norm_backward(buf(l.x_attn), param(b.attn_norm), buf(l.rstd_attn),
                                            d_xn, dh, n_, h, s_.stream));
  PX_EXEC_CUDA_TRY(launch_rms_norm_weight_grad(buf(l.x_attn), buf(l.rstd_attn), d_xn,
                                               grad(b.attn_norm), n_, h, s_.stream));
  return {};
}

/// cos and sin of p * theta^(-2i/d), computed in double and rounded, as RotaryTable does.
void rotary_table(const ModelShape& m, int64_t seq, std::vector<float>& cos_table,
                  std::vector<float>& sin_table) {
  const int64_t half = m.head_dim / 2;
  cos_table.resize(static_cast<std::size_t>(seq * half));
  sin_table.resize(cos_table.size());
  for (int64_t p = 0; p < seq; ++p) {
    for (int64_t i = 0; i < half; ++i) {
      const double freq = std::pow(m.rope_theta, -2.0 * static_cast<double>(i) / m.head_dim);
      const double angle = static_cast<double>(p) * freq;
      cos_table[static_cast<std::size_t>(p * half + i)] = static_cast<float>(std::cos(angle));
      sin_table[static_cast<std::size_t>(p * half + i)] = static_cast<float>(std::sin(angle));
    }
  }
}

}  // namespace

Diagnostics prepare_pass(CudaTrainer::State& s, int64_t batch, int64_t seq) {
  if (batch == s.plan_batch && seq == s.plan_seq) return {};
  s.plan_batch = s.plan_seq = 0;  // until the arena and the table are in place
  s.plan = plan_step_buffers(s.shape, batch, seq);
  if (s.arena.bytes() < s.plan.total_bytes) {
    s.arena.reset();  // first, so that the larger arena can take the old one's place
    PX_EXEC_DIAG_TRY(s.arena.allocate(s.plan.total_bytes, "the step's activations"));
    s.peak_bytes = std::max(s.peak_bytes, s.held_bytes());
  }
  const std::size_t smem = attention_dkdv_smem(seq, s.shape.head_dim);
  if (smem > s.configured_smem_bytes) {
    PX_EXEC_CUDA_TRY(configure_attention_smem(seq, s.shape.head_dim));
    s.configured_smem_bytes = smem;
  }
  std::vector<float> cos_table, sin_table;
  rotary_table(s.shape, seq, cos_table, sin_table);
  const std::size_t bytes = cos_table.size() * sizeof(float);
  // On the trainer's stream (a non-blocking one does not wait for the legacy stream's copies),
  // then waited for: the host tables go away when this returns.
  PX_EXEC_CUDA_TRY(cudaMemcpyAsync(s.buf<float>(s.plan.rope_cos), cos_table.data(), bytes,
                                   cudaMemcpyHostToDevice, s.stream));
  PX_EXEC_CUDA_TRY(cudaMemcpyAsync(s.buf<float>(s.plan.rope_sin), sin_table.data(), bytes,
                                   cudaMemcpyHostToDevice, s.stream));
  PX_EXEC_CUDA_TRY(cudaStreamSynchronize(s.stream));
  s.plan_batch = batch;
  s.plan_seq = seq;
  return {};
}

Result<double> run_microbatch(CudaTrainer::State& s, std::span<const int32_t> tokens, bool train,
                              float grad_scale) {
  const int64_t batch = s.plan_batch, seq = s.plan_seq, n = batch * seq;
  PX_CHECK(static_cast<int64_t>(tokens.size()) == batch * (seq + 1),
           "run_microbatch: " << tokens.size() << " ids for batch=" << batch << " seq=" << seq);
  // The previous microbatch may still read host_ids' upload: wait before rewriting it.
  PX_EXEC_CUDA_TRY(cudaStreamSynchronize(s.stream));
  s.host_ids.resize(static_cast<std::size_t>(2 * n));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < seq; ++i) {
      s.host_ids[static_cast<std::size_t>(b * seq + i)] = tokens[b * (seq + 1) + i];
      s.host_ids[static_cast<std::size_t>(n + b * seq + i)] = tokens[b * (seq + 1) + i + 1];
    }
  const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(int32_t);
  PX_EXEC_CUDA_TRY(cudaMemcpyAsync(s.buf<int32_t>(s.plan.inputs), s.host_ids.data(), bytes,
                                   cudaMemcpyHostToDevice, s.stream));
  PX_EXEC_CUDA_TRY(cudaMemcpyAsync(s.buf<int32_t>(s.plan.targets), s.host_ids.data() + n, bytes,
                                   cudaMemcpyHostToDevice, s.stream));
  DevicePass pass(s);
  PX_EXEC_DIAG_TRY(pass.forward());
  PX_EXEC_DIAG_TRY(pass.head(train, grad_scale));
  if (train) PX_EXEC_DIAG_TRY(pass.backward());
  double* sums = s.buf<double>(s.plan.sums);
  PX_EXEC_CUDA_TRY(launch_sum(s.buf<double>(s.plan.row_loss), n, s.buf<double>(s.plan.partials),
                              sums, s.stream));
  double loss = 0;
  PX_EXEC_CUDA_TRY(cudaMemcpyAsync(&loss, sums, sizeof(double), cudaMemcpyDeviceToHost, s.stream));
  PX_EXEC_CUDA_TRY(cudaStreamSynchronize(s.stream));
  return loss;
}

}  // namespace parallax::exec::gpu
