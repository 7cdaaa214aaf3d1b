// The raw results of a calibration run as JSON (`calibrate --raw`, `--from-raw`): every point
// with its statistics, and what was left out and why.
#include <cmath>
#include <cstdint>
#include <optional>

#include "calibrate/suite.h"
#include "core/units.h"

namespace parallax::calibrate {

namespace {

Json stats_json(const Stats& s) {
  return {{"reps", s.reps},         {"median_s", s.median_s}, {"p10_s", s.p10_s},
          {"p90_s", s.p90_s},       {"min_s", s.min_s},       {"max_s", s.max_s},
          {"outliers", s.outliers}, {"spread", s.spread()}};
}

Stats stats_from(JsonFields& f) {
  Stats s;
  s.reps = static_cast<int>(f.integer("reps"));
  s.median_s = f.number("median_s");
  s.p10_s = f.number("p10_s", s.median_s);
  s.p90_s = f.number("p90_s", s.median_s);
  s.min_s = f.number("min_s", s.median_s);
  s.max_s = f.number("max_s", s.median_s);
  s.outliers = static_cast<int>(f.integer("outliers", 0));
  return s;
}

}  // namespace

Json to_json(const CalibrationData& d) {
  Json j = {{"format", "parallax-calibration/1"},
            {"backend", d.backend},
            {"device", d.device},
            {"communicator", d.communicator},
            {"date", d.date},
            {"driver", d.driver},
            {"ranks", d.ranks},
            {"local_size", d.local_size},
            {"shared_processors", d.shared_processors},
            {"settle",
             {{"seconds", d.settle_s},
              {"first_tflops", d.settle_first_tflops},
              {"last_tflops", d.settle_last_tflops}}},
            {"memory_gib", d.memory_gib},
            {"baseline_gib", d.baseline_gib},
            {"activation_bytes", d.activation_bytes},
            {"attention_representative", d.attention_representative},
            {"quick", d.quick},
            {"seconds", d.seconds}};
  Json g = Json::array(), m = Json::array(), a = Json::array(), c = Json::array(),
       r = Json::array();
  for (const auto& p : d.gemm)
    g.push_back({{"m", p.shape.m},
                 {"n", p.shape.n},
                 {"k", p.shape.k},
                 {"precision", to_string(p.precision)},
                 {"tflops", p.tflops},
                 {"stats", stats_json(p.stats)}});
  for (const auto& p : d.memory)
    m.push_back({{"kernel", to_string(p.shape.kernel)},
                 {"rows", p.shape.rows},
                 {"cols", p.shape.cols},
                 {"bytes", p.bytes},
                 {"gbps", p.gbps},
                 {"stats", stats_json(p.stats)}});
  for (const auto& p : d.attention)
    a.push_back({{"batch_heads", p.shape.batch_heads},
                 {"seq", p.shape.seq},
                 {"head_dim", p.shape.head_dim},
                 {"backward", p.shape.backward},
                 {"flops", p.flops},
                 {"tflops", p.tflops},
                 {"stats", stats_json(p.stats)}});
  for (const auto& p : d.collectives)
    c.push_back({{"op", to_string(p.op)},
                 {"link", to_string(p.link)},
                 {"ranks", p.ranks},
                 {"stride", p.stride},
                 {"bytes", p.bytes},
                 {"algbw_gbps", p.algbw_gbps},
                 {"busbw_gbps", p.busbw_gbps},
                 {"stats", stats_json(p.stats)}});
  for (const auto& x : d.rejected)
    r.push_back({{"table", x.table}, {"what", x.what}, {"why", x.why}});
  j["gemm"] = g;
  j["memory"] = m;
  j["attention"] = a;
  j["collectives"] = c;
  j["rejected"] = r;
  return j;
}

Result<CalibrationData> calibration_from_json(const Json& j, const std::string& where) {
  Diagnostics diag;
  JsonFields f(j, where, &diag);
  CalibrationData d;
  if (f.string("format", "") != "parallax-calibration/1")
    diag.push_back({where + "/format", "not a calibration file",
                    "expected \"format\": \"parallax-calibration/1\" (calibrate --raw writes it)"});
  d.backend = f.string("backend");
  d.device = f.string("device", "");
  d.communicator = f.string("communicator", "");
  d.date = f.string("date", "");
  d.driver = f.string("driver", "");
  d.ranks = static_cast<int>(f.integer_in("ranks", 1, 1 << 20, "ranks that measured", 1));
  d.local_size = static_cast<int>(f.integer_in("local_size", 1, 1 << 20, "ranks on one node", 1));
  d.shared_processors = static_cast<int>(f.integer("shared_processors", 0));
  if (const Json* s = f.object("settle")) {
    JsonFields sf(*s, where + "/settle", &diag);
    d.settle_s = sf.number("seconds", 0.0);
    d.settle_first_tflops = sf.number("first_tflops", 0.0);
    d.settle_last_tflops = sf.number("last_tflops", 0.0);
  }
  d.memory_gib = f.number("memory_gib", 0.0);
  d.baseline_gib = f.number("baseline_gib", 0.0);
  d.activation_bytes = static_cast<int>(
      f.integer_in("activation_bytes", 1, 8, "bytes of one activation element", 4));
  d.attention_representative = f.boolean("attention_representative", true);
  d.quick = f.boolean("quick", false);
  d.seconds = f.number("seconds", 0.0);
  auto rows = [&](const char* key, auto&& read) {
    const Json* arr = f.array(key);
    if (!arr) return;
    for (size_t i = 0; i < arr->size(); ++i) {
      const std::string w = where + "/" + key + "/" + std::to_string(i);
      JsonFields r((*arr)[i], w, &diag);
      Stats s;
      if (const Json* st = r.object("stats")) {
        JsonFields sf(*st, w + "/stats", &diag);
        s = stats_from(sf);
      } else {
        diag.push_back({w + "/stats", "missing", "every point keeps its timing statistics"});
      }
      if (!(s.median_s > 0) || !std::isfinite(s.median_s))
        diag.push_back({w + "/stats/median_s", "must be a positive time", ""});
      read(r, w, s);
    }
  };
  rows("gemm", [&](JsonFields& r, const std::string& w, const Stats& s) {
    GemmPoint p;
    const int64_t kMaxDim = INT32_MAX;
    p.shape = {r.integer_in("m", 1, kMaxDim, "a GEMM dimension"),
               r.integer_in("n", 1, kMaxDim, "a GEMM dimension"),
               r.integer_in("k", 1, kMaxDim, "a GEMM dimension")};
    const std::string prec = r.string("precision");
    if (auto pp = parse_precision(prec))
      p.precision = *pp;
    else
      diag.push_back({w + "/precision", "unknown precision '" + prec + "'", "fp32, bf16, fp8"});
    p.stats = s;
    p.tflops = s.median_s > 0 ? 2.0 * p.shape.m * p.shape.n * p.shape.k / s.median_s / kTera : 0;
    d.gemm.push_back(p);
  });
  rows("memory", [&](JsonFields& r, const std::string& w, const Stats& s) {
    MemoryPoint p;
    const std::string k = r.string("kernel");
    if (auto kk = parse_memory_kernel(k))
      p.shape.kernel = *kk;
    else
      diag.push_back(
          {w + "/kernel", "unknown kernel '" + k + "'", "copy, triad, rmsnorm, swiglu, softmax"});
    // Bounded so that rows * cols * bytes cannot overflow: calibrate measures far less.
    p.shape.rows = r.integer_in("rows", 1, 1 << 24, "rows of a measured kernel");
    p.shape.cols = r.integer_in("cols", 1, 1 << 24, "columns of a measured kernel");
    p.bytes = memory_kernel_bytes(p.shape.kernel, p.shape.rows, p.shape.cols, d.activation_bytes);
    p.stats = s;
    p.gbps = s.median_s > 0 ? p.bytes / s.median_s / kGB : 0;
    d.memory.push_back(p);
  });
  rows("attention", [&](JsonFields& r, const std::string&, const Stats& s) {
    AttentionPoint p;
    p.shape = {r.integer_in("batch_heads", 1, 1 << 20, "batch times heads of a measured kernel"),
               r.integer_in("seq", 1, 1 << 24, "sequence of a measured kernel"),
               r.integer_in("head_dim", 1, 4096, "head size of a measured kernel"),
               r.boolean("backward", false)};
    p.flops = attention_flops(p.shape);
    p.stats = s;
    p.tflops = s.median_s > 0 ? p.flops / s.median_s / kTera : 0;
    d.attention.push_back(p);
  });
  rows("collectives", [&](JsonFields& r, const std::string& w, const Stats& s) {
    CollectivePoint p;
    const std::string op = r.string("op");
    if (auto o = parse_collective(op))
      p.op = *o;
    else
      diag.push_back({w + "/op", "unknown collective '" + op + "'",
                      "all_reduce, all_gather, reduce_scatter, all_to_all, send_recv"});
    p.link = read_link(r, &diag);
    p.ranks = static_cast<int>(r.integer_in("ranks", 2, 1 << 20, "a collective spans 2+ ranks"));
    p.stride = static_cast<int>(r.integer_in("stride", 1, 1 << 20, "ranks between members", 1));
    p.bytes = r.number_in("bytes", 1, 1e15, "bytes a collective moves");
    p.stats = s;
    p.algbw_gbps = s.median_s > 0 ? p.bytes / s.median_s / kGB : 0;
    p.busbw_gbps = p.algbw_gbps * bus_factor(p.op, p.ranks);
    d.collectives.push_back(p);
  });
  if (const Json* rej = f.array("rejected")) {
    for (size_t i = 0; i < rej->size(); ++i) {
      JsonFields r((*rej)[i], where + "/rejected/" + std::to_string(i), &diag);
      d.rejected.push_back({r.string("table"), r.string("what"), r.string("why")});
    }
  }
  if (!diag.empty()) return diag;
  return d;
}

}  // namespace parallax::calibrate
