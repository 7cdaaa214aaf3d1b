#pragma once
/// HwProfile: what one accelerator part and its node deliver. Every number comes from a profile
/// file (hw_profiles/*.json) with its source; nothing about hardware is hard-coded elsewhere.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/result.h"

namespace parallax {

/// Tensor precisions. Training plans run in bf16, fp8 (tensor-wise scaled e4m3/e5m2), or the
/// block-scaled recipes of Blackwell tensor cores: kMxfp8 (OCP MX: e4m3 elements, one e8m0 scale
/// per 32) and kNvfp4 (e2m1 elements, one e4m3 scale per 16, one fp32 scale per tensor); only the
/// linear layers' GEMMs take these formats, the rest of the model stays in bf16. kFp32 exists for
/// measured tables of parts whose native math is fp32 (a CPU calibrated with Eigen).
enum class Precision { kBf16, kFp8, kFp32, kMxfp8, kNvfp4 };

/// The block-scaled recipes (MXFP8, NVFP4): a GEMM at the block-scaled tensor-core rate with its
/// operands quantized in blocks along K.
inline bool is_block_scaled(Precision p) {
  return p == Precision::kMxfp8 || p == Precision::kNvfp4;
}

/// Transformer layers at each end of the model whose linear GEMMs NVIDIA's NVFP4 pretraining
/// recipe keeps in bf16 ("selective high-precision layers", arXiv 2509.25149; its 12B run kept
/// about 16% of them), at the counts Megatron-LM runs it with: --first-last-layers-bf16 and
/// its defaults num_layers_at_start_in_bf16 = num_layers_at_end_in_bf16 = 1
/// (megatron/core/transformer/transformer_config.py). The simulator and the Megatron emitter
/// both take them from here.
inline constexpr int kNvfp4Bf16LayersAtStart = 1;
inline constexpr int kNvfp4Bf16LayersAtEnd = 1;

/// Whether layer `layer` (0-based, of `layers`) of a plan in `p` runs its linear GEMMs in bf16.
inline bool recipe_keeps_layer_in_bf16(Precision p, int layer, int layers) {
  return p == Precision::kNvfp4 &&
         (layer < kNvfp4Bf16LayersAtStart || layer >= layers - kNvfp4Bf16LayersAtEnd);
}

/// Collective operations the cost model and the calibration tables know.
enum class CollectiveOp { kAllReduce, kAllGather, kReduceScatter, kAllToAll, kSendRecv };

/// Which fabric a group's traffic crosses.
enum class LinkClass { kScaleUp, kScaleOut };  ///< NVLink/NVSwitch domain, or NICs between domains

/// A measured GEMM throughput for one shape (filled by `parallax calibrate`).
struct GemmSample {
  int64_t m = 0, n = 0, k = 0;
  Precision precision = Precision::kBf16;
  double tflops = 0;
  double spread = 0;  ///< (p90 - p10) / median of its repetitions; 0 when not recorded
};

/// A measured bus bandwidth (nccl-tests convention) for one collective, group and message size.
struct CollectiveSample {
  CollectiveOp op = CollectiveOp::kAllReduce;
  LinkClass link = LinkClass::kScaleUp;
  int group_size = 0;
  double bytes = 0;
  double busbw_gbps = 0;
  double spread = 0;  ///< (p90 - p10) / median of its repetitions; 0 when not recorded
};

/// A measured memory-bound kernel: the bandwidth it achieved moving `bytes` (reads + writes).
/// Kernels: "copy", "triad", "rmsnorm", "swiglu", "softmax" (calibrate/backend.h).
struct MemorySample {
  std::string kernel;
  double bytes = 0;
  double gbps = 0;
  double spread = 0;
};

/// A measured fused causal attention kernel, forward or backward, over `seq` tokens of
/// `head_dim`; `tflops` counts causal FLOPs (half the square; backward 2.5x forward) in the
/// precision the part runs attention in.
struct AttentionSample {
  int64_t seq = 0;
  int64_t head_dim = 0;
  bool backward = false;
  double tflops = 0;
  double spread = 0;
};

struct HwProfile {
  std::string name;         ///< e.g. "h100-sxm-80gb"
  std::string description;  ///< human-readable part name
  bool measured = false;    ///< written by `parallax calibrate`
  std::string date;         ///< when it was measured (ISO 8601), measured profiles only
  std::string driver;       ///< runtime and driver versions it was measured under

