// Every emitted launch config against the frameworks' own rules, kept as data in
// planner/launch/rules/*.json: argument names, types and choices taken from each framework's
// source (the version and file are in the manifest), and its cross-argument assertions with the
// text and place they are raised. The emitters check these rules in code; this test checks what
// they wrote against the manifest, so that an emitter drifting from the framework (a renamed
// flag, a combination the framework asserts against) fails here.
//
// Configs come from the planner itself: for every zoo model on a cluster of its size, the best
// plans the search finds for each framework, and a sample of every layout the framework runs;
// for serving, the deployments the emitter tests use, on one host and on several.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "core/json_io.h"
#include "core/model_zoo.h"
#include "planner/launch/launch.h"
#include "planner/launch/serve_launch.h"
#include "planner/plan_space.h"
#include "planner/search.h"
#include "tests/test_support.h"

namespace parallax {
namespace {

using nlohmann::json;

json manifest(const std::string& name) {
  const auto text = testing::read_file(std::string(PARALLAX_SOURCE_DIR) + "/planner/launch/rules/" +
                                       name + ".json");
  PX_CHECK(text.has_value(), "cannot read manifest " << name);
  return json::parse(*text);
}

/// One emitted configuration: key -> value (a flag without a value holds true).
using Config = std::map<std::string, json>;

// ---- parsing what the emitters write ----------------------------------------------------------

/// Shell words of `line`, single quotes kept together.
std::vector<std::string> words(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false, any = false;
  for (char c : line) {
    if (c == '\'') {
      quoted = !quoted;
      any = true;
    } else if (!quoted && (c == ' ' || c == '\t')) {
      if (any) out.push_back(cur);
      cur.clear();
      any = false;
    } else {
      cur += c;
      any = true;
    }
  }
  if (any) out.push_back(cur);
  return out;
}

/// The logical lines of a shell text: continuations joined, comments dropped.
std::vector<std::string> shell_lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line, acc;
  while (std::getline(in, line)) {
    if (acc.empty() && (line.empty() || line[0] == '#')) continue;
    const bool more = !line.empty() && line.back() == '\\';
    acc += more ? line.substr(0, line.size() - 1) : line;
    if (!more) {
      out.push_back(acc);
      acc.clear();
    }
  }
  if (!acc.empty()) out.push_back(acc);
  return out;
}

/// Flags of a word list from `first` on: "--x v" -> x = v, "--flag" -> true.
Config flags(const std::vector<std::string>& w, size_t first) {
  Config c;
  for (size_t i = first; i < w.size(); ++i) {
    if (w[i].rfind("--", 0) != 0) continue;
    if (i + 1 < w.size() && w[i + 1].rfind("--", 0) != 0) {
      c[w[i]] = w[i + 1];
      ++i;
    } else {
      c[w[i]] = true;
    }
  }
  return c;
}

/// Every command of `text` whose words contain `program` (e.g. "vllm serve").
std::vector<Config> commands(const std::string& text, const std::vector<std::string>& program) {
  std::vector<Config> out;
  for (const std::string& line : shell_lines(text)) {
    const auto w = words(line);
    for (size_t i = 0; i + program.size() <= w.size(); ++i)
      if (std::equal(program.begin(), program.end(), w.begin() + static_cast<long>(i))) {
        out.push_back(flags(w, i + program.size()));
        break;
      }
  }
  return out;
}

/// TorchTitan's TOML as written by the emitter: sections, `key = value` with JSON-compatible
/// values (numbers, booleans, strings, arrays over several lines).
Config toml(const std::string& text) {
  Config c;
  std::istringstream in(text);
  std::string line, section, pending_key, pending;
  int depth = 0;
  while (std::getline(in, line)) {
    if (depth > 0) {
      pending += line;
    } else {
      if (line.empty() || line[0] == '#') continue;
      if (line[0] == '[') {
        section = line.substr(1, line.find(']') - 1);
        continue;
      }
      const size_t eq = line.find(" = ");
      PX_CHECK(eq != std::string::npos, "not a TOML assignment: " << line);
      pending_key = line.substr(0, eq);
      pending = line.substr(eq + 3);
    }
    for (char ch : line) depth += ch == '[' ? 1 : ch == ']' ? -1 : 0;
    if (depth > 0) continue;
    // TOML allows a trailing comma in arrays; JSON does not.
    for (size_t p; (p = pending.find(",]")) != std::string::npos;) pending.erase(p, 1);
    c[section + "." + pending_key] = json::parse(pending);
  }
  return c;
}

/// A Python value as the TorchTitan main emitter writes it (True/False/None, numbers, double-
/// quoted strings, lists of them) as JSON.
json python_value(std::string v) {
  for (const auto& [py, js] :
       {std::pair<std::string, std::string>{"True", "true"}, {"False", "false"}, {"None", "null"}})
    if (v == py) return json::parse(js);
  for (size_t p; (p = v.find(",]")) != std::string::npos;) v.erase(p, 1);
  for (size_t p; (p = v.find(", ]")) != std::string::npos;) v.erase(p, 1);
  return json::parse(v);
}

/// TorchTitan main's configuration module: `config.training.X = v`, the keyword arguments of
/// ParallelismConfig(...) and CompileConfig(...) (values over several lines joined), as
/// "training.X", "parallelism.X", "compile.X".
Config python_config(const std::string& text) {
  Config c;
  std::istringstream in(text);
  std::string line, section, key, pending;
  int depth = 0;
  auto trim = [](std::string t) {
    t.erase(0, t.find_first_not_of(' '));
    return t;
  };
  while (std::getline(in, line)) {
    const std::string t = trim(line);
    if (depth > 0) {
      pending += t;
      for (char ch : t) depth += ch == '[' ? 1 : ch == ']' ? -1 : 0;
      if (depth == 0) c[section + "." + key] = python_value(pending.substr(0, pending.size() - 1));
      continue;
    }
    if (t.rfind("config.training.", 0) == 0) {
      const size_t eq = t.find(" = ");
      c["training." + t.substr(16, eq - 16)] = python_value(t.substr(eq + 3));
    } else if (t.rfind("config.parallelism = ParallelismConfig(", 0) == 0) {
      section = "parallelism";
    } else if (t.rfind("config.compile = CompileConfig(", 0) == 0) {
      section = "compile";
    } else if (t == ")") {
      section.clear();
    } else if (!section.empty()) {
      const size_t eq = t.find('=');
      key = t.substr(0, eq);
      pending = t.substr(eq + 1);
      for (char ch : pending) depth += ch == '[' ? 1 : ch == ']' ? -1 : 0;
      if (depth == 0) c[section + "." + key] = python_value(pending.substr(0, pending.size() - 1));
    }
  }
  return c;
}

/// A JSON document flattened to dotted keys ("zero_optimization.stage"); top-level keys bare.
Config flattened(const json& j, const std::string& prefix = "") {
  Config c;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string key = prefix.empty() ? it.key() : prefix + "." + it.key();
    if (it->is_object()) {
      for (auto& [k, v] : flattened(*it, key)) c[k] = v;
    } else {
      c[key] = *it;
    }
  }
  return c;
}

