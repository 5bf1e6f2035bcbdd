#include "registry/model_registrar.h"

#include <spdlog/spdlog.h>

#include <utility>

#include "sandbox/in_process_sandbox.h"
#include "variants/variant_pipeline.h"

namespace somm {

ModelRegistrar::ModelRegistrar(ModelCatalog& catalog, RegistrarOptions options,
                               BackendSet backends)
    : catalog_(catalog),
      options_(std::move(options)),
      sandbox_(options_.sandbox ? options_.sandbox
                                : std::make_shared<InProcessModelSandbox>(std::move(backends))) {}

ModelRegistrar::~ModelRegistrar() { Shutdown(); }

void ModelRegistrar::Shutdown() {
  shutting_down_ = true;
  // At once: a probe or a variant job in progress is killed, not waited for.
  sandbox_->Shutdown();
  std::vector<std::thread> jobs;
  {
    MutexLock lock(&jobs_mu_);
    jobs.swap(job_threads_);
  }
  for (auto& t : jobs) t.join();
}

StatusOr<RegistrationStatus> ModelRegistrar::GetRegistrationStatus(const std::string& name) const {
  {
    MutexLock lock(&jobs_mu_);
    auto it = jobs_.find(name);
    if (it != jobs_.end()) return it->second;
  }
  return PublishedVariants(catalog_, name);
}

void ModelRegistrar::StartVariantJob(const ModelConfig& config, int64_t version) {
  MutexLock lock(&jobs_mu_);
  if (shutting_down_) return;
  auto& job = jobs_[config.name];
  if (job.state == "GENERATING") return;
  job = RegistrationStatus{};
  job.name = config.name;
  job.state = "GENERATING";
  job.phase = "queued";
  job_threads_.emplace_back([this, config, version] { RunVariantJob(config, version); });
}

void ModelRegistrar::RunVariantJob(ModelConfig config, int64_t version) {
  // One job at a time: profiling measures latency, and two jobs at once on a
  // small machine would measure each other.
  MutexLock serial(&one_job_at_a_time_);
  if (shutting_down_) return;
  VariantJobRequest request;
  request.config = config;
  request.version = version;
  request.model_dir = catalog_.repository_path() + "/" + config.name;
  request.private_files = !config.owner_tenant.empty();
  VariantPipelineOptions& po = request.options;
  po.variants_root = catalog_.VariantsRoot();
  po.hardware = options_.hardware;
  po.accuracy_tolerance = options_.accuracy_tolerance;
  po.tools_dir = options_.tools_dir;
  po.cancelled = [this] { return shutting_down_.load(); };
  auto result = sandbox_->GenerateVariants(request, [this, &config](const VariantProgress& p) {
    MutexLock lock(&jobs_mu_);
    auto& job = jobs_[config.name];
    job.phase = p.phase + (p.current.empty() ? "" : " " + p.current);
    job.done = p.done;
    job.total = p.total;
  });
  Status installed = result.ok() ? catalog_.SetProfiles(config.name, version, result->profiles)
                                 : result.status();
  MutexLock lock(&jobs_mu_);
  auto& job = jobs_[config.name];
  if (!result.ok()) {
    job.state = "FAILED";
    job.message = catalog_.WithoutPaths(result.status().message());
    spdlog::error("variant generation for {} failed: {}", config.name, job.message);
    return;
  }
  job.variants = result->profiles;
  for (const auto& sk : result->skipped) job.skipped.push_back(sk.variant + ": " + sk.reason);
  job.state = installed.ok() ? "READY" : "FAILED";
  job.phase = "done";
  job.message = installed.ok() ? std::to_string(result->profiles.size()) + " variants profiled"
                               : installed.message();
  spdlog::info("variants of {}:{} ready: {}", config.name, version, job.message);
}

}  // namespace somm
