// InMemoryCatalogStore: the catalog (catalog_store.h) held in this process,
// for unit tests and the simulator, where the leader and its readers share
// one process. Every write changes the view at once and runs the change
// callback on the writer's thread. Clear() is what a Redis restart does to
// the catalog: every model and the complete mark go.
#pragma once

#include <map>
#include <string>

#include "cluster/catalog_store.h"
#include "common/mutex.h"

namespace somm::cluster {

class InMemoryCatalogStore : public CatalogStore {
 public:
  Catalog ReadCatalog() const override;
  Status PublishModel(const std::string& model, const std::string& generation,
                      const std::string& entry) override;
  Status RemoveModel(const std::string& model) override;
  Status MarkCatalogComplete(const std::string& publisher) override;
  StatusOr<std::string> PublishedModel(const std::string& model) override;
  void SetOnCatalogChange(std::function<void()> on_change) override;

  // Loses everything, as a store restarted empty does.
  void Clear();
  // How many writes reached the store (publish, remove, mark).
  int64_t writes() const;

 private:
  void Changed();

  mutable Mutex mu_;
  Catalog catalog_ SOMM_GUARDED_BY(mu_);
  std::map<std::string, std::string> entries_ SOMM_GUARDED_BY(mu_);
  int64_t writes_ SOMM_GUARDED_BY(mu_) = 0;
  std::function<void()> on_change_ SOMM_GUARDED_BY(mu_);
};

}  // namespace somm::cluster
