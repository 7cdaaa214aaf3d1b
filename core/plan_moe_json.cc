#include "core/plan_moe_json.h"

namespace parallax {

std::optional<MoeDispatcher> parse_moe_dispatcher(const std::string& s) {
  for (auto d : {MoeDispatcher::kAllToAll, MoeDispatcher::kAllGather, MoeDispatcher::kFlex})
    if (s == to_string(d)) return d;
  if (s == "deepep") return MoeDispatcher::kFlex;
  return std::nullopt;
}

namespace detail {

void read_moe_plan(JsonFields& f, const std::string& where, Diagnostics* d, ParallelPlan* p) {
  const Json* j = f.object("moe");
  if (!j) return;
  JsonFields m(*j, where + "/moe", d);
  m.reject_unknown({"dispatcher", "max_nodes", "capacity_factor"});
  if (m.has("dispatcher"))
    assign_enum(m.string("dispatcher"), m.path("dispatcher"), "dispatcher", parse_moe_dispatcher,
                &p->moe_dispatcher, "alltoall, allgather, flex", d);
  p->moe_max_nodes = static_cast<int>(m.integer("max_nodes", p->moe_max_nodes));
  p->moe_capacity_factor = m.number("capacity_factor", p->moe_capacity_factor);
}

void write_moe_plan(const ParallelPlan& p, Json* j) {
  // Only what differs from the defaults, so that the files of dense plans stay as they were.
  const ParallelPlan plain;
  Json moe = Json::object();
  if (p.moe_dispatcher != plain.moe_dispatcher) moe["dispatcher"] = to_string(p.moe_dispatcher);
  if (p.moe_max_nodes != plain.moe_max_nodes) moe["max_nodes"] = p.moe_max_nodes;
  if (p.moe_capacity_factor != plain.moe_capacity_factor)
    moe["capacity_factor"] = p.moe_capacity_factor;
  if (!moe.empty()) (*j)["moe"] = moe;
  if (p.overlap_moe_comm) (*j)["overlap"]["moe_comm"] = true;
}

}  // namespace detail
}  // namespace parallax