// ---- checking against a manifest --------------------------------------------------------------

std::optional<double> number(const json& v) {
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    char* end = nullptr;
    const double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end == s.c_str() + s.size()) return d;
  }
  return std::nullopt;
}

/// The spec of `key`: flat "arguments", or "sections" keyed by the part before the last dot.
const json* spec_of(const json& m, const std::string& key) {
  if (m.contains("arguments")) return m["arguments"].contains(key) ? &m["arguments"][key] : nullptr;
  const size_t dot = key.rfind('.');
  const std::string section = dot == std::string::npos ? "" : key.substr(0, dot);
  const std::string field = dot == std::string::npos ? key : key.substr(dot + 1);
  if (!m["sections"].contains(section) || !m["sections"][section].contains(field)) return nullptr;
  return &m["sections"][section][field];
}

/// Problems with one value against its spec (type and choices).
std::string type_problem(const json& spec, const json& v) {
  const std::string t = spec.value("type", "any");
  if (t == "flag") return v == true ? "" : "is a flag but has a value";
  if (v.is_null()) return spec.value("nullable", false) ? "" : "may not be null";
  if (t == "int" && !(number(v) && std::floor(*number(v)) == *number(v))) return "wants an int";
  if (t == "float" && !number(v)) return "wants a number";
  if (t == "bool" && !v.is_boolean()) return "wants true or false";
  if (t.rfind("list", 0) == 0 && !v.is_array()) return "wants a list";
  if (spec.contains("choices")) {
    for (const json& ch : spec["choices"])
      if (ch == v || (ch.is_string() && v.is_number() && ch == v.dump())) return "";
    return "is not one of " + spec["choices"].dump();
  }
  return "";
}

