// ModelRegistry: what somm knows about the models of one repository: their
// configs, their versions, each version's variant profiles, and the
// registration jobs that produce those profiles. It serves no query and loads
// no instance: the worker does that (worker/worker.h), told by the controller.
//
// A model is *published* once at least one of its versions loaded: from then
// on Resolve() finds it (READY in the index). A VersionRecord is immutable;
// SetProfiles() publishes a new one, so readers take a shared_ptr and hold no
// lock while they use it.
//
// Registration: Register() validates a new model, stages its files, probes
// that it loads and answers, and moves it into the repository in one rename;
// the caller then loads it and calls StartVariantJob(), which generates and
// profiles variants in the background (variants/) and installs the profiles
// when done. One job runs at a time (profiles measure latency). The probe and
// the job run the user's model code, so both go through the ModelSandbox
// (sandbox/model_sandbox.h): a confined child process in every server. A
// private model's files (its folder, versions, validation data, variants)
// are 0700 folders and 0600 files.
//
// Shutdown() stops the sandbox first (a probe or job in progress ends at
// once, UNAVAILABLE), then waits for the job threads: a server calls it as
// soon as it is told to stop.
//
// Thread-safety: every method may be called concurrently. Locks: mu_ (the
// models map) and jobs_mu_ (the jobs); neither is held while calling out.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "cluster/cluster_state.h"
#include "common/mutex.h"
#include "profiles/variant_profile.h"
#include "repository/model_config.h"
#include "rollout/rollout.h"
#include "runtime/backend_set.h"
#include "sandbox/model_sandbox.h"
#include "api/inference_server.h"
#include "registry/version_record.h"

namespace somm {

struct RegistryOptions {
  std::string repository_path;
  // Hardware configurations variants are profiled on.
  std::vector<HardwareConfig> hardware;
  // A variant more than this below the as-registered accuracy is unusable.
  double accuracy_tolerance = 0.02;
  // Where tools/quantize_dynamic.py lives (int8 variants).
  std::string tools_dir;
  // The device a registration's probe load runs on.
  Device device;
  // Where the probe and the variant jobs run the model's code. Null: the
  // registry's own thread, through the backend (InProcessModelSandbox), for
  // unit tests; servers give a ProcessModelSandbox.
  std::shared_ptr<ModelSandbox> sandbox;
};

class ModelRegistry {
 public:
  // Registrations without RegistryOptions::sandbox probe and make variants
  // through `backends`, in this process.
  ModelRegistry(RegistryOptions options, BackendSet backends);
  ~ModelRegistry();  // Shutdown()

  const RegistryOptions& options() const { return options_; }
  // Model folders in the repository, sorted (valid names only).
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

  // Registration (see above). On success the model's files are in the
  // repository and its config is returned.
  StatusOr<ModelConfig> Register(const RegistrationRequest& request);
  // Generates and profiles `config`'s variants in the background and
  // installs the profiles when done (see above); a job already running for
  // the model is not started twice.
  void StartVariantJob(const ModelConfig& config, int64_t version);
  StatusOr<RegistrationStatus> GetRegistrationStatus(const std::string& name) const;
  void Shutdown();

 private:
  struct Entry {
    std::optional<ModelConfig> config;
    std::map<int64_t, VersionPtr> versions;  // published, ascending
    std::vector<RepositoryEntry> problems;
    std::shared_ptr<const Rollout> rollout;
  };
  void RunVariantJob(ModelConfig config, int64_t version);
  StatusOr<ModelConfig> RegisterChecked(const RegistrationRequest& request);
  // Whether `caller` may see the model in the repository folder `name`.
  bool MaySee(const Caller& caller, const std::string& name) const;
  std::string VariantsRoot() const { return options_.repository_path + "/.somm/variants"; }

  const RegistryOptions options_;
  const std::shared_ptr<ModelSandbox> sandbox_;
  std::atomic<bool> shutting_down_{false};
  mutable SharedMutex mu_;
  std::map<std::string, Entry> models_ SOMM_GUARDED_BY(mu_);
  // models_'s entries by name, hashed (a map's nodes stay put): Resolve
  // runs for every query, and at thousands of models the tree's string
  // comparisons cost more than the rest of it.
  absl::flat_hash_map<std::string, const Entry*> by_name_ SOMM_GUARDED_BY(mu_);
  std::atomic<uint64_t> versions_changed_{0};  // VersionsChanged(); moved under mu_
  // How many models have a rollout (changed under mu_; read without it).
  std::atomic<int> with_rollout_{0};
  mutable Mutex jobs_mu_;
  std::map<std::string, RegistrationStatus> jobs_ SOMM_GUARDED_BY(jobs_mu_);
  std::vector<std::thread> job_threads_ SOMM_GUARDED_BY(jobs_mu_);
  Mutex one_job_at_a_time_;  // held by a running variant job
};

// The cluster model's options for one version: every profiled variant on
// every hardware it was profiled on (unusable ones flagged), appended.
void AppendOptions(const VersionRecord& v, std::vector<cluster::VariantOption>* out);

bool IsPositiveInteger(const std::string& s);
bool IsValidModelName(const std::string& name);

}  // namespace somm
