#include <filesystem>
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "batch/batch_jobs.h"
#include "batch/batch_routes.h"
#include "auth/guard.h"
#include "repository/repository_poller.h"
#include "cli/commands.h"
#include "cli/model_sandbox_command.h"
#include "node/node_parts.h"
#include "common/host_probe.h"
#include "common/install_paths.h"
#include "controller/placement.h"
#include "crypto/tls_stream.h"
#include "dashboard/operator_routes.h"
#include "frontend/grpc/grpc_server.h"
#include "frontend/http/http_frontend.h"
#include "metrics/prometheus_metrics.h"
#include "runtime/torch/torch_backend.h"
#include "node/embedded_server.h"
#include "serving/byte_budget.h"
#include "serving/inflight_limit.h"

namespace somm {

Status CheckServeArgs(const ServeOptions& options) {
  SOMM_RETURN_IF_ERROR(RoutingPolicy::ByName(options.routing_policy).status());
  SOMM_RETURN_IF_ERROR(
      ByteBudget::FromFlag(options.max_inflight_bytes, 0, options.max_body_bytes).status());
  SOMM_RETURN_IF_ERROR(
      auth::Guard::ForServer(options.auth, options.address, options.model_repository,
                             options.keys_file)
          .status());
  SOMM_RETURN_IF_ERROR(crypto::TlsServerContext::CreateIfEnabled(options.tls).status());
  if (!std::filesystem::is_directory(options.model_repository)) {
    return InvalidArgument("--model-repository " + options.model_repository + " is not a folder");
  }
  return Status::Ok();
}

int RunServe(const ServeOptions& options) {
  if (options.check_args) {
    const Status checked = CheckServeArgs(options);
    if (!checked.ok()) {
      std::fprintf(stderr, "somm serve: %s\n", checked.message().c_str());
      return 2;
    }
    std::printf("ok\n");
    return 0;
  }
  // Logs go to stderr; stdout carries only the banner that scripts read.
  spdlog::set_default_logger(spdlog::stderr_color_mt("somm"));
  spdlog::set_level(spdlog::level::from_str(options.log_level));
  // Block the stop signals before any thread starts, so every thread inherits
  // the mask and only sigwait below sees them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  // Before anything loads: a server that would listen unprotected beyond
  // loopback must not start at all.
  auto guard = auth::Guard::ForServer(options.auth, options.address, options.model_repository,
                                      options.keys_file);
  if (!guard.ok()) {
    spdlog::error("{}", guard.status().message());
    return 2;
  }
  // TLS: one context for the REST and metrics ports; gRPC reads the same
  // files. Bad files stop the start here, before any model loads.
  auto tls = crypto::TlsServerContext::CreateIfEnabled(options.tls);
  if (!tls.ok()) {
    spdlog::error("{}", tls.status().message());
    return 2;
  }
  PrometheusMetrics metrics;
  TorchBackendOptions backend_options;
  // One pacer: the backend records background work, the manager waits.
  backend_options.background_pacer = std::make_shared<DutyCyclePacer>(options.background_duty);
  auto backend = CreateTorchBackend(backend_options);
  auto device = ParseDeviceFlag(options.device, *backend);
  if (!device.ok()) {
    spdlog::error("{}", device.status().message());
    return 2;
  }
  EmbeddedServerOptions mo;
  mo.repository_path = options.model_repository;
  mo.device = *device;
  // tools/quantize_dynamic.py makes int8 variants; common/install_paths.h
  // says where the folder is looked for (SOMM_TOOLS_DIR first).
  mo.tools_dir = ToolsDir(SOMM_DEFAULT_TOOLS_DIR);
  mo.sandbox = MakeRegistrationSandbox(options.registration);
  mo.auto_variants = options.auto_variants;
  mo.managed = options.managed;
  mo.compact_explanation = options.explain == "compact";
  mo.routing_policy = RoutingPolicy::ByName(options.routing_policy).value();  // checked above
  mo.control_tick_ms = std::max(options.control_tick_ms, 10);
  mo.memory_budget_bytes = static_cast<int64_t>(options.memory_budget_mb * 1024 * 1024);
  mo.idle_unload_s = options.idle_unload_s;
  mo.background_pacer = backend_options.background_pacer;
  mo.strict_readiness = options.strict_readiness;
  EmbeddedServer manager(mo, *backend, metrics);
  if (Status s = manager.Start(); !s.ok()) {
    spdlog::error("{}", s.message());
    return 2;
  }
  // The guard checks the model of every query a user key names (a hidden
  // one answers as a missing one): its owner comes from memory, not disk.
  (*guard)->SetOwnerLookup([&registry = manager.registry()](const std::string& model) {
    return registry.OwnerOf(model);
  });

  // Offline batch jobs (docs/lifecycle.md): low priority beside the queries.
  auto bo = BatchSetup(options.batch,
                       (std::filesystem::path(options.model_repository) / ".somm").string(), "",
                       options.model_repository, guard->get());
  if (!bo.ok()) {
    spdlog::error("{}", bo.status().message());
    return 2;
  }
  bo->inflight = [&manager] { return manager.router().InflightQueries(); };
  BatchJobs batch(std::move(bo).value(), manager.router());

  // One bound for both frontends: an overloaded server sheds whichever
  // protocol the excess comes by. Likewise for the bytes requests hold.
  InflightLimit inflight_limit(InflightLimit::Options{options.max_inflight, 1, &metrics});
  const int64_t max_inflight_bytes =
      InflightBytesBudget(options.max_inflight_bytes, options.memory_budget_mb,
                          options.max_body_bytes)
          .value();  // checked before anything loaded
  ByteBudget byte_budget(ByteBudget::Options{max_inflight_bytes, 1, &metrics});
  spdlog::info("bytes of request bodies and tensors in flight: at most {} ({})",
               max_inflight_bytes > 0 ? ByteBudget::Mib(max_inflight_bytes) : "no bound",
               options.max_inflight_bytes >= 0 ? "--max-inflight-bytes"
                                               : "a quarter of the memory budget");

  HttpFrontendOptions ho;
  ho.inflight_limit = &inflight_limit;
  ho.byte_budget = &byte_budget;
  ho.address = options.address;
  ho.port = options.http_port;
  ho.max_body_bytes = static_cast<size_t>(options.max_body_bytes);
  ho.io_threads = options.http_threads;
  ho.guard = guard->get();
  ho.origin_policy.loopback_hosts_only = (*guard)->mode() == auth::AuthMode::kNone;
  ho.origin_policy.cors_origins = options.cors_origins;
  ho.header_timeout_s = options.connections.header_timeout_s;
  ho.body_timeout_s = options.connections.body_timeout_s;
  ho.max_connections_per_address = static_cast<size_t>(options.connections.max_connections_per_address);
  // The operator's views, the dashboard's pages and the batch jobs, mounted
  // on the REST port (frontend/http/rest_mount.h).
  ho.mounts = {dashboard::OperatorViews(manager.router(), guard->get(),
                                        [&metrics] { return metrics.Serialize(); }),
               BatchRoutes(batch, guard->get())};
  ho.pages = {dashboard::DashboardPages()};
  ho.tls = *tls;
  auto http = HttpFrontend::Start(manager.router(), ho);
  if (!http.ok()) {
    spdlog::error("REST frontend: {}", http.status().message());
    return 2;
  }
  GrpcFrontendOptions go;
  go.address = options.address;
  go.port = options.grpc_port;
  go.guard = guard->get();
  go.inflight_limit = &inflight_limit;
  go.byte_budget = &byte_budget;
  go.max_message_bytes = static_cast<int>(options.max_body_bytes);
  go.tls = options.tls;
  auto grpc = GrpcFrontend::Start(manager.router(), go);
  if (!grpc.ok()) {
    spdlog::error("gRPC frontend: {}", grpc.status().message());
    return 2;
  }
  MetricsAccess metrics_access;
  metrics_access.authorize = [g = guard->get()](const std::string& a) { return g->AdmitMetrics(a); };
  metrics_access.extra_text = [g = guard->get()] { return g->MetricsText(); };
  auto metrics_endpoint = MetricsEndpoint::Start(metrics, options.address, options.metrics_port,
                                                 nullptr, std::move(metrics_access), *tls);
  if (!metrics_endpoint.ok()) {
    spdlog::error("{}", metrics_endpoint.status().message());
    return 2;
  }

  const std::string host = DialHost(options.address);
  const int http_port = (*http)->port();
  int ready = 0;
  for (const auto& row : manager.RepositoryIndex(true)) ready += row.state == "READY";
  // The first line is for scripts and tests; keep its format.
  std::printf("somm: listening http=%d grpc=%d metrics=%d\n", http_port, (*grpc)->port(),
              (*metrics_endpoint)->port());
  std::printf(
      "somm is serving %d model version(s) from %s\n"
      "  REST (Open Inference Protocol v2): http://%s:%d/v2\n"
      "  gRPC (Open Inference Protocol v2): %s:%d\n"
      "  Prometheus metrics:                http://%s:%d/metrics\n"
      "  Dashboard:                         http://%s:%d/dashboard/\n"
      "First query (a held-out digit):\n"
      "  curl -s http://%s:%d/v2/models/digits-mlp/infer -d @%s/.examples/digit_3.json\n"
      "List models: build/somm models --url %s:%d\n",
      ready, options.model_repository.c_str(), host.c_str(), http_port, host.c_str(),
      (*grpc)->port(), host.c_str(), (*metrics_endpoint)->port(), host.c_str(), http_port,
      host.c_str(), http_port, options.model_repository.c_str(), host.c_str(), http_port);
  if (*tls) {
    std::printf("TLS on every port (https:// and gRPC over TLS)%s\n",
                (*tls)->requires_client_certificate()
                    ? "; clients must present a certificate of --tls-client-ca"
                    : "");
  }
  std::fflush(stdout);

  batch.ResumeAll();  // jobs a stop (or a kill) left running

  // --model-control-mode poll: the repository is watched (docs/lifecycle.md).
  std::unique_ptr<RepositoryPoller> poller;
  if (options.model_control_mode == "poll") {
    RepositoryPollerOptions po;
    po.repository = options.model_repository;
    po.period = std::chrono::milliseconds(static_cast<int64_t>(options.repository_poll_secs * 1000));
    po.load = [&manager](const std::string& m) { return manager.LoadModel(m); };
    po.unload = [&manager](const std::string& m) { return manager.UnloadModel(m); };
    poller = std::make_unique<RepositoryPoller>(std::move(po));
    spdlog::info("watching {} every {} s (--model-control-mode poll)", options.model_repository,
                 options.repository_poll_secs);
  }

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  // Registrations first: a probe or variant job in progress is killed, so
  // the frontends below wait for no registration.
  manager.registry().Shutdown();
  if (poller) poller->Stop();
  spdlog::info("received {}; refusing new queries and finishing those in flight",
               signal_number == SIGTERM ? "SIGTERM" : "SIGINT");
  // Batch jobs first, while the server still answers their items in flight;
  // they stay running on disk and resume at the next start.
  batch.Shutdown();
  // Frontends first: they stop accepting and wait for their calls in flight,
  // which the still-running instances answer. Then the instances drain.
  (*http)->Shutdown();
  (*grpc)->Shutdown(std::chrono::seconds(30));
  manager.Shutdown();
  (*metrics_endpoint)->Shutdown();
  spdlog::info("somm stopped cleanly");
  return 0;
}

}  // namespace somm
