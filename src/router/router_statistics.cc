// What the router answers for Triton's statistics and model configuration
// extensions (router.h, api/model_statistics.h): the versions' counters it
// kept while answering their queries, and a version's configuration with
// the instances loaded now.
#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>

#include "common/format_number.h"
#include "router/router_query.h"
#include "runtime/backend_registry.h"

namespace somm {
namespace {

std::string Joined(const std::vector<std::string>& parts) {
  std::string s;
  for (const std::string& p : parts) s += (s.empty() ? "" : ",") + p;
  return s;
}

}  // namespace

ModelStatistics Router::StatisticsOf(const std::string& model, const std::string& version) const {
  ModelStatistics s;
  {
    ReaderLock lock(&stats_mu_);
    auto m = stats_by_model_.find(model);
    if (m != stats_by_model_.end()) {
      const int64_t number = std::strtoll(version.c_str(), nullptr, 10);
      auto row = m->second->find(number);
      if (row != m->second->end()) s = row->second->inference->Snapshot();
    }
  }
  // A version without a query yet answers zeros, as Triton's does.
  s.name = model;
  s.version = version;
  return s;
}

StatusOr<std::vector<ModelStatistics>> Router::GetModelStatistics(
    const std::string& name, const std::string& version) const {
  std::vector<ModelStatistics> out;
  if (name.empty()) {
    if (!version.empty()) {
      return InvalidArgument("statistics of version " + version + " need a model name");
    }
    // Every model version that serves (Triton lists its loaded ones).
    std::set<std::string> models;
    for (const RepositoryEntry& e : catalog_.Index(/*ready_only=*/true)) models.insert(e.name);
    for (const std::string& model : models) {
      for (const std::string& v : catalog_.VersionsOf(model)) out.push_back(StatisticsOf(model, v));
    }
    return out;
  }
  // The errors metadata gives: an unknown model, version or malformed one.
  SOMM_ASSIGN_OR_RETURN(VersionPtr v, catalog_.Resolve(name, version));
  if (!version.empty()) {
    out.push_back(StatisticsOf(name, v->version_str));
    return out;
  }
  for (const std::string& each : catalog_.VersionsOf(name)) out.push_back(StatisticsOf(name, each));
  return out;
}

std::vector<cluster::GroupState> Router::GroupsNow() const {
  // The embedded server's one local worker answers for itself, fresher than
  // the store's view of it (written at the controller's ticks).
  const std::vector<std::string> ids = workers_.Ids();
  if (ids.size() == 1) {
    std::shared_ptr<WorkerStub> stub = workers_.Find(ids[0]);
    if (stub && stub->local()) return stub->Report().groups;
  }
  return store_.Read()->groups;
}

StatusOr<ModelConfiguration> Router::GetModelConfiguration(const std::string& name,
                                                           const std::string& version) const {
  SOMM_ASSIGN_OR_RETURN(VersionPtr v, catalog_.Resolve(name, version));
  ModelConfiguration c;
  c.config = v->config;
  c.config.name = name;
  c.version = v->version_str;
  if (const BackendRegistration* runtime = FindBackend(v->config.platform)) {
    c.platform = runtime->metadata_platform;
    c.model_filename = runtime->model_file;
  } else {
    c.platform = v->config.platform;
  }
  std::vector<std::string> variants;
  for (const VariantProfile& p : v->profiles) {
    if (std::find(variants.begin(), variants.end(), p.variant) == variants.end()) {
      variants.push_back(p.variant);
    }
  }
  const ModelConfig& m = v->config;
  auto add = [&c](const char* key, std::string value) {
    if (!value.empty()) c.parameters[key] = std::move(value);
  };
  add("somm_version", v->version_str);
  add("somm_versions", Joined(catalog_.VersionsOf(name)));
  add("somm_platform", m.platform);
  add("somm_task", m.task);
  if (m.accuracy.value) add("somm_accuracy", FormatG(*m.accuracy.value, 6));
  add("somm_accuracy_source", m.accuracy.source);
  add("somm_variants", Joined(variants));
  add("somm_instance_count", std::to_string(m.instance_count));
  add("somm_intra_op_threads", std::to_string(m.intra_op_threads));
  add("somm_description", m.description);
  if (m.image_preprocessing) add("somm_preprocessing", PreprocessingToJson(*m.image_preprocessing));
  // The instances of this version loaded now, by group (variant and
  // hardware), added up over the workers that hold a share of one.
  std::map<std::string, ModelConfiguration::Instances> groups;
  for (const cluster::GroupState& g : GroupsNow()) {
    if (g.loading || g.model != name || g.version != v->version) continue;
    const std::string label = g.variant + "@" + g.hardware.Name();
    ModelConfiguration::Instances& row = groups[label];
    row.name = label;
    row.device = g.hardware.device == DeviceKind::kCpu ? "cpu" : "cuda";
    row.index = g.hardware.device_index;
    row.count += g.replicas;
  }
  for (auto& [_, row] : groups) c.instance_groups.push_back(std::move(row));
  return c;
}

}  // namespace somm
