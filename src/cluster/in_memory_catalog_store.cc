#include "cluster/in_memory_catalog_store.h"

#include <utility>

namespace somm::cluster {

Catalog InMemoryCatalogStore::ReadCatalog() const {
  MutexLock lock(&mu_);
  return catalog_;
}

Status InMemoryCatalogStore::PublishModel(const std::string& model, const std::string& generation,
                                          const std::string& entry) {
  {
    MutexLock lock(&mu_);
    catalog_.models[model] = generation;
    if (!entry.empty()) entries_[model] = entry;
    ++writes_;
  }
  Changed();
  return Status::Ok();
}

Status InMemoryCatalogStore::RemoveModel(const std::string& model) {
  {
    MutexLock lock(&mu_);
    catalog_.models.erase(model);
    entries_.erase(model);
    ++writes_;
  }
  Changed();
  return Status::Ok();
}

Status InMemoryCatalogStore::MarkCatalogComplete(const std::string& /*publisher*/) {
  {
    MutexLock lock(&mu_);
    catalog_.complete = true;
    ++writes_;
  }
  Changed();
  return Status::Ok();
}

StatusOr<std::string> InMemoryCatalogStore::PublishedModel(const std::string& model) {
  MutexLock lock(&mu_);
  auto it = entries_.find(model);
  if (it == entries_.end()) return NotFound("no published entry for model '" + model + "'");
  return it->second;
}

void InMemoryCatalogStore::SetOnCatalogChange(std::function<void()> on_change) {
  MutexLock lock(&mu_);
  on_change_ = std::move(on_change);
}

void InMemoryCatalogStore::Clear() {
  {
    MutexLock lock(&mu_);
    catalog_ = Catalog{};
    entries_.clear();
  }
  Changed();
}

int64_t InMemoryCatalogStore::writes() const {
  MutexLock lock(&mu_);
  return writes_;
}

void InMemoryCatalogStore::Changed() {
  std::function<void()> notify;
  {
    MutexLock lock(&mu_);
    notify = on_change_;
  }
  if (notify) notify();
}

}  // namespace somm::cluster
