#include "cli/app.h"

#include <string>

#include "cli/commands.h"
#include "cli/inputs.h"

namespace parallax::cli {

void add_commands(CLI::App& app, int* exit_code) {
  using AddCommand = void (*)(CLI::App&, int*);
  static constexpr AddCommand kCommands[] = {
      add_plan_command,      add_whatif_command,   add_simulate_command, add_validate_command,
      add_models_command,    add_profiles_command, add_stacks_command,   add_launch_command,
      add_calibrate_command, add_execute_command,  add_serve_command,    add_serve_plan_command,
  };
  for (AddCommand add : kCommands) add(app, exit_code);
}

void configure_app(CLI::App& app, int* exit_code) {
  app.description(
      "parallax: find the best way to train and serve a large model on a GPU cluster. Predicts "
      "the step time and memory of any data, tensor, pipeline, context and expert parallel "
      "layout (discrete-event simulation), searches and ranks layouts, writes the launch config "
      "for Megatron-LM, DeepSpeed, TorchTitan, torchrun or Slurm, checks predictions against "
      "measured runs, and simulates and plans serving deployments (vLLM, SGLang).");
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("parallax 0.1.0"));
  app.footer(
      "Examples:\n"
      "  parallax plan --model llama3.1-405b --cluster h100-sxm-80gb --gpus 16384 --gbs 2048 "
      "--seq 8192\n"
      "  parallax plan --model llama3.1-70b --gpus 1024 --gbs 512 --framework megatron --emit "
      "megatron --out plan.json\n"
      "  parallax launch --plan plan.json --target slurm\n"
      "  parallax whatif --model llama3.1-70b --gbs 512 --vary gpus=128,256,512,1024\n"
      "  parallax simulate --model llama3.1-70b --cluster h100-sxm-80gb --gpus 64 --tp 8 --gbs 128 "
      "--seq 8192\n"
      "  parallax simulate --scenario examples/llama3.1-405b-16k-h100.json --format json\n"
      "  parallax validate validation/public-training.jsonl\n"
      "  mpirun -np 2 parallax calibrate --out cpu.json\n"
      "  mpirun -np 2 parallax execute --model examples/tiny-llama.json --steps 20\n"
      "  parallax serve --model llama3.1-70b --cluster h100-sxm-80gb --gpus 8 --tp 8 --rate 4\n"
      "  parallax models\n"
      "  parallax profiles h100-sxm-80gb");
  // A flag error says "error:" like every other, so scripts and people find it the same way.
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return "error: " + printable(e.what()) + "\nRun with --help for more information.\n";
  });
  add_commands(app, exit_code);
}

}  // namespace parallax::cli
