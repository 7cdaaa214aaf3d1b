// `parallax execute`: train the plan's model for real on CPU ranks (one MPI process per rank) or
// one GPU (--backend cuda), and report loss, step time, throughput and memory.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>

#include "cli/commands.h"
#include "cli/execute_inputs.h"
#include "cli/execute_report.h"
#include "core/text.h"
#include "core/units.h"
#include "executor/checkpoint.h"
#include "executor/checkpoint_retention.h"
#include "executor/data.h"
#include "executor/generate.h"
#include "executor/model.h"
#include "executor/process_group.h"
#include "executor/trainer.h"
#include "simulator/simulate.h"

namespace parallax::cli {
namespace {

using Opts = ExecuteFlags;

/// Weights, gradients and two Adam moments in fp32, plus the activations one microbatch saves
/// for backward (a generous per-layer count of hidden-sized and ffn-sized tensors, and the
/// logits): a check before allocating, not a prediction.
/// Per rank: tp and pp divide the blocks' weights (the embedding and output layer counted whole),
/// pp and cp the saved activations.
double footprint_gib(const exec::ModelShape& s, int64_t params, const ParallelPlan& p) {
  const double tokens = static_cast<double>(p.micro_batch) * p.seq_len / p.cp;
  const double per_layer = tokens * (12.0 * s.hidden + 4.0 * s.ffn_hidden) +
                           static_cast<double>(p.micro_batch) * s.heads * p.seq_len * p.seq_len /
                               (static_cast<double>(p.cp) * p.cp);
  const double act = s.layers * per_layer / p.pp + 3.0 * tokens * s.vocab;
  const double weights =
      static_cast<double>(params) / (p.tp * p.pp) + 2.0 * static_cast<double>(s.vocab) * s.hidden;
  return (16.0 * weights + 4.0 * act) / kGiB;
}

/// The model scaled down by `f` with its proportions kept: layers, query and KV heads (the
/// grouping and head size kept), hidden (heads x head size when the model ties them), the MLP
/// (its ratio to hidden) and expert widths divided by f, rounded so that the layout still divides
/// them (tp the KV heads and widths, pp * vpp the layers); vocabulary, experts and top-k kept.
exec::ModelShape scaled(exec::ModelShape s, int64_t f, const ParallelPlan& p) {
  auto down = [f](int64_t x, int64_t unit) { return std::max(unit, x / f / unit * unit); };
  const int64_t group = s.heads / s.kv_heads;
  const bool tied = s.hidden == s.heads * s.head_dim;  // Llama: hidden = heads x head size
  const double mlp_ratio = static_cast<double>(s.ffn_hidden) / static_cast<double>(s.hidden);
  s.kv_heads = down(s.kv_heads, p.tp);
  s.heads = s.kv_heads * group;
  s.hidden = tied ? s.heads * s.head_dim : down(s.hidden, 64);
  if (s.ffn_hidden > 0) {
    const auto unit = static_cast<int64_t>(16 * p.tp);
    s.ffn_hidden = std::max(
        unit, static_cast<int64_t>(mlp_ratio * static_cast<double>(s.hidden)) / unit * unit);
  }
  s.moe.expert_ffn_hidden = s.moe.experts > 0 ? down(s.moe.expert_ffn_hidden, 16) : 0;
  s.layers = down(s.layers, static_cast<int64_t>(p.pp) * p.vpp);
  s.moe.dense_layers = std::min(s.moe.dense_layers, s.layers - 1);
  return s;
}

double available_gib() {
  FILE* f = std::fopen("/proc/meminfo", "r");
  if (!f) return 0;
  char key[64];
  double kb = 0;
  double out = 0;
  while (std::fscanf(f, "%63s %lf kB\n", key, &kb) == 2) {
    if (std::string(key) == "MemAvailable:") {
      out = kb * 1024 / kGiB;
      break;
    }
  }
  std::fclose(f);
  return out;
}

/// What the executor trains: the plan's layout and batch, and the run's own settings.
exec::TrainOptions train_options(const Opts& o, const ParallelPlan& plan) {
  exec::TrainOptions t;
  t.steps = o.steps;
  t.seq = plan.seq_len;
  t.micro_batch = plan.micro_batch;
  t.global_batch = plan.global_batch;
  t.seed = o.seed;
  t.tp = plan.tp;
  t.sequence_parallel = plan.sequence_parallel;
  t.pp = plan.pp;
  t.cp = plan.cp;
  t.ep = plan.ep;
  t.etp = plan.etp;
  t.vpp = plan.vpp;
  t.schedule = plan.schedule;
  t.shard_optimizer = plan.zero_stage >= 1 || plan.fsdp;
  t.shard_gradients = plan.zero_stage >= 2 || plan.fsdp;
  t.shard_parameters = plan.zero_stage == 3 || plan.fsdp;
  t.checkpoint_dir = o.checkpoint_dir;
  t.save_every = o.save_every;
  t.keep_last = o.keep_last;
  t.resume = o.resume;
  t.async_save = o.async_save;
  t.data_name = o.data == "synthetic" ? "synthetic (seed " + std::to_string(o.seed + 1) + ")"
                                      : "text " + o.data;
  t.adam.lr = o.lr;
  t.adam.warmup_steps = o.warmup;
  t.op_times = o.op_times;
  return t;
}

std::string step_list(const std::vector<int64_t>& steps) {
  std::string list;
  for (const int64_t st : steps) list += (list.empty() ? "" : ", ") + std::to_string(st);
  return list;
}

/// Why a run stopped at a non-finite value, and what is left to resume from.
Diagnostic non_finite_diagnostic(const exec::NonFinite& s, const std::string& checkpoint_dir) {
  const std::vector<int64_t> done =
      checkpoint_dir.empty() ? std::vector<int64_t>{} : exec::complete_steps(checkpoint_dir);
  return {
      "step " + std::to_string(s.step),
      "the " + s.quantity + " is " + format_number("%g", s.value) +
          ", not finite: training stopped before this step's update",
      "a lower --lr or a --warmup; " +
          (done.empty() ? std::string("no checkpoint was saved")
                        : "the newest complete checkpoint, step " + std::to_string(done.back()) +
                              " in " + checkpoint_dir + ", is intact for --resume")};
}

/// Bytes as text, with the unprintable ones escaped.
std::string printable(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t t : ids) {
    if (t >= 32 && t < 127) {
      s += static_cast<char>(t);
    } else if (t == '\n') {
      s += "\\n";
    } else {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", t & 0xff);
      s += b;
    }
  }
  return s;
}

/// --mode generate: the prompt (byte-level tokens), gbs copies of it, through prefill and
/// KV-cached decode under tp x pp.
template <typename Fail>
int run_generate(const Opts& o, const ResolvedRun& run, const exec::ModelShape& shape,
                 exec::ProcessGroup& group, Fail&& fail) {
  const ParallelPlan& plan = run.plan;
  if (plan.dp != 1 || plan.cp != 1)
    return fail({Diagnostic{plan.cp != 1 ? "--cp" : "--dp",
                            "generation runs under tp and pp only (dp=" + std::to_string(plan.dp) +
                                ", cp=" + std::to_string(plan.cp) + ")",
                            "--gpus = tp * pp"}});
  exec::GenerateOptions g;
  g.tp = plan.tp;
  g.pp = plan.pp;
  g.max_new_tokens = o.max_new_tokens;
  g.temperature = o.temperature;
  g.seed = o.seed;
  g.checkpoint_dir = o.checkpoint_dir;
  const std::vector<int32_t> prompt = exec::byte_tokens(o.prompt);
  const std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(plan.global_batch), prompt);
  auto r = exec::generate(shape, prompts, g, group);
  if (!r) return fail(r.errors());
  if (group.rank() != 0) return 0;
  if (o.format == "table") {
    std::printf(
        "generating with %s on %d rank%s: tp%d pp%d, %lld prompt%s of %zu tokens, %lld new "
        "tokens each, %s\n",
        run.model.name.c_str(), group.size(), group.size() == 1 ? "" : "s", plan.tp, plan.pp,
        static_cast<long long>(prompts.size()), prompts.size() == 1 ? "" : "s", prompt.size(),
        static_cast<long long>(o.max_new_tokens),
        r->checkpoint_step > 0
            ? ("weights of the checkpoint of step " + std::to_string(r->checkpoint_step)).c_str()
            : "untrained weights (no --checkpoint-dir)");
    std::printf(
        "  time to first token %.2f ms, time per output token %.2f ms, %.0f tokens/s, "
        "peak memory %.3f GiB per rank\n",
        1e3 * r->ttft_s, 1e3 * r->tpot_s, r->tokens_per_s, r->peak_memory_gib);
    for (size_t b = 0; b < r->tokens.size(); ++b)
      std::printf("  [%zu] %s|%s\n", b, printable(prompt).c_str(), printable(r->tokens[b]).c_str());
    return 0;
  }
  Json texts = Json::array(), ids = Json::array();
  for (const auto& t : r->tokens) {
    texts.push_back(printable(t));
    ids.push_back(t);
  }
  Json j = {{"mode", "generate"},
            {"model", run.model.name},
            {"ranks", group.size()},
            {"checkpoint_step", r->checkpoint_step},
            {"ttft_s", r->ttft_s},
            {"tpot_s", r->tpot_s},
            {"tokens_per_s", r->tokens_per_s},
            {"peak_memory_gib", r->peak_memory_gib},
            {"texts", texts},
            {"tokens", ids}};
  std::cout << j.dump(2) << "\n";
  return 0;
}

