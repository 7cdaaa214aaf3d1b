#include "calibrate/suite.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>
#include <optional>
#include <tuple>

#include "core/text.h"
#include "core/units.h"

namespace parallax::calibrate {
namespace {

std::vector<int64_t> powers_of_two(int64_t lo, int64_t hi, int64_t step) {
  std::vector<int64_t> out;
  for (int64_t v = lo; v <= hi; v *= step) out.push_back(v);
  return out;
}

std::string shape_text(const GemmShape3& s) {
  return std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k);
}

/// TFLOP/s of one GEMM of shape `s` that took `seconds`.
double gemm_tflops(const GemmShape3& s, double seconds) {
  return 2.0 * s.m * s.n * s.k / seconds / kTera;
}

std::string now_iso8601() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

/// The slowest rank's view of a point every rank measured: all ranks call this the same
/// number of times, whatever their own outcome.
std::optional<Stats> agree(Communicator& comm, const Result<Stats>& r, std::string* why) {
  const double failed = comm.max_over_ranks(r.ok() ? 0.0 : 1.0);
  const double slowest = comm.max_over_ranks(r.ok() ? r->median_s : 0.0);
  if (failed > 0) {
    *why = r.ok() ? "failed on another rank" : r.errors().front().what;
    return std::nullopt;
  }
  Stats s = *r;
  const double scale = s.median_s > 0 ? slowest / s.median_s : 1.0;
  s.median_s *= scale;
  s.p10_s *= scale;
  s.p90_s *= scale;
  s.min_s *= scale;
  s.max_s *= scale;
  return s;
}

/// Drops the non-monotone points of each series: `key` groups points, `size` orders them.
template <typename Point, typename Key, typename Size>
void drop_contradictions(std::vector<Point>* points, const char* table, Key key, Size size,
                         const std::function<std::string(const Point&)>& what,
                         std::vector<Rejected>* rejected) {
  std::map<decltype(key(points->front())), std::vector<size_t>> series;
  for (size_t i = 0; i < points->size(); ++i) series[key((*points)[i])].push_back(i);
  std::vector<bool> drop(points->size(), false);
  for (auto& [k, idx] : series) {
    std::sort(idx.begin(), idx.end(),
              [&](size_t a, size_t b) { return size((*points)[a]) < size((*points)[b]); });
    std::vector<double> sizes, times;
    for (size_t i : idx) {
      sizes.push_back(size((*points)[i]));
      times.push_back((*points)[i].stats.median_s);
    }
    for (size_t j : drop_non_monotone(sizes, times)) drop[idx[j]] = true;
  }
  std::vector<Point> kept;
  for (size_t i = 0; i < points->size(); ++i) {
    if (drop[i])
      rejected->push_back({table, what((*points)[i]),
                           "non-monotone: faster than smaller sizes of its series (or slower than "
                           "larger ones) by more than 30%"});
    else
      kept.push_back((*points)[i]);
  }
  *points = std::move(kept);
}

}  // namespace

const char* to_string(Table t) {
  switch (t) {
    case Table::kGemm:
      return "gemm";
    case Table::kMemory:
      return "memory";
    case Table::kAttention:
      return "attention";
    case Table::kCollectives:
      return "collectives";
  }
  return "?";
}

