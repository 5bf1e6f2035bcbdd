#include "metrics/prometheus_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <string_view>

#include "transport/http/http_server.h"

namespace somm {
namespace {

// Seconds, Prometheus's base unit, from 10 us to 10 s: a digits query takes
// tens of microseconds, a cold start seconds.
const prometheus::Histogram::BucketBoundaries& SecondBuckets() {
  static const prometheus::Histogram::BucketBoundaries kBuckets = {
      10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3,
      100e-3, 250e-3, 500e-3, 1, 2.5, 10};
  return kBuckets;
}

const prometheus::Histogram::BucketBoundaries& BatchBuckets() {
  static const prometheus::Histogram::BucketBoundaries kBuckets = {1, 2, 4, 8, 16, 32, 64,
                                                                   128, 256, 512, 1024};
  return kBuckets;
}

}  // namespace

struct PrometheusMetrics::Families {
  explicit Families(prometheus::Registry& r)
      : success(prometheus::BuildCounter()
                    .Name("somm_inference_request_success_total")
                    .Help("Queries that completed successfully")
                    .Register(r)),
        failure(prometheus::BuildCounter()
                    .Name("somm_inference_request_failure_total")
                    .Help("Queries that failed, by status code")
                    .Register(r)),
        queue(prometheus::BuildHistogram()
                  .Name("somm_inference_queue_duration_seconds")
                  .Help("Time a query waited in its instance queue")
                  .Register(r)),
        compute(prometheus::BuildHistogram()
                    .Name("somm_inference_compute_duration_seconds")
                    .Help("Backend execution time of the batch that served a query")
                    .Register(r)),
        request(prometheus::BuildHistogram()
                    .Name("somm_inference_request_duration_seconds")
                    .Help("Server time from dispatch to response")
                    .Register(r)),
        batch(prometheus::BuildHistogram()
                  .Name("somm_inference_batch_size")
                  .Help("Samples per executed batch")
                  .Register(r)),
        slo_queries(prometheus::BuildCounter()
                        .Name("somm_slo_queries_total")
                        .Help("Queries that carried a latency SLO")
                        .Register(r)),
        slo_met(prometheus::BuildCounter()
                    .Name("somm_slo_met_queries_total")
                    .Help("Queries answered within their latency SLO")
                    .Register(r)),
        cost_over_max(prometheus::BuildCounter()
                          .Name("somm_cost_over_max_total")
                          .Help("Queries admitted under max_cost whose measured cost ran over "
                                "it (reported at max_cost; the answer says why)")
                          .Register(r)),
        instances(prometheus::BuildGauge()
                      .Name("somm_instances_loaded")
                      .Help("Instances loaded per model version")
                      .Register(r)),
        decisions(prometheus::BuildCounter()
                      .Name("somm_selector_decisions_total")
                      .Help("Routing decisions, by outcome")
                      .Register(r)),
        replicas(prometheus::BuildGauge()
                     .Name("somm_instances")
                     .Help("Loaded replicas per variant and hardware")
                     .Register(r)),
        instance_memory(prometheus::BuildGauge()
                            .Name("somm_instance_memory_bytes")
                            .Help("Memory accounted to the loaded replicas of a variant")
                            .Register(r)),
        instance_seconds(prometheus::BuildCounter()
                             .Name("somm_instance_seconds_total")
                             .Help("Replica-seconds loaded, summed over every instance group")
                             .Register(r)),
        cold_starts(prometheus::BuildCounter()
                        .Name("somm_cold_starts_total")
                        .Help("Queries that waited for an instance to load")
                        .Register(r)),
        cache_hits(prometheus::BuildCounter()
                       .Name("somm_response_cache_hits_total")
                       .Help("Queries answered from the router's response cache")
                       .Register(r)),
        cache_misses(prometheus::BuildCounter()
                         .Name("somm_response_cache_misses_total")
                         .Help("Queries to a model with a response cache that ran the model")
                         .Register(r)),
        cache_evictions(prometheus::BuildCounter()
                            .Name("somm_response_cache_evictions_total")
                            .Help("Answers dropped from the response cache to keep within its "
                                  "bound (least recently used first)")
                            .Register(r)),
        cache_bytes(prometheus::BuildGauge()
                        .Name("somm_response_cache_bytes")
                        .Help("Bytes the response cache holds for a model (its bound: "
                              "model.yaml's response_cache.max_mb)")
                        .Register(r)),
        cache_entries(prometheus::BuildGauge()
                          .Name("somm_response_cache_entries")
                          .Help("Answers the response cache holds for a model")
                          .Register(r)),
        canary_rollbacks(prometheus::BuildCounter()
                             .Name("somm_canary_rollbacks_total")
                             .Help("Canary versions rolled back (by the rollout policy or an "
                                   "operator), per model")
                             .Register(r)),
        canary_promotions(prometheus::BuildCounter()
                              .Name("somm_canary_promotions_total")
                              .Help("Canary versions promoted to all of a model's unversioned "
                                    "queries, per model")
                              .Register(r)),
        canary_percent(prometheus::BuildGauge()
                           .Name("somm_canary_percent")
                           .Help("The share of a model's unversioned queries its canary takes "
                                 "(shadow: is mirrored to it), 0-100")
                           .Register(r)),
        control_actions(prometheus::BuildCounter()
                            .Name("somm_control_actions_total")
                            .Help("Actions the controller carried out, by kind")
                            .Register(r)),
        paced_waits(prometheus::BuildCounter()
                        .Name("somm_background_paced_waits_total")
                        .Help("Background loads that waited for earlier background work's rest "
                              "(--background-duty)")
                        .Register(r)
                        .Add({})),
        paced_seconds(prometheus::BuildCounter()
                          .Name("somm_background_paced_seconds_total")
                          .Help("Seconds background loads waited for the pacer")
                          .Register(r)
                          .Add({})),
        memory_used(prometheus::BuildGauge()
                        .Name("somm_memory_used_bytes")
                        .Help("Memory accounted to loaded instances, per device")
                        .Register(r)),
        memory_budget(prometheus::BuildGauge()
                          .Name("somm_memory_budget_bytes")
                          .Help("Memory budget for instances, per device")
                          .Register(r)),
        arrival_rate(prometheus::BuildGauge()
                         .Name("somm_arrival_rate_qps")
                         .Help("Arrival rate observed in the last control tick")
                         .Register(r)),
        forecast_rate(prometheus::BuildGauge()
                          .Name("somm_forecast_rate_qps")
                          .Help("The autoscaler's forecast arrival rate")
                          .Register(r)),
        slowdown(prometheus::BuildGauge()
                     .Name("somm_profile_slowdown")
                     .Help("Live batch latency over the profiled latency; the controller scales "
                           "profiles by it")
                     .Register(r)
                     .Add({})),
        // Present from the start, at 0: an autoscaler reads a series that
        // exists before the first query.
        inflight(prometheus::BuildGauge()
                     .Name("somm_inflight_queries")
                     .Help("Queries accepted and not yet answered")
                     .Register(r)
                     .Add({})),
        inflight_bytes(prometheus::BuildGauge()
                           .Name("somm_inflight_bytes")
                           .Help("Bytes of request bodies and decoded tensors held by requests "
                                 "in flight (--max-inflight-bytes bounds them)")
                           .Register(r)
                           .Add({})),
        shed(prometheus::BuildCounter()
                 .Name("somm_shed_total")
                 .Help("Requests refused before their body was decoded (HTTP 429, gRPC "
                       "RESOURCE_EXHAUSTED), by protocol and reason (inflight, bytes)")
                 .Register(r)),
        instance_seconds_total(instance_seconds.Add({})) {
    // Present from the start, at 0: an alert on its rate needs the series.
    for (const char* protocol : {"rest", "grpc"}) {
      for (const char* reason : {"inflight", "bytes"}) {
        shed.Add({{"protocol", protocol}, {"reason", reason}});
      }
    }
  }

