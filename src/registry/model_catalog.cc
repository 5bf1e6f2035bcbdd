#include "registry/model_catalog.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <set>

#include "runtime/backend_registry.h"
#include "variants/variant_pipeline.h"


namespace somm {

uint64_t NextVersionGeneration() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

namespace fs = std::filesystem;
namespace {

// Which versions the policy selects among those present on disk.
std::vector<int64_t> SelectVersions(const VersionPolicy& policy, std::vector<int64_t> present) {
  std::sort(present.begin(), present.end());
  switch (policy.kind) {
    case VersionPolicy::Kind::kAll:
      return present;
    case VersionPolicy::Kind::kLatest: {
      const size_t n = std::min<size_t>(present.size(), static_cast<size_t>(policy.latest_count));
      return std::vector<int64_t>(present.end() - static_cast<std::ptrdiff_t>(n), present.end());
    }
    case VersionPolicy::Kind::kSpecific:
      return policy.specific;
  }
  return {};
}

}  // namespace

std::string AsRegisteredVariant(const VersionRecord& v) {
  return AsRegisteredVariant(std::string_view(v.config.platform));
}

void AppendOptions(const VersionRecord& v, std::vector<cluster::VariantOption>* out) {
  constexpr double kMiB = 1024.0 * 1024.0;
  const std::string as_registered = AsRegisteredVariant(v);
  for (const VariantProfile& p : v.profiles) {
    for (const HardwareProfile& hp : p.hardware) {
      cluster::VariantOption o;
      o.model = v.config.name;
      o.version = v.version;
      o.task = v.config.task;
      o.variant = p.variant;
      o.hardware = hp.hardware;
      o.device = Device{hp.hardware.device, hp.hardware.device_index}.ToString();
      o.accuracy = p.accuracy;
      o.latency = hp.latency;
      o.max_batch = std::max<int64_t>(v.config.max_batch_size, 1);
      o.memory_bytes = static_cast<int64_t>(hp.peak_memory_mb * kMiB);
      o.load_ms = hp.load_time_ms;
      o.usable = p.usable;
      o.unusable_reason = p.unusable_reason;
      if (p.variant == as_registered && v.config.instance_count_configured) {
        o.floor_replicas = v.config.instance_count;
      }
      if (!v.config.owner_tenant.empty()) o.max_replicas = std::max(v.config.instance_count, 1);
      out->push_back(std::move(o));
    }
  }
}

StatusOr<RegistrationStatus> PublishedVariants(const ModelCatalog& catalog, const std::string& name) {
  SOMM_ASSIGN_OR_RETURN(VersionPtr v, catalog.Resolve(name, ""));
  RegistrationStatus status;
  status.name = name;
  status.variants = v->profiles;
  status.state = v->profiles.empty() ? "NONE" : "READY";
  status.done = status.total = static_cast<int>(v->profiles.size());
  return status;
}

bool IsPositiveInteger(const std::string& s) {
  return !s.empty() && s.size() < 19 && std::all_of(s.begin(), s.end(), ::isdigit) &&
         std::stoll(s) > 0;
}

bool IsValidModelName(const std::string& name) {
  return !name.empty() && name.size() <= 256 && name[0] != '.' &&
         name.find('/') == std::string::npos && name.find('\\') == std::string::npos;
}

ModelCatalog::ModelCatalog(std::string repository_path)
    : repository_path_(std::move(repository_path)) {}

Status ModelCatalog::UnknownModel(const std::string& name) {
  return NotFound("unknown model '" + name + "'");
}

std::optional<std::string> ModelCatalog::OwnerOf(const std::string& name) const {
  ReaderLock lock(&mu_);
  auto it = by_name_.find(name);
  if (it == by_name_.end() || !it->second->config) return std::nullopt;
  return it->second->config->owner_tenant;
}

std::string ModelCatalog::WithoutPaths(std::string message) const {
  if (repository_path_.empty()) return message;
  // The folder as given and as an absolute path: messages name either.
  std::error_code ec;
  const fs::path absolute = fs::absolute(repository_path_, ec).lexically_normal();
  for (std::string repo : {ec ? std::string() : absolute.string(), repository_path_}) {
    while (repo.size() > 1 && repo.back() == '/') repo.pop_back();
    if (repo.empty() || repo == "." || repo == "/") continue;
    const std::string folder = repo + "/";
    for (size_t at = message.find(folder); at != std::string::npos; at = message.find(folder, at)) {
      message.erase(at, folder.size());
    }
  }
  return message;
}

Status ModelCatalog::WithoutPaths(const Status& status) const {
  if (status.ok()) return status;
  return Status(status.code(), WithoutPaths(status.message()));
}

std::vector<std::string> ModelCatalog::ListModelFolders() const {
  std::vector<std::string> names;
  std::error_code ec;
  if (repository_path_.empty()) return names;  // none mounted (a router)
  for (const auto& e : fs::directory_iterator(repository_path_, ec)) {
    const std::string name = e.path().filename().string();
    // A pipeline's folder (pipeline.yaml, no model.yaml) is served by the
    // pipelines in front of the router (docs/pipelines.md), not as a model.
    std::error_code pec;
    if (fs::exists(e.path() / "pipeline.yaml", pec) && !fs::exists(e.path() / "model.yaml", pec)) {
      continue;
    }
    if (e.is_directory() && IsValidModelName(name)) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<VersionPtr> ModelCatalog::Read(const std::string& name,
                                            std::vector<RepositoryEntry>* problems) const {
  std::vector<VersionPtr> out;
  if (repository_path_.empty()) {
    // A router with no repository mounted knows models from the catalog only.
    problems->push_back({name, "", "UNAVAILABLE", "not in the cluster's catalog"});
    return out;
  }
  const fs::path dir = fs::path(repository_path_) / name;
  auto config = LoadModelConfig(dir.string());
  if (!config.ok()) {
    problems->push_back({name, "", "UNAVAILABLE", WithoutPaths(config.status().message())});
    return out;
  }
  // The platform names each version's model file; the record keeps its path.
  auto runtime = BackendFor(config->platform);
  if (!runtime.ok()) {
    problems->push_back({name, "", "UNAVAILABLE", runtime.status().message()});
    return out;
  }
  const std::string& model_file = (*runtime)->model_file;
  std::vector<int64_t> present;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string v = e.path().filename().string();
    if (e.is_directory() && IsPositiveInteger(v)) present.push_back(std::stoll(v));
  }
  if (present.empty()) {
    problems->push_back({name, "", "UNAVAILABLE",
                         name + ": no version folders (expected " + name + "/<N>/" +
                             model_file + ")"});
    return out;
  }
  std::vector<int64_t> selected = SelectVersions(config->version_policy, present);
  // A rollout serves its versions whatever the policy says (rollout.h).
  auto rollout = LoadRollout(repository_path_, name);
  if (!rollout.ok()) {
    problems->push_back({name, "", "UNAVAILABLE", WithoutPaths(rollout.status().message())});
  } else if (rollout->has_value()) {
    for (int64_t pinned : (*rollout)->PinnedVersions()) {
      if (std::find(present.begin(), present.end(), pinned) == present.end()) {
        problems->push_back({name, std::to_string(pinned), "UNAVAILABLE",
                             "the rollout serves version " + std::to_string(pinned) + " but " +
                                 name + "/" + std::to_string(pinned) + " is missing"});
      } else if (std::find(selected.begin(), selected.end(), pinned) == selected.end()) {
        selected.push_back(pinned);
      }
    }
    std::sort(selected.begin(), selected.end());
  }
  for (int64_t v : selected) {
    auto record = std::make_shared<VersionRecord>();
    record->config = *config;
    record->version = v;
    record->version_str = std::to_string(v);
    record->path = (dir / std::to_string(v) / model_file).string();
    record->generation = NextVersionGeneration();
    auto profiles = LoadProfiles(VariantsRoot(), name, v);
    if (profiles.ok()) record->profiles = std::move(profiles).value();
    out.push_back(std::move(record));
  }
  return out;
}

void ModelCatalog::Publish(const std::string& name, std::vector<VersionPtr> versions,
                            std::vector<RepositoryEntry> problems) {
  Entry entry;
  for (auto& v : versions) {
    if (!entry.config) entry.config = v->config;
    entry.versions[v->version] = std::move(v);
  }
  entry.problems = std::move(problems);
  WriterLock lock(&mu_);
  if (auto it = models_.find(name); it != models_.end()) {
    entry.rollout = it->second.rollout;
    if (it->second.config) UnindexTaskLocked(it->second.config->task, name);
  }
  if (entry.config) by_task_[entry.config->task].insert(name);
  Entry& held = models_[name];
  held = std::move(entry);
  by_name_[name] = &held;
  versions_changed_.fetch_add(1, std::memory_order_release);
}

bool ModelCatalog::Remove(const std::string& name) {
  WriterLock lock(&mu_);
  by_name_.erase(name);
  versions_changed_.fetch_add(1, std::memory_order_release);
  auto it = models_.find(name);
  if (it == models_.end()) return false;
  if (it->second.rollout) with_rollout_.fetch_sub(1, std::memory_order_relaxed);
  if (it->second.config) UnindexTaskLocked(it->second.config->task, name);
  models_.erase(it);
  return true;
}

bool ModelCatalog::IsPublished(const std::string& name) const {
  ReaderLock lock(&mu_);
  return models_.count(name) > 0;
}

StatusOr<VersionPtr> ModelCatalog::Resolve(const std::string& name,
                                            const std::string& version) const {
  ReaderLock lock(&mu_);
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return UnknownModel(name);
  const Entry& entry = *it->second;
  if (entry.versions.empty()) {
    const std::string why = entry.problems.empty() ? "" : ": " + entry.problems[0].reason;
    return Unavailable("model '" + name + "' is not ready" + why);
  }
  if (version.empty()) {
    if (entry.rollout) {
      auto d = entry.versions.find(entry.rollout->DefaultVersion());
      if (d != entry.versions.end()) return d->second;
    }
    return entry.versions.rbegin()->second;
  }
  if (!IsPositiveInteger(version)) {
    return InvalidArgument("model '" + name + "': version '" + version +
                           "' is not a positive integer");
  }
  auto v = entry.versions.find(std::stoll(version));
  if (v == entry.versions.end()) {
    std::string loaded;
    for (const auto& [n, _] : entry.versions) {
      loaded += (loaded.empty() ? "" : ", ") + std::to_string(n);
    }
    return NotFound("model '" + name + "' has no version " + version + " loaded (loaded: " +
                    loaded + ")");
  }
  return v->second;
}

void ModelCatalog::SetRollout(const std::string& name, std::optional<Rollout> rollout) {
  WriterLock lock(&mu_);
  auto it = models_.find(name);
  if (it == models_.end()) return;
  const bool had = it->second.rollout != nullptr;
  it->second.rollout =
      rollout ? std::make_shared<const Rollout>(std::move(*rollout)) : nullptr;
  with_rollout_.fetch_add((it->second.rollout != nullptr) - static_cast<int>(had),
                          std::memory_order_relaxed);
}

std::shared_ptr<const Rollout> ModelCatalog::RolloutOf(const std::string& name) const {
  // Asked for every query: without any rollout, no lock and no lookup.
  if (with_rollout_.load(std::memory_order_relaxed) == 0) return nullptr;
  ReaderLock lock(&mu_);
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second->rollout;
}

std::vector<std::pair<std::string, std::shared_ptr<const Rollout>>> ModelCatalog::Rollouts()
    const {
  std::vector<std::pair<std::string, std::shared_ptr<const Rollout>>> out;
  if (with_rollout_.load(std::memory_order_relaxed) == 0) return out;
  ReaderLock lock(&mu_);
  for (const auto& [name, entry] : models_) {
    if (entry.rollout) out.emplace_back(name, entry.rollout);
  }
  return out;
}

std::vector<std::string> ModelCatalog::VersionsOf(const std::string& name) const {
  std::vector<std::string> out;
  ReaderLock lock(&mu_);
  auto it = models_.find(name);
  if (it == models_.end()) return out;
  for (const auto& [v, _] : it->second.versions) out.push_back(std::to_string(v));
  return out;
}

void ModelCatalog::UnindexTaskLocked(const std::string& task, const std::string& name) {
  auto it = by_task_.find(task);
  if (it == by_task_.end()) return;
  it->second.erase(name);
  if (it->second.empty()) by_task_.erase(it);
}

std::vector<VersionPtr> ModelCatalog::ForTask(const std::string& task) const {
  std::vector<VersionPtr> out;
  ReaderLock lock(&mu_);
  auto models = by_task_.find(task);
  if (models == by_task_.end()) return out;
  for (const std::string& name : models->second) {
    const Entry& entry = *by_name_.at(name);
    if (entry.config && entry.config->task == task && !entry.versions.empty()) {
      // The default version, as Resolve(name, "") has it: a task query
      // never lands on a canary (its share is of the model's own queries).
      auto it = entry.rollout ? entry.versions.find(entry.rollout->DefaultVersion())
                              : entry.versions.end();
      out.push_back(it != entry.versions.end() ? it->second : entry.versions.rbegin()->second);
    }
  }
  return out;
}

std::vector<VersionPtr> ModelCatalog::All() const {
  std::vector<VersionPtr> out;
  ReaderLock lock(&mu_);
  for (const auto& [_, entry] : models_) {
    for (const auto& [__, v] : entry.versions) out.push_back(v);
  }
  return out;
}

std::vector<RepositoryEntry> ModelCatalog::Index(bool ready_only) const {
  std::vector<RepositoryEntry> rows;
  std::set<std::string> known;
  {
    ReaderLock lock(&mu_);
    for (const auto& [name, entry] : models_) {
      known.insert(name);
      for (const auto& [v, _] : entry.versions) {
        rows.push_back({name, std::to_string(v), "READY", ""});
      }
      if (!ready_only) rows.insert(rows.end(), entry.problems.begin(), entry.problems.end());
    }
  }
  if (!ready_only) {
    for (const std::string& name : ListModelFolders()) {
      if (!known.count(name)) rows.push_back({name, "", "UNAVAILABLE", "unloaded"});
    }
  }
  std::stable_sort(rows.begin(), rows.end(), [](const RepositoryEntry& a, const RepositoryEntry& b) {
    return a.name < b.name;
  });
  return rows;
}

Status ModelCatalog::SetProfiles(const std::string& name, int64_t version,
                                  std::vector<VariantProfile> profiles) {
  WriterLock lock(&mu_);
  auto it = models_.find(name);
  if (it == models_.end()) return UnknownModel(name);
  auto v = it->second.versions.find(version);
  if (v == it->second.versions.end()) {
    return NotFound("model '" + name + "' has no version " + std::to_string(version) + " loaded");
  }
  auto updated = std::make_shared<VersionRecord>(*v->second);
  updated->profiles = std::move(profiles);
  v->second = std::move(updated);
  versions_changed_.fetch_add(1, std::memory_order_release);
  return Status::Ok();
}

}  // namespace somm
