// CatalogFollower: keeps a router's catalog in line with the cluster's
// catalog (cluster/catalog_store.h). A model the catalog lists is read again
// whenever its generation changes, from the entry the leader published with
// that generation (registry/published_model.h: config, versions, profiles,
// problems), or from the shared repository when it has none (a leader that
// wrote none). A model the catalog stops listing is forgotten, but only
// while the catalog is marked complete: one being written again after the
// store lost it (a Redis restart) lists the models model by model, and
// taking their absence for removal answered 404 for models that were served
// all along.
//
// CatalogFollowingControl is the router's ControlClient: the leader's, with
// this router's catalog brought in line as soon as a repository call
// succeeds or a variant job is seen READY, rather than at the catalog's next
// notice: a client that loads a model, or waits for its variants, and then
// queries it must find it so.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "cluster/catalog_store.h"
#include "common/mutex.h"
#include "node/forwarding_control.h"
#include "registry/model_catalog.h"

namespace somm::node {

class CatalogFollower {
 public:
  CatalogFollower(ModelCatalog& models, cluster::CatalogStore& store);
  // Stops following (the store calls no more once this returns, for a store
  // whose change callback runs on the writer's thread; a store with a watch
  // thread must stop it first).
  ~CatalogFollower();

  // Reads the catalog now, then again whenever the store says it changed.
  void Start();
  // Brings the router's catalog in line with `catalog` (Start's callback calls it).
  void Sync(const cluster::Catalog& catalog);
  // Reads `name` now, ahead of the catalog's notice (a repository call or a
  // variant job this router saw finish); the notice reads it again.
  void Refresh(const std::string& name);
  // Forgets `name` now, ahead of the catalog (an unload this router made).
  void Forget(const std::string& name);
  // Calls `changed` after each sync that read or forgot a model, on the
  // syncing thread, outside the follower's lock (what is built over the
  // catalog, as the router's pipelines, binds again).
  void OnChange(std::function<void()> changed);

 private:
  // Publishes `name` from its published entry, else from the repository;
  // says which.
  const char* LoadLocked(const std::string& name) SOMM_REQUIRES(mu_);

  ModelCatalog& models_;
  cluster::CatalogStore& store_;
  Mutex mu_;
  std::map<std::string, std::string> synced_ SOMM_GUARDED_BY(mu_);  // model -> generation read
  std::function<void()> changed_ SOMM_GUARDED_BY(mu_);
};

class CatalogFollowingControl : public ForwardingControl {
 public:
  CatalogFollowingControl(ControlClient& leader, CatalogFollower& catalog,
                          const ModelCatalog& models)
      : ForwardingControl(leader), catalog_(catalog), models_(models) {}
  Status LoadModel(const std::string& name, bool startup) override;
  Status UnloadModel(const std::string& name) override;
  StatusOr<RolloutView> ChangeRollout(const RolloutChange& change) override;
  StatusOr<RegistrationStatus> GetRegistrationStatus(const std::string& name) override;

 private:
  CatalogFollower& catalog_;
  const ModelCatalog& models_;
};

}  // namespace somm::node
