#include "core/hw_profile.h"

namespace parallax {

Diagnostics validate_profile(const HwProfile& p, const std::string& where) {
  Diagnostics out;
  auto pos = [&](const char* f, double v) {
    if (!(v > 0))
      out.push_back(
          {where + "/" + f, std::string(f) + " must be positive, got " + std::to_string(v), ""});
  };
  auto frac = [&](const char* f, double v) {
    if (!(v > 0 && v <= 1))
      out.push_back({where + "/" + f,
                     std::string(f) + " must be in (0, 1], got " + std::to_string(v),
                     "an achieved fraction of peak"});
  };
  pos("bf16_tflops", p.bf16_tflops);
  if (p.fp8_tflops < 0) out.push_back({where + "/fp8_tflops", "must be >= 0", "0 means no fp8"});
  if (p.fp32_tflops < 0)
    out.push_back({where + "/fp32_tflops", "must be >= 0", "0 means not given"});
  for (auto [f, v] : {std::pair{"mxfp8_tflops", p.mxfp8_tflops}, {"nvfp4_tflops", p.nvfp4_tflops}})
    if (v < 0)
      out.push_back({where + "/" + f, "must be >= 0", "0 means the part has no such format"});
  pos("sm_count", p.sm_count);
  pos("gemm_tile_m", p.gemm_tile_m);
  pos("gemm_tile_n", p.gemm_tile_n);
  frac("gemm_efficiency", p.gemm_efficiency);
  if (p.fp8_tflops > 0) frac("fp8_gemm_efficiency", p.fp8_gemm_efficiency);
  if (p.mxfp8_tflops > 0) frac("mxfp8_gemm_efficiency", p.mxfp8_gemm_efficiency);
  if (p.nvfp4_tflops > 0) frac("nvfp4_gemm_efficiency", p.nvfp4_gemm_efficiency);
  frac("attention_fwd_efficiency", p.attention_fwd_efficiency);
  frac("attention_bwd_efficiency", p.attention_bwd_efficiency);
  for (auto [f, v] : {std::pair{"fa2_attention_fwd_efficiency", p.fa2_attention_fwd_efficiency},
                      {"fa2_attention_bwd_efficiency", p.fa2_attention_bwd_efficiency},
                      {"causal_attention_factor", p.causal_attention_factor},
                      {"fa2_causal_attention_factor", p.fa2_causal_attention_factor}})
    if (v != 0) frac(f, v);
  pos("hbm_gib", p.hbm_gib);
  pos("hbm_bw_gbps", p.hbm_bw_gbps);
  frac("hbm_efficiency", p.hbm_efficiency);
  pos("gpus_per_node", p.gpus_per_node);
  pos("scale_up_domain", p.scale_up_domain);
  if (p.shared_processors < 0)
    out.push_back({where + "/shared_processors", "must be >= 0", "0 means not shared"});
  pos("scale_up_bw_gbps", p.scale_up_bw_gbps);
  frac("scale_up_efficiency", p.scale_up_efficiency);
  pos("scale_out_bw_gbps", p.scale_out_bw_gbps);
  frac("scale_out_efficiency", p.scale_out_efficiency);
  if (p.scale_up_domain > 0 && p.gpus_per_node > 0 && p.scale_up_domain % p.gpus_per_node != 0 &&
      p.gpus_per_node % p.scale_up_domain != 0) {
    out.push_back({where + "/scale_up_domain",
                   "scale_up_domain=" + std::to_string(p.scale_up_domain) + " and gpus_per_node=" +
                       std::to_string(p.gpus_per_node) + " must divide one another",
                   ""});
  }
  return out;
}

const char* to_string(Precision p) {
  switch (p) {
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp8:
      return "fp8";
    case Precision::kFp32:
      return "fp32";
    case Precision::kMxfp8:
      return "mxfp8";
    case Precision::kNvfp4:
      return "nvfp4";
  }
  return "?";
}

const char* to_string(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kAllReduce:
      return "all_reduce";
    case CollectiveOp::kAllGather:
      return "all_gather";
    case CollectiveOp::kReduceScatter:
      return "reduce_scatter";
    case CollectiveOp::kAllToAll:
      return "all_to_all";
    case CollectiveOp::kSendRecv:
      return "send_recv";
  }
  return "?";
}

const char* to_string(LinkClass l) { return l == LinkClass::kScaleUp ? "scale_up" : "scale_out"; }

}  // namespace parallax
