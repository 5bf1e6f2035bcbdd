#include "serving/model_manager.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>
#include <set>
#include <thread>


#include "batching/batcher.h"
#include "control/placement.h"
#include "serving/model_manager_internal.h"
#include "variants/host_probe.h"
#include "variants/variant_pipeline.h"

namespace somm {
namespace fs = std::filesystem;

ModelManager::LoadedVersion::~LoadedVersion() {
  // Groups drain as they are destroyed (a query in flight keeps its group
  // alive through its Route until it completes).
  std::map<std::string, std::shared_ptr<InstanceGroup>> drained;
  {
    std::lock_guard<std::mutex> lock(variants_mu);
    drained.swap(groups);
  }
  drained.clear();
  if (metrics) metrics->SetInstancesLoaded(0);
}

int64_t MicrosSince(SteadyClock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(SteadyClock::now() - t).count();
}

bool IsPositiveInteger(const std::string& s) {
  return !s.empty() && s.size() < 19 && std::all_of(s.begin(), s.end(), ::isdigit) &&
         std::stoll(s) > 0;
}

StatusOr<std::vector<std::unique_ptr<Batcher>>> LoadReplicas(Backend& backend,
                                                             const ModelConfig& config,
                                                             const LoadOptions& load,
                                                             const std::string& variant_id,
                                                             const LatencyCurve& curve, int first,
                                                             int count, ModelMetrics* metrics) {
  std::vector<std::unique_ptr<Batcher>> batchers;
  for (int i = 0; i < count; ++i) {
    SOMM_ASSIGN_OR_RETURN(std::unique_ptr<ExecutableModel> exe, backend.Load(load));
    BatcherOptions bo;
    bo.name = variant_id + "#" + std::to_string(first + i);
    bo.max_batch_size = config.max_batch_size;
    if (config.dynamic_batching) {
      bo.max_queue_delay_us = config.dynamic_batching->max_queue_delay_us;
      bo.preferred_batch_sizes = config.dynamic_batching->preferred_batch_sizes;
      bo.max_queue_size = config.dynamic_batching->max_queue_size;
    } else if (config.max_batch_size > 0) {
      // Without dynamic batching a query runs with exactly the batch it
      // brought: a preferred size of 1 sample cuts every batch at one query.
      bo.preferred_batch_sizes = {1};
    }
    if (!curve.points.empty()) {
      bo.predict_compute_us = [curve](int64_t batch) { return curve.Predict(batch) * 1000.0; };
    }
    batchers.push_back(std::make_unique<Batcher>(
        bo, std::move(exe), [metrics](int64_t size, int64_t, bool) { metrics->RecordBatch(size); }));
  }
  return batchers;
}

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

namespace {

bool IsValidModelName(const std::string& name) {
  return !name.empty() && name.size() <= 256 && name[0] != '.' &&
         name.find('/') == std::string::npos && name.find('\\') == std::string::npos;
}

// Checks the query's inputs against the config and returns them in config
// order. Every message names the model, the input and the problem.
Status PrepareInputs(const ModelConfig& config, const std::string& label,
                     std::vector<Tensor> given, std::vector<Tensor>* ordered) {
  const bool batched = config.max_batch_size > 0;
  std::map<std::string, Tensor*> by_name;
  for (Tensor& t : given) {
    if (!by_name.emplace(t.name, &t).second) {
      return InvalidArgument("model '" + label + "': input '" + t.name + "' given twice");
    }
  }
  int64_t batch = -1;
  for (const TensorSpec& spec : config.inputs) {
    auto it = by_name.find(spec.name);
    if (it == by_name.end()) {
      return InvalidArgument("model '" + label + "': missing input '" + spec.name + "'");
    }
    Tensor& t = *it->second;
    if (t.datatype != spec.datatype) {
      return InvalidArgument("model '" + label + "': input '" + spec.name + "' has datatype " +
                             DataTypeName(t.datatype) + ", expected " +
                             DataTypeName(spec.datatype));
    }
    const Shape expected = FullShape(config, spec);
    bool shape_ok = t.shape.size() == expected.size();
    for (size_t d = 0; shape_ok && d < expected.size(); ++d) {
      shape_ok = t.shape[d] >= 0 && (expected[d] == -1 || expected[d] == t.shape[d]);
    }
    if (!shape_ok) {
      return InvalidArgument("model '" + label + "': input '" + spec.name + "' has shape " +
                             ShapeToString(t.shape) + ", expected " + ShapeToString(expected) +
                             (batched ? " (batch dimension first)" : ""));
    }
    if (batched) {
      if (t.shape[0] < 1 || t.shape[0] > config.max_batch_size) {
        return InvalidArgument("model '" + label + "': input '" + spec.name + "' has batch size " +
                               std::to_string(t.shape[0]) + ", allowed 1.." +
                               std::to_string(config.max_batch_size));
      }
      if (batch >= 0 && t.shape[0] != batch) {
        return InvalidArgument("model '" + label + "': inputs disagree on batch size (" +
                               std::to_string(batch) + " vs " + std::to_string(t.shape[0]) + ")");
      }
      batch = t.shape[0];
    }
    Status size = t.CheckByteSize();
    if (!size.ok()) return InvalidArgument("model '" + label + "': " + size.message());
    ordered->push_back(std::move(t));
    by_name.erase(it);
  }
  if (!by_name.empty()) {
    std::string expected;
    for (const auto& spec : config.inputs) expected += (expected.empty() ? "" : ", ") + spec.name;
    return InvalidArgument("model '" + label + "': unknown input '" + by_name.begin()->first +
                           "' (expected: " + expected + ")");
  }
  return Status::Ok();
}

// Which versions the policy selects among those present on disk.
std::vector<int64_t> SelectVersions(const VersionPolicy& policy, std::vector<int64_t> present) {
  std::sort(present.begin(), present.end());
  switch (policy.kind) {
    case VersionPolicy::Kind::kAll:
      return present;
    case VersionPolicy::Kind::kLatest: {
      const size_t n = std::min<size_t>(present.size(), static_cast<size_t>(policy.latest_count));
      return std::vector<int64_t>(present.end() - static_cast<std::ptrdiff_t>(n), present.end());
    }
    case VersionPolicy::Kind::kSpecific:
      return policy.specific;
  }
  return {};
}

}  // namespace

namespace {

// Fills in the hardware configurations variants are profiled on: one thread,
// every core, and each GPU.
ModelManagerOptions WithDefaults(ModelManagerOptions o, const Backend& backend) {
  if (o.hardware.empty()) o.hardware = DefaultHardware(backend);
  return o;
}

}  // namespace

ModelManager::ModelManager(ModelManagerOptions options, Backend& backend, ServingMetrics& metrics)
    : options_(WithDefaults(std::move(options), backend)),
      backend_(backend),
      metrics_(metrics),
      decisions_(options_.decision_log_size) {
  memory_budget_bytes_ = options_.memory_budget_bytes > 0
                             ? options_.memory_budget_bytes
                             : control::DefaultMemoryBudget(AvailableMemoryBytes(),
                                                            control::kDefaultCpuBudgetFraction);
  metrics_.SetMemory("cpu", 0, memory_budget_bytes_);
  spdlog::info("memory budget for instances: {} MiB ({})", memory_budget_bytes_ / (1024 * 1024),
               options_.memory_budget_bytes > 0 ? "--memory-budget-mb"
                                                : "default fraction of the memory available now");
}

ModelManager::~ModelManager() { Shutdown(); }

std::vector<std::string> ModelManager::ListModelFolders() const {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(options_.repository_path, ec)) {
    const std::string name = e.path().filename().string();
    if (e.is_directory() && IsValidModelName(name)) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

Status ModelManager::Start() {
  std::error_code ec;
  if (!fs::is_directory(options_.repository_path, ec)) {
    return NotFound("model repository '" + options_.repository_path + "' is not a directory");
  }
  for (const std::string& name : ListModelFolders()) {
    Status s = LoadModel(name);
    if (!s.ok()) spdlog::error("{}", s.message());
  }
  started_ = true;
  if (options_.auto_variants) {
    // Models placed in the repository by hand are managed like registered
    // ones: variants are generated for any version that has none yet.
    std::vector<std::pair<ModelConfig, int64_t>> todo;
    {
      std::shared_lock<std::shared_mutex> lock(mu_);
      for (const auto& [_, entry] : models_) {
        for (const auto& [v, lv] : entry->versions) {
          std::lock_guard<std::mutex> vlock(lv->variants_mu);
          if (lv->profiles.empty()) todo.emplace_back(lv->config, v);
        }
      }
    }
    for (const auto& [config, v] : todo) StartVariantJob(config, v);
  }
  control_thread_ = std::thread([this] { ControlLoop(); });
  return Status::Ok();
}

void ModelManager::Shutdown() {
  shutting_down_ = true;
  {
    std::lock_guard<std::mutex> lock(control_mu_);
    control_stop_ = true;
  }
  control_cv_.notify_all();
  if (control_thread_.joinable()) control_thread_.join();
  std::vector<std::thread> jobs;
  {
    std::lock_guard<std::mutex> lock(jobs_mu_);
    jobs.swap(job_threads_);
  }
  for (auto& t : jobs) t.join();  // a job in progress finishes its current model
  std::lock_guard<std::mutex> load_lock(load_mu_);
  std::map<std::string, std::shared_ptr<ModelEntry>> drained;
  {
    std::unique_lock<std::shared_mutex> lock(mu_);
    drained.swap(models_);
  }
  drained.clear();  // each LoadedVersion drains its queues as it goes
}

StatusOr<std::shared_ptr<ModelManager::LoadedVersion>> ModelManager::LoadVersion(
    const ModelConfig& config, int64_t version, const std::string& path) {
  auto loaded = std::make_shared<LoadedVersion>();
  loaded->config = config;
  loaded->version = version;
  loaded->version_str = std::to_string(version);
  loaded->device = options_.device;
  loaded->base_hardware.device = options_.device.kind;
  loaded->base_hardware.device_index = options_.device.index;
  loaded->base_hardware.threads = config.intra_op_threads;
  loaded->metrics = metrics_.ForModel(config.name, loaded->version_str);
  LoadOptions& lo = loaded->base_load;
  lo.model_name = config.name;
  lo.model_version = version;
  lo.model_path = path;
  lo.device = options_.device;
  lo.intra_op_threads = config.intra_op_threads;
  lo.max_batch_size = config.max_batch_size;
  lo.inputs = config.inputs;
  lo.outputs = config.outputs;
  loaded->pinned = !options_.managed;
  // Profiles persisted by an earlier run (or an earlier registration).
  auto profiles = LoadProfiles(VariantsRoot(), config.name, version);
  if (profiles.ok()) loaded->profiles = std::move(profiles).value();
  const auto t0 = SteadyClock::now();
  SOMM_RETURN_IF_ERROR(EnsureGroup(*loaded, kAsRegistered, loaded->base_hardware,
                                   config.instance_count, "configured instances (model.yaml)",
                                   /*on_critical_path=*/false)
                           .status());
  spdlog::info("loaded model {} version {} ({} instance(s) on {}, {} ms, {} profiled variants)",
               config.name, version, config.instance_count, options_.device.ToString(),
               MicrosSince(t0) / 1000, loaded->profiles.size());
  return loaded;
}

std::shared_ptr<ModelManager::ModelEntry> ModelManager::BuildModel(const std::string& name) {
  auto entry = std::make_shared<ModelEntry>();
  entry->name = name;
  const fs::path dir = fs::path(options_.repository_path) / name;
  auto config = LoadModelConfig(dir.string());
  if (!config.ok()) {
    entry->problems.push_back({name, "", "UNAVAILABLE", config.status().message()});
    return entry;
  }
  entry->config = *config;
  std::vector<int64_t> present;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string v = e.path().filename().string();
    if (e.is_directory() && IsPositiveInteger(v)) present.push_back(std::stoll(v));
  }
  if (present.empty()) {
    entry->problems.push_back({name, "", "UNAVAILABLE",
                               dir.string() + ": no version folders (expected " + name +
                                   "/<N>/model.pt)"});
    return entry;
  }
  for (int64_t v : SelectVersions(config->version_policy, present)) {
    const fs::path file = dir / std::to_string(v) / "model.pt";
    auto loaded = LoadVersion(*config, v, file.string());
    if (loaded.ok()) {
      entry->versions[v] = std::move(loaded).value();
    } else {
      entry->problems.push_back(
          {name, std::to_string(v), "UNAVAILABLE", loaded.status().message()});
    }
  }
  return entry;
}

Status ModelManager::LoadModel(const std::string& name) {
  if (!IsValidModelName(name)) return InvalidArgument("invalid model name '" + name + "'");
  if (shutting_down_) return Unavailable("server is shutting down");
  std::lock_guard<std::mutex> load_lock(load_mu_);
  std::error_code ec;
  if (!fs::is_directory(fs::path(options_.repository_path) / name, ec)) {
    return NotFound("model '" + name + "' not found in repository " + options_.repository_path);
  }
  std::shared_ptr<ModelEntry> entry = BuildModel(name);
  std::shared_ptr<ModelEntry> replaced;
  std::string problems;
  for (const auto& p : entry->problems) {
    problems += (problems.empty() ? "" : "; ") + p.reason;
    spdlog::error("model {} version {}: {}", name, p.version.empty() ? "-" : p.version, p.reason);
  }
  {
    std::unique_lock<std::shared_mutex> lock(mu_);
    auto it = models_.find(name);
    const bool old_serving = it != models_.end() && !it->second->versions.empty();
    if (entry->versions.empty() && old_serving) {
      // A broken reload must not take down a model that is serving.
      return InvalidArgument("failed to reload model '" + name + "', previous versions keep "
                             "serving: " + problems);
    }
    if (it != models_.end()) replaced = std::move(it->second);
    models_[name] = entry;
  }
  replaced.reset();  // old versions drain here, after the new ones took over
  if (entry->versions.empty()) {
    return InvalidArgument("failed to load model '" + name + "': " + problems);
  }
  return Status::Ok();
}

Status ModelManager::UnloadModel(const std::string& name) {
  std::lock_guard<std::mutex> load_lock(load_mu_);
  std::shared_ptr<ModelEntry> removed;
  {
    std::unique_lock<std::shared_mutex> lock(mu_);
    auto it = models_.find(name);
    if (it == models_.end()) return NotFound("model '" + name + "' is not loaded");
    removed = std::move(it->second);
    models_.erase(it);
  }
  for (const auto& [_, lv] : removed->versions) {
    std::lock_guard<std::mutex> lock(lv->variants_mu);
    for (const auto& [key, group] : lv->groups) {
      metrics_.SetReplicas(name, lv->version_str, key.substr(0, key.find('@')),
                           group->hardware().Name(), 0, 0);
    }
  }
  removed.reset();
  spdlog::info("unloaded model {}", name);
  return Status::Ok();
}

StatusOr<std::shared_ptr<ModelManager::LoadedVersion>> ModelManager::Resolve(
    const std::string& name, const std::string& version) const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  auto it = models_.find(name);
  if (it == models_.end()) return NotFound("unknown model '" + name + "'");
  const ModelEntry& entry = *it->second;
  if (entry.versions.empty()) {
    const std::string why = entry.problems.empty() ? "" : ": " + entry.problems[0].reason;
    return Unavailable("model '" + name + "' is not ready" + why);
  }
  if (version.empty()) return entry.versions.rbegin()->second;
  if (!IsPositiveInteger(version)) {
    return InvalidArgument("model '" + name + "': version '" + version +
                           "' is not a positive integer");
  }
  auto v = entry.versions.find(std::stoll(version));
  if (v == entry.versions.end()) {
    std::string loaded;
    for (const auto& [n, _] : entry.versions) loaded += (loaded.empty() ? "" : ", ") + std::to_string(n);
    return NotFound("model '" + name + "' has no version " + version + " loaded (loaded: " +
                    loaded + ")");
  }
  return v->second;
}

