// ServingMetrics: somm's Prometheus metrics, and the /metrics endpoint.
//
// Callers record through ModelMetrics handles; prometheus-cpp types stay in
// serving_metrics.cc. Handles are created on first use for a (model, version)
// pair and live as long as the ServingMetrics, so batcher threads may keep
// raw pointers to them. Every method is thread-safe.
//
// Families (all labelled model, version):
//   somm_inference_request_success_total, somm_inference_request_failure_total{reason},
//   somm_inference_queue_duration_us, somm_inference_compute_duration_us,
//   somm_inference_request_duration_us (histograms, per query),
//   somm_inference_batch_size (histogram, per executed batch),
//   somm_instances_loaded (gauge); and somm_selector_decisions_total{outcome}.
// The managed runtime's families (see docs/managed.md):
//   somm_instances{model,version,variant,hardware} (gauge, loaded replicas),
//   somm_instance_memory_bytes{model,version,variant,hardware} (gauge, all replicas),
//   somm_instance_seconds_total (replica-seconds loaded, all groups),
//   somm_cold_starts_total{model} (queries that waited for a load),
//   somm_control_actions_total{kind} (load, unload, evict, set_replicas),
//   somm_memory_used_bytes{device}, somm_memory_budget_bytes{device},
//   somm_arrival_rate_qps{model} and somm_forecast_rate_qps{model} (gauges),
//   somm_background_paced_waits_total and somm_background_paced_seconds_total
//   (background loads that waited for the pacer, and how long in all).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "common/status.h"

namespace prometheus {
class Registry;
}  // namespace prometheus

namespace somm {

class ModelMetrics {
 public:
  virtual ~ModelMetrics() = default;
  virtual void RecordSuccess(double queue_us, double compute_us, double total_us) = 0;
  // `reason` is a Status code name, e.g. RESOURCE_EXHAUSTED.
  virtual void RecordFailure(const std::string& reason) = 0;
  virtual void RecordBatch(int64_t batch_size) = 0;
  virtual void SetInstancesLoaded(int64_t count) = 0;
};

class ServingMetrics {
 public:
  ServingMetrics();
  ~ServingMetrics();

  ModelMetrics* ForModel(const std::string& model, const std::string& version);
  // somm_selector_decisions_total{outcome}: loaded, load, best_effort,
  // explicit, default, rejected.
  void RecordDecision(const std::string& outcome);
  // The managed runtime's signals (families listed above).
  void SetReplicas(const std::string& model, const std::string& version,
                   const std::string& variant, const std::string& hardware, int64_t replicas,
                   int64_t memory_bytes_each);
  void AddInstanceSeconds(double seconds);
  void RecordColdStart(const std::string& model);
  void RecordControlAction(const std::string& kind);
  // A background load waited `seconds` for the pacer (--background-duty).
  void RecordPacedWait(double seconds);
  void SetMemory(const std::string& device, int64_t used_bytes, int64_t budget_bytes);
  void SetRates(const std::string& model, double arrival_qps, double forecast_qps);
  // somm_profile_slowdown: live batch latency over the profiled one.
  void SetSlowdown(double factor);
  // The Prometheus text exposition of every metric.
  std::string Serialize() const;
  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

  struct Families;  // opaque: defined in serving_metrics.cc

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<Families> families_;
  std::mutex mu_;
  std::map<std::pair<std::string, std::string>, std::unique_ptr<ModelMetrics>> models_;
};

// Serves GET /metrics on its own port (Triton's --metrics-port habit).
class MetricsEndpoint {
 public:
  // port 0 picks a free port; port() tells which.
  static StatusOr<std::unique_ptr<MetricsEndpoint>> Start(const ServingMetrics& metrics,
                                                          const std::string& address, int port);
  ~MetricsEndpoint();
  int port() const { return port_; }
  void Shutdown();

 private:
  struct Impl;
  explicit MetricsEndpoint(std::unique_ptr<Impl> impl, int port);
  std::unique_ptr<Impl> impl_;
  int port_;
};

}  // namespace somm
