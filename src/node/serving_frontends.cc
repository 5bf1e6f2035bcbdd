#include "node/serving_frontends.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "batch/batch_routes.h"
#include "dashboard/operator_routes.h"
#include "node/node_parts.h"

namespace somm::node {

ServingFrontends::ServingFrontends(int64_t max_inflight, int64_t max_inflight_bytes,
                                   PrometheusMetrics& metrics)
    : inflight_limit_(InflightLimit::Options{max_inflight, 1, &metrics}),
      byte_budget_(ByteBudget::Options{max_inflight_bytes, 1, &metrics}) {}

ServingFrontends::~ServingFrontends() {
  StopFrontends();
  StopMetrics();
}

StatusOr<std::unique_ptr<ServingFrontends>> ServingFrontends::Start(
    InferenceServer& server, auth::Guard& guard, BatchJobs* batch, PrometheusMetrics& metrics,
    const ServingFrontendsOptions& o) {
  SOMM_ASSIGN_OR_RETURN(
      const int64_t max_inflight_bytes,
      InflightBytesBudget(o.max_inflight_bytes, o.memory_budget_mb, o.max_body_bytes));
  spdlog::info("{}: bytes of request bodies and tensors in flight: at most {} ({})", o.name,
               max_inflight_bytes > 0 ? ByteBudget::Mib(max_inflight_bytes) : "no bound",
               o.max_inflight_bytes >= 0 ? "--max-inflight-bytes"
                                         : "a quarter of the memory budget");
  std::unique_ptr<ServingFrontends> f(
      new ServingFrontends(o.max_inflight, max_inflight_bytes, metrics));
  f->exit_timeout_ = o.exit_timeout;

  GrpcFrontendOptions go;
  go.address = o.address;
  go.port = o.grpc_port;
  go.max_message_bytes = static_cast<int>(o.max_body_bytes);
  go.guard = &guard;
  go.inflight_limit = &f->inflight_limit_;
  go.byte_budget = &f->byte_budget_;
  go.tls = o.tls;
  go.infer_threads = o.grpc_threads;
  go.min_infer_threads = o.min_grpc_threads;
  // The operator's views and the batch jobs, on both ports (REST: mounted,
  // frontend/http/rest_mount.h; gRPC: OperatorCall).
  std::vector<RestMount> mounts = {
      dashboard::OperatorViews(server, &guard, [&metrics] { return metrics.Serialize(); })};
  if (batch != nullptr) mounts.push_back(BatchRoutes(*batch, &guard));
  go.mounts = mounts;
  auto grpc = GrpcFrontend::Start(server, go);
  if (!grpc.ok()) return Status(grpc.status().code(), "gRPC frontend: " + grpc.status().message());
  f->grpc_ = std::move(grpc).value();
  if (o.before_rest) o.before_rest(*f->grpc_);

  HttpFrontendOptions ho;
  ho.address = o.address;
  ho.port = o.http_port;
  ho.max_body_bytes = static_cast<size_t>(o.max_body_bytes);
  ho.io_threads = o.http_threads;
  ho.inflight_limit = &f->inflight_limit_;
  ho.byte_budget = &f->byte_budget_;
  ho.guard = &guard;
  ho.origin_policy.loopback_hosts_only = guard.mode() == auth::AuthMode::kNone;
  ho.origin_policy.cors_origins = o.cors_origins;
  ho.header_timeout_s = o.connections.header_timeout_s;
  ho.body_timeout_s = o.connections.body_timeout_s;
  ho.max_connections_per_address = static_cast<size_t>(o.connections.max_connections_per_address);
  ho.shutdown_grace_s = static_cast<int>((o.exit_timeout.count() + 999) / 1000);
  // The operator's views, the dashboard's pages and the batch jobs, mounted
  // on the REST port (frontend/http/rest_mount.h).
  ho.mounts = std::move(mounts);
  ho.pages = {dashboard::DashboardPages()};
  ho.tls = o.tls_context;
  auto http = HttpFrontend::Start(server, ho);
  if (!http.ok()) return Status(http.status().code(), "REST frontend: " + http.status().message());
  f->http_ = std::move(http).value();

  MetricsAccess access;
  access.authorize = [g = &guard](const std::string& a) { return g->AdmitMetrics(a); };
  access.extra_text = [g = &guard] { return g->MetricsText(); };
  SOMM_ASSIGN_OR_RETURN(f->metrics_endpoint_,
                        MetricsEndpoint::Start(metrics, o.address, o.metrics_port, nullptr,
                                               std::move(access), o.tls_context));
  return f;
}

void ServingFrontends::StopFrontends() {
  // One deadline for both: what REST's drain took, gRPC's has less of.
  const auto deadline = std::chrono::system_clock::now() + exit_timeout_;
  if (http_) http_->Shutdown();
  if (grpc_) grpc_->Shutdown(std::max(deadline, std::chrono::system_clock::now()));
}

void ServingFrontends::StopMetrics() {
  if (metrics_endpoint_) metrics_endpoint_->Shutdown();
}

}  // namespace somm::node
