// `parallax calibrate`: microbenchmarks on the machine at hand -> a measured hardware profile,
// or (--check) how far a profile is from the machine today.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>

#include "calibrate/backend.h"
#include "calibrate/fit.h"
#include "calibrate/suite.h"
#include "cli/commands.h"
#include "core/text.h"

namespace parallax::cli {
namespace {

using namespace parallax::calibrate;

struct Opts {
  std::string backend = "cpu";
  int device = -1;  ///< -1: the node-local rank under mpirun, else 0
  bool quick = false;
  std::vector<std::string> tables;
  std::string out, name, base, raw, from_raw, check, profiles_dir;
  double tolerance = 0.15;
};

double median_spread(const std::vector<double>& v) {
  if (v.empty()) return 0;
  std::vector<double> s = v;
  std::sort(s.begin(), s.end());
  return s[s.size() / 2];
}

/// The human report of a run: per table its size, best value and median spread; collectives in
/// nccl-tests' columns; every rejected benchmark with its reason.
void print_report(std::ostream& os, const CalibrationData& d) {
  os << "calibrated " << d.backend << " on " << d.device << ": " << d.ranks << " rank"
     << (d.ranks == 1 ? "" : "s") << " over " << d.communicator << ", "
     << format_fixed(d.seconds, 1) << " s" << (d.quick ? " (quick)" : "") << "\n";
  std::map<Precision, std::vector<const GemmPoint*>> by_prec;
  for (const auto& g : d.gemm) by_prec[g.precision].push_back(&g);
  for (const auto& [prec, pts] : by_prec) {
    const GemmPoint* best = *std::max_element(
        pts.begin(), pts.end(), [](auto* a, auto* b) { return a->tflops < b->tflops; });
    std::vector<double> spreads;
    int outliers = 0;
    for (auto* p : pts) {
      spreads.push_back(p->stats.spread());
      outliers += p->stats.outliers;
    }
    os << "  gemm " << to_string(prec) << ": " << pts.size() << " shapes, best "
       << format_fixed(best->tflops * 1000, 1) << " GFLOP/s at " << best->shape.m << "x"
       << best->shape.n << "x" << best->shape.k << ", median spread "
       << format_fixed(100 * median_spread(spreads), 1) << "%, " << outliers
       << " outlier repetitions\n";
  }
  std::map<std::string, std::pair<const MemoryPoint*, const MemoryPoint*>> mem;
  for (const auto& m : d.memory) {
    auto& [small, large] = mem[to_string(m.shape.kernel)];
    if (!small || m.bytes < small->bytes) small = &m;
    if (!large || m.bytes > large->bytes) large = &m;
  }
  for (const auto& [k, sl] : mem)
    os << "  memory " << k << ": " << format_fixed(sl.first->gbps, 1) << " GB/s at "
       << format_bytes(sl.first->bytes) << " .. " << format_fixed(sl.second->gbps, 1) << " GB/s at "
       << format_bytes(sl.second->bytes) << "\n";
  for (const auto& a : d.attention)
    os << "  attention " << (a.shape.backward ? "bwd" : "fwd") << " seq " << a.shape.seq << " d "
       << a.shape.head_dim << " x" << a.shape.batch_heads << ": "
       << format_fixed(a.tflops * 1000, 1) << " GFLOP/s (spread "
       << format_fixed(100 * a.stats.spread(), 1) << "%)\n";
  std::pair<int, int> shown{0, 0};
  for (const auto& c : d.collectives) {
    if (std::make_pair(c.ranks, c.stride) != shown) {
      shown = {c.ranks, c.stride};
      os << "  collectives in groups of " << c.ranks << (c.stride > 1 ? " (one rank per node)" : "")
         << ", " << to_string(c.link) << ":\n";
      os << "    op              size    time(us)  algbw(GB/s)  busbw(GB/s)  spread  reps  "
            "outliers\n";
    }
    char line[160];
    std::snprintf(line, sizeof line, "    %-14s %9s %11.2f %12.3f %12.3f  %5.1f%% %5d %9d\n",
                  to_string(c.op), format_bytes(c.bytes).c_str(), c.stats.median_s * 1e6,
                  c.algbw_gbps, c.busbw_gbps, 100 * c.stats.spread(), c.stats.reps,
                  c.stats.outliers);
    os << line;
  }
  if (!d.rejected.empty()) {
    os << "  left out (" << d.rejected.size() << "):\n";
    for (const auto& r : d.rejected) os << "    " << r.what << ": " << r.why << "\n";
  }
}

Result<std::vector<Table>> parse_tables(const std::vector<std::string>& names) {
  std::vector<Table> out;
  for (const auto& n : names) {
    bool found = false;
    for (Table t : {Table::kGemm, Table::kMemory, Table::kAttention, Table::kCollectives}) {
      if (n == to_string(t)) {
        out.push_back(t);
        found = true;
      }
    }
    if (!found)
      return Diagnostic{"--tables", "unknown table '" + n + "'",
                        "gemm, memory, attention, collectives"};
  }
  if (out.empty()) out = {Table::kGemm, Table::kMemory, Table::kAttention, Table::kCollectives};
  return out;
}

int run(const Opts& o) {
  // Inputs first: nothing is measured before every flag is known to be good.
  Diagnostics bad;
  auto tables = parse_tables(o.tables);
  if (!tables) bad.insert(bad.end(), tables.errors().begin(), tables.errors().end());
  std::optional<HwProfile> base, checked;
  if (!o.base.empty()) {
    auto b = resolve_profile(o.base, o.profiles_dir, "--base");
    if (b)
      base = b.value();
    else
      bad.insert(bad.end(), b.errors().begin(), b.errors().end());
  }
  if (!o.check.empty()) {
    auto c = resolve_profile(o.check, o.profiles_dir, "--check");
    if (!c)
      bad.insert(bad.end(), c.errors().begin(), c.errors().end());
    else if (!c->has_measured_tables())
      bad.push_back({"--check", "profile " + c->name + " has no measured tables to check",
                     "check a profile written by `parallax calibrate`"});
    else
      checked = c.value();
    if (!o.out.empty())
      bad.push_back({"--out", "--check measures a sample and writes no profile", ""});
  }
  if (!o.from_raw.empty() && !o.check.empty())
    bad.push_back({"--from-raw", "fits a profile from a saved run; it cannot --check", ""});
  if (!bad.empty()) return report_errors(bad);

  CalibrationData data;
  bool rank0 = true;
  if (!o.from_raw.empty()) {
    auto text = read_file(o.from_raw);
    if (!text) return report_errors(text.errors());
    auto j = parse_json(text.value(), o.from_raw);
    if (!j) return report_errors(j.errors());
    auto d = calibration_from_json(j.value(), o.from_raw + ":");
    if (!d) return report_errors(d.errors());
    data = d.value();
  } else {
    std::unique_ptr<ComputeBackend> backend;
    std::unique_ptr<Communicator> comm;
    if (o.backend == "cuda") {
      // Under mpirun each rank takes its node-local GPU unless --device says otherwise.
      int device = o.device;
      if (device < 0) {
        device = 0;
        for (const char* v : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"})
          if (const char* e = std::getenv(v)) {
            device = std::atoi(e);
            break;
          }
      }
      auto b = make_cuda_backend(device);
      if (!b) return report_errors(b.errors());
      backend = std::move(b).value();
      if (launched_by_mpi()) {
        auto c = make_nccl_communicator(nullptr, nullptr);
        if (!c) return report_errors(c.errors());
        comm = std::move(c).value();
      }
    } else {
      backend = make_cpu_backend();
      if (launched_by_mpi()) {
        auto c = make_mpi_communicator(nullptr, nullptr);
        if (!c) return report_errors(c.errors());
        comm = std::move(c).value();
      }
    }
    if (!comm) comm = make_single_communicator();
    rank0 = comm->rank() == 0;
    SuiteOptions so;
    so.policy = o.quick ? quick_policy() : full_policy();
    so.tables = tables.value();
    const GridKind kind = o.backend == "cuda" ? GridKind::kGpu : GridKind::kCpu;
    so.grid = checked ? check_grid(*checked, o.quick ? 4 : 12, backend->activation_bytes())
                      : fit_to_memory(default_grid(kind, o.quick), backend->memory_gib(),
                                      backend->activation_bytes());
    so.progress = [](const std::string& line) { std::cerr << "calibrate: " << line << std::endl; };
    data = run_suite(*backend, *comm, so);
    data.quick = o.quick;
  }
  if (!rank0) return 0;  // rank 0 reports and writes; the others only measured

  if (!o.raw.empty()) {
    if (auto w = write_file_atomic(o.raw, to_json(data).dump(1) + "\n"); !w)
      return report_errors(w.errors());
  }

  if (checked) {
    print_report(std::cout, data);
    const CheckReport r = compare_to_profile(*checked, data);
    std::cout << "check against " << checked->name
              << (checked->date.empty() ? "" : " (measured " + checked->date + ")") << ":\n";
    std::cout << "    table        what                                      profile   "
                 "measured   ratio\n";
    for (const auto& row : r.rows) {
      char line[200];
      std::snprintf(line, sizeof line, "    %-12s %-40s %9.4g %10.4g  %6.3f\n", row.table.c_str(),
                    row.what.c_str(), row.profile, row.measured, row.ratio());
      std::cout << line;
    }
    for (const auto& u : r.unmatched) std::cout << "    not in the profile: " << u << "\n";
    std::cout << "  " << r.rows.size() << " points: median deviation "
              << format_fixed(100 * r.median_deviation, 1) << "%, largest "
              << format_fixed(100 * r.max_deviation, 1) << "% (tolerance "
              << format_fixed(100 * o.tolerance, 0) << "%)\n";
    if (r.rows.empty()) {
      std::cerr << "error: no re-measured point matched the profile\n";
      return 1;
    }
    return r.median_deviation <= o.tolerance ? 0 : 1;
  }

  FitOptions fo;
  fo.name = !o.name.empty()
                ? o.name
                : (base ? base->name + ".measured"
                        : (o.backend == "cuda" ? "cuda" : "cpu") + std::string("-measured"));
  fo.base = base;
  fo.command = std::string("parallax calibrate --backend ") + o.backend +
               (data.quick ? " --quick" : "") +
               (data.ranks > 1 ? " under mpirun -np " + std::to_string(data.ranks) : "");
  auto fitted = fit_profile(data, fo);
  std::ostream& report = o.out.empty() ? std::cerr : std::cout;
  print_report(report, data);
  if (!fitted) {
    report_errors(fitted.errors());
    return 1;  // the measurements could not make a profile: not the user's input
  }
  for (const auto& r : fitted->rejected)
    report << "  left out of the fit: " << r.what << ": " << r.why << "\n";
  for (const auto& n : fitted->notes) report << "  note: " << n << "\n";
  const HwProfile& p = fitted->profile;
  report << "fitted " << p.name << ": bf16 " << format_fixed(p.bf16_tflops * 1000, 1) << " GFLOP/s";
  if (p.fp32_tflops > 0) report << ", fp32 " << format_fixed(p.fp32_tflops * 1000, 1) << " GFLOP/s";
  if (p.fp8_tflops > 0) report << ", fp8 " << format_fixed(p.fp8_tflops * 1000, 1) << " GFLOP/s";
  report << ", GEMM efficiency " << format_fixed(p.gemm_efficiency, 3) << ", memory "
         << format_fixed(p.hbm_bw_gbps * p.hbm_efficiency, 1) << " GB/s, kernel overhead "
         << format_fixed(p.kernel_overhead_us, 2) << " us, attention fwd/bwd efficiency "
         << format_fixed(p.attention_fwd_efficiency, 3) << "/"
         << format_fixed(p.attention_bwd_efficiency, 3) << ", scale-up "
         << format_fixed(p.scale_up_bw_gbps * p.scale_up_efficiency, 2) << " GB/s + "
         << format_fixed(p.scale_up_latency_us, 2) << " us\n";
  const std::string text = to_json(p).dump(2) + "\n";
  if (o.out.empty()) {
    std::cout << text;
  } else {
    if (auto w = write_file_atomic(o.out, text); !w) return report_errors(w.errors());
    report << "wrote " << o.out << "\n";
  }
  return 0;
}

}  // namespace

void add_calibrate_command(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand(
      "calibrate",
      "Measure this machine (GEMMs, memory-bound kernels, attention, collectives) and write a "
      "hardware profile whose measured tables the simulator uses");
  cmd->add_option("--backend", o->backend,
                  "cpu: Eigen on each rank's core, collectives over MPI; cuda: cuBLASLt, our "
                  "kernels and NCCL on one GPU per rank")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_option(
      "--device", o->device,
      "GPU index for --backend cuda (default: the node-local rank under mpirun, else 0)");
  cmd->add_flag("--quick", o->quick, "a sparse grid and fewer repetitions (under a minute)");
  cmd->add_option("--tables", o->tables, "tables to measure: gemm, memory, attention, collectives")
      ->delimiter(',');
  cmd->add_option("--out", o->out,
                  "write the profile here (atomically); without it the profile JSON goes to stdout "
                  "and the report to stderr");
  cmd->add_option("--name", o->name,
                  "name of the profile (default: <base>.measured or cpu-measured)");
  cmd->add_option(
      "--base", o->base,
      "datasheet profile (name or JSON) whose peaks the measured efficiencies refer to; "
      "without it the best measured values are the peaks");
  cmd->add_option("--raw", o->raw, "also write every measured point with its statistics (JSON)");
  cmd->add_option("--from-raw", o->from_raw,
                  "fit a profile from a file written by --raw instead of measuring");
  cmd->add_option(
      "--check", o->check,
      "re-measure a sample of this calibrated profile (name or JSON) and report how far "
      "it is from the machine today; exits 1 beyond --tolerance");
  cmd->add_option("--tolerance", o->tolerance,
                  "largest median |measured / profile - 1| --check accepts (default 0.15)")
      ->check(finite_in(0, 10));
  cmd->add_option("--profiles-dir", o->profiles_dir,
                  "directory of extra hardware profiles (*.json)");
  cmd->footer(
      "Collectives need two or more ranks: launch under MPI, e.g.\n"
      "  mpirun -np 2 parallax calibrate --out cpu.json\n"
      "  mpirun -np 8 parallax calibrate --backend cuda --base h200-sxm-141gb --out h200.json\n"
      "Then: parallax simulate --cluster cpu.json ...   parallax calibrate --check cpu.json");
  cmd->callback([o, exit_code] { *exit_code = run(*o); });
}

}  // namespace parallax::cli
