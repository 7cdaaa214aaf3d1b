// The raw results of a calibration run as JSON (`calibrate --raw`, `--from-raw`): every point
// with its statistics, and what was left out and why.
#include <cmath>
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

/// The array at `key`, or nullptr when absent; anything else is reported, not indexed (a JSON
/// object or string indexed by position throws).
const Json* array_at(const JsonFields& f, const char* key, Diagnostics* diag) {
  const Json* arr = f.object(key);
  if (arr && !arr->is_array()) {
    diag->push_back({f.path(key), std::string("expected an array, got ") + arr->type_name(),
                     "calibrate --raw writes a list of points"});
    return nullptr;
  }
  return arr;
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
  d.ranks = static_cast<int>(f.integer("ranks", 1));
  d.local_size = static_cast<int>(f.integer("local_size", 1));
  d.shared_processors = static_cast<int>(f.integer("shared_processors", 0));
  if (const Json* s = f.object("settle")) {
    JsonFields sf(*s, where + "/settle", &diag);
    d.settle_s = sf.number("seconds", 0.0);
    d.settle_first_tflops = sf.number("first_tflops", 0.0);
    d.settle_last_tflops = sf.number("last_tflops", 0.0);
  }
  d.memory_gib = f.number("memory_gib", 0.0);
  d.baseline_gib = f.number("baseline_gib", 0.0);
  d.activation_bytes = static_cast<int>(f.integer("activation_bytes", 4));
  d.attention_representative = f.boolean("attention_representative", true);
  d.quick = f.boolean("quick", false);
  d.seconds = f.number("seconds", 0.0);
  auto rows = [&](const char* key, auto&& read) {
    const Json* arr = array_at(f, key, &diag);
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
    p.shape = {r.integer("m"), r.integer("n"), r.integer("k")};
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
    p.shape.rows = r.integer("rows");
    p.shape.cols = r.integer("cols");
    p.bytes = memory_kernel_bytes(p.shape.kernel, p.shape.rows, p.shape.cols, d.activation_bytes);
    p.stats = s;
    p.gbps = s.median_s > 0 ? p.bytes / s.median_s / kGB : 0;
    d.memory.push_back(p);
  });
  rows("attention", [&](JsonFields& r, const std::string&, const Stats& s) {
    AttentionPoint p;
    p.shape = {r.integer("batch_heads"), r.integer("seq"), r.integer("head_dim"),
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
    p.link =
        r.string("link", "scale_up") == "scale_out" ? LinkClass::kScaleOut : LinkClass::kScaleUp;
    p.ranks = static_cast<int>(r.integer("ranks"));
    p.stride = static_cast<int>(r.integer("stride", 1));
    p.bytes = r.number("bytes");
    p.stats = s;
    p.algbw_gbps = s.median_s > 0 ? p.bytes / s.median_s / kGB : 0;
    p.busbw_gbps = p.algbw_gbps * bus_factor(p.op, p.ranks);
    d.collectives.push_back(p);
  });
  if (const Json* rej = array_at(f, "rejected", &diag)) {
    for (size_t i = 0; i < rej->size(); ++i) {
      JsonFields r((*rej)[i], where + "/rejected/" + std::to_string(i), &diag);
      d.rejected.push_back({r.string("table"), r.string("what"), r.string("why")});
    }
  }
  if (!diag.empty()) return diag;
  return d;
}

}  // namespace parallax::calibrate