void ModelManager::Infer(InferenceRequest request, InferCallback done) {
  const auto start = SteadyClock::now();
  if (shutting_down_) {
    done(Unavailable("server is shutting down"));
    return;
  }
  auto routed = RouteQuery(request);
  if (!routed.ok()) {
    done(routed.status());
    return;
  }
  Route route = std::move(routed).value();
  std::shared_ptr<LoadedVersion> lv = route.version;
  const std::string label = lv->config.name + ":" + lv->version_str;
  ModelMetrics* metrics = lv->metrics;
  auto fail = [&](Status s) {
    metrics->RecordFailure(StatusCodeName(s.code()));
    done(std::move(s));
  };

  std::vector<Tensor> inputs;
  Status prepared = PrepareInputs(lv->config, label, std::move(request.inputs), &inputs);
  if (!prepared.ok()) return fail(std::move(prepared));
  const int64_t samples =
      lv->config.max_batch_size > 0 && !inputs.empty() ? inputs[0].shape[0] : 1;

  // Requested outputs: names must exist; empty = all.
  std::vector<bool> keep(lv->config.outputs.size(), request.outputs.empty());
  for (const auto& ro : request.outputs) {
    auto it = std::find_if(lv->config.outputs.begin(), lv->config.outputs.end(),
                           [&](const TensorSpec& s) { return s.name == ro.name; });
    if (it == lv->config.outputs.end()) {
      return fail(InvalidArgument("model '" + label + "': unknown output '" + ro.name + "'"));
    }
    keep[static_cast<size_t>(it - lv->config.outputs.begin())] = true;
  }

  auto chosen = std::make_shared<int>(-1);
  BatchTask task;
  task.inputs = std::move(inputs);
  if (route.latency_slo_ms) {
    // The SLO runs from arrival: the batcher admits, batches and drops by it.
    task.deadline = start + std::chrono::duration_cast<SteadyClock::duration>(
                                std::chrono::duration<double, std::milli>(*route.latency_slo_ms));
  }
  task.best_effort = route.best_effort;
  task.done = [metrics, done, keep = std::move(keep), start, chosen, samples,
               device = lv->device.ToString(),
               decision = route.decision, price = route.price_per_s,
               name = lv->config.name, version = lv->version_str,
               id = std::move(request.id)](Status s, std::vector<Tensor> outputs,
                                            const BatchStats& stats) {
    if (!s.ok()) {
      metrics->RecordFailure(StatusCodeName(s.code()));
      done(std::move(s));
      return;
    }
    InferenceResponse response;
    response.model_name = name;
    response.model_version = version;
    response.id = id;
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (keep[i]) response.outputs.push_back(std::move(outputs[i]));
    }
    const int64_t total_us = MicrosSince(start);
    auto& p = response.parameters;
    p["somm_queue_us"] = stats.queue_ns / 1000;
    p["somm_compute_us"] = stats.compute_ns / 1000;
    p["somm_server_us"] = total_us;
    p["somm_batch_size"] = stats.batch_size;
    p["somm_instance"] = static_cast<int64_t>(*chosen);
    p["somm_variant"] = decision.variant;
    p["somm_hardware"] = decision.hardware;
    p["somm_device"] = device;
    p["somm_decision"] = decision.outcome;
    p["somm_predicted_latency_ms"] = decision.predicted_latency_ms;
    p["somm_latency_ms"] = static_cast<double>(total_us) / 1000.0;
    // This query's share of its batch's hardware time, at the hardware price.
    p["somm_cost_usd"] = price * (static_cast<double>(stats.compute_ns) / 1e9) *
                         static_cast<double>(samples) /
                         static_cast<double>(std::max<int64_t>(stats.batch_size, 1));
    p["somm_reason"] = decision.reason;
    metrics->RecordSuccess(stats.queue_ns / 1e3, stats.compute_ns / 1e3, static_cast<double>(total_us));
    done(std::move(response));
  };
  Status enqueued = route.group->Enqueue(std::move(task), route.instance, chosen.get());
  if (!enqueued.ok()) fail(std::move(enqueued));
}