  prometheus::Family<prometheus::Counter>& success;
  prometheus::Family<prometheus::Counter>& failure;
  prometheus::Family<prometheus::Histogram>& queue;
  prometheus::Family<prometheus::Histogram>& compute;
  prometheus::Family<prometheus::Histogram>& request;
  prometheus::Family<prometheus::Histogram>& batch;
  prometheus::Family<prometheus::Counter>& slo_queries;
  prometheus::Family<prometheus::Counter>& slo_met;
  prometheus::Family<prometheus::Counter>& cost_over_max;
  prometheus::Family<prometheus::Gauge>& instances;
  prometheus::Family<prometheus::Counter>& decisions;
  prometheus::Family<prometheus::Gauge>& replicas;
  prometheus::Family<prometheus::Gauge>& instance_memory;
  prometheus::Family<prometheus::Counter>& instance_seconds;
  prometheus::Family<prometheus::Counter>& cold_starts;
  prometheus::Family<prometheus::Counter>& cache_hits;
  prometheus::Family<prometheus::Counter>& cache_misses;
  prometheus::Family<prometheus::Counter>& cache_evictions;
  prometheus::Family<prometheus::Gauge>& cache_bytes;
  prometheus::Family<prometheus::Gauge>& cache_entries;
  prometheus::Family<prometheus::Counter>& canary_rollbacks;
  prometheus::Family<prometheus::Counter>& canary_promotions;
  prometheus::Family<prometheus::Gauge>& canary_percent;
  prometheus::Family<prometheus::Counter>& control_actions;
  prometheus::Counter& paced_waits;
  prometheus::Counter& paced_seconds;
  prometheus::Family<prometheus::Gauge>& memory_used;
  prometheus::Family<prometheus::Gauge>& memory_budget;
  prometheus::Family<prometheus::Gauge>& arrival_rate;
  prometheus::Family<prometheus::Gauge>& forecast_rate;
  prometheus::Gauge& slowdown;
  prometheus::Gauge& inflight;
  prometheus::Gauge& inflight_bytes;
  prometheus::Family<prometheus::Counter>& shed;
  prometheus::Counter& instance_seconds_total;
};

namespace {

class PrometheusModelMetrics : public ModelMetrics {
 public:
  PrometheusModelMetrics(PrometheusMetrics::Families& f, prometheus::Labels labels)
      : families_(f),
        labels_(labels),
        success_(f.success.Add(labels)),
        queue_(f.queue.Add(labels, SecondBuckets())),
        compute_(f.compute.Add(labels, SecondBuckets())),
        request_(f.request.Add(labels, SecondBuckets())),
        batch_(f.batch.Add(labels, BatchBuckets())),
        slo_queries_(f.slo_queries.Add(labels)),
        slo_met_(f.slo_met.Add(labels)),
        cost_over_max_(f.cost_over_max.Add(labels)),
        instances_(f.instances.Add(labels)) {}

