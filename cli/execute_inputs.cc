#include "cli/execute_inputs.h"

#include <cmath>

#include "core/text.h"

namespace parallax::cli {
namespace {

std::string number(double v) { return format_number("%g", v); }

/// A diagnostic for `flag` when `v` is not a finite number in [lo, hi] (lo excluded when
/// `open_lo`), with `why` (the reason for the range) as its hint.
void check_real(Diagnostics* d, const char* flag, double v, double lo, bool open_lo, double hi,
                const std::string& why) {
  const bool below = open_lo ? !(v > lo) : !(v >= lo);
  if (std::isfinite(v) && !below && v <= hi) return;
  const std::string range = std::string(open_lo ? "(" : "[") + number(lo) + ", " + number(hi) + "]";
  d->push_back({flag, "must be a finite number in " + range + ", got " + number(v), why});
}

void check_int(Diagnostics* d, const char* flag, int64_t v, int64_t lo, int64_t hi,
               const std::string& why) {
  if (v >= lo && v <= hi) return;
  d->push_back({flag,
                "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                    std::to_string(v),
                why});
}

}  // namespace

void add_execute_flags(CLI::App* cmd, ExecuteFlags* o) {
  cmd->add_option("--backend", o->backend,
                  "cpu (Eigen, one MPI process per rank) or cuda (one GPU: cuBLAS and our "
                  "kernels, fp32; dense models, no parallelism yet)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_option("--steps", o->steps, "optimizer steps to run, 1 to 99999999 (default 10)");
  // CLI11 reads "-1" into an unsigned integer as 2^64 - 1: a sign is refused before it converts.
  cmd->add_option("--seed", o->seed,
                  "initialisation and synthetic-data seed, 0 to 2^64 - 1 (default 1234)")
      ->check(CLI::Validator(
          [](std::string& v) {
            return v.find('-') == std::string::npos
                       ? std::string()
                       : "must be in [0, 2^64 - 1], got " + v + " (hint: a seed has no sign)";
          },
          "UINT64"));
  cmd->add_option("--data", o->data,
                  "a text file (byte-level tokens; the model's vocab must be >= 256) or "
                  "'synthetic' (default)");
  cmd->add_option("--lr", o->lr, "AdamW learning rate, in (0, 1] (default 1e-3)");
  cmd->add_option("--warmup", o->warmup,
                  "linear learning-rate warm-up steps, 0 or more (default 0; longer than --steps "
                  "is allowed, for a run to be resumed)");
  cmd->add_option("--format", o->format, "output format: table | json")
      ->check(CLI::IsMember({"table", "json"}));
  cmd->add_option("--checkpoint-dir", o->checkpoint_dir,
                  "directory of sharded checkpoints (one step-NNNNNNNN/ per save; a step is "
                  "complete once its manifest.json is written)");
  cmd->add_option("--mode", o->mode,
                  "train (default), or generate: prefill --prompt and decode --max-new-tokens "
                  "with a KV cache under tp and pp (--gbs prompts; weights from the newest "
                  "checkpoint in --checkpoint-dir)")
      ->check(CLI::IsMember({"train", "generate"}));
  cmd->add_option("--prompt", o->prompt, "generate: the prompt text (byte-level tokens)");
  cmd->add_option("--max-new-tokens", o->max_new_tokens,
                  "generate: tokens to decode, 1 to 1048576 (default 32)");
  cmd->add_option("--temperature", o->temperature,
                  "generate: 0 = greedy (default), else sample softmax(logits / T)");
  cmd->add_flag("--fit", o->fit,
                "scale the model down, keeping its proportions (head size, GQA grouping, "
                "vocabulary, experts), until each rank's share fits this machine's memory");
  cmd->add_option("--fit-gib", o->fit_gib,
                  "--fit into this many GiB (all ranks together) instead of 80% of the memory "
                  "available");
  cmd->add_option("--timeout", o->timeout_s,
                  "seconds a rank waits in a collective or for a pipeline message before the "
                  "job is stopped, naming the ranks that have stopped answering (default 300)");
  cmd->add_option("--save-every", o->save_every, "save a checkpoint every N steps (0: never)");
  cmd->add_option("--keep-last", o->keep_last,
                  "complete checkpoints to keep in --checkpoint-dir: after each save the oldest "
                  "beyond N are deleted, never the one just written (default 3; 0: keep all)");
  cmd->add_flag("--async-save", o->async_save,
                "write checkpoint shards on a thread that overlaps the next step (the state is "
                "copied first; the checkpoint completes at the end of that step)");
  cmd->add_flag("--resume", o->resume,
                "continue from the newest complete checkpoint in --checkpoint-dir, under this "
                "run's layout (the checkpoint is resharded as needed), up to --steps");
  cmd->add_flag("--compare", o->compare,
                "also simulate the plan (in fp32) on --cluster, e.g. a profile from `parallax "
                "calibrate`, and print the prediction beside the measurement");
  cmd->add_flag("--op-times", o->op_times,
                "time each operator (GEMMs, attention, norms, optimizer...) and print rank 0's "
                "times in the median step, beside the simulator's for the same stage with "
                "--compare");
}

Diagnostics check_execute_flags(const ExecuteFlags& f) {
  Diagnostics d;
  const std::string steps_why = "checkpoint directories carry the step in 8 digits";
  check_int(&d, "--steps", f.steps, 1, kMaxSteps, steps_why);
  check_int(&d, "--warmup", f.warmup, 0, kMaxSteps, steps_why);
  check_int(&d, "--save-every", f.save_every, 0, kMaxSteps, "0 never saves");
  check_int(&d, "--keep-last", f.keep_last, 0, kMaxSteps, "0 keeps every checkpoint");
  // AdamW moves each weight by about lr a step whatever the gradient's size (the update is
  // m / sqrt(v)): above 1 that outgrows the weights themselves and the loss diverges.
  if (std::isfinite(f.lr) && f.lr > 1)
    d.push_back({"--lr", "must be at most 1 for AdamW, got " + number(f.lr),
                 "AdamW moves each weight by about lr a step; 1e-4 to 3e-3 is usual"});
  else
    check_real(&d, "--lr", f.lr, 0, true, 1, "a positive learning rate; 0 would not train");
  // Beyond a day a wait is indistinguishable from a hang.
  check_real(&d, "--timeout", f.timeout_s, 0, true, 86400,
             "seconds a rank waits for its peers; at most a day");
  check_real(&d, "--temperature", f.temperature, 0, false, 1e6, "0 is greedy decoding");
  // The KV cache holds the prompt and every new token of each prompt.
  check_int(&d, "--max-new-tokens", f.max_new_tokens, 1, int64_t{1} << 20,
            "the KV cache holds every new token");
  if (f.fit_gib)
    check_real(&d, "--fit-gib", *f.fit_gib, 0, true, 1e9, "GiB of memory for all ranks together");
  if ((f.save_every > 0 || f.resume) && f.checkpoint_dir.empty())
    d.push_back({f.resume ? "--resume" : "--save-every", "needs --checkpoint-dir", ""});
  return d;
}

std::vector<std::string> execute_flag_notes(const ExecuteFlags& f) {
  std::vector<std::string> notes;
  if (f.mode != "train") return notes;
  // A warm-up is a function of the global step, so a run that is to be resumed may stop
  // before its warm-up ends: allowed, and said.
  if (f.warmup > f.steps)
    notes.push_back("--warmup " + std::to_string(f.warmup) + " is longer than --steps " +
                    std::to_string(f.steps) +
                    ": the learning rate stays below --lr for this whole run (fine for a run "
                    "that will be resumed)");
  if (f.save_every > f.steps)
    notes.push_back("--save-every " + std::to_string(f.save_every) + " is more than --steps " +
                    std::to_string(f.steps) + ": this run saves no checkpoint");
  return notes;
}

}  // namespace parallax::cli
