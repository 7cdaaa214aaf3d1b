#pragma once
/// One function per subcommand, each defined in its own file; each registers its options and a
/// callback that stores the process exit code.

#include <CLI/CLI.hpp>

#include "cli/inputs.h"

namespace parallax::cli {

void add_simulate_command(CLI::App& app, int* exit_code);
void add_validate_command(CLI::App& app, int* exit_code);
void add_models_command(CLI::App& app, int* exit_code);
void add_profiles_command(CLI::App& app, int* exit_code);
void add_stacks_command(CLI::App& app, int* exit_code);
void add_plan_command(CLI::App& app, int* exit_code);
void add_launch_command(CLI::App& app, int* exit_code);
void add_whatif_command(CLI::App& app, int* exit_code);
void add_calibrate_command(CLI::App& app, int* exit_code);
void add_execute_command(CLI::App& app, int* exit_code);
void add_serve_command(CLI::App& app, int* exit_code);
void add_serve_plan_command(CLI::App& app, int* exit_code);

}  // namespace parallax::cli
