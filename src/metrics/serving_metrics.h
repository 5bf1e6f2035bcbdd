// ServingMetrics: what the serving core records, as an interface, so that
// the core builds and is tested without prometheus-cpp (and under TSan).
// PrometheusMetrics (prometheus_metrics.h) is the implementation somm serves
// on /metrics; NullServingMetrics (below) records nothing.
//
// Callers record through ModelMetrics handles. Handles are created on first
// use for a (model, version) pair and live as long as the ServingMetrics, so
// batcher threads may keep raw pointers to them. Every method is thread-safe.
//
// Families (all labelled model, version):
//   somm_inference_request_success_total, somm_inference_request_failure_total{reason},
//   somm_inference_queue_duration_seconds, somm_inference_compute_duration_seconds,
//   somm_inference_request_duration_seconds (histograms, per query; recorded
//   in microseconds, exposed in seconds, Prometheus's base unit),
//   somm_inference_batch_size (histogram, per executed batch),
//   somm_instances_loaded (gauge); and somm_selector_decisions_total{outcome}.
// somm_slo_queries_total and somm_slo_met_queries_total{model,version}: the
//   queries that carried a latency SLO, and those answered within it (SLO
//   attainment = met / queries; the dashboard and the alert rules use them).
// somm_inflight_queries (gauge, no labels): queries a router accepted and has
//   not answered yet, queued and executing alike, whatever their model; the
//   per-pod metric a HorizontalPodAutoscaler scales routers on (deploy/).
// somm_shed_total{protocol,reason} (counter): requests a frontend refused
//   before decoding them: protocol rest or grpc, reason inflight (the
//   server's --max-inflight was reached, serving/inflight_limit.h) or bytes
//   (its --max-inflight-bytes would be passed, serving/byte_budget.h).
// somm_inflight_bytes (gauge, no labels): the bytes of request bodies and
//   decoded tensors requests hold now (serving/byte_budget.h).
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

namespace somm {

class ModelMetrics {
 public:
  virtual ~ModelMetrics() = default;
  virtual void RecordSuccess(double queue_us, double compute_us, double total_us) = 0;
  // `reason` is a Status code name, e.g. RESOURCE_EXHAUSTED.
  virtual void RecordFailure(const std::string& reason) = 0;
  virtual void RecordBatch(int64_t batch_size) = 0;
  virtual void SetInstancesLoaded(int64_t count) = 0;
  // A query that carried a latency SLO was answered (or failed): `met` when
  // it was answered within the SLO. A default, so that fakes need not care.
  virtual void RecordSlo(bool met) { (void)met; }
  // A query admitted under max_cost whose measured charge ran over it (its
  // answer is reported at the ceiling and says why: somm_cost_over_reason).
  // somm_cost_over_max_total. A default, so that fakes need not care.
  virtual void RecordCostOverCeiling() {}
};

class ServingMetrics {
 public:
  virtual ~ServingMetrics() = default;
  virtual ModelMetrics* ForModel(const std::string& model, const std::string& version) = 0;
  // somm_selector_decisions_total{outcome}: loaded, load, best_effort,
  // explicit, default, rejected.
  virtual void RecordDecision(const std::string& outcome) = 0;
  // somm_inflight_queries += delta: +1 when a query is accepted, -1 when it
  // is answered. A delta, not a value, so that two threads cannot leave the
  // gauge at a stale count.
  virtual void AddInflightQueries(int64_t delta) = 0;
  // The managed runtime's signals (families listed above).
  virtual void SetReplicas(const std::string& model, const std::string& version,
                           const std::string& variant, const std::string& hardware,
                           int64_t replicas, int64_t memory_bytes_each) = 0;
  virtual void AddInstanceSeconds(double seconds) = 0;
  virtual void RecordColdStart(const std::string& model) = 0;
  virtual void RecordControlAction(const std::string& kind) = 0;
  // A background load waited `seconds` for the pacer (--background-duty).
  virtual void RecordPacedWait(double seconds) = 0;
  virtual void SetMemory(const std::string& device, int64_t used_bytes, int64_t budget_bytes) = 0;
  virtual void SetRates(const std::string& model, double arrival_qps, double forecast_qps) = 0;
  // somm_profile_slowdown: live batch latency over the profiled one.
  virtual void SetSlowdown(double factor) = 0;
  // The router's response cache (docs/lifecycle.md), per model:
  // somm_response_cache_{hits,misses,evictions}_total and what it holds now,
  // somm_response_cache_{bytes,entries}. Defaults: fakes need not care.
  virtual void RecordResponseCache(const std::string& model, bool hit) { (void)model, (void)hit; }
  virtual void SetResponseCache(const std::string& model, int64_t bytes, int64_t entries,
                                int64_t evicted) {
    (void)model, (void)bytes, (void)entries, (void)evicted;
  }
  // A request refused before it was decoded: `protocol` is rest or grpc,
  // `reason` why (inflight, bytes). A default, so that fakes need not care.
  virtual void RecordShed(const std::string& protocol, const std::string& reason) {
    (void)protocol, (void)reason;
  }
  // somm_inflight_bytes += delta (serving/byte_budget.h). A default, so
  // that fakes need not care.
  virtual void AddInflightBytes(int64_t delta) { (void)delta; }
  // A rollout step of `model` (rollout/rollout.h): `event` is started, set,
  // advanced, promoted or rolled_back; the canary's share after it.
  // somm_canary_{rollbacks,promotions}_total and somm_canary_percent.
  virtual void RecordRollout(const std::string& model, const std::string& event, int percent) {
    (void)model, (void)event, (void)percent;
  }
};

// Records nothing: for tests and tools that serve no /metrics.
class NullServingMetrics : public ServingMetrics {
 public:
  ModelMetrics* ForModel(const std::string&, const std::string&) override { return &model_; }
  void RecordDecision(const std::string&) override {}
  void AddInflightQueries(int64_t) override {}
  void SetReplicas(const std::string&, const std::string&, const std::string&, const std::string&,
                   int64_t, int64_t) override {}
  void AddInstanceSeconds(double) override {}
  void RecordColdStart(const std::string&) override {}
  void RecordControlAction(const std::string&) override {}
  void RecordPacedWait(double) override {}
  void SetMemory(const std::string&, int64_t, int64_t) override {}
  void SetRates(const std::string&, double, double) override {}
  void SetSlowdown(double) override {}

 private:
  class NullModel : public ModelMetrics {
   public:
    void RecordSuccess(double, double, double) override {}
    void RecordFailure(const std::string&) override {}
    void RecordBatch(int64_t) override {}
    void SetInstancesLoaded(int64_t) override {}
  };
  NullModel model_;
};

}  // namespace somm