Grid default_grid(GridKind kind, bool quick) {
  Grid g;
  const bool cpu = kind == GridKind::kCpu;
  // GEMM: one CPU core runs ~0.1 TFLOP/s, a GPU ~1000; a repetition stays under ~50 ms.
  const int64_t lo = cpu ? 64 : 256, hi = cpu ? 2048 : 16384;
  const double max_flops = cpu ? 4.3e9 : 2.2e12;
  const auto dims = powers_of_two(lo, hi, quick ? 4 : 2);
  for (int64_t m : dims)
    for (int64_t n : dims)
      for (int64_t k : dims)
        if (2.0 * m * n * k <= max_flops) g.gemm.push_back({m, n, k});
  // Memory: activations of 4096 (CPU) or 8192 (GPU) columns, 16 KiB (1 MiB) per array up to
  // 256 MiB (4 GiB): from the caches out to DRAM (HBM).
  const int64_t cols = cpu ? 4096 : 8192;
  const auto rows =
      cpu ? powers_of_two(1, 16384, quick ? 16 : 2) : powers_of_two(32, 131072, quick ? 16 : 2);
  for (MemoryKernel k : {MemoryKernel::kCopy, MemoryKernel::kTriad, MemoryKernel::kRmsNorm,
                         MemoryKernel::kSwiglu, MemoryKernel::kSoftmax})
    for (int64_t r : rows) g.memory.push_back({k, r, cols});
  // Attention: causal, one head on a CPU core (the short sequences and small heads CPU ranks
  // train), on a GPU enough heads to fill it (batch_heads * seq = 256K tokens).
  const auto seqs =
      cpu ? powers_of_two(64, 2048, quick ? 4 : 2) : powers_of_two(512, 32768, quick ? 4 : 2);
  const std::vector<int64_t> head_dims =
      cpu ? std::vector<int64_t>{32, 64, 128} : std::vector<int64_t>{64, 128};
  for (bool bwd : {false, true})
    for (int64_t d : head_dims)
      for (int64_t s : seqs)
        g.attention.push_back({cpu ? 1 : std::max<int64_t>(1, 262144 / s), s, d, bwd});
  g.collective_ops = {CollectiveOp::kAllReduce, CollectiveOp::kAllGather,
                      CollectiveOp::kReduceScatter, CollectiveOp::kAllToAll,
                      CollectiveOp::kSendRecv};
  const double max_bytes = quick ? 16.0 * (1 << 20) : (cpu ? 256.0 : 1024.0) * (1 << 20);
  for (double b = 16; b <= max_bytes; b *= quick ? 16 : 4) g.collective_bytes.push_back(b);
  return g;
}

Grid fit_to_memory(Grid g, double memory_gib, int activation_bytes) {
  const double budget = 0.25 * memory_gib * kGiB;
  std::erase_if(g.gemm, [&](const GemmShape3& s) {
    return 4.0 * (s.m * s.k + s.k * s.n + s.m * s.n) > budget;
  });
  std::erase_if(g.memory, [&](const MemoryShape& s) {
    return 3.0 * s.rows * s.cols * activation_bytes > budget;
  });
  std::erase_if(g.attention, [&](const AttentionShape& a) {
    return 8.0 * a.batch_heads * a.seq * a.head_dim * activation_bytes > budget;
  });
  std::erase_if(g.collective_bytes, [&](double b) { return 2.0 * b > budget; });
  return g;
}

Grid check_grid(const HwProfile& p, int per_table, int activation_bytes) {
  Grid g;
  auto pick = [&](size_t n) {
    std::vector<size_t> idx;
    if (n == 0) return idx;
    const size_t k = std::min<size_t>(n, static_cast<size_t>(std::max(1, per_table)));
    for (size_t i = 0; i < k; ++i) idx.push_back(k == 1 ? n - 1 : i * (n - 1) / (k - 1));
    idx.erase(std::unique(idx.begin(), idx.end()), idx.end());
    return idx;
  };
  // Largest first tells the most (peaks); the even spread covers the rest.
  for (size_t i : pick(p.gemm_samples.size())) {
    const auto& s = p.gemm_samples[i];
    g.gemm.push_back({s.m, s.n, s.k});
  }
  for (size_t i : pick(p.memory_samples.size())) {
    const auto& s = p.memory_samples[i];
    if (auto k = parse_memory_kernel(s.kernel)) {
      const int64_t cols = 4096;
      const double per_row = memory_kernel_bytes(*k, 1, cols, activation_bytes);
      g.memory.push_back({*k, std::max<int64_t>(1, std::llround(s.bytes / per_row)), cols});
    }
  }
  for (size_t i : pick(p.attention_samples.size())) {
    const auto& s = p.attention_samples[i];
    g.attention.push_back({std::max<int64_t>(1, activation_bytes == 4 ? 1 : 262144 / s.seq), s.seq,
                           s.head_dim, s.backward});
  }
  for (size_t i : pick(p.collective_samples.size())) {
    const auto& s = p.collective_samples[i];
    if (std::find(g.collective_ops.begin(), g.collective_ops.end(), s.op) == g.collective_ops.end())
      g.collective_ops.push_back(s.op);
    if (std::find(g.collective_bytes.begin(), g.collective_bytes.end(), s.bytes) ==
        g.collective_bytes.end())
      g.collective_bytes.push_back(s.bytes);
  }
  std::sort(g.collective_bytes.begin(), g.collective_bytes.end());
  return g;
}

