// ServingFrontends: the user-facing ports of a serving process, mounted in
// one place for `somm serve` (serve_node.h) and `somm router`
// (router_node.h): the gRPC and REST frontends under one InflightLimit and
// one ByteBudget (an overloaded process sheds whichever protocol the excess
// comes by), both asking the guard; on the REST port the browser origin
// policy, the operator's views and the dashboard's pages
// (dashboard/operator_routes.h) and the batch jobs API
// (batch/batch_routes.h); and the Prometheus port, whose readers the guard
// admits. A change to how a serving process's frontends are wired is made
// here.
//
// Lifecycle: Start() binds the gRPC port, calls `before_rest` (a router
// moves its workers' answers onto the gRPC queue before any query can
// come), then binds the REST and the metrics ports; a port that cannot be
// bound fails the start, and what had started stops. StopFrontends() stops
// accepting and waits for the calls in flight (REST, then gRPC, for at most
// `exit_timeout` in all); StopMetrics() closes the metrics port; the destructor does both.
// Everything passed by reference must outlive the frontends. One thread
// starts and stops them.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "api/inference_server.h"
#include "auth/guard.h"
#include "batch/batch_jobs.h"
#include "common/status.h"
#include "crypto/tls_files.h"
#include "crypto/tls_stream.h"
#include "frontend/grpc/grpc_server.h"
#include "frontend/http/http_frontend.h"
#include "metrics/prometheus_metrics.h"
#include "node/node_options.h"
#include "serving/byte_budget.h"
#include "serving/inflight_limit.h"

namespace somm::node {

struct ServingFrontendsOptions {
  std::string name = "somm";  // who logs ("somm", "router <id>")
  std::string address = "127.0.0.1";
  int http_port = 8000;  // 0 = picked; the *_port() accessors tell
  int grpc_port = 8001;
  int metrics_port = 8002;
  int64_t max_body_bytes = 64 << 20;  // REST bodies and gRPC messages
  int http_threads = 0;               // HttpFrontendOptions::io_threads
  int grpc_threads = 0;               // GrpcFrontendOptions::infer_threads
  int min_grpc_threads = 1;           // GrpcFrontendOptions::min_infer_threads
  int64_t max_inflight = 0;           // InflightLimit; 0 = no bound
  // --max-inflight-bytes (InflightBytesBudget): -1 = a quarter of
  // `memory_budget_mb` (0 = of the memory available now), 0 = no bound.
  int64_t max_inflight_bytes = -1;
  double memory_budget_mb = 0;
  ConnectionLimitFlags connections;
  std::vector<std::string> cors_origins;
  // gRPC reads the files; the REST and metrics ports take the context made
  // of them (null = plaintext).
  crypto::TlsServerFiles tls;
  std::shared_ptr<const crypto::TlsServerContext> tls_context;
  // --exit-timeout-secs: how long StopFrontends() waits for the calls in
  // flight, REST and gRPC together, before it cancels what is left.
  std::chrono::milliseconds exit_timeout{30000};
  // Runs once the gRPC frontend is up, before the REST one starts.
  std::function<void(GrpcFrontend&)> before_rest;
};

class ServingFrontends {
 public:
  // `batch` null: no batch jobs API.
  static StatusOr<std::unique_ptr<ServingFrontends>> Start(InferenceServer& server,
                                                           auth::Guard& guard, BatchJobs* batch,
                                                           PrometheusMetrics& metrics,
                                                           const ServingFrontendsOptions& options);
  ~ServingFrontends();
  ServingFrontends(const ServingFrontends&) = delete;
  ServingFrontends& operator=(const ServingFrontends&) = delete;

  int http_port() const { return http_->port(); }
  int grpc_port() const { return grpc_->port(); }
  int metrics_port() const { return metrics_endpoint_->port(); }

  void StopFrontends();
  void StopMetrics();

 private:
  ServingFrontends(int64_t max_inflight, int64_t max_inflight_bytes, PrometheusMetrics& metrics);

  InflightLimit inflight_limit_;
  ByteBudget byte_budget_;
  std::unique_ptr<GrpcFrontend> grpc_;
  std::unique_ptr<HttpFrontend> http_;
  std::unique_ptr<MetricsEndpoint> metrics_endpoint_;
  std::chrono::milliseconds exit_timeout_{30000};
};

}  // namespace somm::node