ServerMetadata ModelManager::GetServerMetadata() const {
  return ServerMetadata{options_.server_name, options_.server_version,
                        {"binary_tensor_data", "model_repository", "parameters", "statistics"}};
}

StatusOr<ModelMetadata> ModelManager::GetModelMetadata(const std::string& name,
                                                       const std::string& version) const {
  SOMM_ASSIGN_OR_RETURN(std::shared_ptr<LoadedVersion> lv, Resolve(name, version));
  ModelMetadata md;
  md.name = name;
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    auto it = models_.find(name);
    if (it != models_.end()) {
      for (const auto& [v, _] : it->second->versions) md.versions.push_back(std::to_string(v));
    }
  }
  const ModelConfig& c = lv->config;
  md.platform = "pytorch_torchscript";
  for (const auto& s : c.inputs) md.inputs.push_back({s.name, DataTypeName(s.datatype), FullShape(c, s)});
  for (const auto& s : c.outputs) md.outputs.push_back({s.name, DataTypeName(s.datatype), FullShape(c, s)});
  if (!c.task.empty()) md.parameters["task"] = c.task;
  md.parameters["max_batch_size"] = c.max_batch_size;
  if (c.accuracy.value) md.parameters["accuracy"] = *c.accuracy.value;
  if (!c.accuracy.source.empty()) md.parameters["accuracy_source"] = c.accuracy.source;
  if (!c.description.empty()) md.parameters["description"] = c.description;
  if (c.image_preprocessing) {
    md.parameters["preprocessing"] = PreprocessingToJson(*c.image_preprocessing);
  }
  return md;
}

