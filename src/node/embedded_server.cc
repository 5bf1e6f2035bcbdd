#include "node/embedded_server.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>

#include "variants/variant_pipeline.h"

namespace somm {

namespace {

// The devices of the default platform's backend; the CPU alone where this
// binary cannot make it (a test whose models are of another runtime).
std::vector<Device> DevicesOf(const BackendSet& backends) {
  StatusOr<Backend*> backend = backends.For(kDefaultPlatform);
  return backend.ok() ? (*backend)->Devices() : std::vector<Device>{Device{}};
}

}  // namespace

EmbeddedServer::EmbeddedServer(EmbeddedServerOptions options, BackendSet backends,
                               ServingMetrics& metrics)
    : options_(std::move(options)), log_(options_.decision_log_size) {
  catalog_ = std::make_unique<ModelCatalog>(options_.repository_path);
  RegistrarOptions ro;
  ro.hardware =
      options_.hardware.empty() ? DefaultHardware(DevicesOf(backends)) : options_.hardware;
  ro.accuracy_tolerance = options_.accuracy_tolerance;
  ro.tools_dir = options_.tools_dir;
  ro.device = options_.device;
  ro.sandbox = options_.sandbox;
  registrar_ = std::make_unique<ModelRegistrar>(*catalog_, ro, backends);

  WorkerOptions wo;
  wo.device = options_.device;
  wo.memory_budget_bytes = options_.memory_budget_bytes;
  wo.background_pacer = options_.background_pacer;
  wo.inline_max_compute_us = options_.inline_max_compute_us;
  wo.inline_min_gap_us = options_.inline_min_gap_us;
  // Every change of the worker's groups reaches the store at once: the
  // router reads where groups are from there.
  wo.on_change = [this] {
    if (stub_) stub_->Publish();
  };
  worker_ = std::make_unique<Worker>(wo, std::move(backends), metrics);
  stub_ = std::make_unique<LocalWorkerStub>(*worker_, store_);
  directory_ = std::make_unique<SingleWorkerDirectory>(*stub_);

  ControllerOptions co = options_.controller;
  co.prices = options_.prices;
  co.device = options_.device;
  co.before_tick = [this] {
    if (router_) router_->PublishDemand();
  };
  controller_ = std::make_unique<Controller>(co, *catalog_, registrar_.get(), store_, *directory_,
                                             metrics, log_);

  RouterOptions rto = options_.router;
  rto.server_name = options_.server_name;
  rto.server_version = options_.server_version;
  rto.prices = options_.prices;
  rto.ready = [this] { return started_.load() && (!options_.strict_readiness || ConfiguredInstancesLoaded()); };
  router_ = std::make_unique<Router>(rto, *catalog_, registrar_.get(), store_, *directory_,
                                     *controller_, metrics, log_);
}

EmbeddedServer::~EmbeddedServer() { Shutdown(); }

Status EmbeddedServer::Start() {
  std::error_code ec;
  if (!std::filesystem::is_directory(options_.repository_path, ec)) {
    return NotFound("model repository '" + options_.repository_path + "' is not a directory");
  }
  stub_->Publish();
  std::vector<std::string> startup = catalog_->ListModelFolders();
  if (options_.startup_models) {
    for (const std::string& name : *options_.startup_models) {
      if (std::find(startup.begin(), startup.end(), name) == startup.end()) {
        return NotFound("--load-model " + name +
                        ": no model folder of that name in the repository");
      }
    }
    startup = *options_.startup_models;
  }
  for (const std::string& name : startup) {
    Status s = controller_->LoadModel(name, /*startup=*/true);
    if (!s.ok()) spdlog::error("{}", s.message());
  }
  if (options_.auto_variants) {
    // Models placed in the repository by hand are managed like registered
    // ones: variants are generated for any version that has none yet.
    for (const VersionPtr& v : catalog_->All()) {
      if (v->profiles.empty()) registrar_->StartVariantJob(v->config, v->version);
    }
  }
  controller_->Start();
  started_ = true;
  return Status::Ok();
}

bool EmbeddedServer::ConfiguredInstancesLoaded() const {
  for (const RepositoryEntry& row : catalog_->Index(/*ready_only=*/false)) {
    if (row.state == "UNAVAILABLE") return false;  // a model that failed to load
  }
  const auto state = store_.Read();
  for (const VersionPtr& v : catalog_->All()) {
    if (!v->config.instance_count_configured) continue;
    const bool loaded = std::any_of(state->groups.begin(), state->groups.end(), [&](const auto& g) {
      return g.model == v->config.name && g.version == v->version && g.variant == AsRegisteredVariant(*v) &&
             !g.loading;
    });
    if (!loaded) return false;
  }
  return true;
}

void EmbeddedServer::Shutdown() {
  if (stopped_) return;
  stopped_ = true;
  router_->Shutdown();
  controller_->Stop();
  registrar_->Shutdown();
  worker_->Shutdown();
}

}  // namespace somm
