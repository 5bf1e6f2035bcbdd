#include "node/catalog_publisher.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "registry/published_model.h"

namespace somm::node {

std::string PublishedEntry(const ModelCatalog& models, const std::string& name,
                           const std::vector<VersionPtr>& versions) {
  PublishedModel model;
  model.name = name;
  model.versions = versions;
  std::ifstream yaml(std::filesystem::path(models.repository_path()) / name /
                     "model.yaml");
  std::stringstream text;
  text << yaml.rdbuf();
  model.config_yaml = text.str();
  if (auto rollout = models.RolloutOf(name)) model.rollout = *rollout;
  for (RepositoryEntry& row : models.Index(/*ready_only=*/false)) {
    if (row.name == name && row.state != "READY") model.problems.push_back(std::move(row));
  }
  return PublishedModelToJson(model);
}

CatalogPublisher::CatalogPublisher(const ModelCatalog& models, cluster::CatalogStore& store,
                                   std::string publisher,
                                   std::function<std::string()> new_generation)
    : models_(models),
      store_(store),
      publisher_(std::move(publisher)),
      new_generation_(std::move(new_generation)) {}

void CatalogPublisher::Publish() {
  MutexLock lock(&mu_);
  // Whether the mark may be written is read before the models is: a
  // start-up that ends meanwhile is marked at the next publication.
  const bool started_up = started_up_.load();
  std::map<std::string, std::vector<VersionPtr>> known;
  for (const std::string& name : models_.ListModelFolders()) {
    if (models_.IsPublished(name)) known[name];
  }
  for (const VersionPtr& v : models_.All()) known[v->config.name].push_back(v);
  const cluster::Catalog held = store_.ReadCatalog();
  bool wrote_all = true;
  for (const auto& [name, records] : known) {
    Published& last = published_[name];
    const auto rollout_now = models_.RolloutOf(name);
    if (last.generation.empty() || last.records != records || last.rollout != rollout_now) {
      last.generation = new_generation_();
    }
    last.records = records;
    last.rollout = rollout_now;
    auto it = held.models.find(name);
    if (it == held.models.end() || it->second != last.generation) {
      const Status s = store_.PublishModel(name, last.generation, PublishedEntry(models_, name, records));
      if (!s.ok()) wrote_all = false;
    }
  }
  for (auto it = published_.begin(); it != published_.end();) {
    if (known.count(it->first) == 0) {
      if (!store_.RemoveModel(it->first).ok()) wrote_all = false;
      it = published_.erase(it);
    } else {
      ++it;
    }
  }
  if (started_up && wrote_all && !held.complete) {
    if (const Status s = store_.MarkCatalogComplete(publisher_); !s.ok()) {
      spdlog::warn("catalog: not marked complete: {}", s.message());
    }
  }
}

Status CatalogPublishingControl::LoadModel(const std::string& name, bool startup) {
  Status s = inner_.LoadModel(name, startup);
  publisher_.Publish();  // a failed load publishes its problems too
  return s;
}

Status CatalogPublishingControl::UnloadModel(const std::string& name) {
  Status s = inner_.UnloadModel(name);
  publisher_.Publish();
  return s;
}

StatusOr<RolloutView> CatalogPublishingControl::ChangeRollout(const RolloutChange& change) {
  StatusOr<RolloutView> view = inner_.ChangeRollout(change);
  publisher_.Publish();  // a new canary version or split reaches every router now
  return view;
}

StatusOr<RegistrationStatus> CatalogPublishingControl::GetRegistrationStatus(
    const std::string& name) {
  auto status = inner_.GetRegistrationStatus(name);
  // Profiles a finished job installed reach the catalog before the asker
  // reads them; polls while a job runs change nothing there.
  if (status.ok() && status->state == "READY") publisher_.Publish();
  return status;
}

}  // namespace somm::node
