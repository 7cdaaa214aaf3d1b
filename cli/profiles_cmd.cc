// `parallax profiles`: the hardware profiles, or one in full with its sources; `parallax stacks`:
// the software-stack profiles, or one in full with its sources.
#include <cstdio>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "core/builtin_profiles.h"
#include "core/software_stack.h"

namespace parallax::cli {

void add_profiles_command(CLI::App& app, int* exit_code) {
  struct Opts {
    std::string name, format = "table", profiles_dir;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand(
      "profiles", "List hardware profiles, or show one with the source of every number");
  cmd->add_option("name", o->name, "show this profile in full (JSON with sources)");
  cmd->add_option("--format", o->format, "output format: table | json")
      ->check(CLI::IsMember({"table", "json"}));
  cmd->add_option("--profiles-dir", o->profiles_dir,
                  "directory of extra hardware profiles (*.json)");
  cmd->callback([o, exit_code] {
    auto profiles = load_profiles(o->profiles_dir);
    if (!profiles) {
      *exit_code = report_errors(profiles.errors());
      return;
    }
    if (!o->name.empty()) {
      auto p = find_profile(profiles.value(), o->name, "profile");
      if (!p) {
        *exit_code = report_errors(p.errors());
        return;
      }
      std::cout << to_json(p.value()).dump(2) << "\n";
      *exit_code = 0;
      return;
    }
    if (o->format == "json") {
      Json out = Json::array();
      for (const auto& p : profiles.value()) out.push_back(to_json(p));
      std::cout << out.dump(2) << "\n";
    } else {
      std::printf("%-20s %9s %9s %7s %9s %8s %6s %8s  %s\n", "name", "bf16 TF", "fp8 TF", "HBM GiB",
                  "HBM GB/s", "SU GB/s", "domain", "NIC GB/s", "description");
      for (const auto& p : profiles.value())
        std::printf("%-20s %9.0f %9.0f %7.0f %9.0f %8.0f %6d %8.0f  %s%s\n", p.name.c_str(),
                    p.bf16_tflops, p.fp8_tflops, p.hbm_gib, p.hbm_bw_gbps, p.scale_up_bw_gbps,
                    p.scale_up_domain, p.scale_out_bw_gbps, p.description.c_str(),
                    p.measured ? " [measured]" : "");
    }
    *exit_code = 0;
  });
}

void add_stacks_command(CLI::App& app, int* exit_code) {
  auto name = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "stacks", "List software-stack profiles (what each framework runs), or show one in full");
  cmd->add_option("name", *name, "show this stack's profile (JSON with the source of each value)");
  cmd->callback([name, exit_code] {
    if (!name->empty()) {
      for (const auto& [stem, text] : builtin_stack_texts())
        if (stem == *name) {
          std::cout << text;
          *exit_code = 0;
          return;
        }
      *exit_code = report_errors({{"stacks", "no stack profile '" + printable(*name) + "'",
                                   "parallax stacks lists them"}});
      return;
    }
    std::printf("%-20s %-9s %-6s %-15s %-10s %-8s  %s\n", "framework", "attention", "eager",
                "selective", "cp", "launch", "description");
    for (const auto& s : builtin_stacks())
      std::printf("%-20s %-9s %-6s %-15s %-10s %-8s  %s\n", s.framework.c_str(),
                  to_string(s.attention), s.eager ? "yes" : "no",
                  s.selective_per_op ? "per-op" : "attention-core", to_string(s.cp_comm),
                  s.launch_target.empty() ? "-" : s.launch_target.c_str(), s.description.c_str());
    *exit_code = 0;
  });
}

}  // namespace parallax::cli
