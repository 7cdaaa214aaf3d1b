#include "calibrate/fit.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "core/text.h"
#include "core/units.h"

namespace parallax::calibrate {
namespace {

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string fmt(double v, int digits = 1) { return format_fixed(v, digits); }

/// Sets a field and its source.
struct Setter {
  HwProfile* p;
  std::string origin;  ///< "measured by parallax calibrate on <device>, <date>"
  void num(const char* key, double HwProfile::*member, double v, const std::string& how) {
    p->*member = v;
    p->sources[key] = origin + ": " + how;
  }
  void integer(const char* key, int HwProfile::*member, int v, const std::string& how) {
    p->*member = v;
    p->sources[key] = origin + ": " + how;
  }
  /// A number calibrate sets without measuring it (a modelling choice), saying so.
  template <typename T>
  void chosen(const char* key, T HwProfile::*member, T v, const std::string& how) {
    p->*member = v;
    p->sources[key] = "not measured, set by parallax calibrate: " + how;
  }
};

double& peak_field(HwProfile& p, Precision prec) {
  switch (prec) {
    case Precision::kFp8:
      return p.fp8_tflops;
    case Precision::kFp32:
      return p.fp32_tflops;
    case Precision::kMxfp8:
      return p.mxfp8_tflops;
    case Precision::kNvfp4:
      return p.nvfp4_tflops;
    case Precision::kBf16:
      break;
  }
  return p.bf16_tflops;
}

const char* peak_key(Precision prec) {
  switch (prec) {
    case Precision::kFp8:
      return "fp8_tflops";
    case Precision::kFp32:
      return "fp32_tflops";
    case Precision::kMxfp8:
      return "mxfp8_tflops";
    case Precision::kNvfp4:
      return "nvfp4_tflops";
    case Precision::kBf16:
      break;
  }
  return "bf16_tflops";
}

}  // namespace

std::optional<LatencyBandwidth> fit_latency_bandwidth(const std::vector<double>& bytes,
                                                      const std::vector<double>& seconds) {
  // Minimise sum w (a + b x - t)^2, w = 1/t^2: the 2x2 normal equations.
  double sw = 0, swx = 0, swxx = 0, swt = 0, swxt = 0;
  int n = 0;
  for (size_t i = 0; i < bytes.size() && i < seconds.size(); ++i) {
    const double x = bytes[i], t = seconds[i];
    if (!(t > 0) || !(x > 0)) continue;
    const double w = 1 / (t * t);
    sw += w;
    swx += w * x;
    swxx += w * x * x;
    swt += w * t;
    swxt += w * x * t;
    ++n;
  }
  const double det = sw * swxx - swx * swx;
  if (n < 2 || !(det > 0)) return std::nullopt;
  double b = (sw * swxt - swx * swt) / det;
  double a = (swt - b * swx) / sw;
  if (!(b > 0)) return std::nullopt;
  if (a < 0) {
    // A negative intercept is noise around a latency near zero: refit through the origin.
    a = 0;
    b = swxt / swxx;
  }
  LatencyBandwidth f;
  f.latency_s = a;
  f.bandwidth_gbps = 1 / b / kGB;
  f.points = n;
  double se = 0;
  for (size_t i = 0; i < bytes.size() && i < seconds.size(); ++i) {
    if (!(seconds[i] > 0) || !(bytes[i] > 0)) continue;
    const double r = (a + b * bytes[i]) / seconds[i] - 1;
    se += r * r;
  }
  f.rms_rel_error = std::sqrt(se / n);
  return f;
}

Result<Fitted> fit_profile(const CalibrationData& d, const FitOptions& opt) {
  Fitted out;
  HwProfile& p = out.profile;
  const bool based = opt.base.has_value();
  if (based) p = *opt.base;
  p.name = opt.name;
  p.measured = true;
  p.date = d.date;
  p.driver = d.driver;
  // Ranks that time-shared the host's processors measured a rank's share of one (suite.h).
  const std::string shared = d.shared_processors > 0
                                 ? ", " + std::to_string(d.local_size) + " per host sharing " +
                                       std::to_string(d.shared_processors) + " processors"
                                 : "";
  p.description = "measured: " + d.device + " (" + d.backend + ", " + std::to_string(d.ranks) +
                  " rank" + (d.ranks == 1 ? "" : "s") + shared + " over " + d.communicator + ")" +
                  (based ? ", peaks from " + opt.base->name : "");
  p.gemm_samples.clear();
  p.collective_samples.clear();
  p.memory_samples.clear();
  p.attention_samples.clear();
  Setter set{&p, "measured by parallax calibrate on " + d.device + ", " + d.date +
                     (opt.command.empty() ? "" : " (" + opt.command + shared + ")")};
  const std::string what_base = based ? opt.base->name : "";

  // GEMM: per precision, the best shape of the sweep is the achievable peak (as library
  // benchmarks define it); the table keeps every shape.
  std::map<Precision, double> best;
  for (const GemmPoint& g : d.gemm) {
    const double datasheet = based ? opt.base->peak_tflops(g.precision) : 0;
    const bool has_datasheet = based &&
                               (g.precision != Precision::kFp8 || opt.base->fp8_tflops > 0) &&
                               (g.precision != Precision::kFp32 || opt.base->fp32_tflops > 0);
    if (has_datasheet && g.tflops > 1.05 * datasheet) {
      out.rejected.push_back(
          {"gemm",
           "gemm " + std::to_string(g.shape.m) + "x" + std::to_string(g.shape.n) + "x" +
               std::to_string(g.shape.k) + " " + to_string(g.precision),
           "nonsense: " + fmt(g.tflops) + " TFLOP/s is above the datasheet peak " + fmt(datasheet) +
               " of " + what_base});
      continue;
    }
    p.gemm_samples.push_back(
        {g.shape.m, g.shape.n, g.shape.k, g.precision, g.tflops, g.stats.spread()});
    best[g.precision] = std::max(best[g.precision], g.tflops);
  }
  for (const auto& entry : best) {
    // Named copies, not a structured binding: a lambda below captures prec (clang before 16
    // refuses to capture a binding).
    const Precision prec = entry.first;
    const double tflops = entry.second;
    const bool has_datasheet = based && (prec == Precision::kBf16 ||
                                         (prec == Precision::kFp8 && opt.base->fp8_tflops > 0) ||
                                         (prec == Precision::kFp32 && opt.base->fp32_tflops > 0));
    const std::string shapes =
        std::to_string(std::count_if(p.gemm_samples.begin(), p.gemm_samples.end(),
                                     [&](const GemmSample& s) { return s.precision == prec; }));
    if (has_datasheet) {
      const double eff = std::min(1.0, tflops / opt.base->peak_tflops(prec));
      if (prec == Precision::kBf16)
        set.num("gemm_efficiency", &HwProfile::gemm_efficiency, eff,
                "best of " + shapes + " GEMM shapes " + fmt(tflops) + " TFLOP/s / datasheet " +
                    fmt(opt.base->bf16_tflops));
      if (prec == Precision::kFp8)
        set.num("fp8_gemm_efficiency", &HwProfile::fp8_gemm_efficiency, eff,
                "best of " + shapes + " fp8 GEMM shapes " + fmt(tflops) + " TFLOP/s / datasheet " +
                    fmt(opt.base->fp8_tflops));
    } else {
      peak_field(p, prec) = tflops;
      p.sources[peak_key(prec)] = set.origin + ": best of " + shapes + " " + to_string(prec) +
                                  " GEMM shapes (the achievable peak; no datasheet given)";
      if (prec == Precision::kBf16)
        set.num("gemm_efficiency", &HwProfile::gemm_efficiency, 1.0,
                "1 by definition: bf16_tflops is the best measured shape");
      if (prec == Precision::kFp8)
        set.num("fp8_gemm_efficiency", &HwProfile::fp8_gemm_efficiency, 1.0,
                "1 by definition: fp8_tflops is the best measured shape");
    }
  }
  if (!based && p.bf16_tflops == 0 && p.fp32_tflops > 0) {
    p.bf16_tflops = p.fp32_tflops;
    p.sources["bf16_tflops"] =
        "not measured: this backend has no bf16 GEMM; the measured fp32 peak";
    p.gemm_efficiency = 1.0;
    p.sources["gemm_efficiency"] = "1 by definition: bf16_tflops is the best measured shape";
    out.notes.push_back("no bf16 GEMM on this backend: bf16_tflops is the fp32 peak");
  }
  if (!based) {
    // One rank is one CPU core (or one GPU without its datasheet): no tiles, no waves.
    set.chosen("sm_count", &HwProfile::sm_count, 1,
               "one rank's processor; the measured GEMM table carries its shape effects");
    set.chosen("gemm_tile_m", &HwProfile::gemm_tile_m, 1, "no tile quantisation modelled");
    set.chosen("gemm_tile_n", &HwProfile::gemm_tile_n, 1, "no tile quantisation modelled");
    set.chosen("gemm_k_overhead", &HwProfile::gemm_k_overhead, 0,
               "none: the measured GEMM table carries short-K effects");
  }

  // Memory: the streaming kernels (copy, triad) at the largest sizes measured are what DRAM or
  // HBM delivers; smaller sizes, in caches, stay in the table.
  double largest = 0;
  for (const MemoryPoint& m : d.memory) {
    p.memory_samples.push_back({to_string(m.shape.kernel), m.bytes, m.gbps, m.stats.spread()});
    if (m.shape.kernel == MemoryKernel::kCopy || m.shape.kernel == MemoryKernel::kTriad)
      largest = std::max(largest, m.bytes);
  }
  double stream_bw = 0, small_copy_s = 0, small_copy_bytes = 0;
  for (const MemoryPoint& m : d.memory) {
    const bool streaming =
        m.shape.kernel == MemoryKernel::kCopy || m.shape.kernel == MemoryKernel::kTriad;
    if (streaming && m.bytes >= largest / 4) stream_bw = std::max(stream_bw, m.gbps);
    if (m.shape.kernel == MemoryKernel::kCopy &&
        (small_copy_bytes == 0 || m.bytes < small_copy_bytes)) {
      small_copy_bytes = m.bytes;
      small_copy_s = m.stats.median_s;
    }
  }
  if (stream_bw > 0) {
    const std::string how = "best copy/triad bandwidth at the largest sizes (" +
                            format_fixed(largest / (1 << 20), 0) +
                            " MiB moved): " + fmt(stream_bw) + " GB/s";
    if (based) {
      if (stream_bw > 1.1 * opt.base->hbm_bw_gbps)
        out.notes.push_back("streaming bandwidth " + fmt(stream_bw) + " GB/s is above the " +
                            what_base + " datasheet's " + fmt(opt.base->hbm_bw_gbps) +
                            " GB/s: the largest size still fits a cache; efficiency capped at 1");
      set.num("hbm_efficiency", &HwProfile::hbm_efficiency,
              std::min(1.0, stream_bw / opt.base->hbm_bw_gbps),
              how + " / datasheet " + fmt(opt.base->hbm_bw_gbps));
    } else {
      set.num("hbm_bw_gbps", &HwProfile::hbm_bw_gbps, stream_bw, how);
      set.num("hbm_efficiency", &HwProfile::hbm_efficiency, 1.0,
              "1 by definition: hbm_bw_gbps is the measured streaming bandwidth");
    }
    const double bw = p.hbm_bw_gbps * p.hbm_efficiency * kGB;
    set.num("kernel_overhead_us", &HwProfile::kernel_overhead_us,
            std::max(0.0, (small_copy_s - small_copy_bytes / bw) / kUs),
            "time of the smallest copy (" + format_fixed(small_copy_bytes / 1024, 0) +
                " KiB) beyond its bytes at the streaming bandwidth");
  }
  if (!based && d.memory_gib > 0) {
    set.num("hbm_gib", &HwProfile::hbm_gib, d.memory_gib,
            d.backend == "cpu-eigen"
                ? "the node's memory divided among its cores (one rank per core)"
                : "device memory the runtime reports");
    set.num("reserved_gib", &HwProfile::reserved_gib, d.baseline_gib,
            "resident memory of the calibrating process before its buffers (binary, libraries, "
            "runtime), the largest over the ranks");
  }

  // Attention: the best forward and backward are the achievable efficiency, relative to the
  // dense peak of the precision attention ran in.
  const Precision att_prec = d.activation_bytes >= 4 ? Precision::kFp32 : Precision::kBf16;
  double best_fwd = 0, best_bwd = 0;
  if (!d.attention.empty() && !d.attention_representative)
    out.notes.push_back(
        "attention was measured with " + d.backend +
        "'s reference kernel (CUDA cores, not tensor cores): reported, kept in --raw, but not "
        "written to the profile, whose attention efficiencies stay " +
        (based ? "the datasheet profile's" : "the GEMM efficiency"));
  for (const AttentionPoint& a : d.attention) {
    if (!d.attention_representative) break;
    p.attention_samples.push_back(
        {a.shape.seq, a.shape.head_dim, a.shape.backward, a.tflops, a.stats.spread()});
    (a.shape.backward ? best_bwd : best_fwd) =
        std::max(a.shape.backward ? best_bwd : best_fwd, a.tflops);
  }
  const double att_peak = p.peak_tflops(att_prec);
  if (att_peak > 0) {
    const std::string rel = std::string(" / ") + to_string(att_prec) + " peak " + fmt(att_peak, 3);
    if (best_fwd > 0)
      set.num("attention_fwd_efficiency", &HwProfile::attention_fwd_efficiency,
              std::min(1.0, best_fwd / att_peak),
              "best causal forward " + fmt(best_fwd, 4) + " TFLOP/s" + rel);
    if (best_bwd > 0)
      set.num("attention_bwd_efficiency", &HwProfile::attention_bwd_efficiency,
              std::min(1.0, best_bwd / att_peak),
              "best causal backward " + fmt(best_bwd, 4) + " TFLOP/s" + rel);
  }

  // Collectives: the table, then latency and bandwidth per link class.
  std::map<LinkClass, std::vector<const CollectivePoint*>> by_link;
  for (const CollectivePoint& c : d.collectives) {
    p.collective_samples.push_back(
        {c.op, c.link, c.ranks, c.bytes, c.busbw_gbps, c.stats.spread()});
    by_link[c.link].push_back(&c);
  }
  for (const auto& [link, points] : by_link) {
    const bool up = link == LinkClass::kScaleUp;
    // Latency from the pairs of the smallest groups; bandwidth from all-reduce in the largest
    // (a whole node for scale-up: what the fabric's nominal bandwidth describes).
    int smallest_group = 0, biggest_group = 0;
    for (const CollectivePoint* c : points) {
      smallest_group = smallest_group == 0 ? c->ranks : std::min(smallest_group, c->ranks);
      biggest_group = std::max(biggest_group, c->ranks);
    }
    std::vector<double> x, t;
    double big = 0, bw = 0;
    for (const CollectivePoint* c : points) {
      if (c->op == CollectiveOp::kSendRecv && c->ranks == smallest_group) {
        x.push_back(c->bytes);
        t.push_back(c->stats.median_s);
      }
      if (c->op == CollectiveOp::kAllReduce && c->ranks == biggest_group)
        big = std::max(big, c->bytes);
    }
    for (const CollectivePoint* c : points)
      if (c->op == CollectiveOp::kAllReduce && c->ranks == biggest_group && c->bytes >= big / 4)
        bw = std::max(bw, c->busbw_gbps);
    const std::string ranks = std::to_string(smallest_group) + "-rank groups";
    const std::string bw_ranks = std::to_string(biggest_group) + "-rank groups";
    if (auto lb = fit_latency_bandwidth(x, t)) {
      set.num(up ? "scale_up_latency_us" : "scale_out_latency_us",
              up ? &HwProfile::scale_up_latency_us : &HwProfile::scale_out_latency_us,
              lb->latency_s / kUs,
              "send/recv fit t = a + S/B over " + std::to_string(lb->points) + " sizes in " +
                  ranks + " (B = " + fmt(lb->bandwidth_gbps) + " GB/s, rms error " +
                  fmt(100 * lb->rms_rel_error) + "%)");
    } else {
      out.notes.push_back(std::string("no latency fit for ") + to_string(link) +
                          ": send/recv needs two sizes whose times grow with size");
    }
    if (bw > 0) {
      const char* key = up ? "scale_up_bw_gbps" : "scale_out_bw_gbps";
      const char* eff_key = up ? "scale_up_efficiency" : "scale_out_efficiency";
      double HwProfile::*bw_m = up ? &HwProfile::scale_up_bw_gbps : &HwProfile::scale_out_bw_gbps;
      double HwProfile::*eff_m =
          up ? &HwProfile::scale_up_efficiency : &HwProfile::scale_out_efficiency;
      const std::string how = "best all-reduce bus bandwidth at the biggest_group sizes in " +
                              bw_ranks + ": " + fmt(bw) + " GB/s";
      if (based) {
        set.num(eff_key, eff_m, std::min(1.0, bw / (opt.base.value().*bw_m)),
                how + " / nominal " + fmt(opt.base.value().*bw_m));
      } else {
        set.num(key, bw_m, bw, how);
        set.num(eff_key, eff_m, 1.0, std::string("1 by definition: ") + key + " is measured");
      }
    }
  }
  if (!based) {
    set.integer("gpus_per_node", &HwProfile::gpus_per_node, std::max(1, d.local_size),
                "ranks sharing this node in the calibration run");
    set.integer("scale_up_domain", &HwProfile::scale_up_domain, std::max(1, d.local_size),
                "ranks sharing this node (shared memory is the scale-up fabric)");
    if (d.shared_processors > 0)
      set.integer("shared_processors", &HwProfile::shared_processors, d.shared_processors,
                  "processors the node's ranks time-shared: each compute table holds a rank's "
                  "share, timed over batches of calls");
    // What one node cannot measure is derived from what it did, and says so.
    if (!by_link.count(LinkClass::kScaleUp)) {
      p.scale_up_bw_gbps = p.hbm_bw_gbps / 2;
      p.sources["scale_up_bw_gbps"] =
          "not measured (one rank; run under mpirun -np N): half the measured streaming bandwidth, "
          "as a shared-memory transfer reads and writes each byte";
      p.scale_up_efficiency = 1.0;
      p.sources["scale_up_efficiency"] = "not measured: 1";
      out.notes.push_back(
          "collectives not measured (one rank): scale-up bandwidth derived from "
          "memory bandwidth; run under mpirun -np N to measure them");
    }
    if (!by_link.count(LinkClass::kScaleOut)) {
      p.scale_out_bw_gbps = p.scale_up_bw_gbps;
      p.scale_out_efficiency = p.scale_up_efficiency;
      p.scale_out_latency_us = p.scale_up_latency_us;
      for (const char* k : {"scale_out_bw_gbps", "scale_out_efficiency", "scale_out_latency_us"})
        p.sources[k] =
            "not measured (all ranks on one node): the scale-up fit; calibrate across nodes to "
            "measure the network";
      out.notes.push_back("scale-out not measured (one node): set to the scale-up fit");
    }
    set.chosen("comm_sms", &HwProfile::comm_sms, 0,
               "collectives run on their own rank, beside no compute kernels");
  }
  if ((d.attention.empty() || !d.attention_representative) && !based) {
    if (d.attention.empty())
      out.notes.push_back("attention not measured: its efficiency is the GEMM efficiency");
    p.attention_fwd_efficiency = p.attention_bwd_efficiency = p.gemm_efficiency;
    p.sources["attention_fwd_efficiency"] = p.sources["attention_bwd_efficiency"] =
        "not measured: the GEMM efficiency";
  }
  Diagnostics missing;
  if (p.gemm_samples.empty() && !based)
    missing.push_back({"calibrate", "no GEMM was measured",
                       "measure the gemm table (--tables gemm,...) or pass --base"});
  if (stream_bw == 0 && !based)
    missing.push_back({"calibrate", "no memory bandwidth was measured",
                       "measure the memory table (--tables memory,...) or pass --base"});
  if (!missing.empty()) return missing;
  Diagnostics v = validate_profile(p, "fitted profile " + p.name);
  if (!v.empty()) return v;
  return out;
}

CheckReport compare_to_profile(const HwProfile& p, const CalibrationData& d) {
  CheckReport r;
  auto shape = [](int64_t m, int64_t n, int64_t k) {
    return std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
  };
  for (const GemmPoint& g : d.gemm) {
    const std::string what =
        "gemm " + shape(g.shape.m, g.shape.n, g.shape.k) + " " + to_string(g.precision);
    auto it = std::find_if(p.gemm_samples.begin(), p.gemm_samples.end(), [&](const GemmSample& s) {
      return s.m == g.shape.m && s.n == g.shape.n && s.k == g.shape.k && s.precision == g.precision;
    });
    if (it == p.gemm_samples.end())
      r.unmatched.push_back(what);
    else
      r.rows.push_back({"gemm", what, it->tflops, g.tflops});
  }
  for (const MemoryPoint& m : d.memory) {
    const std::string what = std::string("memory ") + to_string(m.shape.kernel) + " " +
                             format_fixed(m.bytes / (1 << 20), 2) + " MiB";
    auto it =
        std::find_if(p.memory_samples.begin(), p.memory_samples.end(), [&](const MemorySample& s) {
          return s.kernel == to_string(m.shape.kernel) && std::abs(s.bytes / m.bytes - 1) < 0.01;
        });
    if (it == p.memory_samples.end())
      r.unmatched.push_back(what);
    else
      r.rows.push_back({"memory", what, it->gbps, m.gbps});
  }
  for (const AttentionPoint& a : d.attention) {
    const std::string what = std::string("attention ") + (a.shape.backward ? "bwd" : "fwd") +
                             " seq " + std::to_string(a.shape.seq) + " d " +
                             std::to_string(a.shape.head_dim);
    auto it = std::find_if(p.attention_samples.begin(), p.attention_samples.end(),
                           [&](const AttentionSample& s) {
                             return s.seq == a.shape.seq && s.head_dim == a.shape.head_dim &&
                                    s.backward == a.shape.backward;
                           });
    if (it == p.attention_samples.end())
      r.unmatched.push_back(what);
    else
      r.rows.push_back({"attention", what, it->tflops, a.tflops});
  }
  for (const CollectivePoint& c : d.collectives) {
    const std::string what = std::string("collective ") + to_string(c.op) + " " +
                             format_fixed(c.bytes, 0) + " B on " + std::to_string(c.ranks);
    auto it = std::find_if(
        p.collective_samples.begin(), p.collective_samples.end(), [&](const CollectiveSample& s) {
          return s.op == c.op && s.link == c.link && s.group_size == c.ranks && s.bytes == c.bytes;
        });
    if (it == p.collective_samples.end())
      r.unmatched.push_back(what);
    else
      r.rows.push_back({"collectives", what, it->busbw_gbps, c.busbw_gbps});
  }
  std::vector<double> dev;
  for (const CheckRow& row : r.rows) dev.push_back(std::abs(row.ratio() - 1));
  r.median_deviation = median_of(dev);
  r.max_deviation = dev.empty() ? 0 : *std::max_element(dev.begin(), dev.end());
  return r;
}

}  // namespace parallax::calibrate