int run(const Opts& o) {
  // Every rank checks the flags before MPI starts, and says why it stops.
  if (Diagnostics bad = check_execute_flags(o); !bad.empty()) return report_errors(bad);
  if (o.backend != "cpu" && o.backend != "cuda")
    return report_errors(
        {Diagnostic{"--backend", "unknown backend " + o.backend, "--backend cpu or cuda"}});
  const bool gpu = o.backend == "cuda";
  if (gpu && o.mode == "generate")
    return report_errors({Diagnostic{"--backend", "generation on the CUDA backend is not built yet",
                                     "--backend cpu"}});
  if (o.layout.model.empty() && o.layout.scenario.empty())
    return report_errors({Diagnostic{"--model", "execute needs a model (--model or --plan)",
                                     "a small JSON model, e.g. examples/tiny-llama.json"}});
  std::unique_ptr<exec::ProcessGroup> group;
  if (launched_by_mpi()) {
    auto g = exec::make_mpi_world(o.timeout_s);
    if (!g) return report_errors(g.errors());
    group = std::move(g).value();
  } else {
    group = exec::make_local_group();
  }
  const bool rank0 = group->rank() == 0;
  if (rank0)
    for (const std::string& note : execute_flag_notes(o))
      std::cerr << ("note: " + note + "\n") << std::flush;
  // Every rank says why it stops (a job whose ranks exit silently looks hung); the others name
  // themselves.
  auto fail = [&](Diagnostics d) {
    if (!rank0)
      for (Diagnostic& x : d) x.where = "rank " + std::to_string(group->rank()) + ": " + x.where;
    return report_errors(d);
  };

  // Defaults sized for CPU ranks: every rank data-parallel, short sequences, small batches.
  LayoutFlags f = o.layout;
  if (f.scenario.empty()) {
    if (f.gpus == kUnset && f.dp == kUnset) f.gpus = group->size();
    if (f.tp == kUnset) f.tp = 1;
    if (f.pp == kUnset) f.pp = 1;
    if (f.seq == kUnset) f.seq = 128;
    if (f.mbs == kUnset) f.mbs = 1;
    if (f.gbs == kUnset) f.gbs = o.mode == "generate" ? 1 : 4 * group->size();
    if (f.recompute.empty()) f.recompute = "none";
    if (f.zero == kUnset) f.zero = 0;
    if (f.sp == -1) f.sp = 0;
  }
  auto resolved = resolve_run(f, /*check_layout=*/false);
  if (!resolved) return fail(resolved.errors());
  const ParallelPlan& plan = resolved->plan;
  Diagnostics bad;
  auto shape = exec::executable_shape(resolved->model);
  if (shape && (o.fit || o.fit_gib)) {
    // Halve the proportions until the ranks' shares fit this machine's memory (80% of it).
    const double have = o.fit_gib ? *o.fit_gib / 0.8 : available_gib();
    for (int halvings = 0; halvings < 40; ++halvings) {
      const double need =
          footprint_gib(*shape, exec::Transformer<float>(*shape).num_params(), plan);
      if (have <= 0 || need * group->size() <= 0.8 * have) break;
      const exec::ModelShape next = scaled(*shape, 2, plan);
      if (next.hidden == shape->hidden && next.layers == shape->layers) {  // at the floor
        bad.push_back({"--fit",
                       resolved->model.name + " scaled as far as its proportions allow (" +
                           std::to_string(shape->layers) + " layers, hidden " +
                           std::to_string(shape->hidden) + ", vocab " +
                           std::to_string(shape->vocab) + ") still needs " +
                           format_fixed(need * group->size(), 2) + " GiB, more than the " +
                           format_fixed(0.8 * have, 2) + " GiB it may use",
                       "more memory (--fit-gib), a shorter --seq, or a smaller model"});
        break;
      }
      shape.value() = next;
    }
    if (rank0 && o.format == "table")
      std::printf(
          "scaled %s to fit: %lld layers, hidden %lld, %lld heads (%lld KV) of %lld, MLP "
          "%lld, vocab %lld%s\n",
          resolved->model.name.c_str(), static_cast<long long>(shape->layers),
          static_cast<long long>(shape->hidden), static_cast<long long>(shape->heads),
          static_cast<long long>(shape->kv_heads), static_cast<long long>(shape->head_dim),
          static_cast<long long>(shape->ffn_hidden), static_cast<long long>(shape->vocab),
          shape->moe.experts > 0 ? (", " + std::to_string(shape->moe.experts) + " experts of " +
                                    std::to_string(shape->moe.expert_ffn_hidden))
                                       .c_str()
                                 : "");
  }
  const exec::TrainOptions t = train_options(o, plan);
  if (!shape) {
    bad.insert(bad.end(), shape.errors().begin(), shape.errors().end());
  } else {
    const Diagnostics layout = exec::check_training(*shape, t, plan.gpus());
    bad.insert(bad.end(), layout.begin(), layout.end());
  }
  if (!bad.empty()) return fail(bad);
  if (gpu && plan.gpus() > 1)
    return fail({Diagnostic{"--backend",
                            "the CUDA backend runs one GPU; this plan has " +
                                std::to_string(plan.gpus()) + " ranks (tp*pp*dp*cp)",
                            "--backend cpu under mpirun for a parallel layout"}});
  if (plan.gpus() != group->size())
    return fail(
        {Diagnostic{"--gpus",
                    "the plan has " + std::to_string(plan.gpus()) + " ranks (tp*pp*dp*cp), " +
                        "the job " + std::to_string(group->size()),
                    "launch with mpirun -np " + std::to_string(plan.gpus())}});

  if (o.mode == "generate") return run_generate(o, *resolved, *shape, *group, fail);

  // Data: synthetic, or a text file through the byte-level tokenizer.
  exec::TokenSource data = exec::TokenSource::synthetic(shape->vocab, o.seed + 1);
  if (o.data != "synthetic") {
    auto text = read_file(o.data);
    if (!text) return fail(text.errors());
    auto src = exec::TokenSource::from_tokens(exec::byte_tokens(text.value()), shape->vocab,
                                              plan.seq_len, "--data " + o.data);
    if (!src) return fail(src.errors());
    data = std::move(src).value();
  }

  const exec::Transformer<float> probe(*shape);
  const double need = footprint_gib(*shape, probe.num_params(), plan);
  const double have = available_gib();
  if (have > 0 && need * group->size() > have)
    return fail(
        {Diagnostic{"--model",
                    resolved->model.name + " needs about " + format_fixed(need, 2) +
                        " GiB per rank, " + std::to_string(group->size()) +
                        " ranks; this machine has " + format_fixed(have, 2) + " GiB available",
                    "a smaller model, --mbs or --seq"}});

  // The simulator's prediction for the same plan as the executor runs it (exec::as_executed)
  // on --cluster.
  std::optional<StepReport> predicted;
  if (o.compare) {
    SimulationOptions sim;
    sim.record_trace = o.op_times;
    auto rep = simulate(resolved->model, resolved->cluster, exec::as_executed(plan), sim);
    if (!rep) return fail(rep.errors());
    predicted = rep.value();
  }

  const bool table = o.format == "table";
  if (rank0 && table)
    std::printf(
        "executing %s (%.2fM parameters) on %d rank%s: tp%d pp%d cp%d dp%d%s%s, mbs %d, gbs "
        "%lld x %lld tokens, zero %d%s\n",
        resolved->model.name.c_str(), probe.num_params() / 1e6, group->size(),
        group->size() == 1 ? "" : "s", plan.tp, plan.pp, plan.cp, plan.dp,
        plan.vpp > 1 ? (" vpp" + std::to_string(plan.vpp)).c_str() : "",
        t.sequence_parallel && plan.tp > 1 ? " sp" : "", plan.micro_batch,
        static_cast<long long>(plan.global_batch), static_cast<long long>(plan.seq_len),
        plan.zero_stage, gpu ? ", backend cuda (one GPU)" : "");
  const auto print_step = [&](const exec::StepRecord& r) {
    if (rank0 && table)
      std::printf("  step %4lld  loss %.4f  grad-norm %.3f  %.3f s  %.0f tokens/s  peak %.3f GiB\n",
                  static_cast<long long>(r.step), r.loss, r.grad_norm, r.time_s, r.tokens_per_s,
                  r.peak_memory_gib);
    std::fflush(stdout);
  };
  if (gpu && group->size() > 1)
    return fail({Diagnostic{"--backend", "the CUDA backend runs one GPU in one process",
                            "launch without mpirun"}});
  // Temporaries of a write killed mid-save: cleared before any rank of this run can write (the
  // others wait in train's first collective).
  if (rank0 && !o.checkpoint_dir.empty()) {
    const exec::CheckpointCleanup stale = exec::remove_stale_temporaries(o.checkpoint_dir);
    for (const std::string& file : stale.files)
      std::cerr << ("note: removed " + file + ", left by an interrupted checkpoint write\n");
    for (const std::string& n : stale.notes) std::cerr << ("note: " + n + "\n");
    // A fresh run over an earlier run's checkpoints: --resume would read theirs, and
    // --keep-last counts them with this run's.
    if (const std::vector<int64_t> old = exec::complete_steps(o.checkpoint_dir);
        !o.resume && o.save_every > 0 && !old.empty())
      std::cerr << ("note: " + o.checkpoint_dir + " already holds the checkpoints of steps " +
                    step_list(old) +
                    "; this run starts fresh (no --resume), and --keep-last counts them with "
                    "its own\n");
  }
  auto result = gpu ? exec::train_on_gpu(*shape, data, t, print_step)
                    : exec::train(*shape, data, t, *group, print_step);
  if (!result) return fail(result.errors());
  if (rank0)
    for (const std::string& n : result->notes) std::cerr << ("note: " + n + "\n") << std::flush;
  if (result->stopped) {
    fail({non_finite_diagnostic(*result->stopped, o.checkpoint_dir)});
    return kExitNonFinite;
  }
  if (!rank0) return 0;
  if (table && result->resumed_from > 0)
    std::printf("  resumed from the checkpoint of step %lld in %s\n",
                static_cast<long long>(result->resumed_from), o.checkpoint_dir.c_str());
  if (table && !result->removed.empty())
    std::printf("  removed the older checkpoints of steps %s (--keep-last %lld)\n",
                step_list(result->removed).c_str(), static_cast<long long>(o.keep_last));
  if (table && !result->saved.empty())
    std::printf("  saved checkpoints of steps %s in %s (%.3f s in all, outside the step times)\n",
                step_list(result->saved).c_str(), o.checkpoint_dir.c_str(), result->save_time_s);
  const double error = predicted && result->median_step_time_s > 0
                           ? predicted->step_time_s / result->median_step_time_s - 1
                           : 0;
  // The routing the run saw (timed runs under expert parallelism): the busiest expert-parallel
  // rank's routed copies over the mean, averaged over the MoE layers of the steps after the
  // first, and the prediction with that imbalance instead of the plan's.
  double routing = 0;
  std::optional<StepReport> predicted_routed;
  if (predicted && o.op_times && plan.ep > 1) {
    double sum = 0;
    int64_t layers = 0;
    for (size_t i = result->steps.size() > 1 ? 1 : 0; i < result->steps.size(); ++i) {
      sum += result->steps[i].ops.routing_sum;
      layers += result->steps[i].ops.routing_layers;
    }
    if (layers > 0) {
      routing = sum / static_cast<double>(layers);
      ParallelPlan routed = exec::as_executed(plan);
      routed.moe_imbalance = routing;
      auto rep = simulate(resolved->model, resolved->cluster, routed, SimulationOptions{});
      if (!rep) return fail(rep.errors());
      predicted_routed = rep.value();
    }
  }
  // The simulator runs each rank at its profile's speed. Ranks that outnumber the cores
  // time-share them: comparable only with a profile calibrated the same way (as many ranks on
  // as many cores, whose tables hold a rank's share of a core); the comparison says so.
  std::string note;
  if (const long cores = sysconf(_SC_NPROCESSORS_ONLN);
      predicted && cores > 0 && group->local_size() > cores) {
    const HwProfile& hw = resolved->cluster.hw;
    if (!(hw.shared_processors == cores && hw.gpus_per_node == group->local_size()))
      note = std::to_string(group->local_size()) + " ranks share this host's " +
             std::to_string(cores) + " cores, but " + hw.name +
             " was not calibrated so: the measurement is not comparable (calibrate under mpirun "
             "-np " +
             std::to_string(group->local_size()) + " on this host for a profile that is)";
  }
  if (table) {
    std::printf(
        "  median step %.4f s, %.0f tokens/s (%.0f per rank), peak memory %.3f GiB per rank\n",
        result->median_step_time_s, result->tokens_per_s, result->tokens_per_s / group->size(),
        result->peak_memory_gib);
    if (predicted)
      std::printf("  predicted on %s: step %.4f s (%+.1f%%), peak memory %.3f GiB\n",
                  resolved->cluster.hw.name.c_str(), predicted->step_time_s, 100 * error,
                  predicted->peak_memory_gib);
    if (!note.empty()) std::printf("  note: %s\n", note.c_str());
    if (predicted_routed)
      std::printf(
          "  routing: the busiest expert-parallel rank got %.2fx the mean of routed tokens (over "
          "the MoE layers); predicted with that: step %.4f s (%+.1f%%)\n",
          routing, predicted_routed->step_time_s,
          100 * (predicted_routed->step_time_s / result->median_step_time_s - 1));
    if (o.op_times) print_op_times(*result, predicted ? &*predicted : nullptr, false, nullptr);
  } else {
    Json j = {{"model", resolved->model.name},
              {"backend", o.backend},
              {"params", result->params},
              {"ranks", group->size()},
              {"step_time_s", result->median_step_time_s},
              {"tokens_per_s", result->tokens_per_s},
              {"peak_memory_gib", result->peak_memory_gib}};
    Json losses = Json::array(), times = Json::array(), memory = Json::array();
    for (const auto& s : result->steps) {
      losses.push_back(s.loss);
      times.push_back(s.time_s);
      memory.push_back(s.peak_memory_gib);
    }
    j["losses"] = losses;
    j["first_step"] = result->steps.empty() ? 0 : result->steps.front().step;
    j["resumed_from"] = result->resumed_from;
    j["saved_steps"] = result->saved;
    j["removed_steps"] = result->removed;
    if (predicted) {
      j["predicted_step_time_s"] = predicted->step_time_s;
      j["predicted_peak_memory_gib"] = predicted->peak_memory_gib;
      j["step_time_error"] = error;
      j["profile"] = resolved->cluster.hw.name;
      if (!note.empty()) j["note"] = note;
    }
    if (predicted_routed) {
      j["moe_imbalance"] = routing;
      j["predicted_step_time_s_with_routing"] = predicted_routed->step_time_s;
    }
    j["step_times_s"] = times;
    if (o.op_times) print_op_times(*result, predicted ? &*predicted : nullptr, true, &j);
    j["peak_memory_gib_per_step"] = memory;
    std::cout << j.dump(2) << "\n";
  }
  return 0;
}

}  // namespace

void add_execute_command(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<ExecuteFlags>();
  CLI::App* cmd = app.add_subcommand("execute",
                                     "Train the plan's model for real on CPU ranks (one MPI "
                                     "process per rank) or one GPU, and measure it");
  add_layout_flags(cmd, &o->layout);
  add_execute_flags(cmd, o.get());
  cmd->footer(
      "Runs fp32 on each rank's CPU core. Under `mpirun -np N` each process is one rank; the plan "
      "must have N ranks.\n"
      "Example: mpirun -np 2 parallax execute --model examples/tiny-llama.json --gpus 2 --tp 1 "
      "--gbs 8 --seq 128 --steps 20\n"
      "Exit code: 0 ran, 2 bad input (every rank says why), 3 a rank stopped answering (the job "
      "is aborted after --timeout, naming it), 4 stopped at a non-finite loss or gradient norm "
      "(the last complete checkpoint is kept).");
  cmd->callback([o, exit_code] { *exit_code = run(*o); });
}

}  // namespace parallax::cli