  void RecordSuccess(double queue_us, double compute_us, double total_us) override {
    success_.Increment();
    queue_.Observe(queue_us * 1e-6);
    compute_.Observe(compute_us * 1e-6);
    request_.Observe(total_us * 1e-6);
  }
  void RecordFailure(const std::string& reason) override {
    auto labels = labels_;
    labels["reason"] = reason;
    families_.failure.Add(labels).Increment();  // Add returns the existing child
  }
  void RecordBatch(int64_t batch_size) override { batch_.Observe(static_cast<double>(batch_size)); }
  void SetInstancesLoaded(int64_t count) override { instances_.Set(static_cast<double>(count)); }
  void RecordSlo(bool met) override {
    slo_queries_.Increment();
    if (met) slo_met_.Increment();
  }
  void RecordCostOverCeiling() override { cost_over_max_.Increment(); }

 private:
  PrometheusMetrics::Families& families_;
  const prometheus::Labels labels_;
  prometheus::Counter& success_;
  prometheus::Histogram& queue_;
  prometheus::Histogram& compute_;
  prometheus::Histogram& request_;
  prometheus::Histogram& batch_;
  prometheus::Counter& slo_queries_;
  prometheus::Counter& slo_met_;
  prometheus::Counter& cost_over_max_;
  prometheus::Gauge& instances_;
};

}  // namespace

PrometheusMetrics::PrometheusMetrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      families_(std::make_unique<Families>(*registry_)) {}

struct PrometheusMetrics::ScalerFamilies {
  explicit ScalerFamilies(prometheus::Registry& r)
      : steps(prometheus::BuildCounter()
                  .Name("somm_worker_scale_steps_total")
                  .Help("Workers the worker scaler asked for (out) or drained (in), by reason")
                  .Register(r)),
        workers(prometheus::BuildGauge()
                    .Name("somm_workers")
                    .Help("Workers registered plus those being started")
                    .Register(r)
                    .Add({})),
        desired(prometheus::BuildGauge()
                    .Name("somm_workers_desired")
                    .Help("Workers the worker scaler wants")
                    .Register(r)
                    .Add({})) {}
  prometheus::Family<prometheus::Counter>& steps;
  prometheus::Gauge& workers;
  prometheus::Gauge& desired;
};

struct PrometheusMetrics::ViewLagFamily {
  explicit ViewLagFamily(prometheus::Registry& r)
      : lag(prometheus::BuildHistogram()
                .Name("somm_cluster_view_lag_seconds")
                .Help("From a worker's report written in Redis to this process's view holding it")
                .Register(r)) {}
  prometheus::Family<prometheus::Histogram>& lag;
};

PrometheusMetrics::~PrometheusMetrics() = default;

PrometheusMetrics::ScalerFamilies& PrometheusMetrics::Scaler() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!scaler_) scaler_ = std::make_unique<ScalerFamilies>(*registry_);
  return *scaler_;
}