std::vector<GroupPlan> collective_groups(int world, int local) {
  std::vector<GroupPlan> out;
  if (world < 2) return out;
  if (local < 1 || local > world || world % local != 0) local = world;  // one node
  auto sizes = [](int n) {
    std::vector<int> v;
    for (int g = 2; g < n; g *= 2)
      if (n % g == 0) v.push_back(g);
    if (n >= 2) v.push_back(n);
    return v;
  };
  for (int g : sizes(local)) out.push_back({Grouping{g, 1}, LinkClass::kScaleUp});
  for (int d : sizes(world / local)) out.push_back({Grouping{d, local}, LinkClass::kScaleOut});
  return out;
}

double bus_factor(CollectiveOp op, int n) {
  const double f = n > 0 ? static_cast<double>(n - 1) / n : 0;
  switch (op) {
    case CollectiveOp::kAllReduce:
      return 2 * f;
    case CollectiveOp::kAllGather:
    case CollectiveOp::kReduceScatter:
    case CollectiveOp::kAllToAll:
      return f;
    case CollectiveOp::kSendRecv:
      return 1;
  }
  return 1;
}

double attention_flops(const AttentionShape& a) {
  const double fwd = 2.0 * a.batch_heads * static_cast<double>(a.seq) * a.seq * 2 * a.head_dim / 2;
  return a.backward ? 2.5 * fwd : fwd;
}

std::vector<size_t> drop_non_monotone(const std::vector<double>& sizes,
                                      const std::vector<double>& times) {
  constexpr double kSlack = 0.7;
  const size_t n = times.size();
  std::vector<bool> gone(n, false);
  std::vector<size_t> dropped;
  while (true) {
    std::vector<int> conflicts(n, 0);
    int most = 0;
    for (size_t i = 0; i < n; ++i) {
      if (gone[i]) continue;
      for (size_t j = i + 1; j < n; ++j) {
        if (gone[j] || !(sizes[j] > sizes[i])) continue;
        // j is larger than i: it should not take much less time.
        if (times[j] < kSlack * times[i]) {
          most = std::max({most, ++conflicts[i], ++conflicts[j]});
        }
      }
    }
    if (most == 0) break;
    // The point in the most conflicts goes; on a tie, the larger size (a too-fast large
    // transfer is the usual nonsense: a skipped copy, a cached result).
    size_t worst = n;
    for (size_t i = 0; i < n; ++i)
      if (!gone[i] && conflicts[i] == most) worst = i;
    gone[worst] = true;
    dropped.push_back(worst);
  }
  std::sort(dropped.begin(), dropped.end());
  return dropped;
}

namespace {

/// VmRSS of this process, in GiB; 0 where /proc is not there.
double resident_gib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) * 1024.0 / kGiB;  // kB
  return 0;
}

/// The settling run of a power-capped backend (SuiteOptions::settle_gemm and the rest): windows
/// of back-to-back GEMMs for settle_min_s, then until one runs no more than 0.5% slower than the
/// one before. Every rank runs it; the slowest rank's rate decides, so all stop together.
void settle(ComputeBackend& backend, Communicator& comm, const SuiteOptions& opt,
            CalibrationData* d) {
  const std::vector<Precision> precisions = backend.gemm_precisions();
  if (precisions.empty()) return;
  const Precision p =
      std::find(precisions.begin(), precisions.end(), Precision::kBf16) != precisions.end()
          ? Precision::kBf16
          : precisions.front();
  TimingPolicy window = opt.policy;
  window.warmup = 0;
  window.warmup_s = 0;
  window.min_reps = 1;
  window.max_reps = 1 << 20;
  window.min_time_s = window.max_time_s = opt.settle_window_s;
  window.target_spread = 0;
  window.batch_s = 0;
  const GemmShape3& s = opt.settle_gemm;
  const std::string what = std::string("settle gemm ") + shape_text(s) + " " + to_string(p);
  double previous = 0;
  int windows = 0;
  while (windows * opt.settle_window_s < opt.settle_max_s) {
    std::string why;
    const auto stats = agree(comm, backend.gemm(s.m, s.n, s.k, p, window), &why);
    if (!stats) {
      d->rejected.push_back({"settle", what, why});
      return;
    }
    const double tflops = gemm_tflops(s, stats->median_s);
    if (windows++ == 0) d->settle_first_tflops = tflops;
    d->settle_last_tflops = tflops;
    d->settle_s = windows * opt.settle_window_s;
    if (d->settle_s >= opt.settle_min_s && previous > 0 && tflops >= previous * (1 - 0.005)) return;
    previous = tflops;
  }
}

}  // namespace