double term(const Config& c, const json& t) {
  if (t.is_number()) return t.get<double>();
  auto it = c.find(t.get<std::string>());
  if (it == c.end()) return NAN;
  return number(it->second).value_or(NAN);
}

/// `c` with every argument the manifest defaults and `c` leaves out, as the framework reads it.
Config with_defaults(const json& m, Config c) {
  auto fill = [&c](const std::string& key, const json& spec) {
    if (spec.contains("default") && !c.count(key)) c[key] = spec["default"];
  };
  if (m.contains("arguments")) {
    for (auto& [k, spec] : m["arguments"].items()) fill(k, spec);
  } else {
    for (auto& [section, fields] : m["sections"].items())
      for (auto& [k, spec] : fields.items()) fill(section.empty() ? k : section + "." + k, spec);
  }
  return c;
}

bool holds(const Config& c, const json& cond) {
  const std::string op = cond["op"];
  if (op == "any_present") {
    for (const json& k : cond["key"])
      if (c.count(k.get<std::string>())) return true;
    return false;
  }
  const std::string key = cond["key"];
  const auto it = c.find(key);
  if (op == "present") return it != c.end();
  if (op == "absent") return it == c.end();
  if (it == c.end()) return false;
  const json& v = it->second;
  const json& want = cond["value"];
  if (op == "==") return v == want || (number(v) && want.is_number() && *number(v) == want);
  const double x = number(v).value_or(NAN);
  if (op == ">") return x > want.get<double>();
  if (op == "<=") return x <= want.get<double>();
  if (op == ">=key") return x >= term(c, want);
  if (op == "<key") return x < term(c, want);
  double product = 1;
  for (const json& t : want) product *= term(c, t);
  if (op == "divisible_by") return product > 0 && std::fmod(x, product) == 0;
  if (op == "==product") return x == product;
  ADD_FAILURE() << "unknown operator " << op;
  return false;
}

/// Every problem of `c` against manifest `m`: unknown keys, bad types or choices, and each rule
/// whose conditions hold but whose demands do not.
std::vector<std::string> violations(const json& m, const Config& c) {
  std::vector<std::string> out;
  for (const auto& [key, v] : c) {
    if (key[0] == '$') continue;  // launch facts, not arguments
    const json* spec = spec_of(m, key);
    if (!spec) {
      out.push_back(key + ": not an argument of " + m["framework"].get<std::string>() + " " +
                    m["version"].get<std::string>());
    } else if (std::string p = type_problem(*spec, v); !p.empty()) {
      out.push_back(key + "=" + v.dump() + ": " + p);
    }
  }
  // Rules read the arguments as the framework sees them: defaults for what is left out. A
  // defaulted flag-less argument (present/absent) is judged on what was written.
  const Config full = with_defaults(m, c);
  auto judge = [&](const json& cond) {
    const std::string op = cond["op"];
    return holds(op == "present" || op == "absent" || op == "any_present" ? c : full, cond);
  };
  for (const json& rule : m["rules"]) {
    bool applies = true;
    for (const json& w : rule["when"]) applies = applies && judge(w);
    if (!applies) continue;
    for (const json& t : rule["then"])
      if (!judge(t))
        out.push_back(rule["assert"].get<std::string>() + " (" + rule["at"].get<std::string>() +
                      "): " + t.dump());
  }
  return out;
}

