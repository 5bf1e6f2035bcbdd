// EmbeddedServer: somm in one process (`somm serve`): a router, a controller
// and one local worker around an in-memory cluster-state store, the model
// catalog and the registrar. It is the cluster's code path wired with direct calls instead of
// RPCs (docs/architecture.md): the router reaches the worker through a
// LocalWorkerStub, exactly where a cluster's router uses a gRPC stub.
//
// Lifecycle: Start() loads every model of the repository, or those
// EmbeddedServerOptions::startup_models names (a broken one is UNAVAILABLE
// with the reason and does not stop the others), starts variant
// generation for versions that have no profiles yet, and starts the control
// loop. Shutdown() refuses new queries, stops the loop and the registration
// jobs, and drains every queue.
//
// Thread-safety: every method may be called concurrently after Start().
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cluster/in_memory_store.h"
#include "common/duty_cycle_pacer.h"
#include "controller/controller.h"
#include "metrics/serving_metrics.h"
#include "registry/model_catalog.h"
#include "registry/model_registrar.h"
#include "api/decision_log.h"
#include "router/router.h"
#include "runtime/backend_set.h"
#include "worker/worker.h"
#include "worker/worker_directory.h"
#include "worker/local_worker_stub.h"

namespace somm {

struct EmbeddedServerOptions {
  std::string repository_path;
  std::string server_name = "somm";
  std::string server_version = "0.1.0";
  // Device every configured instance is placed on.
  Device device;
  // Hardware configurations variants are profiled on and may be placed on.
  // Empty = one thread, every core, and each GPU the default platform's
  // backend reports (the CPU alone where this binary cannot make it).
  std::vector<HardwareConfig> hardware;
  // Generate and profile variants for repository models that have none yet
  // (registered models always get them).
  bool auto_variants = true;
  // The models Start() loads: every folder of the repository (nullopt), or
  // only these (--model-control-mode explicit's --load-model), each of which
  // must be a folder of it.
  std::optional<std::vector<std::string>> startup_models;
  // A variant more than this below the as-registered accuracy is unusable.
  double accuracy_tolerance = 0.02;
  // Where tools/quantize_dynamic.py lives (int8 variants).
  std::string tools_dir;
  // Where registrations run the model's code (RegistrarOptions::sandbox);
  // null: in this process (tests).
  std::shared_ptr<ModelSandbox> sandbox;
  // The router's and the controller's prices (RouterOptions::prices,
  // ControllerOptions::prices).
  PriceList prices;
  size_t decision_log_size = 1000;
  // The router's and the controller's options as a process's flags make
  // them (node/component_options.h), managed or not (docs/managed.md). The
  // server adds its wiring: the prices and device above, the server's name,
  // readiness, the demand the router publishes before each control tick.
  RouterOptions router;
  ControllerOptions controller;
  // Memory instances may use on the CPU; 0 = the default fraction.
  int64_t memory_budget_bytes = 0;
  // Paces background loads (--background-duty). Null: unpaced.
  std::shared_ptr<DutyCyclePacer> background_pacer;
  // WorkerOptions::inline_max_compute_us and inline_min_gap_us: an idle
  // one-thread instance runs a small query on the frontend thread that
  // brought it, as a cluster worker does on its RPC thread. 0 = never.
  double inline_max_compute_us = 0;
  double inline_min_gap_us = kDefaultInlineMinGapUs;
  // Triton's --strict-readiness: ready (/v2/health/ready) once every model
  // in the repository is available and the configured instances
  // (instance_count written in model.yaml) are loaded; false = ready once up.
  bool strict_readiness = true;
};

class EmbeddedServer : public InferenceServer {
 public:
  // Models load on their platform's backend from `backends` (the worker's;
  // registrations without a sandbox probe there too). `metrics` must
  // outlive the server.
  EmbeddedServer(EmbeddedServerOptions options, BackendSet backends, ServingMetrics& metrics);
  ~EmbeddedServer() override;

  Status Start();
  void Shutdown();