void PrometheusMetrics::RecordWorkerScaleStep(const std::string& direction,
                                              const std::string& reason) {
  Scaler().steps.Add({{"direction", direction}, {"reason", reason}}).Increment();
}

void PrometheusMetrics::SetWorkers(int current, int desired) {
  ScalerFamilies& f = Scaler();
  f.workers.Set(current);
  f.desired.Set(desired);
}

std::function<void(double seconds)> PrometheusMetrics::ViewLagRecorder(const std::string& process) {
  // From a quarter of a millisecond (a view on the same host as Redis) to a
  // second (a lost notice, caught by the re-poll).
  static const prometheus::Histogram::BucketBoundaries kBuckets = {
      250e-6, 500e-6, 1e-3, 2e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 1};
  prometheus::Histogram* lag;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!view_lag_) view_lag_ = std::make_unique<ViewLagFamily>(*registry_);
    lag = &view_lag_->lag.Add({{"process", process}}, kBuckets);
  }
  return [lag](double seconds) { lag->Observe(seconds); };
}

ModelMetrics* PrometheusMetrics::ForModel(const std::string& model, const std::string& version) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = models_[{model, version}];
  if (!slot) {
    slot = std::make_unique<PrometheusModelMetrics>(
        *families_, prometheus::Labels{{"model", model}, {"version", version}});
    // The model's cold-start counter exists at 0 from its first metrics on,
    // so rates and alerts over it work before the first cold start.
    families_->cold_starts.Add({{"model", model}});
    // So are its rollout's (the alert SommCanaryRolledBack): a model with
    // no canary has none to promote or roll back, and its canary's share is 0.
    families_->canary_rollbacks.Add({{"model", model}});
    families_->canary_promotions.Add({{"model", model}});
    families_->canary_percent.Add({{"model", model}});
  }
  return slot.get();
}

void PrometheusMetrics::RecordDecision(const std::string& outcome) {
  families_->decisions.Add({{"outcome", outcome}}).Increment();
}

void PrometheusMetrics::SetReplicas(const std::string& model, const std::string& version,
                                 const std::string& variant, const std::string& hardware,
                                 int64_t replicas, int64_t memory_bytes_each) {
  const prometheus::Labels labels = {
      {"model", model}, {"version", version}, {"variant", variant}, {"hardware", hardware}};
  families_->replicas.Add(labels).Set(static_cast<double>(replicas));
  families_->instance_memory.Add(labels).Set(static_cast<double>(replicas * memory_bytes_each));
}

void PrometheusMetrics::AddInstanceSeconds(double seconds) {
  if (seconds > 0) families_->instance_seconds_total.Increment(seconds);
}

void PrometheusMetrics::RecordColdStart(const std::string& model) {
  families_->cold_starts.Add({{"model", model}}).Increment();
}

void PrometheusMetrics::RecordResponseCache(const std::string& model, bool hit) {
  (hit ? families_->cache_hits : families_->cache_misses).Add({{"model", model}}).Increment();
}

void PrometheusMetrics::SetResponseCache(const std::string& model, int64_t bytes, int64_t entries,
                                         int64_t evicted) {
  families_->cache_bytes.Add({{"model", model}}).Set(static_cast<double>(bytes));
  families_->cache_entries.Add({{"model", model}}).Set(static_cast<double>(entries));
  auto& evictions = families_->cache_evictions.Add({{"model", model}});
  if (evicted > 0) evictions.Increment(static_cast<double>(evicted));
}

void PrometheusMetrics::RecordRollout(const std::string& model, const std::string& event,
                                      int percent) {
  const prometheus::Labels labels = {{"model", model}};
  auto& rollbacks = families_->canary_rollbacks.Add(labels);
  if (event == "rolled_back") rollbacks.Increment();
  auto& promotions = families_->canary_promotions.Add(labels);
  if (event == "promoted") promotions.Increment();
  families_->canary_percent.Add(labels).Set(percent);
}

void PrometheusMetrics::RecordShed(const std::string& protocol, const std::string& reason) {
  families_->shed.Add({{"protocol", protocol}, {"reason", reason}}).Increment();
}

