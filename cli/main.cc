// parallax: cluster-scale simulator and parallelism planner for large-model training.
#include <CLI/CLI.hpp>

#include "cli/app.h"
#include "cli/inputs.h"

int main(int argc, char** argv) {
  CLI::App app;
  int exit_code = 0;
  parallax::cli::configure_app(app, &exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : parallax::cli::kExitBadInput;
  }
  return exit_code;
}
