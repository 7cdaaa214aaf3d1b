#pragma once
/// The `parallax` command line: the app, its description and examples, and every subcommand.
/// main() parses argv with it; the flag-parsing fuzz target builds the same app.

#include <CLI/CLI.hpp>

namespace parallax::cli {

/// Registers every subcommand on `app` (one row each in the table of app.cc); each callback
/// stores its process exit code in *exit_code.
void add_commands(CLI::App& app, int* exit_code);

/// An app with the description, version flag and examples of `parallax`, and every subcommand.
void configure_app(CLI::App& app, int* exit_code);

}  // namespace parallax::cli
