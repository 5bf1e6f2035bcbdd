// ModelManager's routing: which variant, hardware and instance serve a query
// (the policy itself is selector/selector.h; this file gathers its inputs
// and carries out its decision).
#include <spdlog/spdlog.h>

#include <chrono>
#include <sstream>

#include "serving/model_manager_internal.h"
#include "variants/variant_pipeline.h"

namespace somm {
namespace {

StatusOr<std::optional<double>> NumberParameter(const Parameters& p, const std::string& key) {
  auto it = p.find(key);
  if (it == p.end()) return std::optional<double>();
  if (const auto* d = std::get_if<double>(&it->second)) return std::optional<double>(*d);
  if (const auto* i = std::get_if<int64_t>(&it->second)) {
    return std::optional<double>(static_cast<double>(*i));
  }
  if (const auto* s = std::get_if<std::string>(&it->second)) {
    char* end = nullptr;
    const double v = std::strtod(s->c_str(), &end);
    if (!s->empty() && end && *end == '\0') return std::optional<double>(v);
  }
  return InvalidArgument("parameter '" + key + "' must be a number");
}

// The model-less requirements a query carries in its parameters.
StatusOr<Requirements> ParseRequirements(const Parameters& p, bool* any) {
  Requirements r;
  SOMM_ASSIGN_OR_RETURN(r.latency_slo_ms, NumberParameter(p, "latency_slo_ms"));
  SOMM_ASSIGN_OR_RETURN(r.min_accuracy, NumberParameter(p, "min_accuracy"));
  SOMM_ASSIGN_OR_RETURN(r.max_cost_usd, NumberParameter(p, "max_cost"));
  if (r.latency_slo_ms && !(*r.latency_slo_ms > 0)) {
    return InvalidArgument("parameter 'latency_slo_ms' must be positive");
  }
  if (r.min_accuracy && !(*r.min_accuracy >= 0 && *r.min_accuracy <= 1)) {
    return InvalidArgument("parameter 'min_accuracy' must be between 0 and 1");
  }
  if (r.max_cost_usd && !(*r.max_cost_usd >= 0)) {
    return InvalidArgument("parameter 'max_cost' must not be negative");
  }
  auto be = p.find("best_effort");
  if (be != p.end()) {
    if (const auto* b = std::get_if<bool>(&be->second)) {
      r.best_effort = *b;
    } else if (const auto* s = std::get_if<std::string>(&be->second)) {
      r.best_effort = *s == "true" || *s == "1";
    } else {
      return InvalidArgument("parameter 'best_effort' must be true or false");
    }
  }
  *any = r.latency_slo_ms || r.min_accuracy || r.max_cost_usd;
  return r;
}

std::string DescribeRequirements(const Requirements& r) {
  std::ostringstream out;
  if (r.min_accuracy) out << "min_accuracy=" << *r.min_accuracy << " ";
  if (r.latency_slo_ms) out << "latency_slo_ms=" << *r.latency_slo_ms << " ";
  if (r.max_cost_usd) out << "max_cost=" << *r.max_cost_usd << " ";
  if (r.best_effort) out << "best_effort ";
  std::string s = out.str();
  if (!s.empty()) s.pop_back();
  return s.empty() ? "none" : s;
}

int64_t QuerySamples(const InferenceRequest& r) {
  if (r.inputs.empty() || r.inputs[0].shape.empty()) return 1;
  return std::max<int64_t>(r.inputs[0].shape[0], 1);
}

}  // namespace

void ModelManager::LogDecision(DecisionRecord record) {
  metrics_.RecordDecision(record.outcome);
  spdlog::debug("decision {} [{}]: {} -> {} on {}: {}", record.target, record.requirements,
                record.outcome, record.variant, record.hardware, record.reason);
  decisions_.Add(std::move(record));
}

std::vector<DecisionRecord> ModelManager::RecentDecisions(size_t limit) const {
  return decisions_.Recent(limit);
}

StatusOr<ModelManager::Route> ModelManager::RouteQuery(const InferenceRequest& request) {
  std::string task = request.task;
  if (task.empty()) {
    auto it = request.parameters.find("task");
    if (it != request.parameters.end()) {
      const auto* s = std::get_if<std::string>(&it->second);
      if (!s) return InvalidArgument("parameter 'task' must be a string");
      task = *s;
    }
  }
  if (!task.empty()) {
    std::vector<std::shared_ptr<LoadedVersion>> versions;
    {
      std::shared_lock<std::shared_mutex> lock(mu_);
      for (const auto& [_, entry] : models_) {
        if (entry->config && entry->config->task == task && !entry->versions.empty()) {
          versions.push_back(entry->versions.rbegin()->second);
        }
      }
    }
    if (versions.empty()) return NotFound("no loaded model serves task '" + task + "'");
    return RouteWithSelector(request, std::move(versions), "task:" + task);
  }
  if (request.model_name.find(':') != std::string::npos) {
    return RouteExplicitVariant(request.model_name, request.model_version);
  }
  SOMM_ASSIGN_OR_RETURN(std::shared_ptr<LoadedVersion> lv,
                        Resolve(request.model_name, request.model_version));
  bool has_slo = false;
  SOMM_ASSIGN_OR_RETURN(Requirements req, ParseRequirements(request.parameters, &has_slo));
  RecordDemand(*lv, req);
  if (has_slo || req.best_effort) return RouteWithSelector(request, {lv}, request.model_name);

  Route route;
  route.version = lv;
  route.decision.target = request.model_name;
  route.decision.requirements = "none";
  route.decision.outcome = "default";
  route.decision.reason = "model named without SLOs: its configured instances run it as registered";
  const std::string base_key = GroupKey(kAsRegistered, lv->base_hardware);
  HardwareConfig hw = lv->base_hardware;
  {
    std::lock_guard<std::mutex> lock(lv->variants_mu);
    auto g = lv->groups.find(base_key);
    if (g != lv->groups.end()) {
      route.group = g->second;
    } else if (options_.managed && !lv->groups.empty()) {
      // The controller replaced the as-registered instances (an upgrade under
      // load): the replicas it keeps serve the model's plain queries too.
      for (const auto& [key, group] : lv->groups) {
        if (!route.group || group->size() > route.group->size()) route.group = group;
      }
      hw = route.group->hardware();
      route.decision.outcome = "managed";
      route.decision.reason = "model named without SLOs; the controller replaced its as-registered "
                              "instances with " + route.group->variant_id() + "@" + hw.Name();
    }
  }
  if (!route.group) {
    bool cold = false;
    SOMM_ASSIGN_OR_RETURN(route.group,
                          EnsureGroup(*lv, kAsRegistered, hw, lv->config.instance_count,
                                      "a query for a model with no instance loaded", true, &cold));
    if (cold) route.decision.reason += " (loaded on demand: cold start)";
  }
  route.price_per_s = options_.prices.PerSecond(hw);
  route.decision.variant = route.group->variant_id();
  route.decision.hardware = hw.Name();
  metrics_.RecordDecision(route.decision.outcome);
  return route;
}

void ModelManager::RecordDemand(LoadedVersion& lv, const Requirements& req) {
  lv.arrivals.fetch_add(1, std::memory_order_relaxed);
  if (req.latency_slo_ms) {
    const auto us = static_cast<int64_t>(*req.latency_slo_ms * 1000.0);
    int64_t cur = lv.tightest_slo_us.load(std::memory_order_relaxed);
    while (us < cur && !lv.tightest_slo_us.compare_exchange_weak(cur, us)) {
    }
  }
  if (req.min_accuracy) {
    const auto ppm = static_cast<int64_t>(*req.min_accuracy * 1e6);
    int64_t cur = lv.strictest_accuracy_ppm.load(std::memory_order_relaxed);
    while (ppm > cur && !lv.strictest_accuracy_ppm.compare_exchange_weak(cur, ppm)) {
    }
  }
}

StatusOr<ModelManager::Route> ModelManager::RouteExplicitVariant(const std::string& name,
                                                                 const std::string& version) {
  // "model:version:variant[@hardware]"
  const auto first = name.find(':');
  const auto second = name.find(':', first + 1);
  if (second == std::string::npos) {
    return InvalidArgument("variant '" + name + "' must be model:version:variant[@hardware]");
  }
  const std::string model = name.substr(0, first);
  const std::string ver = name.substr(first + 1, second - first - 1);
  std::string variant = name.substr(second + 1);
  std::string hw_name;
  if (const auto at = variant.find('@'); at != std::string::npos) {
    hw_name = variant.substr(at + 1);
    variant = variant.substr(0, at);
  }
  if (!version.empty() && version != ver) {
    return InvalidArgument("variant '" + name + "' names version " + ver + " but the request names " + version);
  }
  SOMM_ASSIGN_OR_RETURN(std::shared_ptr<LoadedVersion> lv, Resolve(model, ver));
  Route route;
  route.version = lv;
  route.decision.target = name;
  route.decision.requirements = "explicit variant";
  route.decision.outcome = "explicit";
  std::optional<VariantProfile> profile;
  {
    std::lock_guard<std::mutex> lock(lv->variants_mu);
    for (const auto& p : lv->profiles) {
      if (p.variant == variant) profile = p;
    }
  }
  if (!profile) {
    if (variant == kAsRegistered && (hw_name.empty() || hw_name == lv->base_hardware.Name())) {
      SOMM_ASSIGN_OR_RETURN(route.group,
                            EnsureGroup(*lv, kAsRegistered, lv->base_hardware, 1,
                                        "variant named explicitly", true));
      route.price_per_s = options_.prices.PerSecond(lv->base_hardware);
      route.decision.variant = route.group->variant_id();
      route.decision.hardware = lv->base_hardware.Name();
      route.decision.reason = "variant named explicitly";
      LogDecision(route.decision);
      return route;
    }
    std::string known = kAsRegistered;
    {
      std::lock_guard<std::mutex> lock(lv->variants_mu);
      for (const auto& p : lv->profiles) {
        if (p.variant != kAsRegistered) known += ", " + p.variant;
      }
    }
    return NotFound("model '" + model + "' version " + ver + " has no variant '" + variant +
                    "' (available: " + known + ")");
  }
  const HardwareProfile* chosen = nullptr;
  for (const auto& hp : profile->hardware) {
    if (hw_name.empty() ? true : hp.hardware.Name() == hw_name) {
      chosen = &hp;
      break;
    }
  }
  if (!chosen) {
    return NotFound("variant '" + profile->Id() + "' was not profiled on hardware '" + hw_name + "'");
  }
  SOMM_ASSIGN_OR_RETURN(route.group, EnsureGroup(*lv, variant, chosen->hardware, 1,
                                                 "variant named explicitly", true));
  route.price_per_s = options_.prices.PerSecond(chosen->hardware);
  route.decision.variant = profile->Id();
  route.decision.hardware = chosen->hardware.Name();
  route.decision.predicted_latency_ms = chosen->latency.Predict(1);
  route.decision.reason = "variant named explicitly" +
                          (profile->usable ? std::string() : " (marked unusable: " + profile->unusable_reason + ")");
  LogDecision(route.decision);
  return route;
}

StatusOr<ModelManager::Route> ModelManager::RouteWithSelector(
    const InferenceRequest& request, std::vector<std::shared_ptr<LoadedVersion>> versions,
    const std::string& target) {
  bool has_slo = false;
  SOMM_ASSIGN_OR_RETURN(Requirements req, ParseRequirements(request.parameters, &has_slo));
  req.batch = QuerySamples(request);
  const bool task_form = target.rfind("task:", 0) == 0;
  if (task_form) {
    req.task = target.substr(5);
  } else {
    req.model = versions[0]->config.name;
  }

  // Snapshot the candidates: every profiled variant x hardware of every version.
  struct Origin {
    LoadedVersion* version;
    size_t version_index;
    VariantProfile profile;
    HardwareConfig hardware;
  };
  SelectorState state;
  std::vector<Origin> origins;
  for (size_t v = 0; v < versions.size(); ++v) {
    LoadedVersion& lv = *versions[v];
    std::lock_guard<std::mutex> lock(lv.variants_mu);
    for (const auto& profile : lv.profiles) {
      for (const auto& hp : profile.hardware) {
        Candidate c;
        c.variant_id = profile.Id();
        c.model = lv.config.name;
        c.task = lv.config.task;
        c.hardware = hp.hardware;
        c.accuracy = profile.accuracy;
        c.usable = profile.usable;
        c.latency = hp.latency;
        c.load_time_ms = hp.load_time_ms;
        c.max_batch_size = std::max<int64_t>(lv.config.max_batch_size, 1);
        auto g = lv.groups.find(GroupKey(profile.variant, hp.hardware));
        if (g != lv.groups.end()) {
          c.instances = g->second->Snapshot(hp.latency);
        } else if (!options_.managed) {
          continue;  // static provisioning: only what is loaded serves
        }
        state.candidates.push_back(std::move(c));
        origins.push_back({&lv, v, profile, hp.hardware});
      }
    }
  }
  DecisionRecord record;
  record.unix_ms = NowUnixMs();
  record.target = target;
  record.requirements = DescribeRequirements(req);
  if (state.candidates.empty()) {
    record.outcome = "rejected";
    record.reason = "no profiled variants yet for " + target + " (variant generation in progress?)";
    LogDecision(record);
    return Unavailable(record.reason);
  }
  auto decision = SelectVariant(req, state, options_.prices, SelectorClock::now());
  if (!decision.ok()) {
    record.outcome = "rejected";
    record.reason = decision.status().message();
    LogDecision(record);
    return decision.status();
  }
  const Origin& origin = origins[decision->candidate];
  Route route;
  route.version = versions[origin.version_index];
  if (decision->instance_id >= 0) {
    std::lock_guard<std::mutex> lock(origin.version->variants_mu);
    auto g = origin.version->groups.find(GroupKey(origin.profile.variant, origin.hardware));
    if (g != origin.version->groups.end()) route.group = g->second;
    route.instance = decision->instance_id;
  }
  if (!route.group) {
    SOMM_ASSIGN_OR_RETURN(route.group,
                          EnsureGroup(*origin.version, origin.profile.variant, origin.hardware, 1,
                                      "chosen by the selector for " + target, true));
    route.instance = -1;
  }
  if (task_form) RecordDemand(*route.version, req);
  route.latency_slo_ms = req.latency_slo_ms;
  route.best_effort = req.best_effort;
  route.price_per_s = options_.prices.PerSecond(origin.hardware);
  record.outcome = DecisionOutcomeName(decision->outcome);
  record.variant = origin.profile.Id();
  record.hardware = origin.hardware.Name();
  record.predicted_latency_ms = decision->predicted_latency_ms;
  record.cost_usd = decision->cost_usd;
  record.reason = decision->reason;
  route.decision = record;
  LogDecision(std::move(record));
  return route;
}

Status ModelManager::SetVariantProfiles(const std::string& name, int64_t version,
                                        std::vector<VariantProfile> profiles) {
  SOMM_ASSIGN_OR_RETURN(std::shared_ptr<LoadedVersion> lv, Resolve(name, std::to_string(version)));
  std::lock_guard<std::mutex> lock(lv->variants_mu);
  lv->profiles = std::move(profiles);
  return Status::Ok();
}

}  // namespace somm
