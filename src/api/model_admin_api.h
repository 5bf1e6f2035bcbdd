// ModelAdminApi: what a model's owner or an operator may ask about the
// models themselves: the repository (index, load, unload), registration and
// its progress, task discovery, and rollouts. The caller's tenant decides
// what each answer shows: a model the caller may not see answers as one
// that does not exist.
//
// A server that does not offer one of these answers UNIMPLEMENTED (the
// defaults below), never a silent empty success.
//
// Thread-safety: every method may be called concurrently from any thread.
#pragma once

#include <string>
#include <vector>

#include "api/caller.h"
#include "api/records.h"
#include "api/task_description.h"
#include "common/status.h"
#include "rollout/rollout.h"

namespace somm {

class ModelAdminApi {
 public:
  virtual ~ModelAdminApi() = default;

  virtual std::vector<RepositoryEntry> RepositoryIndex(bool ready_only) const = 0;
  virtual Status LoadModel(const std::string& name) = 0;
  virtual Status UnloadModel(const std::string& name) = 0;

  // Model-less extensions. Registration validates synchronously and returns;
  // variant generation and profiling then run in the background.
  virtual Status RegisterModel(RegistrationRequest request) {
    return Unimplemented("model registration is not supported by this server");
  }
  virtual StatusOr<RegistrationStatus> GetRegistrationStatus(const std::string& name) const {
    return Unimplemented("model registration is not supported by this server");
  }
  // Task discovery (api/task_description.h): every task with a model the
  // caller may use, by name; one task, NotFound when it has none.
  virtual std::vector<TaskDescription> ListTasks(const Caller& caller) const { return {}; }
  virtual StatusOr<TaskDescription> DescribeTask(const std::string& task,
                                                 const Caller& caller) const {
    return Unimplemented("task discovery is not supported by this server");
  }

  // A model's rollout (rollout/rollout.h; REST .../models/{m}/rollout, gRPC
  // somm.SommControl/Rollout): changes it, or reads it with the current
  // step's figures. A model the caller may not see is NOT_FOUND as unknown.
  virtual StatusOr<RolloutView> ChangeRollout(const RolloutChange& change, const Caller& caller) {
    return Unimplemented("rollouts are not supported by this server");
  }
  virtual StatusOr<RolloutView> GetRollout(const std::string& model, const Caller& caller) const {
    return Unimplemented("rollouts are not supported by this server");
  }
};

}  // namespace somm
