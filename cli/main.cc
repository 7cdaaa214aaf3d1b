// parallax: cluster-scale simulator and parallelism planner for large-model training.
#include <CLI/CLI.hpp>
#include <iostream>
#include <new>

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
  } catch (const std::bad_alloc&) {
    // Inputs are bounded where they are read; this is the last guard, not the plan.
    std::cerr << "error: out of memory: the input asks for more work than this machine holds\n";
    return parallax::cli::kExitBadInput;
  } catch (const std::exception& e) {
    std::cerr << "error: internal error: " << parallax::cli::printable(e.what()) << "\n";
    return 4;
  }
  return exit_code;
}
