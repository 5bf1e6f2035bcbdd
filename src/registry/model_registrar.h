// ModelRegistrar: the registrar (registry/registrar.h) of one repository,
// which runs the models' code through a ModelSandbox
// (sandbox/model_sandbox.h): a confined child process in every server, so
// that a registration's probe and a variant job cannot reach the server's
// memory. It writes what it learns into a ModelCatalog: the profiles a
// variant job measured, installed with SetProfiles(). A private model's files
// (its folder, versions, validation data, variants) are 0700 folders and
// 0600 files.
//
// Thread-safety: every method may be called concurrently. Locks: jobs_mu_
// (the jobs) and one_job_at_a_time_ (held by a running variant job); neither
// is held while calling the catalog.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "profiles/device.h"
#include "profiles/variant_profile.h"
#include "registry/model_catalog.h"
#include "registry/registrar.h"
#include "runtime/backend_set.h"
#include "sandbox/model_sandbox.h"

namespace somm {

struct RegistrarOptions {
  // Hardware configurations variants are profiled on.
  std::vector<HardwareConfig> hardware;
  // A variant more than this below the as-registered accuracy is unusable.
  double accuracy_tolerance = 0.02;
  // Where tools/quantize_dynamic.py lives (int8 variants).
  std::string tools_dir;
  // The device a registration's probe load runs on.
  Device device;
  // Where the probe and the variant jobs run the model's code. Null: the
  // registrar's own thread, through the backend (InProcessModelSandbox), for
  // unit tests; servers give a ProcessModelSandbox.
  std::shared_ptr<ModelSandbox> sandbox;
};

class ModelRegistrar final : public Registrar {
 public:
  // Registrations without RegistrarOptions::sandbox probe and make variants
  // through `backends`, in this process. `catalog` outlives the registrar.
  ModelRegistrar(ModelCatalog& catalog, RegistrarOptions options, BackendSet backends);
  ~ModelRegistrar() override;  // Shutdown()

  StatusOr<ModelConfig> Register(const RegistrationRequest& request) override;
  void StartVariantJob(const ModelConfig& config, int64_t version) override;
  StatusOr<RegistrationStatus> GetRegistrationStatus(const std::string& name) const override;
  void Shutdown() override;

 private:
  void RunVariantJob(ModelConfig config, int64_t version);
  StatusOr<ModelConfig> RegisterChecked(const RegistrationRequest& request);
  // Whether `caller` may see the model in the repository folder `name`.
  bool MaySee(const Caller& caller, const std::string& name) const;

  ModelCatalog& catalog_;
  const RegistrarOptions options_;
  const std::shared_ptr<ModelSandbox> sandbox_;
  std::atomic<bool> shutting_down_{false};
  mutable Mutex jobs_mu_;
  std::map<std::string, RegistrationStatus> jobs_ SOMM_GUARDED_BY(jobs_mu_);
  std::vector<std::thread> job_threads_ SOMM_GUARDED_BY(jobs_mu_);
  Mutex one_job_at_a_time_;  // held by a running variant job
};

}  // namespace somm
