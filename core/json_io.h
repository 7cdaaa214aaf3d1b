#pragma once
/// JSON load/save of the core types. Every reader reports all problems with their JSON path
/// (`where` + "/field") and never throws.

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/hw_profile.h"
#include "core/model_spec.h"
#include "core/parallel_plan.h"
#include "core/result.h"

namespace parallax {

using Json = nlohmann::json;

/// Parses text; a syntax error names `where`, line and column (lines counted from
/// `first_line`, for a record that starts on that line of a larger file).
Result<Json> parse_json(const std::string& text, const std::string& where, int first_line = 1);

/// Collects typed fields from a JSON object, recording a diagnostic for each missing or mistyped
/// one. Numbers in hw profiles may be {"value": x, "source": "..."}; `sources()` keeps the texts.
class JsonFields {
 public:
  JsonFields(const Json& obj, std::string where, Diagnostics* out);
  bool has(const char* key) const;
  /// Required fields record "missing" when absent; optional ones keep `fallback`.
  int64_t integer(const char* key, std::optional<int64_t> fallback = std::nullopt);
  double number(const char* key, std::optional<double> fallback = std::nullopt);
  bool boolean(const char* key, std::optional<bool> fallback = std::nullopt);
  std::string string(const char* key, std::optional<std::string> fallback = std::nullopt);
  const Json* object(const char* key) const;  ///< nullptr when absent or null
  /// Reports each key of the object not in `known`, with the nearest known name.
  void reject_unknown(const std::vector<std::string>& known);
  std::string path(const char* key) const { return where_ + "/" + key; }
  const std::map<std::string, std::string>& sources() const { return sources_; }

 private:
  const Json* value(const char* key, bool required);
  const Json& obj_;
  std::string where_;
  Diagnostics* out_;
  std::map<std::string, std::string> sources_;
};

/// Our own model format (the `model` block of validation/SCHEMA.md).
Result<ModelSpec> model_from_json(const Json& j, const std::string& where);
Json to_json(const ModelSpec& m);

/// A hardware profile (hw_profiles/*.json).
Result<HwProfile> profile_from_json(const Json& j, const std::string& where);
Json to_json(const HwProfile& p);

/// Enum names accepted in files and flags.
std::optional<Recompute> parse_recompute(const std::string& s);
std::optional<ScheduleKind> parse_schedule(const std::string& s);
std::optional<Precision> parse_precision(const std::string& s);
std::optional<CollectiveOp> parse_collective(const std::string& s);
std::optional<FfnAct> parse_ffn_act(const std::string& s);
std::optional<CpComm> parse_cp_comm(const std::string& s);
std::optional<AttentionImpl> parse_attention(const std::string& s);

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