void PrometheusMetrics::RecordControlAction(const std::string& kind) {
  families_->control_actions.Add({{"kind", kind}}).Increment();
}

void PrometheusMetrics::RecordPacedWait(double seconds) {
  families_->paced_waits.Increment();
  if (seconds > 0) families_->paced_seconds.Increment(seconds);
}

void PrometheusMetrics::SetMemory(const std::string& device, int64_t used_bytes,
                               int64_t budget_bytes) {
  families_->memory_used.Add({{"device", device}}).Set(static_cast<double>(used_bytes));
  families_->memory_budget.Add({{"device", device}}).Set(static_cast<double>(budget_bytes));
}

void PrometheusMetrics::SetRates(const std::string& model, double arrival_qps, double forecast_qps) {
  families_->arrival_rate.Add({{"model", model}}).Set(arrival_qps);
  families_->forecast_rate.Add({{"model", model}}).Set(forecast_qps);
}

void PrometheusMetrics::SetSlowdown(double factor) { families_->slowdown.Set(factor); }

void PrometheusMetrics::AddInflightQueries(int64_t delta) {
  families_->inflight.Increment(static_cast<double>(delta));
}

void PrometheusMetrics::AddInflightBytes(int64_t delta) {
  families_->inflight_bytes.Increment(static_cast<double>(delta));
}

std::string PrometheusMetrics::Serialize() const {
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

struct MetricsEndpoint::Impl {
  std::unique_ptr<http::Server> server;
};

MetricsEndpoint::MetricsEndpoint(std::unique_ptr<Impl> impl, int port)
    : impl_(std::move(impl)), port_(port) {}

MetricsEndpoint::~MetricsEndpoint() { Shutdown(); }

StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(
    const PrometheusMetrics& metrics, const std::string& address, int port,
    std::function<bool()> ready, MetricsAccess access,
    std::shared_ptr<const crypto::TlsServerContext> tls) {
  // somm's own HTTP server (not an HTTP library's): the same TLS layer as
  // the REST port, and OpenSSL stays in crypto/. Handlers run on its one I/O
  // thread; serializing the registry does not block.
  auto handler = [&metrics, access, ready](http::Request request, http::Responder responder) {
    http::Response res;
    const std::string& path = request.head.path;
    if (request.head.method != "GET" && request.head.method != "HEAD") {
      res.status = 405;
    } else if (path == "/metrics") {
      const std::string* header = request.head.Find("authorization");
      const Status allowed =
          access.authorize ? access.authorize(header != nullptr ? *header : "") : Status::Ok();
      if (!allowed.ok()) {
        res.status = allowed.code() == StatusCode::kUnauthenticated   ? 401
                     : allowed.code() == StatusCode::kPermissionDenied ? 403
                                                                       : 429;
        if (res.status == 401) res.headers.emplace_back("WWW-Authenticate", "Bearer");
        res.headers.emplace_back("Content-Type", "text/plain");
        res.body = allowed.message() + "\n";
      } else {
        res.body = metrics.Serialize();
        if (access.extra_text) res.body += access.extra_text();
        res.headers.emplace_back("Content-Type", "text/plain; version=0.0.4");
      }
    } else if (ready && path == "/v2/health/live") {
      res.status = 200;
    } else if (ready && path == "/v2/health/ready") {
      res.status = ready() ? 200 : 400;
    } else {
      res.status = 404;
    }
    responder.Send(std::move(res));
  };
  auto error = [](int status, std::string_view message) {
    http::Response res;
    res.status = status;
    res.headers.emplace_back("Content-Type", "text/plain");
    res.body = std::string(message) + "\n";
    return res;
  };
  http::ServerOptions options;
  options.address = address;
  options.port = port;
  options.io_threads = 1;
  options.max_body_bytes = 64 << 10;  // scrapes and probes send no body
  options.max_connections = 256;
  options.tls = std::move(tls);
  auto server = http::Server::Start(std::move(options), std::move(handler), std::move(error));
  if (!server.ok()) {
    return Unavailable("metrics endpoint: cannot listen on " + address + ":" +
                       std::to_string(port) + ": " + server.status().message());
  }
  auto impl = std::make_unique<Impl>();
  impl->server = std::move(*server);
  const int bound = impl->server->port();
  return std::unique_ptr<MetricsEndpoint>(new MetricsEndpoint(std::move(impl), bound));
}

void MetricsEndpoint::Shutdown() {
  if (impl_ && impl_->server) impl_->server->Shutdown();
}

}  // namespace somm
