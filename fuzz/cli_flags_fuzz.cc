// Fuzz target: the command line. The input is an argument vector, one argument a line, parsed by
// the app `parallax` builds (cli/app.cc) with every subcommand's callback replaced by nothing:
// this covers flag parsing, conversions and validators, not the commands' work (the loaders
// have their own targets). The commands' callbacks stay in place (each owns the options its
// flags write into) and never run: the app's parse-complete callback, which CLI11 calls after
// every flag is parsed and checked and before any subcommand's callback, stops the parse.
#include <vector>

#include "cli/app.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace parallax;
  constexpr size_t kMaxArgs = 64;
  std::vector<std::string> args = {"parallax"};
  std::string arg;
  for (size_t i = 0; i < size && args.size() < kMaxArgs; ++i) {
    if (data[i] == '\n') {
      args.push_back(arg);
      arg.clear();
    } else {
      arg += static_cast<char>(data[i]);
    }
  }
  if (!arg.empty() && args.size() < kMaxArgs) args.push_back(arg);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());

  CLI::App app;
  int exit_code = 0;
  cli::configure_app(app, &exit_code);
  struct Parsed {
    int unused = 0;
  };
  app.parse_complete_callback([] { throw Parsed{}; });
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError&) {
    // --help, --version and bad flags end here, as they do in main() (exit code 0 or 2).
  } catch (const Parsed&) {
  }
  return 0;
}
