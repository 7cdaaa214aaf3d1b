#include "core/model_numerics_json.h"

namespace parallax::detail {

void read_model_numerics(JsonFields& f, const std::string& where, Diagnostics* d, ModelSpec* m) {
  m->qk_norm = f.boolean("qk_norm", false);
  m->rope_theta = f.number("rope_theta", 0.0);
  m->norm_eps = f.number("norm_eps", 0.0);
  const Json* rs = f.object("rope_scaling");
  if (!rs) return;
  JsonFields s(*rs, where + "/rope_scaling", d);
  s.reject_unknown({"type", "factor"});
  const std::string type = s.string("type");
  if (type == "llama3")
    m->rope_scaling = RopeScaling::kLlama3;
  else if (type == "yarn")
    m->rope_scaling = RopeScaling::kYarn;
  else if (!type.empty())
    d->push_back({s.path("type"), "unknown rotary scaling '" + type + "'", "valid: llama3, yarn"});
  m->rope_scaling_factor = s.number("factor");
}

void read_router(JsonFields& moe, const std::string& where, Diagnostics* d, RouterSpec* r) {
  const Json* j = moe.object("router");
  if (!j) return;
  JsonFields f(*j, where + "/router", d);
  f.reject_unknown({"score", "pre_softmax", "expert_bias", "topk_scaling", "groups", "group_topk"});
  const std::string score = f.string("score", "softmax");
  if (score == "sigmoid")
    r->score = RouterScore::kSigmoid;
  else if (score != "softmax")
    d->push_back(
        {f.path("score"), "unknown router score '" + score + "'", "valid: softmax, sigmoid"});
  r->pre_softmax = f.boolean("pre_softmax", false);
  r->expert_bias = f.boolean("expert_bias", false);
  r->topk_scaling = f.number("topk_scaling", 1.0);
  r->groups = static_cast<int>(f.integer("groups", 0));
  r->group_topk = static_cast<int>(f.integer("group_topk", 0));
}

void write_model_numerics(const ModelSpec& m, Json* j) {
  if (m.qk_norm) (*j)["qk_norm"] = true;
  if (m.rope_theta > 0) (*j)["rope_theta"] = m.rope_theta;
  if (m.norm_eps > 0) (*j)["norm_eps"] = m.norm_eps;
  if (m.rope_scaling != RopeScaling::kNone)
    (*j)["rope_scaling"] = {{"type", m.rope_scaling == RopeScaling::kLlama3 ? "llama3" : "yarn"},
                            {"factor", m.rope_scaling_factor}};
  if (!m.moe) return;
  const RouterSpec& r = m.moe->router;
  const RouterSpec plain;
  Json out = Json::object();
  if (r.score != plain.score)
    out["score"] = r.score == RouterScore::kSigmoid ? "sigmoid" : "softmax";
  if (r.pre_softmax) out["pre_softmax"] = true;
  if (r.expert_bias) out["expert_bias"] = true;
  if (r.topk_scaling != plain.topk_scaling) out["topk_scaling"] = r.topk_scaling;
  if (r.groups > 0) out["groups"] = r.groups;
  if (r.group_topk > 0) out["group_topk"] = r.group_topk;
  if (!out.empty()) (*j)["moe"]["router"] = out;
}

}  // namespace parallax::detail