// ---- the configs ------------------------------------------------------------------------------

struct Case {
  const char* model;
  const char* gpu;
  int gpus;
  int64_t gbs, seq;
};

// Each zoo family at a size its users train it on.
constexpr Case kCases[] = {
    {"llama3.1-8b", "h100-sxm-80gb", 64, 256, 8192},
    {"llama3.1-70b", "h100-sxm-80gb", 256, 512, 8192},
    {"llama3.1-405b", "h100-sxm-80gb", 512, 512, 8192},
    {"gpt3-175b", "a100-sxm-80gb", 256, 512, 2048},
    {"mixtral-8x7b", "h100-sxm-80gb", 64, 256, 4096},
    {"qwen3-30b-a3b", "h100-sxm-80gb", 64, 256, 4096},
    {"deepseek-v3", "h800-sxm-80gb", 256, 1024, 4096},
};

Cluster cluster_of(const char* gpu, int gpus) {
  auto hw = find_profile(builtin_profiles().value(), gpu, "test");
  PX_CHECK(hw.ok(), hw.error_text());
  return {*hw, gpus};
}

/// Adds the launch facts the arguments leave to the launcher.
Config with_facts(Config c, const LaunchRequest& r) {
  const ParallelPlan& p = r.plan;
  c["$world_size"] = r.cluster.num_gpus;
  c["$data_parallel_size"] = p.dp;
  c["$pipeline_parallel_size"] = p.pp;
  return c;
}

Config parsed(LaunchTarget t, const LaunchRequest& r, const std::string& text) {
  switch (t) {
    case LaunchTarget::kMegatron:
      return with_facts(flags(words(shell_lines(text).front()), 0), r);
    case LaunchTarget::kTorchTitan: {
      Config c = toml(text);
      c["$data_parallel_size"] = r.plan.dp;
      return c;
    }
    case LaunchTarget::kTorchTitanMain: {
      Config c = python_config(text);
      c["$data_parallel_size"] = r.plan.dp;
      c["$dense_region"] = (r.plan.shards_params() ? r.plan.dp : 1) * r.plan.cp * r.plan.tp;
      return c;
    }
    case LaunchTarget::kDeepSpeed: {
      Config c = flattened(json::parse(text));
      c["$data_parallel_size"] = r.cluster.num_gpus / r.plan.pp;
      c["$pipeline_parallel_size"] = r.plan.pp;
      return c;
    }
    default:
      break;
  }
  ADD_FAILURE() << "no parser for " << to_string(t);
  return {};
}

const char* manifest_name(LaunchTarget t) {
  switch (t) {
    case LaunchTarget::kMegatron:
      return "megatron";
    case LaunchTarget::kTorchTitan:
      return "torchtitan-v0.2.2";
    case LaunchTarget::kTorchTitanMain:
      return "torchtitan-main";
    default:
      return "deepspeed";
  }
}

/// The plans to emit for one framework: the search's best few, and about 120 candidates spread
/// over the space that the framework runs (every 61st at the least).
std::vector<ParallelPlan> plans_for(LaunchTarget f, const PlanRequest& base) {
  PlanRequest r = base;
  r.constraints.frameworks = {f};
  std::vector<ParallelPlan> out;
  SearchOptions opt;
  opt.top_k = 3;
  if (auto found = search_plans(r, opt))
    for (const RankedPlan& p : found->top) out.push_back(p.report.plan);
  const PlanSpaceResult space = enumerate_plans(r);
  const size_t stride = std::max<size_t>(61, space.candidates.size() / 120);
  for (size_t i = 0; i < space.candidates.size(); i += stride) out.push_back(space.candidates[i]);
  return out;
}