  // The router: what frontends should hold (one call less per query).
  Router& router() { return *router_; }
  Worker& worker() { return *worker_; }
  Controller& controller() { return *controller_; }
  ModelCatalog& catalog() { return *catalog_; }
  ModelRegistrar& registrar() { return *registrar_; }
  int64_t QueuedQueries() const { return worker_->QueuedQueries(); }

  bool IsLive() const override { return true; }
  bool IsReady() const override { return router_->IsReady(); }
  ServerMetadata GetServerMetadata() const override { return router_->GetServerMetadata(); }
  StatusOr<ModelMetadata> GetModelMetadata(const std::string& name,
                                           const std::string& version) const override {
    return router_->GetModelMetadata(name, version);
  }
  StatusOr<bool> IsModelReady(const std::string& name, const std::string& version) const override {
    return router_->IsModelReady(name, version);
  }
  void Infer(InferenceRequest request, InferCallback done) override {
    router_->Infer(std::move(request), std::move(done));
  }
  StatusOr<std::vector<ModelStatistics>> GetModelStatistics(
      const std::string& name, const std::string& version) const override {
    return router_->GetModelStatistics(name, version);
  }
  StatusOr<ModelConfiguration> GetModelConfiguration(const std::string& name,
                                                     const std::string& version) const override {
    return router_->GetModelConfiguration(name, version);
  }
  std::vector<RepositoryEntry> RepositoryIndex(bool ready_only) const override {
    return router_->RepositoryIndex(ready_only);
  }
  Status LoadModel(const std::string& name) override { return router_->LoadModel(name); }
  Status UnloadModel(const std::string& name) override { return router_->UnloadModel(name); }
  Status RegisterModel(RegistrationRequest request) override {
    return router_->RegisterModel(std::move(request));
  }
  StatusOr<RegistrationStatus> GetRegistrationStatus(const std::string& name) const override {
    return router_->GetRegistrationStatus(name);
  }
  std::vector<DecisionRecord> RecentDecisions(size_t limit) const override {
    return router_->RecentDecisions(limit);
  }
  std::vector<TaskDescription> ListTasks(const Caller& caller) const override {
    return router_->ListTasks(caller);
  }
  StatusOr<TaskDescription> DescribeTask(const std::string& task,
                                         const Caller& caller) const override {
    return router_->DescribeTask(task, caller);
  }
  std::shared_ptr<const cluster::ClusterState> ClusterView() const override {
    return router_->ClusterView();
  }
  PriceList Prices() const override { return router_->Prices(); }
  StatusOr<RolloutView> ChangeRollout(const RolloutChange& change, const Caller& caller) override {
    return router_->ChangeRollout(change, caller);
  }
  StatusOr<RolloutView> GetRollout(const std::string& model, const Caller& caller) const override {
    return router_->GetRollout(model, caller);
  }
  std::vector<DecisionRecord> RecentActions(size_t limit) const override {
    return router_->RecentActions(limit);
  }
  std::map<std::string, int64_t> ControlActionTotals() const override {
    return router_->ControlActionTotals();
  }
  // Installs profiled variants of a published model version (tests).
  Status SetVariantProfiles(const std::string& name, int64_t version,
                            std::vector<VariantProfile> profiles) {
    return catalog_->SetProfiles(name, version, std::move(profiles));
  }

 private:
  const EmbeddedServerOptions options_;
  cluster::InMemoryClusterStateStore store_;
  DecisionLog log_;
  std::unique_ptr<ModelCatalog> catalog_;
  std::unique_ptr<ModelRegistrar> registrar_;
  std::unique_ptr<Worker> worker_;
  std::unique_ptr<LocalWorkerStub> stub_;
  std::unique_ptr<SingleWorkerDirectory> directory_;
  std::unique_ptr<Controller> controller_;
  std::unique_ptr<Router> router_;
  bool stopped_ = false;
  std::atomic<bool> started_{false};
  // Strict readiness (EmbeddedServerOptions::strict_readiness).
  bool ConfiguredInstancesLoaded() const;
};

}  // namespace somm
