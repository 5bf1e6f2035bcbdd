// Registrar: registers new models into a repository and makes their
// variants. Where a catalog (registry/model_catalog.h) only knows models,
// a registrar runs their code: Register() validates a new model, stages its
// files, probes that it loads and answers, and moves it into the repository
// in one rename; the caller then loads it and calls StartVariantJob(), which
// generates and profiles variants in the background and installs the
// profiles in the catalog when done. One job runs at a time (profiles
// measure latency); a job already running for a model is not started twice.
//
// Errors name files from the model's own folder, never the server's. A name
// the caller may not see (another tenant's private model) is answered as a
// new name is (docs/security.md).
//
// Shutdown() ends a probe or job in progress at once (UNAVAILABLE) and waits
// for the job threads; after it Register() refuses and StartVariantJob()
// does nothing. Every method may be called concurrently.
//
// Who holds one: `somm serve`, a cluster's routers (they probe
// registrations) and its controllers (the leader runs variant jobs). A
// worker, and the simulator, hold none.
#pragma once

#include <string>

#include "api/records.h"
#include "common/status.h"
#include "repository/model_config.h"

namespace somm {

class Registrar {
 public:
  virtual ~Registrar() = default;
  // On success the model's files are in the repository; returns its config.
  virtual StatusOr<ModelConfig> Register(const RegistrationRequest& request) = 0;
  virtual void StartVariantJob(const ModelConfig& config, int64_t version) = 0;
  // The model's variant job as it stands, or, when none ran in this
  // process, what its published default version's profiles say (READY or
  // NONE); NotFound for a model the catalog does not publish.
  virtual StatusOr<RegistrationStatus> GetRegistrationStatus(const std::string& name) const = 0;
  virtual void Shutdown() = 0;
};

}  // namespace somm
