// ModelManager: the embedded InferenceServer. It owns the models of one model
// repository, their loaded versions, each version's variants (with their
// profiles) and the instance groups those variants run in, and it routes
// queries to them.
//
// Routing (see docs/architecture.md):
//   * a model named without SLOs runs on the version's configured instances
//     (the variant as registered, on the configured threads);
//   * a model with SLOs in the request parameters (latency_slo_ms,
//     min_accuracy, max_cost, best_effort), a task (/v2/tasks/{task}/infer),
//     or an exact variant ("model:version:variant[@hardware]") goes through
//     the selector (selector/selector.h) over the profiled variants; a chosen
//     variant that is not loaded is loaded on demand.
//   Every response says what ran and why (somm_* response parameters), and
//   every selector decision goes to the decision log and the metrics.
//
// Lifecycle: Start() scans the repository and loads every model; a broken
// model is recorded as UNAVAILABLE with the reason and does not stop the
// others. LoadModel() (re)loads one model: the new versions come up first,
// then replace the old, which finish their queued queries before they are
// destroyed. RegisterModel() validates a new model synchronously, moves it
// into the repository and loads it; variant generation and profiling then
// run on a background thread (model_registration.cc). Shutdown() refuses new
// queries and drains every queue.
//
// Thread-safety: all methods may be called concurrently. Queries hold no lock
// while they wait; the models map is guarded by a shared mutex.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/duty_cycle_pacer.h"
#include "metrics/serving_metrics.h"
#include "runtime/backend.h"
#include "selector/selector.h"
#include "serving/decision_log.h"
#include "serving/inference_server.h"

namespace somm {

struct ModelManagerOptions {
  std::string repository_path;
  std::string server_name = "somm";
  std::string server_version = "0.1.0";
  // Device every configured instance is placed on.
  Device device;
  // Hardware configurations variants are profiled on and may be placed on.
  // Empty = one thread, every core, and each GPU the backend reports.
  std::vector<HardwareConfig> hardware;
  // Generate and profile variants for repository models that have none yet
  // (registered models always get them).
  bool auto_variants = true;
  // A variant more than this below the as-registered accuracy is unusable.
  double accuracy_tolerance = 0.02;
  // Where tools/quantize_dynamic.py lives (int8 variants).
  std::string tools_dir;
  PriceList prices;
  size_t decision_log_size = 1000;

  // The managed runtime (docs/managed.md). On: a control loop ticks every
  // control_tick_ms and carries out the autoscaler's actions (replicas,
  // upgrades and downgrades, preloads, idle unloads); loads make room by
  // cost-aware eviction within the memory budget; plain queries reload an
  // evicted model on demand. Off (static provisioning): the configured
  // instances are all there is; the selector only picks loaded variants
  // (an exact variant named in the request still loads on demand).
  bool managed = true;
  int control_tick_ms = 1000;
  // Memory instances may use on the CPU; 0 = the default fraction of the
  // memory available at start (control/placement.h).
  int64_t memory_budget_bytes = 0;
  // Seconds without a query after which the controller unloads a model's
  // instances (0 = the autoscaler's default).
  double idle_unload_s = 0;
  // Paces background loads (common/duty_cycle_pacer.h, --background-duty):
  // a load no query waits for first waits out the rest that earlier
  // background work earned, before it takes any lock, so a query's load
  // never queues behind that rest. The backend records the work (the same
  // pacer goes into TorchBackendOptions). Null: unpaced.
  std::shared_ptr<DutyCyclePacer> background_pacer;
};

class ModelManager : public InferenceServer {
 public:
  // `backend` and `metrics` must outlive the manager.
  ModelManager(ModelManagerOptions options, Backend& backend, ServingMetrics& metrics);
  ~ModelManager() override;

  // Loads every model in the repository. Fails only if the repository itself
  // cannot be read.
  Status Start();
  void Shutdown();

  bool IsLive() const override { return true; }
  bool IsReady() const override { return !shutting_down_.load(); }
  ServerMetadata GetServerMetadata() const override;
  StatusOr<ModelMetadata> GetModelMetadata(const std::string& name,
                                           const std::string& version) const override;
  StatusOr<bool> IsModelReady(const std::string& name, const std::string& version) const override;
  void Infer(InferenceRequest request, InferCallback done) override;
  std::vector<RepositoryEntry> RepositoryIndex(bool ready_only) const override;
  Status LoadModel(const std::string& name) override;
  Status UnloadModel(const std::string& name) override;
  Status RegisterModel(RegistrationRequest request) override;
  StatusOr<RegistrationStatus> GetRegistrationStatus(const std::string& name) const override;
  std::vector<DecisionRecord> RecentDecisions(size_t limit) const override;

