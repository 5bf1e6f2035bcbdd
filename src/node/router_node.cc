#include "node/router_node.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <set>
#include <sstream>
#include <thread>

#include "auth/guard.h"
#include "batch/batch_jobs.h"
#include "cluster_rpc/grpc_control_client.h"
#include "cluster_rpc/worker_pool.h"
#include "metrics/prometheus_metrics.h"
#include "node/catalog_follower.h"
#include "node/component_options.h"
#include "node/serving_frontends.h"
#include "router/router.h"
#include "serving/byte_budget.h"

namespace somm::node {
namespace {

using redis::RedisClusterStateStore;

// A model's owner as the router's catalog has it (the leader's catalog):
// nullopt when no version of it is published here.
auth::Guard::OwnerLookup RegistryOwner(const ModelCatalog& models) {
  return [&models](const std::string& model) -> std::optional<std::string> {
    StatusOr<VersionPtr> v = models.Resolve(model, "");
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
  SOMM_RETURN_IF_ERROR(BuildRouterOptions(o.routing, o.managed).status());
  SOMM_RETURN_IF_ERROR(StartupModels(o.model_control_mode, {}).status());
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
                          RedisClientName("router", o.router_id), o.registration,
                          /*with_registrar=*/true);
  if (!parts.ok()) {
    spdlog::error("{}", parts.status().message());
    return 2;
  }
  const Device device = parts->device;
  RedisClusterStateStore* store = parts->store.get();
  ModelCatalog& models = *parts->catalog;
  node::CatalogFollower catalog(models, *store);
  catalog.Start();

  GrpcWorkerPoolOptions pool_options;
  pool_options.stub.tls = crypto::ForPeer(RouterPeerFiles(o), "somm-worker");
  GrpcWorkerPool workers(AddressesOf(*store), pool_options);
  GrpcControlClient leader([store] { return LeaderAddress(*store); }, device,
                           std::chrono::minutes(5),
                           crypto::ForPeer(RouterPeerFiles(o), "somm-controller"));
  node::CatalogFollowingControl control(leader, catalog, models);
  DecisionLog log(1000);
  auto built = BuildRouterOptions(o.routing, o.managed);
  if (!built.ok()) {
    spdlog::error("{}", built.status().message());
    return 2;
  }
  built->model_control_mode = o.model_control_mode;
  RouterOptions rto = std::move(built).value();
  rto.id = DefaultId(o.router_id, o.http_port);
  // Ready means able to serve: the catalog is here, a leader controller and
  // a live worker are seen (a query before that was answered 404 or 503).
  // With a repository mounted, its models must be in the catalog too (an
  // empty catalog is a cluster that serves nothing yet, ready to register).
  rto.ready = [store, &workers, &models] {
    if (LeaderAddress(*store).empty() || workers.Ids().empty()) return false;
    return !store->ReadCatalog().models.empty() || models.ListModelFolders().empty();
  };
  Router router(rto, models, parts->registrar.get(), *store, workers, control, metrics, log);
  // The mounted repository's pipelines, in front of the router: their
  // built-in steps run here, their model and task steps go to the workers as
  // any query does (docs/pipelines.md).
  std::unique_ptr<pipeline::PipelineServer> pipelines =
      StartPipelines(o.model_repository, models, router);
  // The catalog fills from the leader after the pipelines are first read.
  catalog.OnChange([&served = *pipelines] { served.RebindUnavailable(); });
  pipelines->RebindUnavailable();  // a change before the line above
  // Owners come from the catalog (a router may have no repository mounted),
  // a pipeline's from the models its steps use.
  (*guard)->SetOwnerLookup(OwnerOfModelOrPipeline(RegistryOwner(models), *pipelines));
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
  auto batch = std::make_unique<BatchJobs>(std::move(bo).value(), *pipelines);
  spdlog::info("router {}: audit log, quota file and batch jobs in {}; batch files under {}",
               rto.id, state_dir, batch->paths()->root());

  // How stale its view of the cluster gets (docs/cluster-state.md, "Steady-state
  // cost of the cluster state").
  store->SetOnViewLag(metrics.ViewLagRecorder("router:" + rto.id));
  ServingFrontendsOptions fo;
  fo.name = "router " + rto.id;
  fo.address = o.address;
  fo.http_port = o.http_port;
  fo.grpc_port = o.grpc_port;
  fo.metrics_port = o.metrics_port;
  fo.max_body_bytes = o.max_body_bytes;
  fo.http_threads = o.http_threads;
  fo.grpc_threads = o.grpc_threads;
  fo.min_grpc_threads = 2;
  fo.max_inflight = o.max_inflight;
  fo.max_inflight_bytes = o.max_inflight_bytes;
  fo.connections = o.connections;
  fo.cors_origins = o.cors_origins;
  fo.tls = o.tls;
  fo.tls_context = *tls;
  fo.exit_timeout = std::chrono::milliseconds(std::llround(o.exit_timeout_secs * 1000));
  // The worker calls' answers come back on the frontend's completion queue,
  // taken by its threads: no other thread polls gRPC in a router, which
  // spares gRPC's callback threads and their hand-offs (docs/cluster.md, the
  // router hop). Before the REST frontend starts, so that no query is on its
  // way yet.
  fo.before_rest = [&workers, &leader](GrpcFrontend& grpc) {
    workers.UseQueue(grpc.queue());
    leader.UseQueue(grpc.queue());
  };
  auto frontends = ServingFrontends::Start(*pipelines, **guard, batch.get(), metrics, fo);
  if (!frontends.ok()) {
    spdlog::error("{}", frontends.status().message());
    return 2;
  }
  // The same first line as `somm serve`: scripts and tests read it.
  std::printf("somm: listening http=%d grpc=%d metrics=%d\n", (*frontends)->http_port(),
              (*frontends)->grpc_port(), (*frontends)->metrics_port());
  if (batch) batch->ResumeAll();
  std::printf("somm router %s: the cluster at redis %s\n", rto.id.c_str(), o.redis.c_str());
  std::fflush(stdout);

  const char* why = process.wait_for_stop();
  spdlog::info("router {}: {}: finishing the queries in flight", rto.id, why);
  if (parts->registrar) parts->registrar->Shutdown();  // a registration's probe in progress is killed at once
  if (batch) batch->Shutdown();  // before the router refuses their items
  router.Shutdown();
  (*frontends)->StopFrontends();
  demand.Stop();
  (*frontends)->StopMetrics();
  // The watch thread calls into `catalog`, which goes before the store does:
  // a change notice during the teardown (a worker draining) used it freed.
  store->StopWatching();
  spdlog::info("router {} stopped cleanly", rto.id);
  return 0;
}


}  // namespace somm::node
