#include "node/node_parts.h"

#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "common/host_probe.h"
#include "common/install_paths.h"
#include "cluster/memory_budget.h"
#include "node/log_format.h"
#include "sandbox/process_sandbox.h"
#include "serving/byte_budget.h"

namespace somm {

StatusOr<Device> ParseDeviceFlag(const std::string& text, const Backend& backend) {
  if (text == "cpu") return Device{};
  if (text == "auto") {
    // The first GPU when libtorch has CUDA and the machine has one; else CPU.
    const auto devices = backend.Devices();
    return devices.size() > 1 ? devices[1] : devices[0];
  }
  if (text.rfind("cuda", 0) == 0) {
    int index = 0;
    if (text.size() > 5 && text[4] == ':') index = std::atoi(text.c_str() + 5);
    for (const Device& d : backend.Devices()) {
      if (d.kind == DeviceKind::kCuda && d.index == index) return d;
    }
    return Unavailable("device '" + text + "' is not available (this machine offers: cpu" +
                       std::string(backend.Devices().size() > 1 ? " and CUDA" : "") + ")");
  }
  return InvalidArgument("unknown device '" + text + "' (use auto, cpu or cuda:N)");
}

StatusOr<ProcessBackends> StartBackends(const std::string& device_flag,
                                        std::shared_ptr<DutyCyclePacer> background_pacer) {
  BackendOptions options;
  options.background_pacer = std::move(background_pacer);
  ProcessBackends out{BackendSet(std::move(options)), Device{}, {}};
  SOMM_ASSIGN_OR_RETURN(Backend* const base, out.backends.For(kDefaultPlatform));
  SOMM_ASSIGN_OR_RETURN(out.device, ParseDeviceFlag(device_flag, *base));
  out.hardware = DefaultHardware(*base);
  return out;
}

std::string DialHost(const std::string& address) {
  return address == "0.0.0.0" || address == "::" ? "127.0.0.1" : address;
}

StatusOr<int64_t> InflightBytesBudget(int64_t flag, double memory_budget_mb,
                                      int64_t max_body_bytes) {
  const int64_t memory_budget =
      memory_budget_mb > 0 ? static_cast<int64_t>(memory_budget_mb * 1024 * 1024)
                           : cluster::DefaultMemoryBudget(AvailableMemoryBytes(),
                                                          cluster::kDefaultCpuBudgetFraction);
  return ByteBudget::FromFlag(flag, memory_budget, max_body_bytes);
}

std::shared_ptr<ModelSandbox> MakeRegistrationSandbox(const RegistrationLimitFlags& limits) {
  ProcessSandboxOptions o;
  o.probe = {limits.cpu_s, limits.timeout_s, limits.memory_mb};
  o.variants = {limits.variants_cpu_s, limits.variants_timeout_s, limits.memory_mb};
  auto sandbox = std::make_shared<ProcessModelSandbox>(o);
  spdlog::info("registrations run the model's code in {}", sandbox->Describe());
  return sandbox;
}

StatusOr<BatchJobs::Options> BatchSetup(const BatchRootFlags& flags, const std::string& state_dir,
                                        const std::string& sub, const std::string& repository,
                                        auth::Guard* guard) {
  const std::filesystem::path state(state_dir);
  BatchPaths::Options po;
  po.root = flags.root.empty() ? (state / "batch-files").string() : flags.root;
  po.admin_roots = flags.admin_roots;
  po.repository = repository;
  SOMM_ASSIGN_OR_RETURN(BatchPaths paths, BatchPaths::Create(std::move(po)));
  BatchJobs::Options bo;
  bo.state_dir = (sub.empty() ? state / "batch" : state / "batch" / sub).string();
  bo.paths = std::make_shared<const BatchPaths>(std::move(paths));
  if (guard != nullptr) {
    bo.audit = [guard](const BatchEvent& e) {
      guard->Audit({e.key_id, e.tenant, e.action, e.job, e.outcome, e.detail});
    };
  }
  return bo;
}


namespace node {

std::unique_ptr<pipeline::PipelineServer> StartPipelines(
    const std::string& repository, const ModelCatalog& catalog, InferenceServer& inner,
    std::optional<std::vector<std::string>> only) {
  pipeline::PipelineServerOptions po;
  po.repository_path = repository;
  po.model_owner = [&catalog](const std::string& model) { return catalog.OwnerOf(model); };
  po.only = std::move(only);
  // The SLO split plans over each step's variants as the catalog profiles them.
  po.variant_options = [&catalog](const std::string& model, const std::string& task) {
    std::vector<cluster::VariantOption> out;
    if (!model.empty()) {
      if (auto v = catalog.Resolve(model, ""); v.ok()) AppendOptions(**v, &out);
    } else {
      for (const VersionPtr& v : catalog.ForTask(task)) AppendOptions(*v, &out);
    }
    return out;
  };
  auto pipelines = std::make_unique<pipeline::PipelineServer>(std::move(po), inner);
  if (!repository.empty()) pipelines->LoadAll();
  spdlog::info("pipelines: {} served from the repository", pipelines->Count());
  return pipelines;
}

auth::Guard::OwnerLookup OwnerOfModelOrPipeline(auth::Guard::OwnerLookup models,
                                                const pipeline::PipelineServer& pipelines) {
  return [models = std::move(models), &pipelines](const std::string& name) {
    std::optional<std::string> owner = models(name);
    return owner ? owner : pipelines.OwnerOf(name);
  };
}

using redis::RedisClusterStateStore;

NodeProcess SetUpProcess(const std::string& log_level, const std::string& log_format) {
  spdlog::set_default_logger(spdlog::stderr_color_mt("somm"));
  spdlog::set_level(spdlog::level::from_str(log_level));
  spdlog::set_formatter(MakeLogFormatter(log_format));
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  signal(SIGPIPE, SIG_IGN);
  NodeProcess p;
  p.wait_for_stop = [stop]() -> const char* {
    int signal_number = 0;
    sigwait(&stop, &signal_number);
    return signal_number == SIGTERM ? "SIGTERM" : "SIGINT";
  };
  p.request_stop = [] { kill(getpid(), SIGTERM); };
  return p;
}

int ReportArgs(const char* command, const Status& checked) {
  if (!checked.ok()) {
    std::fprintf(stderr, "somm %s: %s\n", command, checked.message().c_str());
    return 2;
  }
  std::printf("ok\n");
  return 0;
}

// "<hostname>-<port>", or "<hostname>-<pid>" when the port is picked at
// start (0).
std::string DefaultId(const std::string& given, int port) {
  if (!given.empty()) return given;
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  return std::string(host) + "-" + std::to_string(port != 0 ? port : getpid());
}

// The name a process's Redis connections carry (CLIENT SETNAME): its role
// and its id, or its pid when the id is picked later.
std::string RedisClientName(const std::string& role, const std::string& given_id) {
  return role + ":" + (given_id.empty() ? std::to_string(getpid()) : given_id);
}

static StatusOr<std::unique_ptr<RedisClusterStateStore>> OpenStore(const std::string& address,
                                                             int lease_ms, bool watch,
                                                             const std::string& client_name) {
  // The password comes from the environment, never argv (redis/redis_endpoint.h).
  SOMM_ASSIGN_OR_RETURN(
      redis::RedisEndpoint endpoint,
      redis::ParseRedisEndpoint(address, [](const char* n) { return std::getenv(n); }));
  endpoint.client_name = client_name;
  redis::RedisStoreOptions o;
  o.endpoint = endpoint;
  o.lease = std::chrono::milliseconds(lease_ms);
  o.watch = watch;
  return RedisClusterStateStore::Open(o);
}

StatusOr<ProcessParts> StartParts(const std::string& repository, const std::string& device,
                                  const std::string& redis, int lease_ms, bool watch,
                                  const std::string& client_name,
                                  const RegistrationLimitFlags& registration, bool with_registrar,
                                  std::shared_ptr<DutyCyclePacer> background_pacer) {
  ProcessParts parts;
  SOMM_ASSIGN_OR_RETURN(ProcessBackends backends,
                        StartBackends(device, std::move(background_pacer)));
  parts.backends = backends.backends;
  parts.device = backends.device;
  SOMM_ASSIGN_OR_RETURN(parts.store, OpenStore(redis, lease_ms, watch, client_name));
  parts.catalog = std::make_unique<ModelCatalog>(repository);
  // A router without a repository has nowhere to write a model: no registrar.
  if (!with_registrar || repository.empty()) return parts;
  RegistrarOptions ro;
  ro.device = parts.device;
  // What a registration's variant job profiles on and builds int8 with; only
  // the leader controller runs one (ControlClient::StartVariantJob), as
  // `somm serve` does.
  ro.hardware = backends.hardware;
  ro.tools_dir = ToolsDir(SOMM_DEFAULT_TOOLS_DIR);  // common/install_paths.h
  // Both in a confined child of this binary.
  ro.sandbox = MakeRegistrationSandbox(registration);
  parts.registrar = std::make_unique<ModelRegistrar>(*parts.catalog, ro, parts.backends);
  return parts;
}

// The worker ids and addresses a store's view holds: what a GrpcWorkerPool
// dials.
GrpcWorkerPool::Provider AddressesOf(RedisClusterStateStore& store) {
  return [&store] {
    std::map<std::string, std::string> out;
    for (const auto& [id, report] : store.Workers()) {
      if (!report.address.empty()) out[id] = report.address;
    }
    return out;
  };
}

// The leader's control address from the lease holder "id|host:port".
std::string LeaderAddress(const cluster::LeaseStore& lease) {
  const std::string holder = lease.LeaseHolder();
  const auto bar = holder.find('|');
  return bar == std::string::npos ? "" : holder.substr(bar + 1);
}

// A cluster process's TLS context (null = plaintext). In a cluster TLS is
// mutual or nothing: the client CA is also what each process checks its
// peers' certificates against, and the certificate is also its client one.
StatusOr<std::shared_ptr<const crypto::TlsServerContext>> ClusterTls(
    const crypto::TlsServerFiles& files) {
  if (files.enabled() && files.client_ca_file.empty()) {
    return InvalidArgument(
        "--tls-cert in a cluster needs --tls-client-ca too: routers, workers and controllers "
        "authenticate each other with mutual TLS (scripts/make-certs makes the CA)");
  }
  return crypto::TlsServerContext::CreateIfEnabled(files);
}

// The TLS of a worker's or a controller's metrics port: its certificate,
// and no client certificate asked for, so that kubelet's probes (which
// present none) and Prometheus (a bearer key) reach it; null = plaintext.
StatusOr<std::shared_ptr<const crypto::TlsServerContext>> MetricsPortTls(
    const crypto::TlsServerFiles& files) {
  crypto::TlsServerFiles server_only = files;
  server_only.client_ca_file.clear();
  return crypto::TlsServerContext::CreateIfEnabled(server_only);
}

// Who may read a worker's or a controller's /metrics: with --keys-file, a
// metrics or admin key from it (private models' names are in there);
// without, anyone (loopback only: CheckClusterListenAddress).
StatusOr<std::pair<std::unique_ptr<auth::Guard>, MetricsAccess>> MetricsKeys(
    const std::string& keys_file) {
  std::pair<std::unique_ptr<auth::Guard>, MetricsAccess> out;
  if (keys_file.empty()) return out;
  auth::GuardOptions go;
  go.mode = auth::AuthMode::kKeys;
  go.keys_path = keys_file;
  go.state_dir = std::filesystem::path(keys_file).parent_path().string();
  SOMM_ASSIGN_OR_RETURN(out.first, auth::Guard::Create(std::move(go)));
  out.second.authorize = [g = out.first.get()](const std::string& a) { return g->AdmitMetrics(a); };
  return out;
}

// What every cluster process checks of its --redis before it starts: the
// form, and the password's file or variable.
Status CheckRedisFlag(const std::string& address) {
  return redis::ParseRedisEndpoint(address, [](const char* n) { return std::getenv(n); }).status();
}

// A worker's and a controller's checks of their own flags: where they may
// listen, their TLS files, their metrics keys, their Redis.
Status CheckServiceArgs(const std::string& address, const crypto::TlsServerFiles& tls,
                        const std::string& keys_file, const std::string& redis) {
  SOMM_RETURN_IF_ERROR(auth::CheckClusterListenAddress(address, tls, keys_file));
  SOMM_RETURN_IF_ERROR(ClusterTls(tls).status());
  SOMM_RETURN_IF_ERROR(MetricsPortTls(tls).status());
  SOMM_RETURN_IF_ERROR(MetricsKeys(keys_file).status());
  return CheckRedisFlag(redis);
}

}  // namespace node
}  // namespace somm