  // Total queries waiting in all queues (for tests and status).
  int64_t QueuedQueries() const;
  // Installs profiled variants of a loaded model version (the registration
  // job calls this; so can tests).
  Status SetVariantProfiles(const std::string& name, int64_t version,
                            std::vector<VariantProfile> profiles);

  struct LoadedVersion;  // opaque: defined in model_manager_internal.h
  struct ModelEntry;
  struct Route;

 private:
  StatusOr<std::shared_ptr<LoadedVersion>> Resolve(const std::string& name,
                                                   const std::string& version) const;
  std::shared_ptr<ModelEntry> BuildModel(const std::string& name);
  StatusOr<std::shared_ptr<LoadedVersion>> LoadVersion(const ModelConfig& config, int64_t version,
                                                       const std::string& path);
  std::vector<std::string> ListModelFolders() const;
  std::string VariantsRoot() const { return options_.repository_path + "/.somm/variants"; }

  // model_selection.cc
  StatusOr<Route> RouteQuery(const InferenceRequest& request);
  StatusOr<Route> RouteExplicitVariant(const std::string& name, const std::string& version);
  StatusOr<Route> RouteWithSelector(const InferenceRequest& request,
                                    std::vector<std::shared_ptr<LoadedVersion>> versions,
                                    const std::string& target);
  void RecordDemand(LoadedVersion& lv, const Requirements& req);
  void LogDecision(DecisionRecord record);

  // model_control.cc: the managed runtime's mechanism.
  // The group of `variant` on `hw`, loading it (with `replicas`) if absent.
  // Loading makes room first (evicting by the placement policy when managed)
  // and is logged with `reason`; *cold is set when a load happened.
  StatusOr<std::shared_ptr<class InstanceGroup>> EnsureGroup(LoadedVersion& lv,
                                                            const std::string& variant,
                                                            const HardwareConfig& hw, int replicas,
                                                            const std::string& reason,
                                                            bool on_critical_path,
                                                            bool* cold = nullptr);
  // Evicts (by the placement policy) until `bytes` more fit in the budget;
  // the group labelled `protect` is never a victim.
  Status MakeRoom(int64_t bytes, const std::string& for_what, const std::string& protect = "");
  Status SetGroupReplicas(LoadedVersion& lv, const std::string& variant, const HardwareConfig& hw,
                          int replicas, const std::string& reason);
  Status UnloadGroup(LoadedVersion& lv, const std::string& variant, const HardwareConfig& hw,
                     const std::string& reason, bool only_if_idle);
  struct ControlSnapshot;
  ControlSnapshot Snapshot(double tick_s);
  void ControlLoop();
  void RecordControl(const std::string& kind, const std::string& model, const std::string& group,
                     const std::string& hardware, const std::string& reason);
  void PublishReplicaMetrics(LoadedVersion& lv);
  int64_t MemoryBudgetBytes() const { return memory_budget_bytes_; }

  // model_registration.cc
  void StartVariantJob(const ModelConfig& config, int64_t version);
  void RunVariantJob(ModelConfig config, int64_t version);

  const ModelManagerOptions options_;
  Backend& backend_;
  ServingMetrics& metrics_;
  std::atomic<bool> shutting_down_{false};
  std::atomic<bool> started_{false};  // the repository's initial loads are done
  std::mutex load_mu_;  // serialises Load/Unload so two reloads never interleave
  mutable std::shared_mutex mu_;
  std::map<std::string, std::shared_ptr<ModelEntry>> models_;  // guarded by mu_
  DecisionLog decisions_;

  int64_t memory_budget_bytes_ = 0;
  // Serialises loads, evictions and replica changes, so two loads never
  // count the same free memory. Taken before any LoadedVersion lock.
  std::mutex placement_mu_;
  // Memory measured when an unprofiled variant loaded ("file@cpu2" -> bytes).
  std::map<std::string, int64_t> measured_bytes_;  // guarded by placement_mu_
  std::mutex control_mu_;  // the control loop's sleep
  std::condition_variable control_cv_;
  bool control_stop_ = false;  // guarded by control_mu_
  std::thread control_thread_;

  mutable std::mutex jobs_mu_;
  std::map<std::string, RegistrationStatus> jobs_;  // guarded by jobs_mu_
  std::vector<std::thread> job_threads_;            // guarded by jobs_mu_
};

}  // namespace somm