StatusOr<bool> ModelManager::IsModelReady(const std::string& name,
                                          const std::string& version) const {
  auto lv = Resolve(name, version);
  if (lv.ok()) return !shutting_down_.load();
  if (lv.status().code() == StatusCode::kUnavailable) return false;
  return lv.status();
}

std::vector<RepositoryEntry> ModelManager::RepositoryIndex(bool ready_only) const {
  std::vector<RepositoryEntry> rows;
  std::set<std::string> known;
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    for (const auto& [name, entry] : models_) {
      known.insert(name);
      for (const auto& [v, _] : entry->versions) rows.push_back({name, std::to_string(v), "READY", ""});
      if (!ready_only) rows.insert(rows.end(), entry->problems.begin(), entry->problems.end());
    }
  }
  if (!ready_only) {
    for (const std::string& name : ListModelFolders()) {
      if (!known.count(name)) rows.push_back({name, "", "UNAVAILABLE", "unloaded"});
    }
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const RepositoryEntry& a, const RepositoryEntry& b) { return a.name < b.name; });
  return rows;
}

int64_t ModelManager::QueuedQueries() const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  int64_t total = 0;
  for (const auto& [_, entry] : models_) {
    for (const auto& [__, lv] : entry->versions) {
      std::lock_guard<std::mutex> vlock(lv->variants_mu);
      for (const auto& [___, group] : lv->groups) total += group->QueuedQueries();
    }
  }
  return total;
}

}  // namespace somm
