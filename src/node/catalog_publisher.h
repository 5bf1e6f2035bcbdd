// CatalogPublisher: the leader controller's half of the catalog
// (cluster/catalog_store.h). It writes the entry of every model its
// catalog knows (served, or whose load failed: routers show its problems
// as `somm serve` does) under a generation that changes whenever the
// model's records or rollout do, so routers read it again; it removes the
// models it no longer knows; and once the leader's start-up loads are done
// (SetStartedUp) it marks the catalog complete after each publication that
// wrote everything, so that routers may take a model's absence for its
// removal. Publish() writes only what the store's view lacks or holds
// under another generation: called each lease tick, it costs nothing when
// nothing changed, and writes the whole catalog again after the store lost
// it.
//
// CatalogPublishingControl is the leader's ControlClient as routers reach
// it: after a repository call the catalog is written before the call
// returns, so every router hears of the change now, not at the next tick.
//
// Thread-safety: every method may be called from any thread; publications
// run one at a time.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cluster/catalog_store.h"
#include "common/mutex.h"
#include "node/forwarding_control.h"
#include "registry/model_catalog.h"

namespace somm::node {

// What the leader publishes for `name`: the model.yaml it serves (read
// again from the repository: the catalog keeps it parsed), its versions
// with their profiles, its rollout, and the problems its last read found.
std::string PublishedEntry(const ModelCatalog& models, const std::string& name,
                           const std::vector<VersionPtr>& versions);

class CatalogPublisher {
 public:
  // `publisher` names the leader in the complete mark; `new_generation`
  // makes a generation no earlier one equals (redis::NewIncarnation).
  CatalogPublisher(const ModelCatalog& models, cluster::CatalogStore& store,
                   std::string publisher, std::function<std::string()> new_generation);

  // Brings the store's catalog in line with the leader's catalog, and marks it
  // complete when started up and every write succeeded.
  void Publish();
  // The leader's start-up loads are done: its catalog lists every model it
  // serves, so a publication from now on is the whole catalog.
  void SetStartedUp() { started_up_ = true; }

 private:
  const ModelCatalog& models_;
  cluster::CatalogStore& store_;
  const std::string publisher_;
  const std::function<std::string()> new_generation_;
  std::atomic<bool> started_up_{false};
  Mutex mu_;
  // What was last published of each model: its generation, records and
  // rollout (a rollout step changes no record).
  struct Published {
    std::string generation;
    std::vector<VersionPtr> records;
    std::shared_ptr<const Rollout> rollout;
  };
  std::map<std::string, Published> published_ SOMM_GUARDED_BY(mu_);
};

class CatalogPublishingControl : public ForwardingControl {
 public:
  CatalogPublishingControl(ControlClient& controller, CatalogPublisher& publisher)
      : ForwardingControl(controller), publisher_(publisher) {}
  Status LoadModel(const std::string& name, bool startup) override;
  Status UnloadModel(const std::string& name) override;
  StatusOr<RolloutView> ChangeRollout(const RolloutChange& change) override;
  StatusOr<RegistrationStatus> GetRegistrationStatus(const std::string& name) override;

 private:
  CatalogPublisher& publisher_;
};

}  // namespace somm::node