TEST(LaunchRules, EveryEmittedTrainingConfigKeepsItsFrameworksRules) {
  std::map<std::string, int> checked;
  for (const Case& k : kCases) {
    PlanRequest base;
    base.model = find_zoo_model(k.model, "test").value();
    base.cluster = cluster_of(k.gpu, k.gpus);
    base.global_batch = k.gbs;
    base.seq_len = k.seq;
    // TorchTitan main too; a model it does not define gives it no plans.
    std::vector<LaunchTarget> targets = training_frameworks();
    targets.push_back(LaunchTarget::kTorchTitanMain);
    for (LaunchTarget f : targets) {
      const json m = manifest(manifest_name(f));
      for (const ParallelPlan& p : plans_for(f, base)) {
        const LaunchRequest r{base.model, base.cluster, p};
        auto text = emit_launch(f, r);
        ASSERT_TRUE(text.ok()) << k.model << " " << layout_label(p) << ": " << text.error_text();
        for (const std::string& v : violations(m, parsed(f, r, *text)))
          ADD_FAILURE() << to_string(f) << ", " << k.model << " " << layout_label(p) << ": " << v
                        << "\n"
                        << *text;
        ++checked[to_string(f)];
      }
    }
  }
  for (const auto& [f, n] : checked) {
    std::cout << "[ checked  ] " << n << " " << f << " configs\n";
    EXPECT_GT(n, 20) << f;
  }
}

// The block-scaled recipes' flags and sections keep the manifests' rules too (Megatron's
// --fp8-recipe and --fp4-* choices, TorchTitan 0.2.2's [quantize.linear.mx] fields).
TEST(LaunchRules, BlockScaledConfigsKeepTheirFrameworksRules) {
  PlanRequest base;
  base.model = find_zoo_model("llama3.1-8b", "test").value();
  base.cluster = cluster_of("b200-sxm-180gb", 16);
  base.global_batch = 64;
  base.seq_len = 8192;
  const std::pair<LaunchTarget, Precision> runs[] = {
      {LaunchTarget::kMegatron, Precision::kMxfp8},
      {LaunchTarget::kMegatron, Precision::kNvfp4},
      {LaunchTarget::kTorchTitan, Precision::kMxfp8},
      {LaunchTarget::kTorchTitanMain, Precision::kNvfp4}};
  for (const auto& [f, prec] : runs) {
    base.settings.precision = prec;
    const json m = manifest(manifest_name(f));
    const std::vector<ParallelPlan> plans = plans_for(f, base);
    EXPECT_FALSE(plans.empty()) << to_string(f) << " " << to_string(prec);
    for (const ParallelPlan& p : plans) {
      const LaunchRequest r{base.model, base.cluster, p};
      auto text = emit_launch(f, r);
      ASSERT_TRUE(text.ok()) << to_string(prec) << " " << layout_label(p) << ": "
                             << text.error_text();
      for (const std::string& v : violations(m, parsed(f, r, *text)))
        ADD_FAILURE() << to_string(f) << " " << to_string(prec) << ": " << v << "\n" << *text;
    }
  }
}

// The checker itself: a config that breaks a rule, or names an argument the framework lacks, is
// caught with the framework's own words.
TEST(LaunchRules, TheCheckerCatchesWhatTheFrameworkRefuses) {
  const json meg = manifest("megatron");
  Config c = flags(words("--tensor-model-parallel-size 2 --tp-comm-overlap --num-layers 30 "
                         "--pipeline-model-parallel-size 4 --micro-batch-size 1 "
                         "--global-batch-size 8 --context-parallel-size 1 --recompute-granularity "
                         "partial --no-such-flag"),
                   0);
  c["$world_size"] = 8;
  c["$data_parallel_size"] = 1;
  std::string found;
  for (const std::string& v : violations(meg, c)) found += v + "\n";
  EXPECT_NE(found.find("only when sequence parallelism is enabled"), std::string::npos) << found;
  EXPECT_NE(found.find("Number of layers should be divisible"), std::string::npos) << found;
  EXPECT_NE(found.find("--recompute-granularity=\"partial\": is not one of"), std::string::npos)
      << found;
  EXPECT_NE(found.find("--no-such-flag: not an argument of Megatron-LM"), std::string::npos)
      << found;
  const Config t = toml(
      "[parallelism]\ndata_parallel_replicate_degree = 4\n"
      "data_parallel_shard_degree = 1\ntensor_parallel_degree = 2\n"
      "context_parallel_degree = 1\npipeline_parallel_degree = 1\n"
      "expert_parallel_degree = 1\n");
  found.clear();
  for (const std::string& v : violations(manifest("torchtitan-v0.2.2"), t)) found += v + "\n";
  EXPECT_NE(found.find("DDP has not supported > 1D parallelism"), std::string::npos) << found;
  // TorchTitan main's module: every keyword is read, and async TP without compile is caught.
  const Config py = python_config(
      "    config.training.num_tokens_per_microbatch_per_dp_rank = 8192\n"
      "    config.parallelism = ParallelismConfig(\n"
      "        tensor_parallel_degree=4,\n"
      "        module_fqns_per_model_part=[\n"
      "            [\"tok_embeddings\", \"layers.0\"],\n"
      "            [\"layers.1\", \"norm\", \"lm_head\"],\n"
      "        ],\n"
      "    )\n"
      "    config.compile = CompileConfig(\n"
      "        enable=False,\n"
      "        enable_async_tensor_parallel=True,\n"
      "    )\n");
  EXPECT_EQ(py.size(), 5u);
  EXPECT_EQ(py.at("parallelism.module_fqns_per_model_part").size(), 2u);
  found.clear();
  for (const std::string& v : violations(manifest("torchtitan-main"), py)) found += v + "\n";
  EXPECT_NE(found.find("Async TP requires"), std::string::npos) << found;
}

