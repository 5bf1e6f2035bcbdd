#include "node/catalog_follower.h"

#include <spdlog/spdlog.h>

#include <utility>
#include <vector>

#include "registry/published_model.h"
#include "rollout/rollout.h"

namespace somm::node {

CatalogFollower::CatalogFollower(ModelCatalog& models, cluster::CatalogStore& store)
    : models_(models), store_(store) {}

CatalogFollower::~CatalogFollower() { store_.SetOnCatalogChange(nullptr); }

void CatalogFollower::Start() {
  store_.SetOnCatalogChange([this] { Sync(store_.ReadCatalog()); });
  Sync(store_.ReadCatalog());
}

void CatalogFollower::Sync(const cluster::Catalog& catalog) {
  std::function<void()> changed;
  {
    MutexLock lock(&mu_);
    bool any = false;
    for (const auto& [name, generation] : catalog.models) {
      auto it = synced_.find(name);
      if (it != synced_.end() && it->second == generation) continue;
      const char* from = LoadLocked(name);
      spdlog::info("catalog: model {} (generation {}): read from {}", name, generation, from);
      synced_[name] = generation;
      any = true;
    }
    // An incomplete catalog (being written again) only adds.
    for (auto it = synced_.begin(); catalog.complete && it != synced_.end();) {
      if (catalog.models.count(it->first) == 0) {
        spdlog::info("catalog: model {} is no longer served", it->first);
        models_.Remove(it->first);
        it = synced_.erase(it);
        any = true;
      } else {
        ++it;
      }
    }
    if (any) changed = changed_;
  }
  if (changed) changed();
}

void CatalogFollower::OnChange(std::function<void()> changed) {
  MutexLock lock(&mu_);
  changed_ = std::move(changed);
}

void CatalogFollower::Refresh(const std::string& name) {
  MutexLock lock(&mu_);
  LoadLocked(name);
}

void CatalogFollower::Forget(const std::string& name) {
  MutexLock lock(&mu_);
  models_.Remove(name);
}

const char* CatalogFollower::LoadLocked(const std::string& name) {
  StatusOr<std::string> entry = store_.PublishedModel(name);
  if (entry.ok()) {
    StatusOr<PublishedModel> published = PublishedModelFromJson(*entry, name);
    if (published.ok()) {
      models_.Publish(name, std::move(published->versions), std::move(published->problems));
      models_.SetRollout(name, std::move(published->rollout));
      return "the leader's published entry";
    }
    spdlog::warn("catalog: {}; reading the repository instead", published.status().message());
  }
  std::vector<RepositoryEntry> problems;
  std::vector<VersionPtr> versions = models_.Read(name, &problems);
  models_.Publish(name, std::move(versions), std::move(problems));
  if (auto rollout = LoadRollout(models_.repository_path(), name); rollout.ok()) {
    models_.SetRollout(name, std::move(rollout).value());
  }
  return "the shared repository";
}

Status CatalogFollowingControl::LoadModel(const std::string& name, bool startup) {
  Status s = inner_.LoadModel(name, startup);
  if (s.ok()) catalog_.Refresh(name);
  return s;
}

Status CatalogFollowingControl::UnloadModel(const std::string& name) {
  Status s = inner_.UnloadModel(name);
  if (s.ok()) catalog_.Forget(name);
  return s;
}

StatusOr<RolloutView> CatalogFollowingControl::ChangeRollout(const RolloutChange& change) {
  StatusOr<RolloutView> view = inner_.ChangeRollout(change);
  if (view.ok()) catalog_.Refresh(change.model);
  return view;
}

StatusOr<RegistrationStatus> CatalogFollowingControl::GetRegistrationStatus(
    const std::string& name) {
  StatusOr<RegistrationStatus> status = inner_.GetRegistrationStatus(name);
  if (status.ok() && status->state == "READY") {
    auto v = models_.Resolve(name, "");
    if (!v.ok() || (*v)->profiles.size() != status->variants.size()) catalog_.Refresh(name);
  }
  return status;
}

}  // namespace somm::node
