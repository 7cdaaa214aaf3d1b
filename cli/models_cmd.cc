// `parallax models`: the built-in model zoo.
#include <cstdio>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "core/model_zoo.h"

namespace parallax::cli {

void add_models_command(CLI::App& app, int* exit_code) {
  struct Opts {
    std::string format = "table";
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("models", "List the built-in model zoo with parameter counts");
  cmd->add_option("--format", o->format, "output format: table | json")
      ->check(CLI::IsMember({"table", "json"}));
  cmd->callback([o, exit_code] {
    if (o->format == "json") {
      Json out = Json::array();
      for (const auto& m : model_zoo()) {
        const ParamCount pc = count_params(m);
        Json j = to_json(m);
        j["params"] = pc.total();
        j["active_params"] = pc.active(m);
        out.push_back(j);
      }
      std::cout << out.dump(2) << "\n";
    } else {
      std::printf("%-24s %7s %7s %6s %5s %7s %8s %10s %10s\n", "name", "layers", "hidden", "heads",
                  "kv", "ffn", "vocab", "params", "active");
      for (const auto& m : model_zoo()) {
        const ParamCount pc = count_params(m);
        std::string kind = m.moe ? " moe " + std::to_string(m.moe->experts) + "x top" +
                                       std::to_string(m.moe->top_k)
                                 : "";
        if (m.mla) kind += " mla";
        std::printf("%-24s %7d %7lld %6d %5d %7lld %8lld %9.1fB %9.1fB%s\n", m.name.c_str(),
                    m.layers, static_cast<long long>(m.hidden), m.heads, m.kv_heads,
                    static_cast<long long>(m.moe ? m.moe->expert_ffn_hidden : m.ffn_hidden),
                    static_cast<long long>(m.vocab), pc.total() / 1e9, pc.active(m) / 1e9,
                    kind.c_str());
      }
    }
    *exit_code = 0;
  });
}

}  // namespace parallax::cli
