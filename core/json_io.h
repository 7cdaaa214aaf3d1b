#pragma once
/// JSON load/save of the core types. Every reader reports all problems with their JSON path
/// (`where` + "/field") and never throws.

#include <optional>
#include <string>
#include <vector>

#include "core/hw_profile.h"
#include "core/json_read.h"
#include "core/model_spec.h"
#include "core/parallel_plan.h"
#include "core/result.h"

namespace parallax {

/// Our own model format (the `model` block of validation/SCHEMA.md).
Result<ModelSpec> model_from_json(const Json& j, const std::string& where);
Json to_json(const ModelSpec& m);

/// A hardware profile (hw_profiles/*.json).
Result<HwProfile> profile_from_json(const Json& j, const std::string& where);
Json to_json(const HwProfile& p);

/// A measured table row's "link": scale_up (the default) or scale_out; another name is reported
/// at the row's "/link". Shared by hardware profiles and raw calibrations.
LinkClass read_link(JsonFields& row, Diagnostics* d);

/// Enum names accepted in files and flags.
std::optional<Recompute> parse_recompute(const std::string& s);
std::optional<ScheduleKind> parse_schedule(const std::string& s);
std::optional<Precision> parse_precision(const std::string& s);
/// The names parse_precision takes for a plan (fp16 runs at bf16's rate; fp32 only with a
/// measured CPU profile), for "valid:" hints.
inline constexpr const char* kPrecisionNames = "bf16, fp16, fp8, mxfp8, nvfp4";
std::optional<CollectiveOp> parse_collective(const std::string& s);
std::optional<FfnAct> parse_ffn_act(const std::string& s);
std::optional<CpComm> parse_cp_comm(const std::string& s);
std::optional<AttentionImpl> parse_attention(const std::string& s);
/// alltoall | allgather | flex (also "deepep").
std::optional<MoeDispatcher> parse_moe_dispatcher(const std::string& s);

/// Sets *target from an enum name with `parse`; an unknown name becomes the diagnostic
/// `where: unknown <what> 'name' (hint: valid: ...)`. Shared by the JSON readers and the flags.
template <typename E, typename Parse>
void assign_enum(const std::string& name, const std::string& where, const std::string& what,
                 Parse parse, E* target, const char* valid, Diagnostics* d) {
  if (auto v = parse(name))
    *target = *v;
  else
    d->push_back({where, "unknown " + what + " '" + name + "'", std::string("valid: ") + valid});
}

/// The format a plan file (`parallax plan --out`) names; a scenario file names none.
inline constexpr char kPlanFileFormat[] = "parallax-plan/1";

/// A scenario file: {"model": name-or-object, "cluster": {"gpu", "num_gpus"}, "parallel": {...},
/// "batch": {...}, "seq_len", "recompute", "precision", "overlap": {...}}. Fields left out keep
/// the values already in `plan`.
struct Scenario {
  std::optional<std::string> model_name;
  std::optional<ModelSpec> model;
  std::optional<std::string> gpu;
  std::optional<int> num_gpus;
  bool dp_given = false;
  ParallelPlan plan;
};
Result<Scenario> scenario_from_json(const Json& j, const std::string& where, ParallelPlan defaults);
Json plan_to_json(const ParallelPlan& p);

/// The hardware profiles compiled into the binary (hw_profiles/*.json).
Result<std::vector<HwProfile>> builtin_profiles();
/// Finds `name` among `profiles`, with a "did you mean" hint when unknown.
Result<HwProfile> find_profile(const std::vector<HwProfile>& profiles, const std::string& name,
                               const std::string& where);

}  // namespace parallax