serving::Deployment deployment(int tp, int dp, int ep, int64_t seqs) {
  serving::Deployment d;
  d.tp = tp;
  d.dp = dp;
  d.ep = ep;
  d.max_num_seqs = seqs;
  d.max_num_batched_tokens = 8192;
  return d;
}

TEST(LaunchRules, EveryEmittedServingCommandKeepsItsEnginesRules) {
  struct ServeCase {
    const char* model;
    serving::Deployment d;
    ServeEngineSettings s;
  };
  const ServeCase cases[] = {
      {"llama3.1-70b", deployment(8, 1, 1, 256), {.gpus = 8, .gpus_per_node = 8}},
      {"llama3.1-70b", deployment(4, 2, 1, 256), {.gpus = 8, .gpus_per_node = 8}},
      {"llama3.1-70b", deployment(4, 4, 1, 256), {.gpus = 16, .gpus_per_node = 8}},
      {"llama3.1-405b", deployment(16, 1, 1, 128), {.gpus = 16, .gpus_per_node = 8}},
      {"qwen3-30b-a3b", deployment(4, 2, 4, 256), {.gpus = 8, .gpus_per_node = 8}},
      {"qwen3-30b-a3b", deployment(4, 2, 8, 256), {.gpus = 8, .gpus_per_node = 8}},
      {"deepseek-v3", deployment(8, 4, 32, 64), {.gpus = 32, .gpus_per_node = 8}},
      {"llama3.1-8b", deployment(1, 4, 1, 256), {.gpus = 4, .prefill_replicas = 2}},
  };
  const json vllm = manifest("vllm"), sglang = manifest("sglang");
  int nv = 0, ng = 0;
  for (const ServeCase& c : cases) {
    const ModelSpec m = find_zoo_model(c.model, "test").value();
    auto v = emit_vllm(m, c.d, c.s);
    ASSERT_TRUE(v.ok()) << c.model << ": " << v.error_text();
    for (const Config& cmd : commands(*v, {"vllm", "serve"})) {
      for (const std::string& x : violations(vllm, cmd)) ADD_FAILURE() << x << "\n" << *v;
      ++nv;
    }
    auto g = emit_sglang(m, c.d, c.s);
    ASSERT_TRUE(g.ok()) << c.model << ": " << g.error_text();
    for (const Config& cmd : commands(*g, {"python", "-m", "sglang.launch_server"})) {
      for (const std::string& x : violations(sglang, cmd)) ADD_FAILURE() << x << "\n" << *g;
      ++ng;
    }
  }
  std::cout << "[ checked  ] " << nv << " vllm and " << ng << " sglang commands\n";
  EXPECT_GT(nv, 10);
  EXPECT_GT(ng, 10);
}

}  // namespace
}  // namespace parallax
