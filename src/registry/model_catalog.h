// ModelCatalog: what somm knows about the models of one repository: their
// configs, their versions, each version's variant profiles and rollout. It
// serves no query, loads no instance and runs no model code: the worker
// loads (worker/worker.h, told by the controller), and the registrar
// (registry/registrar.h) registers models and makes their variants. So it
// needs no backend: routers, controllers, workers and the simulator all read
// one.
//
// A model is *published* once at least one of its versions loaded: from then
// on Resolve() finds it (READY in the index). A VersionRecord is immutable;
// SetProfiles() publishes a new one, so readers take a shared_ptr and hold no
// lock while they use it.
//
// Thread-safety: every method may be called concurrently. One lock, mu_ (the
// models map), never held while calling out.
#pragma once

#include <atomic>
#include <map>
#include <set>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "api/records.h"
#include "cluster/cluster_state.h"
#include "common/mutex.h"
#include "profiles/variant_profile.h"
#include "registry/version_record.h"
#include "repository/model_config.h"
#include "rollout/rollout.h"

namespace somm {

class ModelCatalog {
 public:
  // `repository_path` "" = none mounted (a router with no repository: it
  // knows the models its leader's catalog names, nothing on disk).
  explicit ModelCatalog(std::string repository_path);

  const std::string& repository_path() const { return repository_path_; }
  // Where variants and their persisted profiles live: <repo>/.somm/variants.
  std::string VariantsRoot() const { return repository_path_ + "/.somm/variants"; }
  // Model folders in the repository, sorted (valid names only; a
  // pipeline's folder, with pipeline.yaml and no model.yaml, is not one).
  std::vector<std::string> ListModelFolders() const;
  // Reads `name`'s model.yaml and the versions its policy selects, and
  // those its rollout pins (<repo>/.somm/rollouts), with the profiles
  // persisted earlier. Problems (config errors, missing folders) go
  // to *problems as UNAVAILABLE rows.
  std::vector<VersionPtr> Read(const std::string& name,
                               std::vector<RepositoryEntry>* problems) const;
  // Publishes `name` with the versions that loaded and the rows of what did
  // not; replaces what was published.
  void Publish(const std::string& name, std::vector<VersionPtr> versions,
               std::vector<RepositoryEntry> problems);
  // Forgets `name`; false when it was not published.
  bool Remove(const std::string& name);
  bool IsPublished(const std::string& name) const;

  // The published version ("" = the default: the rollout's
  // (rollout/rollout.h) when the model has one and serves that version,
  // else the latest). NotFound, Unavailable (known but
  // nothing loaded) or InvalidArgument (a malformed version), with messages.
  StatusOr<VersionPtr> Resolve(const std::string& name, const std::string& version) const;
  std::vector<std::string> VersionsOf(const std::string& name) const;
  // The model's rollout (canary), or null. Set by whoever keeps it (the
  // controller; a cluster's router from the leader's catalog entry); kept
  // when the model is published again, dropped when it is removed.
  void SetRollout(const std::string& name, std::optional<Rollout> rollout);
  std::shared_ptr<const Rollout> RolloutOf(const std::string& name) const;
  // Every model that has a rollout, with it, in name order.
  std::vector<std::pair<std::string, std::shared_ptr<const Rollout>>> Rollouts() const;
  // The default version (Resolve's) of every model registered for `task`.
  std::vector<VersionPtr> ForTask(const std::string& task) const;
  std::vector<VersionPtr> All() const;
  // Moves whenever All() would list other records (a model published or
  // removed, new profiles): a caller that keeps All()'s list re-reads it
  // only then (read this first, then All()).
  uint64_t VersionsChanged() const { return versions_changed_.load(std::memory_order_acquire); }
  std::vector<RepositoryEntry> Index(bool ready_only) const;
  // The answer for a model that is not there; also what a caller gets for a
  // model it may not see (docs/security.md), so existence is not revealed.
  static Status UnknownModel(const std::string& name);
  // The owner tenant of a published model ("" = public), from memory;
  // nullopt when no config of it is published.
  std::optional<std::string> OwnerOf(const std::string& name) const;
  // `message` with the repository's path taken out ("<repo>/m/1/x.pt"
  // says "m/1/x.pt"): what reaches a client names no folder of this
  // machine.
  std::string WithoutPaths(std::string message) const;
  Status WithoutPaths(const Status& status) const;
  Status SetProfiles(const std::string& name, int64_t version, std::vector<VariantProfile> profiles);

 private:
  void UnindexTaskLocked(const std::string& task, const std::string& name) SOMM_REQUIRES(mu_);
  struct Entry {
    std::optional<ModelConfig> config;
    std::map<int64_t, VersionPtr> versions;  // published, ascending
    std::vector<RepositoryEntry> problems;
    std::shared_ptr<const Rollout> rollout;
  };

  const std::string repository_path_;
  mutable SharedMutex mu_;
  std::map<std::string, Entry> models_ SOMM_GUARDED_BY(mu_);
  // models_'s entries by name, hashed (a map's nodes stay put): Resolve
  // runs for every query, and at thousands of models the tree's string
  // comparisons cost more than the rest of it.
  absl::flat_hash_map<std::string, const Entry*> by_name_ SOMM_GUARDED_BY(mu_);
  // The models of each task, by name: ForTask runs for every task query,
  // and a scan of every model's task cost the simulator at 2,500 models a
  // fifth of its time in string comparisons.
  absl::flat_hash_map<std::string, std::set<std::string>> by_task_ SOMM_GUARDED_BY(mu_);
  std::atomic<uint64_t> versions_changed_{0};  // VersionsChanged(); moved under mu_
  // How many models have a rollout (changed under mu_; read without it).
  std::atomic<int> with_rollout_{0};
};

// The cluster model's options for one version: every profiled variant on
// every hardware it was profiled on (unusable ones flagged), appended.
void AppendOptions(const VersionRecord& v, std::vector<cluster::VariantOption>* out);

// What a model's variants are by its published default version's profiles
// (READY, or NONE before any were made): a registration's status where no
// variant job of it ran in this process. NotFound when not published.
StatusOr<RegistrationStatus> PublishedVariants(const ModelCatalog& catalog, const std::string& name);

bool IsPositiveInteger(const std::string& s);
bool IsValidModelName(const std::string& name);

}  // namespace somm
