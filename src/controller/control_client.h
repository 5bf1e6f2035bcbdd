// ControlClient: what a router asks of the controller. The embedded server's
// router calls the Controller of its own process; a cluster's router reaches
// the leader controller over RPC with the same contract.
//
// Contract: EnsureLoaded never blocks its caller; `done` runs exactly once,
// on any thread, possibly before the call returns, once the replicas are up
// (or why they cannot be). LoadModel and UnloadModel block (the repository
// API runs them on handler threads); StartVariantJob and
// GetRegistrationStatus block only for a round trip. Thread-safe.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "profiles/variant_profile.h"
#include "registry/version_record.h"
#include "api/inference_server.h"

namespace somm {

// Where a load ended up: the worker that holds the group ("" when it failed).
using LoadDone = std::function<void(const Status& status, const std::string& worker)>;

class ControlClient {
 public:
  virtual ~ControlClient() = default;
  // Has `replicas` of `variant`@`hw` of `version` loaded somewhere; `done`
  // names the worker, so a query can go there before every view of the
  // cluster has caught up. `urgent`: a query waits (the worker's urgent
  // lane). `query_waits`: it counts as a cold start.
  virtual void EnsureLoaded(VersionPtr version, const std::string& variant,
                            const HardwareConfig& hw, int replicas, const std::string& reason,
                            bool urgent, LoadDone done, bool query_waits = true) = 0;
  // (Re)loads a repository model; unloads one (the repository API).
  virtual Status LoadModel(const std::string& name, bool startup = false) = 0;
  virtual Status UnloadModel(const std::string& name) = 0;
  // Where the configured instances of `version` run.
  virtual HardwareConfig BaseHardware(const VersionRecord& version) const = 0;
  // A registration's second half (registry/registrar.h): generates and
  // profiles the variants of a loaded model version in the background where
  // the controller runs, which then publishes the profiles (a cluster's
  // leader: with the model's next catalog generation, so every router
  // re-reads them from the shared repository). Does not block on the job.
  virtual Status StartVariantJob(const std::string& name, int64_t version) = 0;
  // That job's progress, or the profiles the model has (NONE: none yet).
  virtual StatusOr<RegistrationStatus> GetRegistrationStatus(const std::string& name) = 0;
  // The controller's recent control actions (loads, evictions, replica
  // changes, worker scaling), newest first, for GET /v2/somm/actions: a
  // cluster's router has none of its own. Blocks for a round trip at most;
  // empty when the controller cannot be reached (logged).
  virtual std::vector<DecisionRecord> RecentActions(size_t limit) { return {}; }
  // The controller's control actions by kind since it started (its
  // somm_control_actions_total), for a router's overview. Blocks for a
  // round trip at most; empty when the controller cannot be reached.
  virtual std::map<std::string, int64_t> ActionTotals() { return {}; }
  // A model's rollout (rollout/rollout.h): changes it as asked, or reads it
  // with the current step's windows. Blocks while a started canary version
  // loads. NOT_FOUND when the model (or, for a read or a change, its
  // rollout) is not there; FAILED_PRECONDITION when the change does not fit
  // the rollout's state, with both named.
  virtual StatusOr<RolloutView> ChangeRollout(const RolloutChange& change) {
    return Unimplemented("rollouts are not available here");
  }
  virtual StatusOr<RolloutView> GetRollout(const std::string& model) {
    return Unimplemented("rollouts are not available here");
  }
};

}  // namespace somm