  // Compute.
  double bf16_tflops = 0;   ///< dense tensor-core peak
  double fp8_tflops = 0;    ///< dense; 0 when the part has no fp8
  double fp32_tflops = 0;   ///< dense fp32 (non-tensor-core); 0 when not given
  double mxfp8_tflops = 0;  ///< dense block-scaled MXFP8; 0 when the part has no MX formats
  double nvfp4_tflops = 0;  ///< dense block-scaled NVFP4; 0 when the part has no NVFP4
  int sm_count = 0;         ///< streaming multiprocessors (or AI cores) for wave quantization
  int gemm_tile_m = 128;    ///< typical output tile of the vendor GEMM library
  int gemm_tile_n = 128;
  int gemm_k_overhead =
      0;  ///< K-elements' worth of time each output tile spends outside the mainloop
  double gemm_efficiency = 0;        ///< achieved/peak on large, aligned GEMMs (library benchmarks)
  double fp8_gemm_efficiency = 0;    ///< same for fp8
  double mxfp8_gemm_efficiency = 0;  ///< same for MXFP8 (the GEMM alone, not its casts)
  double nvfp4_gemm_efficiency = 0;  ///< same for NVFP4
  double attention_fwd_efficiency = 0;  ///< fused (flash) attention forward, achieved/peak
  double attention_bwd_efficiency = 0;  ///< fused attention backward
  /// FlashAttention-2 (PyTorch SDPA's flash backend) where it differs from the above (Hopper:
  /// FA2 has no WGMMA/TMA path); 0 = the same kernel as `attention_*_efficiency`.
  double fa2_attention_fwd_efficiency = 0;
  double fa2_attention_bwd_efficiency = 0;
  /// Causal (masked) over unmasked TFLOP/s of the same kernel, the FLOPs of causal attention
  /// counted as half, away from the diagonal: the uneven work of the query blocks costs
  /// throughput, and each masked diagonal block costs two unmasked ones (ComputeCost::attention
  /// counts those apart). 0 = not given (taken as 1, and no diagonal cost).
  double causal_attention_factor = 0;      ///< of attention_*_efficiency's kernel
  double fa2_causal_attention_factor = 0;  ///< of fa2_attention_*_efficiency's kernel
  double kernel_overhead_us = 0;           ///< per-kernel launch and tail overhead
  int comm_sms = 0;  ///< SMs a collective occupies while it overlaps compute (NCCL channels)

  // Memory.
  double hbm_gib = 0;
  double hbm_bw_gbps = 0;     ///< GB/s
  double hbm_efficiency = 0;  ///< achieved/peak for streaming kernels
  double reserved_gib = 0;    ///< runtime context, allocator fragmentation

  // Interconnect. Bandwidths are unidirectional per GPU in GB/s.
  int gpus_per_node = 0;
  int scale_up_domain = 0;  ///< GPUs sharing one NVLink/NVSwitch domain (8, or 72 for NVL72)
  /// Measured CPU profiles: the host's processors when the gpus_per_node ranks that calibrated
  /// it time-shared them (its compute tables are a rank's share of one); 0 otherwise.
  int shared_processors = 0;
  double scale_up_bw_gbps = 0;
  double scale_up_efficiency = 0;  ///< achieved bus bandwidth / nominal for large messages
  double scale_up_latency_us = 0;
  double scale_out_bw_gbps = 0;  ///< NIC bandwidth per GPU
  double scale_out_efficiency = 0;
  double scale_out_latency_us = 0;

  /// Field name -> where its number comes from (datasheet, paper, measurement).
  std::map<std::string, std::string> sources;

  // Measured tables (optional).
  std::vector<GemmSample> gemm_samples;
  std::vector<CollectiveSample> collective_samples;
  std::vector<MemorySample> memory_samples;
  std::vector<AttentionSample> attention_samples;

  bool has_measured_tables() const {
    return !gemm_samples.empty() || !collective_samples.empty() || !memory_samples.empty() ||
           !attention_samples.empty();
  }

  /// The dense peak GEMMs in `p` run against (bf16's where the part gives none for `p`).
  double peak_tflops(Precision p) const {
    if (p == Precision::kFp8 && fp8_tflops > 0) return fp8_tflops;
    if (p == Precision::kFp32 && fp32_tflops > 0) return fp32_tflops;
    if (p == Precision::kMxfp8 && mxfp8_tflops > 0) return mxfp8_tflops;
    if (p == Precision::kNvfp4 && nvfp4_tflops > 0) return nvfp4_tflops;
    return bf16_tflops;
  }

  /// The peak MFU of a plan in `p` is reported against: that precision's dense peak for bf16,
  /// fp8 and fp32, and the bf16 dense peak for MXFP8 and NVFP4, as published block-scaled runs
  /// report it (TorchTitan's get_peak_flops, torchtitan/tools/utils.py v0.2.2, returns the bf16
  /// peak whatever model converter, MX included, the run uses).
  double mfu_peak_tflops(Precision p) const {
    return is_block_scaled(p) ? bf16_tflops : peak_tflops(p);
  }

  /// Achieved/peak of large, aligned GEMMs in `p`.
  double gemm_efficiency_of(Precision p) const {
    switch (p) {
      case Precision::kFp8:
        return fp8_gemm_efficiency;
      case Precision::kMxfp8:
        return mxfp8_gemm_efficiency;
      case Precision::kNvfp4:
        return nvfp4_gemm_efficiency;
      case Precision::kBf16:
      case Precision::kFp32:
        break;
    }
    return gemm_efficiency;
  }

  /// Whether the part's tensor cores run `p` (a peak for it); bf16 always.
  bool supports(Precision p) const {
    switch (p) {
      case Precision::kFp8:
        return fp8_tflops > 0;
      case Precision::kFp32:
        return fp32_tflops > 0;
      case Precision::kMxfp8:
        return mxfp8_tflops > 0;
      case Precision::kNvfp4:
        return nvfp4_tflops > 0;
      case Precision::kBf16:
        break;
    }
    return true;
  }
};

/// Checks a profile for missing or impossible numbers; `where` prefixes diagnostics.
Diagnostics validate_profile(const HwProfile& p, const std::string& where);

const char* to_string(Precision p);
const char* to_string(CollectiveOp op);
const char* to_string(LinkClass l);

}  // namespace parallax
