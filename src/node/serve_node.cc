#include "node/serve_node.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <utility>

#include "auth/guard.h"
#include "batch/batch_jobs.h"
#include "common/duty_cycle_pacer.h"
#include "common/install_paths.h"
#include "crypto/tls_stream.h"
#include "metrics/prometheus_metrics.h"
#include "node/component_options.h"
#include "node/embedded_server.h"
#include "node/serving_frontends.h"
#include "pipeline/pipeline_config.h"
#include "pipeline/pipeline_server.h"
#include "repository/repository_poller.h"
#include "router/routing_policy.h"
#include "serving/byte_budget.h"

namespace somm::node {

Status CheckServeArgs(const ServeOptions& o) {
  SOMM_RETURN_IF_ERROR(RoutingPolicy::ByName(o.routing.routing_policy).status());
  SOMM_RETURN_IF_ERROR(StartupModels(o.model_control_mode, o.load_models).status());
  SOMM_RETURN_IF_ERROR(ByteBudget::FromFlag(o.max_inflight_bytes, 0, o.max_body_bytes).status());
  SOMM_RETURN_IF_ERROR(
      auth::Guard::ForServer(o.auth, o.address, o.model_repository, o.keys_file).status());
  SOMM_RETURN_IF_ERROR(crypto::TlsServerContext::CreateIfEnabled(o.tls).status());
  if (!std::filesystem::is_directory(o.model_repository)) {
    return InvalidArgument("--model-repository " + o.model_repository + " is not a folder");
  }
  return Status::Ok();
}

// Declared in the order they start; they go in the reverse one.
struct ServeNode::Parts {
  std::unique_ptr<auth::Guard> guard;
  std::shared_ptr<const crypto::TlsServerContext> tls;
  PrometheusMetrics metrics;
  std::unique_ptr<EmbeddedServer> server;
  // In front of the router: the repository's pipelines (docs/pipelines.md).
  std::unique_ptr<pipeline::PipelineServer> pipelines;
  std::unique_ptr<BatchJobs> batch;
  std::unique_ptr<ServingFrontends> frontends;
  std::unique_ptr<RepositoryPoller> poller;
  bool stopped = false;
};

ServeNode::ServeNode(ServeOptions options) : options_(std::move(options)) {}

ServeNode::~ServeNode() { Stop(); }

Status ServeNode::Start() {
  const ServeOptions& o = options_;
  parts_ = std::make_unique<Parts>();
  Parts& p = *parts_;
  // Before anything loads: a server that would listen unprotected beyond
  // loopback must not start at all.
  SOMM_ASSIGN_OR_RETURN(p.guard,
                        auth::Guard::ForServer(o.auth, o.address, o.model_repository, o.keys_file));
  // TLS: one context for the REST and metrics ports; gRPC reads the same
  // files. Bad files stop the start here, before any model loads.
  SOMM_ASSIGN_OR_RETURN(p.tls, crypto::TlsServerContext::CreateIfEnabled(o.tls));

  EmbeddedServerOptions mo;
  SOMM_ASSIGN_OR_RETURN(mo.router, BuildRouterOptions(o.routing, o.managed));
  mo.router.model_control_mode = o.model_control_mode;
  SOMM_ASSIGN_OR_RETURN(mo.startup_models, StartupModels(o.model_control_mode, o.load_models));
  // --load-model may name pipelines; the embedded server loads the models.
  std::optional<std::vector<std::string>> startup_pipelines;
  if (mo.startup_models) {
    startup_pipelines.emplace();
    std::erase_if(*mo.startup_models, [&](const std::string& name) {
      const bool is = pipeline::IsPipelineFolder(
          (std::filesystem::path(o.model_repository) / name).string());
      if (is) startup_pipelines->push_back(name);
      return is;
    });
  }
  mo.controller = BuildControllerOptions(o.control, o.managed);
  // One pacer: the backends record background work, the manager waits.
  const auto pacer = std::make_shared<DutyCyclePacer>(o.background_duty);
  SOMM_ASSIGN_OR_RETURN(ProcessBackends backends, StartBackends(o.device, pacer));
  mo.device = backends.device;
  mo.hardware = backends.hardware;
  mo.repository_path = o.model_repository;
  // tools/quantize_dynamic.py makes int8 variants; common/install_paths.h
  // says where the folder is looked for (SOMM_TOOLS_DIR first).
  mo.tools_dir = ToolsDir(SOMM_DEFAULT_TOOLS_DIR);
  mo.sandbox = MakeRegistrationSandbox(o.registration);
  mo.auto_variants = o.auto_variants;
  mo.memory_budget_bytes = static_cast<int64_t>(o.memory_budget_mb * 1024 * 1024);
  mo.background_pacer = pacer;
  mo.inline_max_compute_us = o.inline_max_compute_us;
  mo.inline_min_gap_us = o.inline_min_gap_us;
  mo.strict_readiness = o.strict_readiness;
  p.server = std::make_unique<EmbeddedServer>(mo, std::move(backends.backends), p.metrics);
  SOMM_RETURN_IF_ERROR(p.server->Start());
  p.pipelines = StartPipelines(o.model_repository, p.server->catalog(), p.server->router(),
                               std::move(startup_pipelines));
  // The guard checks the model of every query a user key names (a hidden
  // one answers as a missing one): its owner comes from memory, not disk;
  // a pipeline's is that of the private models its steps use.
  p.guard->SetOwnerLookup(OwnerOfModelOrPipeline(
      [&catalog = p.server->catalog()](const std::string& model) { return catalog.OwnerOf(model); },
      *p.pipelines));

  // Offline batch jobs (docs/lifecycle.md): low priority beside the queries.
  SOMM_ASSIGN_OR_RETURN(
      BatchJobs::Options bo,
      BatchSetup(o.batch, (std::filesystem::path(o.model_repository) / ".somm").string(), "",
                 o.model_repository, p.guard.get()));
  bo.inflight = [&router = p.server->router()] { return router.InflightQueries(); };
  p.batch = std::make_unique<BatchJobs>(std::move(bo), *p.pipelines);

  ServingFrontendsOptions fo;
  fo.address = o.address;
  fo.http_port = o.http_port;
  fo.grpc_port = o.grpc_port;
  fo.metrics_port = o.metrics_port;
  fo.max_body_bytes = o.max_body_bytes;
  fo.http_threads = o.http_threads;
  fo.max_inflight = o.max_inflight;
  fo.max_inflight_bytes = o.max_inflight_bytes;
  fo.memory_budget_mb = o.memory_budget_mb;
  fo.connections = o.connections;
  fo.cors_origins = o.cors_origins;
  fo.tls = o.tls;
  fo.tls_context = p.tls;
  fo.exit_timeout = std::chrono::milliseconds(std::llround(o.exit_timeout_secs * 1000));
  SOMM_ASSIGN_OR_RETURN(p.frontends, ServingFrontends::Start(*p.pipelines, *p.guard,
                                                             p.batch.get(), p.metrics, fo));

  p.batch->ResumeAll();  // jobs a stop (or a kill) left running

  // --model-control-mode poll: the repository is watched (docs/lifecycle.md).
  if (o.model_control_mode == "poll") {
    RepositoryPollerOptions po;
    po.repository = o.model_repository;
    po.period = std::chrono::milliseconds(static_cast<int64_t>(o.repository_poll_secs * 1000));
    // Straight to the controller: the repository API's load and unload
    // (the router's) pass only under explicit.
    po.load = [server = p.server.get()](const std::string& m) {
      return server->controller().LoadModel(m);
    };
    po.unload = [server = p.server.get()](const std::string& m) {
      return server->controller().UnloadModel(m);
    };
    p.poller = std::make_unique<RepositoryPoller>(std::move(po));
    spdlog::info("watching {} every {} s (--model-control-mode poll)", o.model_repository,
                 o.repository_poll_secs);
  }
  return Status::Ok();
}

void ServeNode::Stop() {
  if (!parts_ || parts_->stopped) return;
  Parts& p = *parts_;
  p.stopped = true;
  // Registrations first: a probe or variant job in progress is killed, so
  // the frontends below wait for no registration.
  if (p.server) p.server->registrar().Shutdown();
  if (p.poller) p.poller->Stop();
  // Batch jobs first, while the server still answers their items in flight;
  // they stay running on disk and resume at the next start.
  if (p.batch) p.batch->Shutdown();
  // Frontends first: they stop accepting and wait for their calls in flight,
  // which the still-running instances answer. Then the instances drain.
  if (p.frontends) p.frontends->StopFrontends();
  if (p.server) p.server->Shutdown();
  if (p.frontends) p.frontends->StopMetrics();
}

int ServeNode::http_port() const { return parts_->frontends->http_port(); }
int ServeNode::grpc_port() const { return parts_->frontends->grpc_port(); }
int ServeNode::metrics_port() const { return parts_->frontends->metrics_port(); }

int ServeNode::ReadyVersions() const {
  int ready = 0;
  for (const auto& row : parts_->server->RepositoryIndex(true)) ready += row.state == "READY";
  return ready;
}

const crypto::TlsServerContext* ServeNode::tls() const { return parts_->tls.get(); }

int RunServeNode(const ServeOptions& o, const NodeProcess& process) {
  ServeNode node(o);
  if (Status s = node.Start(); !s.ok()) {
    spdlog::error("{}", s.message());
    return 2;
  }
  const std::string host = DialHost(o.address);
  const int http_port = node.http_port();
  // The first line is for scripts and tests; keep its format.
  std::printf("somm: listening http=%d grpc=%d metrics=%d\n", http_port, node.grpc_port(),
              node.metrics_port());
  std::printf(
      "somm is serving %d model version(s) from %s\n"
      "  REST (Open Inference Protocol v2): http://%s:%d/v2\n"
      "  gRPC (Open Inference Protocol v2): %s:%d\n"
      "  Prometheus metrics:                http://%s:%d/metrics\n"
      "  Dashboard:                         http://%s:%d/dashboard/\n"
      "First query (a held-out digit):\n"
      "  curl -s http://%s:%d/v2/models/digits-mlp/infer -d @%s/.examples/digit_3.json\n"
      "List models: build/somm models --url %s:%d\n",
      node.ReadyVersions(), o.model_repository.c_str(), host.c_str(), http_port, host.c_str(),
      node.grpc_port(), host.c_str(), node.metrics_port(), host.c_str(), http_port, host.c_str(),
      http_port, o.model_repository.c_str(), host.c_str(), http_port);
  if (node.tls() != nullptr) {
    std::printf("TLS on every port (https:// and gRPC over TLS)%s\n",
                node.tls()->requires_client_certificate()
                    ? "; clients must present a certificate of --tls-client-ca"
                    : "");
  }
  std::fflush(stdout);

  const char* why = process.wait_for_stop();
  spdlog::info("received {}; refusing new queries and finishing those in flight", why);
  node.Stop();
  spdlog::info("somm stopped cleanly");
  return 0;
}

}  // namespace somm::node