CalibrationData run_suite(ComputeBackend& backend, Communicator& comm, const SuiteOptions& opt) {
  const auto start = std::chrono::steady_clock::now();
  CalibrationData d;
  d.baseline_gib = comm.max_over_ranks(resident_gib());
  d.backend = backend.name();
  d.device = backend.device();
  d.communicator = comm.name();
  d.ranks = comm.size();
  d.local_size = comm.local_size();
  // Ranks that outnumber the host's processors time-share them, as they will when they train:
  // the compute benchmarks count the share each rank gets (all ranks run each one at once).
  TimingPolicy compute = opt.policy;
  if (const int processors = backend.host_processors();
      processors > 0 && comm.local_size() > processors) {
    d.shared_processors = processors;
    compute.batch_s = opt.shared_batch_s;
  }
  d.memory_gib = backend.memory_gib();
  d.activation_bytes = backend.activation_bytes();
  d.attention_representative = backend.attention_is_representative();
  d.date = now_iso8601();
  d.driver = backend.runtime();
  const std::string comm_runtime = comm.runtime();
  if (!comm_runtime.empty()) d.driver += (d.driver.empty() ? "" : ", ") + comm_runtime;
  const bool rank0 = comm.rank() == 0;
  auto say = [&](const std::string& line) {
    if (rank0 && opt.progress) opt.progress(line);
  };
  if (d.shared_processors > 0)
    say(std::to_string(d.local_size) + " ranks share this host's " +
        std::to_string(d.shared_processors) + " processors: each compute benchmark is timed over " +
        format_fixed(opt.shared_batch_s * 1000, 0) +
        " ms batches, the share of a processor a rank gets");
  auto wants = [&](Table t) {
    return std::find(opt.tables.begin(), opt.tables.end(), t) != opt.tables.end();
  };
  // A power-capped device is settled at the clock its cap allows under load, and each compute
  // benchmark warms up and runs long enough to stay there.
  if (backend.power_capped() &&
      (wants(Table::kGemm) || wants(Table::kMemory) || wants(Table::kAttention))) {
    compute.warmup_s = std::max(compute.warmup_s, opt.sustained_warmup_s);
    compute.min_time_s = std::max(compute.min_time_s, opt.sustained_min_time_s);
    compute.max_time_s = std::max(compute.max_time_s, compute.min_time_s);
    settle(backend, comm, opt, &d);
    say("settled the clock under load: GEMM " + shape_text(opt.settle_gemm) + " from " +
        format_fixed(d.settle_first_tflops, 1) + " to " + format_fixed(d.settle_last_tflops, 1) +
        " TFLOP/s over " + format_fixed(d.settle_s, 2) + " s; each compute benchmark warms up " +
        format_fixed(opt.sustained_warmup_s * 1000, 0) + " ms and is timed at least " +
        format_fixed(opt.sustained_min_time_s * 1000, 0) + " ms");
  }
  const Grid& g = opt.grid;
  std::string why;

  if (wants(Table::kGemm)) {
    for (Precision p : backend.gemm_precisions()) {
      size_t kept = 0;
      double best = 0;
      for (const GemmShape3& s : g.gemm) {
        const std::string what = std::string("gemm ") + shape_text(s) + " " + to_string(p);
        auto stats = agree(comm, backend.gemm(s.m, s.n, s.k, p, compute), &why);
        if (!stats) {
          d.rejected.push_back({"gemm", what, why});
          continue;
        }
        const double tflops = gemm_tflops(s, stats->median_s);
        d.gemm.push_back({s, p, *stats, tflops});
        best = std::max(best, tflops);
        ++kept;
      }
      say(std::string("gemm ") + to_string(p) + ": " + std::to_string(kept) + " shapes, best " +
          format_fixed(best * 1000, 1) + " GFLOP/s");
    }
  }

  if (wants(Table::kMemory)) {
    for (const MemoryShape& s : g.memory) {
      const double bytes = memory_kernel_bytes(s.kernel, s.rows, s.cols, d.activation_bytes);
      const std::string what = std::string("memory ") + to_string(s.kernel) + " " +
                               std::to_string(s.rows) + "x" + std::to_string(s.cols);
      auto stats = agree(comm, backend.memory_kernel(s.kernel, s.rows, s.cols, compute), &why);
      if (!stats) {
        d.rejected.push_back({"memory", what, why});
        continue;
      }
      d.memory.push_back({s, bytes, *stats, bytes / stats->median_s / kGB});
    }
    drop_contradictions<MemoryPoint>(
        &d.memory, "memory", [](const MemoryPoint& p) { return static_cast<int>(p.shape.kernel); },
        [](const MemoryPoint& p) { return p.bytes; },
        [](const MemoryPoint& p) {
          return std::string("memory ") + to_string(p.shape.kernel) + " " + format_bytes(p.bytes);
        },
        &d.rejected);
    double best = 0;
    for (const auto& m : d.memory) best = std::max(best, m.gbps);
    say("memory: " + std::to_string(d.memory.size()) + " points, best " + format_fixed(best, 1) +
        " GB/s");
  }

  if (wants(Table::kAttention)) {
    for (const AttentionShape& a : g.attention) {
      const std::string what = std::string("attention ") + (a.backward ? "bwd " : "fwd ") +
                               std::to_string(a.batch_heads) + "x" + std::to_string(a.seq) + "x" +
                               std::to_string(a.head_dim);
      auto stats = agree(
          comm, backend.attention(a.batch_heads, a.seq, a.head_dim, a.backward, compute), &why);
      if (!stats) {
        d.rejected.push_back({"attention", what, why});
        continue;
      }
      const double flops = attention_flops(a);
      d.attention.push_back({a, flops, *stats, flops / stats->median_s / kTera});
    }
    drop_contradictions<AttentionPoint>(
        &d.attention, "attention",
        [](const AttentionPoint& p) { return p.shape.head_dim * 2 + (p.shape.backward ? 1 : 0); },
        [](const AttentionPoint& p) { return p.flops; },
        [](const AttentionPoint& p) {
          return std::string("attention ") + (p.shape.backward ? "bwd" : "fwd") + " seq " +
                 std::to_string(p.shape.seq) + " d " + std::to_string(p.shape.head_dim);
        },
        &d.rejected);
    double best = 0;
    for (const auto& a : d.attention) best = std::max(best, a.tflops);
    say("attention: " + std::to_string(d.attention.size()) + " points, best " +
        format_fixed(best * 1000, 1) + " GFLOP/s");
  }

  if (wants(Table::kCollectives) && comm.size() > 1) {
    for (const GroupPlan& gp : collective_groups(comm.size(), comm.local_size())) {
      const Grouping& grp = gp.grouping;
      const std::string in = " in groups of " + std::to_string(grp.size) +
                             (grp.stride > 1 ? " (one rank per node)" : "");
      for (CollectiveOp op : g.collective_ops) {
        for (double bytes : g.collective_bytes) {
          const std::string what =
              std::string("collective ") + to_string(op) + " " + format_bytes(bytes) + in;
          auto stats = comm.collective(op, bytes, opt.policy, grp);
          if (!stats) {
            d.rejected.push_back({"collectives", what, stats.errors().front().what});
            continue;
          }
          const double algbw = bytes / stats->median_s / kGB;
          d.collectives.push_back({op, gp.link, grp.size, grp.stride, bytes, *stats, algbw,
                                   algbw * bus_factor(op, grp.size)});
        }
      }
      say(std::string("collectives") + in + " (" + to_string(gp.link) + "): done");
    }
    drop_contradictions<CollectivePoint>(
        &d.collectives, "collectives",
        [](const CollectivePoint& p) {
          return std::make_tuple(static_cast<int>(p.op), p.ranks, p.stride);
        },
        [](const CollectivePoint& p) { return p.bytes; },
        [](const CollectivePoint& p) {
          return std::string("collective ") + to_string(p.op) + " " + format_bytes(p.bytes) +
                 " in groups of " + std::to_string(p.ranks);
        },
        &d.rejected);
  } else if (wants(Table::kCollectives)) {
    say("collectives: skipped (one rank; launch with mpirun -np N to measure them)");
  }
  d.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return d;
}

}  // namespace parallax::calibrate
