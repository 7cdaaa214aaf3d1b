// parallax: cluster-scale simulator and parallelism planner for large-model training.
#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{
      "parallax: predict the step time and memory of a large-model training layout on a GPU "
      "cluster (discrete-event simulation of data, tensor, pipeline, context and expert "
      "parallelism), and check predictions against measured runs."};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("parallax 0.1.0"));
  app.footer(
      "Examples:\n"
      "  parallax simulate --model llama3.1-70b --cluster h100-sxm-80gb --gpus 64 --tp 8 --gbs 128 "
      "--seq 8192\n"
      "  parallax simulate --scenario examples/llama3.1-405b-16k-h100.json --format json\n"
      "  parallax validate ../shared/validation/public-training.jsonl\n"
      "  parallax models\n"
      "  parallax profiles h100-sxm-80gb");
  int exit_code = 0;
  parallax::cli::add_simulate_command(app, &exit_code);
  parallax::cli::add_validate_command(app, &exit_code);
  parallax::cli::add_models_command(app, &exit_code);
  parallax::cli::add_profiles_command(app, &exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : parallax::cli::kExitBadInput;
  }
  return exit_code;
}
