#include "node/router_node.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <set>
#include <sstream>
#include <thread>

#include "auth/guard.h"
#include "batch/batch_jobs.h"
#include "batch/batch_routes.h"
#include "cluster_rpc/grpc_control_client.h"
#include "cluster_rpc/worker_pool.h"
#include "dashboard/operator_routes.h"
#include "frontend/grpc/grpc_server.h"
#include "frontend/http/http_frontend.h"
#include "metrics/prometheus_metrics.h"
#include "node/catalog_follower.h"
#include "router/router.h"
#include "serving/byte_budget.h"
#include "serving/inflight_limit.h"

namespace somm::node {
namespace {

using redis::RedisClusterStateStore;

// A model's owner as the router's registry has it (the leader's catalog):
// nullopt when no version of it is published here.
auth::Guard::OwnerLookup RegistryOwner(const ModelRegistry& registry) {
  return [&registry](const std::string& model) -> std::optional<std::string> {
    StatusOr<VersionPtr> v = registry.Resolve(model, "");
    if (!v.ok()) return std::nullopt;
    return (*v)->config.owner_tenant;
  };
}

std::string RouterStateDir(const RouterProcessOptions& o) {
  if (!o.state_dir.empty()) return o.state_dir;
  if (!o.model_repository.empty()) {
    return (std::filesystem::path(o.model_repository) / ".somm").string();
  }
  const char* home = std::getenv("HOME");
  return (std::filesystem::path(home != nullptr && *home != '\0' ? home : ".") / ".somm").string();
}

// A router's own ports' TLS: one-way TLS is allowed when its client side
// toward the cluster has files of its own (--cluster-tls-*); otherwise its
// files are also its peer identity, and mutual or nothing (ClusterTls).
StatusOr<std::shared_ptr<const crypto::TlsServerContext>> RouterTls(const RouterProcessOptions& o) {
  if (o.cluster_tls.enabled()) return crypto::TlsServerContext::CreateIfEnabled(o.tls);
  return ClusterTls(o.tls);
}

// The client side of a router toward workers and the controller: its
// --cluster-tls-* files, else its own server files when they are mutual.
crypto::TlsClientFiles RouterPeerFiles(const RouterProcessOptions& o) {
  return o.cluster_tls.enabled() ? o.cluster_tls : crypto::PeerClientFiles(o.tls);
}

}  // namespace

Status CheckRouterArgs(const RouterProcessOptions& o) {
  SOMM_ASSIGN_OR_RETURN(auth::AuthMode mode, auth::ParseAuthMode(o.auth));
  SOMM_RETURN_IF_ERROR(auth::CheckListenAddress(mode, o.address, "--address"));
  SOMM_RETURN_IF_ERROR(RoutingPolicy::ByName(o.routing_policy).status());
  SOMM_RETURN_IF_ERROR(RouterTls(o).status());
  SOMM_RETURN_IF_ERROR(o.cluster_tls.Validate());
  if (mode == auth::AuthMode::kKeys && !o.keys_file.empty() &&
      !std::filesystem::is_regular_file(o.keys_file)) {
    return InvalidArgument("--keys-file " + o.keys_file + " is not a file");
  }
  SOMM_RETURN_IF_ERROR(ByteBudget::FromFlag(o.max_inflight_bytes, 0, o.max_body_bytes).status());
  return CheckRedisFlag(o.redis);
}

int RunRouterNode(const RouterProcessOptions& o, const NodeProcess& process) {
  auto tls = RouterTls(o);
  if (!tls.ok()) {
    spdlog::error("{}", tls.status().message());
    return 2;
  }
  // Its own files (audit log, quota file, default key file, batch jobs):
  // --state-dir, else the repository's .somm/, else $HOME/.somm.
  const std::string state_dir = RouterStateDir(o);
  // The router is the cluster's front door: keys are checked here.
  auto guard = auth::Guard::ForServer(o.auth, o.address, o.model_repository, o.keys_file, state_dir);
  if (!guard.ok()) {
    spdlog::error("{}", guard.status().message());
    return 2;
  }
  PrometheusMetrics metrics;
  auto parts = StartParts(o.model_repository, o.device, o.redis, 3000, /*watch=*/true,
                          RedisClientName("router", o.router_id), o.registration);
  if (!parts.ok()) {
    spdlog::error("{}", parts.status().message());
    return 2;
  }
  const Device device = parts->device;
  RedisClusterStateStore* store = parts->store.get();
  ModelRegistry& registry = *parts->registry;
  // Owners come from the catalog: a router may have no repository mounted.
  (*guard)->SetOwnerLookup(RegistryOwner(registry));
  node::CatalogFollower catalog(registry, *store);
  catalog.Start();

  GrpcWorkerPoolOptions pool_options;
  pool_options.stub.tls = crypto::ForPeer(RouterPeerFiles(o), "somm-worker");
  GrpcWorkerPool workers(AddressesOf(*store), pool_options);
  GrpcControlClient leader([store] { return LeaderAddress(*store); }, device,
                           std::chrono::minutes(5),
                           crypto::ForPeer(RouterPeerFiles(o), "somm-controller"));
  node::CatalogFollowingControl control(leader, catalog, registry);
  DecisionLog log(1000);
  RouterOptions rto;
  rto.id = DefaultId(o.router_id, o.http_port);
  rto.managed = o.managed;
  rto.compact_explanation = o.explain == "compact";
  rto.zone = o.zone;
  rto.cross_zone_rtt_ms = o.cross_zone_rtt_ms;
  rto.routing_policy = RoutingPolicy::ByName(o.routing_policy).value();  // checked above
  // Ready means able to serve: the catalog is here, a leader controller and
  // a live worker are seen (a query before that was answered 404 or 503).
  // With a repository mounted, its models must be in the catalog too (an
  // empty catalog is a cluster that serves nothing yet, ready to register).
  rto.ready = [store, &workers, &registry] {
    if (LeaderAddress(*store).empty() || workers.Ids().empty()) return false;
    return !store->ReadCatalog().models.empty() || registry.ListModelFolders().empty();
  };
  Router router(rto, registry, *store, workers, control, metrics, log);
  Ticker demand(std::chrono::milliseconds(1000), [&router] { router.PublishDemand(); });
  // Offline batch jobs run on the router that took them, beside its queries;
  // their state is kept in its state folder, so a restarted router resumes
  // them when that folder outlives it.
  auto bo = BatchSetup(o.batch, state_dir, rto.id, o.model_repository, guard->get());
  if (!bo.ok()) {
    spdlog::error("{}", bo.status().message());
    return 2;
  }
  bo->inflight = [&router] { return router.InflightQueries(); };
  auto batch = std::make_unique<BatchJobs>(std::move(bo).value(), router);
  spdlog::info("router {}: audit log, quota file and batch jobs in {}; batch files under {}",
               rto.id, state_dir, batch->paths()->root());

  // One bound for both frontends, as in `somm serve`, and one byte budget.
  InflightLimit inflight_limit(InflightLimit::Options{o.max_inflight, 1, &metrics});
  const int64_t max_inflight_bytes =
      InflightBytesBudget(o.max_inflight_bytes, 0, o.max_body_bytes).value();  // checked above
  ByteBudget byte_budget(ByteBudget::Options{max_inflight_bytes, 1, &metrics});
  spdlog::info("router {}: bytes of request bodies and tensors in flight: at most {}", rto.id,
               max_inflight_bytes > 0 ? ByteBudget::Mib(max_inflight_bytes) : "no bound");
  GrpcFrontendOptions go;
  go.address = o.address;
  go.port = o.grpc_port;
  go.max_message_bytes = static_cast<int>(o.max_body_bytes);
  go.guard = guard->get();
  go.inflight_limit = &inflight_limit;
  go.byte_budget = &byte_budget;
  go.tls = o.tls;
  go.infer_threads = o.grpc_threads;
  go.min_infer_threads = 2;
  auto grpc = GrpcFrontend::Start(router, go);
  if (!grpc.ok()) {
    spdlog::error("gRPC frontend: {}", grpc.status().message());
    return 2;
  }
  // The worker calls' answers come back on the frontend's completion queue,
  // taken by its threads: no other thread polls gRPC in a router, which
  // spares gRPC's callback threads and their hand-offs (docs/cluster.md, the
  // router hop). Before the REST frontend starts, so that no query is on its
  // way yet.
  workers.UseQueue((*grpc)->queue());
  leader.UseQueue((*grpc)->queue());
  HttpFrontendOptions ho;
  ho.inflight_limit = &inflight_limit;
  ho.byte_budget = &byte_budget;
  ho.address = o.address;
  ho.port = o.http_port;
  ho.max_body_bytes = static_cast<size_t>(o.max_body_bytes);
  ho.io_threads = o.http_threads;
  // The operator's views, the dashboard's pages and the batch jobs, mounted
  // on the REST port (frontend/http/rest_mount.h).
  ho.mounts = {dashboard::OperatorViews(router, guard->get(),
                                        [&metrics] { return metrics.Serialize(); }),
               BatchRoutes(*batch, guard->get())};
  ho.pages = {dashboard::DashboardPages()};
  ho.guard = guard->get();
  ho.origin_policy.loopback_hosts_only = (*guard)->mode() == auth::AuthMode::kNone;
  ho.origin_policy.cors_origins = o.cors_origins;
  ho.header_timeout_s = o.connections.header_timeout_s;
  ho.body_timeout_s = o.connections.body_timeout_s;
  ho.max_connections_per_address = static_cast<size_t>(o.connections.max_connections_per_address);
  ho.tls = *tls;
  auto http = HttpFrontend::Start(router, ho);
  if (!http.ok()) {
    spdlog::error("REST frontend: {}", http.status().message());
    return 2;
  }
  MetricsAccess metrics_access;
  metrics_access.authorize = [g = guard->get()](const std::string& a) { return g->AdmitMetrics(a); };
  metrics_access.extra_text = [g = guard->get()] { return g->MetricsText(); };
  // How stale its view of the cluster gets (docs/cluster-state.md, "Steady-state
  // cost of the cluster state").
  store->SetOnViewLag(metrics.ViewLagRecorder("router:" + rto.id));
  auto endpoint = MetricsEndpoint::Start(metrics, o.address, o.metrics_port, nullptr,
                                         std::move(metrics_access), *tls);
  if (!endpoint.ok()) {
    spdlog::error("{}", endpoint.status().message());
    return 2;
  }
  // The same first line as `somm serve`: scripts and tests read it.
  std::printf("somm: listening http=%d grpc=%d metrics=%d\n", (*http)->port(), (*grpc)->port(),
              (*endpoint)->port());
  if (batch) batch->ResumeAll();
  std::printf("somm router %s: the cluster at redis %s\n", rto.id.c_str(), o.redis.c_str());
  std::fflush(stdout);

  const char* why = process.wait_for_stop();
  spdlog::info("router {}: {}: finishing the queries in flight", rto.id, why);
  registry.Shutdown();  // a registration's probe in progress is killed at once
  if (batch) batch->Shutdown();  // before the router refuses their items
  router.Shutdown();
  (*http)->Shutdown();
  (*grpc)->Shutdown(std::chrono::seconds(30));
  demand.Stop();
  (*endpoint)->Shutdown();
  // The watch thread calls into `catalog`, which goes before the store does:
  // a change notice during the teardown (a worker draining) used it freed.
  store->StopWatching();
  spdlog::info("router {} stopped cleanly", rto.id);
  return 0;
}


}  // namespace somm::node
