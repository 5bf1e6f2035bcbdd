// PrometheusMetrics: ServingMetrics (serving_metrics.h) on prometheus-cpp,
// and the /metrics endpoint that serves it. prometheus-cpp types stay in
// prometheus_metrics.cc.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "common/status.h"
#include "metrics/serving_metrics.h"

namespace prometheus {
class Registry;
}  // namespace prometheus

namespace somm::crypto {
class TlsServerContext;
}  // namespace somm::crypto

namespace somm {

class PrometheusMetrics : public ServingMetrics {
 public:
  PrometheusMetrics();
  ~PrometheusMetrics() override;

  ModelMetrics* ForModel(const std::string& model, const std::string& version) override;
  void RecordDecision(const std::string& outcome) override;
  void AddInflightQueries(int64_t delta) override;
  void AddInflightBytes(int64_t delta) override;
  void SetReplicas(const std::string& model, const std::string& version,
                   const std::string& variant, const std::string& hardware, int64_t replicas,
                   int64_t memory_bytes_each) override;
  void AddInstanceSeconds(double seconds) override;
  void RecordColdStart(const std::string& model) override;
  void RecordControlAction(const std::string& kind) override;
  void RecordPacedWait(double seconds) override;
  void SetMemory(const std::string& device, int64_t used_bytes, int64_t budget_bytes) override;
  void SetRates(const std::string& model, double arrival_qps, double forecast_qps) override;
  void SetSlowdown(double factor) override;
  void RecordResponseCache(const std::string& model, bool hit) override;
  void RecordRollout(const std::string& model, const std::string& event, int percent) override;
  void RecordShed(const std::string& protocol, const std::string& reason) override;
  void SetResponseCache(const std::string& model, int64_t bytes, int64_t entries,
                        int64_t evicted) override;
  // The worker scaler's (controller/worker_scaler.h), in the controller
  // process only: somm_worker_scale_steps_total{direction,reason} and the
  // gauges somm_workers (registered plus being started) and
  // somm_workers_desired.
  void RecordWorkerScaleStep(const std::string& direction, const std::string& reason);
  void SetWorkers(int current, int desired);
  // What records into somm_cluster_view_lag_seconds{process=`process`}: how
  // stale the cluster view of a router or controller gets, from a worker's
  // report written in Redis to the view holding it (the Redis store's
  // SetOnViewLag). The histogram exists, at 0, from this call on.
  std::function<void(double seconds)> ViewLagRecorder(const std::string& process);
  // The Prometheus text exposition of every metric.
  std::string Serialize() const;
  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

  struct Families;  // opaque: defined in prometheus_metrics.cc

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<Families> families_;
  struct ScalerFamilies;  // made on first use, under mu_
  std::unique_ptr<ScalerFamilies> scaler_;
  ScalerFamilies& Scaler();
  struct ViewLagFamily;  // made on first use, under mu_
  std::unique_ptr<ViewLagFamily> view_lag_;
  std::mutex mu_;
  std::map<std::pair<std::string, std::string>, std::unique_ptr<ModelMetrics>> models_;
};

// Who may read /metrics, and what it shows beside the registry (auth/guard.h
// fills both in). Null members: anyone may read; nothing is added.
struct MetricsAccess {
  // Given the Authorization header ("" when absent): OK, or the refusal
  // (UNAUTHENTICATED -> 401, PERMISSION_DENIED -> 403).
  std::function<Status(const std::string& authorization)> authorize;
  // More exposition text (e.g. the per-tenant quota families).
  std::function<std::string()> extra_text;
};

// Serves GET /metrics on its own port (Triton's --metrics-port habit), on
// somm's HTTP server (transport/http/http_server.h), over TLS when `tls` is
// given (the process's REST context: same certificate, same client CA).
class MetricsEndpoint {
 public:
  // port 0 picks a free port; port() tells which.
  // With `ready`, it also answers the KServe v2 health probes (a cluster's
  // workers and controllers have no REST frontend of their own):
  // /v2/health/live 200 while the process runs, /v2/health/ready 200 while
  // ready() holds, else 400.
  static StatusOr<std::unique_ptr<MetricsEndpoint>> Start(const PrometheusMetrics& metrics,
                                                          const std::string& address, int port,
                                                          std::function<bool()> ready = nullptr,
                                                          MetricsAccess access = {},
                                                          std::shared_ptr<const crypto::TlsServerContext> tls = nullptr);
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
