#include "worker/worker.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <random>
#include <thread>

#include "common/host_probe.h"
#include "cluster/memory_budget.h"
#include "variants/variant_pipeline.h"

namespace somm {
namespace {

constexpr int64_t kMiB = 1024 * 1024;

int64_t MicrosSince(SteadyClock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(SteadyClock::now() - t).count();
}

std::string DeviceName(const HardwareConfig& hw) {
  return Device{hw.device, hw.device_index}.ToString();
}

std::string NewIncarnation() {
  std::random_device rd;
  const uint64_t bits = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(bits));
  return buf;
}

const VariantProfile* FindProfile(const VersionRecord& v, const std::string& variant) {
  for (const auto& p : v.profiles) {
    if (p.variant == variant) return &p;
  }
  return nullptr;
}

// Batches of one sample a new instance runs before it takes queries
// (Batcher::WarmUp) when its model.yaml has no `warmup` block:
// TorchScript's profiling runs, the first optimised ones and cold caches are
// past by the fifth on the digits models; the later half measures the
// settled time.
constexpr int kWarmRuns = 8;

// Whether model.yaml's `warmup` block says what an instance runs.
bool HasWarmupBlock(const ModelConfig& config) {
  return config.warmup.runs >= 0 || !config.warmup.batch_sizes.empty();
}

// `batch` samples of zeros of each input (one sample, unbatched, when the
// model takes no batch dim); empty when a dim is variable or an input is
// BYTES.
std::vector<Tensor> ZeroBatch(const ModelConfig& config, int64_t batch) {
  std::vector<Tensor> inputs;
  for (const TensorSpec& spec : config.inputs) {
    Tensor t;
    t.name = spec.name;
    t.datatype = spec.datatype;
    if (config.max_batch_size > 0) t.shape.push_back(batch);
    t.shape.insert(t.shape.end(), spec.shape.begin(), spec.shape.end());
    const int64_t count = ElementCount(t.shape);
    if (count < 0 || spec.datatype == DataType::kBytes) return {};
    t.data.assign(static_cast<size_t>(count) * DataTypeSize(spec.datatype), '\0');
    inputs.push_back(std::move(t));
  }
  return inputs;
}

// Warms each new instance on the serving path, so that the first query
// after a load is not the one that pays for the model's first runs, and
// returns how much longer than `curve` a settled batch of one took there
// (GroupState::warm_overhead_ms): the router's prior for the charge of a
// query here, before its own measurements count. -1 when unknown.
//
// model.yaml's `warmup` (Triton's model_warmup) governs the runs: `runs`
// batches at batch 1 and as many at each of `batch_sizes` the model takes,
// every one of them, on the batcher's thread (the backend then only checks
// the signature on the loading thread: VariantLoadOptions); a query at one
// of those sizes meets a model that has already run it (TorchScript
// specialises its graph on the shapes it has seen). Without the block,
// kWarmRuns at batch 1 within Batcher::kWarmUpBudget.
double WarmReplicas(const std::vector<std::unique_ptr<Batcher>>& batchers,
                    const ModelConfig& config, const LatencyCurve& curve,
                    const std::string& label) {
  const bool configured = HasWarmupBlock(config);
  const int runs = configured ? std::max(0, config.warmup.runs) : kWarmRuns;
  // A block without `runs` keeps the default count, at its sizes.
  const int per_size = configured && config.warmup.runs < 0 ? kWarmRuns : runs;
  const std::vector<Tensor> zeros = ZeroBatch(config, 1);
  if (zeros.empty() || per_size == 0) return -1;
  const auto start = SteadyClock::now();
  const std::optional<std::chrono::milliseconds> budget =
      configured ? std::nullopt : std::optional(Batcher::kWarmUpBudget);
  std::vector<double> settled_us;
  for (const auto& b : batchers) {
    if (auto us = b->WarmUp(zeros, per_size, budget)) settled_us.push_back(*us);
    for (int64_t size : config.warmup.batch_sizes) {
      if (size <= 1 || config.max_batch_size <= 0 || size > config.max_batch_size) continue;
      b->WarmUp(ZeroBatch(config, size), per_size, budget);
    }
  }
  if (configured) {
    spdlog::info("warm-up of {} on its serving thread: {} run(s) at batch 1{} in {:.1f} ms", label,
                 per_size,
                 config.warmup.batch_sizes.empty() ? "" : " and at each of model.yaml's sizes",
                 std::chrono::duration<double, std::milli>(SteadyClock::now() - start).count());
  }
  if (settled_us.empty() || curve.points.empty()) return -1;
  std::sort(settled_us.begin(), settled_us.end());
  return std::max(0.0, settled_us[settled_us.size() / 2] / 1000.0 - curve.Predict(1));
}

// The backend's own warm-up on the loading thread: only the signature check
// (one run) when the batcher's thread runs model.yaml's block (WarmReplicas),
// so that the block is not run twice; else the backend's default.
void BackendWarmup(const ModelConfig& config, LoadOptions* lo) {
  lo->warmup_runs = HasWarmupBlock(config) ? 0 : -1;
  lo->warmup_batch_sizes.clear();
}

}  // namespace

struct Worker::Slot {
  std::string label;
  std::string variant_id;  // "model:version:variant"
  std::string variant;
  HardwareConfig hardware;
  VersionPtr record;
  LatencyCurve curve;
  double load_ms = 0;
  double warm_overhead_ms = -1;  // GroupState::warm_overhead_ms
  bool pinned = false;
  std::shared_ptr<InstanceGroup> group;  // null while the first load runs
  bool loading = false;
  int loading_replicas = 0;
  int64_t memory_bytes = 0;  // per replica: profiled, measured, or the estimate while loading
  std::vector<std::function<void(Status)>> waiters;
};

StatusOr<LoadOptions> VariantLoadOptions(const VersionRecord& v, const std::string& variant,
                                         const HardwareConfig& hw) {
  if (const VariantProfile* p = FindProfile(v, variant)) {
    StatusOr<LoadOptions> lo = LoadOptionsForVariant(v.config, *p, hw);
    if (lo.ok()) BackendWarmup(v.config, &*lo);
    return lo;
  }
  if (variant != AsRegisteredVariant(v)) {
    return NotFound("model '" + v.config.name + "' version " + v.version_str +
                    " has no profiled variant '" + variant + "'");
  }
  LoadOptions lo;
  lo.model_name = v.config.name;
  lo.model_version = v.version;
  lo.model_path = v.path;
  lo.device = Device{hw.device, hw.device_index};
  lo.intra_op_threads = hw.threads;
  lo.max_batch_size = v.config.max_batch_size;
  lo.inputs = v.config.inputs;
  lo.outputs = v.config.outputs;
  BackendWarmup(v.config, &lo);
  return lo;
}

Worker::Worker(WorkerOptions options, BackendSet backends, ServingMetrics& metrics)
    : options_(std::move(options)),
      env_(options_.env != nullptr ? *options_.env : Env::Default()),
      backends_(std::move(backends)),
      metrics_(metrics),
      incarnation_(NewIncarnation()) {
  memory_budget_bytes_ = options_.memory_budget_bytes > 0
                             ? options_.memory_budget_bytes
                             : cluster::DefaultMemoryBudget(env_.AvailableMemoryBytes(),
                                                            cluster::kDefaultCpuBudgetFraction);
  metrics_.SetMemory("cpu", 0, memory_budget_bytes_);
  spdlog::info("worker {}: memory budget for instances: {} MiB ({})", options_.id,
               memory_budget_bytes_ / kMiB,
               options_.memory_budget_bytes > 0 ? "--memory-budget-mb"
                                                : "default fraction of the memory available now");
}

Worker::~Worker() { Shutdown(); }

void Worker::Shutdown() {
  shutting_down_ = true;
  urgent_lane_.Shutdown();
  background_lane_.Shutdown();
  std::map<std::string, std::shared_ptr<Slot>> drained;
  {
    WriterLock lock(&mu_);
    drained.swap(slots_);
  }
  drained.clear();  // each group drains its queues as it goes
}

void Worker::Changed() {
  if (options_.on_change) options_.on_change();
}

bool Worker::HasGroup(const std::string& label) const {
  ReaderLock lock(&mu_);
  auto it = slots_.find(label);
  return it != slots_.end() && it->second->group != nullptr;
}

Status Worker::Execute(ExecuteRequest& request, ExecuteCallback done) {
  std::shared_ptr<InstanceGroup> group;
  std::string device;
  {
    ReaderLock lock(&mu_);
    auto it = slots_.find(request.group);
    if (it != slots_.end()) {
      group = it->second->group;
      device = DeviceName(it->second->hardware);
    }
  }
  if (!group) {
    return NotFound("instance group " + request.group + " is not loaded on worker " + options_.id);
  }
  auto chosen = std::make_shared<int64_t>(-1);
  BatchTask task;
  task.inputs = request.shared_inputs != nullptr ? *request.shared_inputs
                                                 : std::move(request.inputs);
  task.deadline = request.deadline;
  task.best_effort = request.best_effort;
  task.done = [done, chosen, device = std::move(device)](Status s, std::vector<Tensor> outputs,
                                                          const BatchStats& stats) {
    if (!s.ok()) {
      done(std::move(s));
      return;
    }
    ExecuteResult r;
    r.outputs = std::move(outputs);
    r.stats = stats;
    r.instance_id = *chosen;
    r.device = device;
    done(std::move(r));
  };
  // A refused task is not called back (batcher.h): `done` answers here.
  Status enqueued = group->Enqueue(std::move(task), request.instance_id, chosen.get());
  if (!enqueued.ok()) done(std::move(enqueued));
  return Status::Ok();
}

void Worker::Apply(WorkerAction action, std::function<void(Status)> done) {
  if (shutting_down_) {
    done(Unavailable("worker " + options_.id + " is shutting down"));
    return;
  }
  const cluster::Action& a = action.action;
  const std::string label = cluster::GroupLabel(a);
  SerialExecutor& lane = action.urgent ? urgent_lane_ : background_lane_;
  if (a.kind == cluster::Action::kLoad) {
    bool start = false;
    bool resize = false;
    {
      WriterLock lock(&mu_);
      std::shared_ptr<Slot>& slot = slots_[label];
      if (!slot) {
        if (!action.version) {
          slots_.erase(label);
          done(InvalidArgument("load of " + label + " names no model version"));
          return;
        }
        slot = std::make_shared<Slot>();
        slot->label = label;
        slot->variant = a.variant;
        slot->variant_id = a.model + ":" + std::to_string(a.version) + ":" + a.variant;
        slot->hardware = a.hardware;
        slot->record = action.version;
        slot->pinned = action.pinned;
        slot->loading = true;
        slot->loading_replicas = std::max(a.replicas, 1);
        if (const VariantProfile* p = FindProfile(*action.version, a.variant)) {
          if (const HardwareProfile* hp = p->For(a.hardware)) {
            slot->curve = hp->latency;
            slot->load_ms = hp->load_time_ms;
            slot->memory_bytes = static_cast<int64_t>(hp->peak_memory_mb * kMiB);
          }
        }
        slot->waiters.push_back(std::move(done));
        start = true;
      } else if (slot->loading) {
        slot->waiters.push_back(std::move(done));
        return;
      } else if (action.reload) {
        slot->loading = true;
        slot->record = action.version;
        slot->waiters.push_back(std::move(done));
        start = true;
      } else {
        resize = slot->group && static_cast<int>(slot->group->size()) < a.replicas;
      }
    }
    if (start) {
      Changed();
      if (!lane.Post([this, action] { RunLoad(action); })) {
        RunLoad(action);  // shutting down: fail the waiters now
      }
      return;
    }
    if (!resize) {
      done(Status::Ok());
      return;
    }
    WorkerAction r = action;
    r.action.kind = cluster::Action::kSetReplicas;
    if (!lane.Post([this, r, done] { done(Resize(r)); })) done(Unavailable("worker is shutting down"));
    return;
  }
  std::function<Status()> work;
  if (a.kind == cluster::Action::kSetReplicas) {
    work = [this, action] { return Resize(action); };
  } else {
    work = [this, action] { return Unload(action); };
  }
  if (!lane.Post([work, done] { done(work()); })) done(Unavailable("worker is shutting down"));
}

void Worker::RunLoad(const WorkerAction& action) {
  const cluster::Action& a = action.action;
  const std::string label = cluster::GroupLabel(a);
  Status s = shutting_down_ ? Unavailable("worker " + options_.id + " is shutting down")
                            : LoadGroup(action);
  std::vector<std::function<void(Status)>> waiters;
  {
    WriterLock lock(&mu_);
    auto it = slots_.find(label);
    if (it != slots_.end()) {
      waiters.swap(it->second->waiters);
      it->second->loading = false;
      if (!it->second->group) slots_.erase(it);  // a first load that failed
    }
  }
  Changed();
  for (auto& w : waiters) w(s);
}

StatusOr<std::vector<std::unique_ptr<Batcher>>> Worker::LoadReplicas(
    const VersionRecord& v, const LoadOptions& load, const std::string& id,
    const LatencyCurve& curve, int first, int count, std::vector<int64_t>* ids) {
  const ModelConfig& config = v.config;
  ModelMetrics* metrics = metrics_.ForModel(config.name, v.version_str);
  // The version's platform names its backend (made here the first time).
  SOMM_ASSIGN_OR_RETURN(Backend* const backend, backends_.For(config.platform));
  std::vector<std::unique_ptr<Batcher>> batchers;
  for (int i = 0; i < count; ++i) {
    SOMM_ASSIGN_OR_RETURN(std::unique_ptr<ExecutableModel> exe, backend->Load(load));
    BatcherOptions bo;
    bo.name = id + "#" + std::to_string(first + i);
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
      bo.predict_compute_us = [curve](int64_t batch) { return curve.Measured(batch) * 1000.0; };
    }
    if (load.intra_op_threads <= 1) {
      bo.inline_max_compute_us = options_.inline_max_compute_us;
      bo.inline_min_gap_us = options_.inline_min_gap_us;
    }
    batchers.push_back(std::make_unique<Batcher>(
        bo, std::move(exe),
        [metrics](int64_t size, int64_t, bool) { metrics->RecordBatch(size); }));
    ids->push_back(next_instance_id_.fetch_add(1));
  }
  return batchers;
}

Status Worker::LoadGroup(const WorkerAction& action) {
  const cluster::Action& a = action.action;
  const VersionRecord& v = *action.version;
  if (!action.urgent && options_.background_pacer) {
    const auto waited = options_.background_pacer->WaitTurn();
    if (waited.count() > 0) {
      const double duty = options_.background_pacer->duty();
      spdlog::info("load of {}:{}:{} waited {:.0f} ms: background loads and unloads are paced "
                   "to {:.0f}% of wall time (--background-duty {:g}), so that back-to-back ones "
                   "leave serving models some rest",
                   a.model, a.version, a.variant,
                   std::chrono::duration<double, std::milli>(waited).count(), duty * 100, duty);
      metrics_.RecordPacedWait(std::chrono::duration<double>(waited).count());
    }
  }
  SOMM_ASSIGN_OR_RETURN(LoadOptions load,
                        VariantLoadOptions(v, a.variant, a.hardware));
  load.urgent = action.urgent;
  const std::string id = a.model + ":" + std::to_string(a.version) + ":" + a.variant;
  const std::string label = cluster::GroupLabel(a);
  const VariantProfile* profile = FindProfile(v, a.variant);
  const HardwareProfile* hp = profile ? profile->For(a.hardware) : nullptr;
  const int replicas = std::max(a.replicas, 1);
  // The platform's backend is made before the memory mark: what it takes is
  // the process's, not this group's.
  SOMM_RETURN_IF_ERROR(backends_.For(v.config.platform).status());
  const auto t0 = SteadyClock::now();
  const int64_t rss0 = env_.ResidentBytes();
  std::vector<int64_t> ids;
  SOMM_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<Batcher>> batchers,
                        LoadReplicas(v, load, id, hp ? hp->latency : LatencyCurve{}, 0, replicas,
                                     &ids));
  const double warm_overhead_ms =
      WarmReplicas(batchers, v.config, hp ? hp->latency : LatencyCurve{}, label);
  int64_t bytes_per = hp ? static_cast<int64_t>(hp->peak_memory_mb * kMiB) : 0;
  if (!hp) {
    // Unprofiled: account what the load added to the process, at least the
    // file's size (the weights).
    std::error_code ec;
    const auto file_bytes = static_cast<int64_t>(std::filesystem::file_size(load.model_path, ec));
    bytes_per = std::max((env_.ResidentBytes() - rss0) / replicas, ec ? int64_t{0} : file_bytes);
  }
  auto group = std::make_shared<InstanceGroup>(id, a.hardware, std::move(batchers), std::move(ids),
                                               bytes_per);
  std::shared_ptr<InstanceGroup> replaced;
  {
    WriterLock lock(&mu_);
    auto it = slots_.find(label);
    if (it == slots_.end()) return Unavailable(label + " was unloaded while it loaded");
    Slot& slot = *it->second;
    if (!hp) slot.memory_bytes = std::max(slot.memory_bytes, bytes_per);
    slot.warm_overhead_ms = warm_overhead_ms;
    replaced = std::move(slot.group);
    slot.group = std::move(group);
    slot.record = action.version;
  }
  replaced.reset();  // a reload's old instances finish their queued queries here
  PublishReplicaMetrics(a.model, std::to_string(a.version));
  // The settled batch's time beyond the profile goes to the log too: it is
  // what the router predicts the first queries' charge from.
  std::string warm;
  if (warm_overhead_ms >= 0) {
    warm = fmt::format(", a settled batch {:.3f} ms over its profile", warm_overhead_ms);
  }
  spdlog::info("worker {}: loaded {} x{} in {} ms{}{}", options_.id, label, replicas,
               MicrosSince(t0) / 1000, action.urgent ? " (urgent)" : "", warm);
  return Status::Ok();
}

Status Worker::Resize(const WorkerAction& action) {
  const cluster::Action& a = action.action;
  const std::string label = cluster::GroupLabel(a);
  std::shared_ptr<Slot> slot;
  {
    ReaderLock lock(&mu_);
    auto it = slots_.find(label);
    if (it != slots_.end()) slot = it->second;
  }
  if (!slot || !slot->group) return NotFound(label + " is not loaded on worker " + options_.id);
  const int want = std::max(a.replicas, 1);
  const int have = static_cast<int>(slot->group->size());
  if (want > have) {
    SOMM_ASSIGN_OR_RETURN(LoadOptions load,
                          VariantLoadOptions(*slot->record, a.variant, a.hardware));
    // A scale-up answers load the group already cannot carry: its queries
    // wait on it, so it runs at normal priority.
    load.urgent = true;
    std::vector<int64_t> ids;
    SOMM_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<Batcher>> batchers,
                          LoadReplicas(*slot->record, load, slot->variant_id, slot->curve, have,
                                       want - have, &ids));
    WarmReplicas(batchers, slot->record->config, slot->curve, label);
    slot->group->AddReplicas(std::move(batchers), std::move(ids));
  } else if (want < have) {
    slot->group->RemoveReplicas(have - want);
  } else {
    return Status::Ok();
  }
  PublishReplicaMetrics(a.model, std::to_string(a.version));
  Changed();
  return Status::Ok();
}

Status Worker::Unload(const WorkerAction& action) {
  const cluster::Action& a = action.action;
  const std::string label = cluster::GroupLabel(a);
  std::shared_ptr<InstanceGroup> removed;
  {
    WriterLock lock(&mu_);
    auto it = slots_.find(label);
    if (it == slots_.end() || it->second->loading) return Status::Ok();
    Slot& slot = *it->second;
    if (slot.pinned && !action.pinned) {
      return FailedPrecondition(label + " is pinned (static provisioning)");
    }
    if (action.only_if_idle && slot.group && slot.group->InFlight() > 0) {
      return FailedPrecondition(label + " has " + std::to_string(slot.group->InFlight()) +
                                " queries in flight");
    }
    removed = std::move(slot.group);
    slots_.erase(it);
  }
  metrics_.SetReplicas(a.model, std::to_string(a.version), a.variant, a.hardware.Name(), 0, 0);
  PublishReplicaMetrics(a.model, std::to_string(a.version));
  Changed();
  // A query dispatched here a moment ago still holds the group and enqueues
  // on it; the group drains once the last holder lets go.
  removed.reset();
  return Status::Ok();
}

void Worker::PublishReplicaMetrics(const std::string& model, const std::string& version) {
  int64_t total = 0;
  std::vector<std::tuple<std::string, std::string, int64_t, int64_t>> rows;
  const std::string prefix = model + ":" + version + ":";
  {
    ReaderLock lock(&mu_);
    for (const auto& [label, slot] : slots_) {
      if (label.rfind(prefix, 0) != 0 || !slot->group) continue;
      const auto n = static_cast<int64_t>(slot->group->size());
      rows.emplace_back(slot->variant, slot->hardware.Name(), n, slot->group->memory_bytes());
      total += n;
    }
  }
  for (const auto& [variant, hw, n, bytes] : rows) {
    metrics_.SetReplicas(model, version, variant, hw, n, bytes);
  }
  metrics_.ForModel(model, version)->SetInstancesLoaded(total);
}

cluster::WorkerReport Worker::Report() const {
  cluster::WorkerReport r;
  r.worker = options_.id;
  r.incarnation = incarnation_;
  r.zone = options_.zone;
  r.sequence = report_sequence_.fetch_add(1) + 1;
  cluster::DeviceState cpu;
  cpu.worker = options_.id;
  cpu.name = "cpu";
  cpu.budget_bytes = memory_budget_bytes_;
  cpu.cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  ReaderLock lock(&mu_);
  for (const auto& [label, slot] : slots_) {
    cluster::GroupState g;
    g.worker = options_.id;
    g.model = slot->record->config.name;
    g.version = slot->record->version;
    g.variant = slot->variant;
    g.hardware = slot->hardware;
    g.device = DeviceName(slot->hardware);
    g.memory_bytes = slot->memory_bytes;
    g.load_ms = slot->load_ms;
    g.warm_overhead_ms = slot->warm_overhead_ms;
    g.pinned = slot->pinned;
    g.loading = slot->group == nullptr;
    if (slot->group) {
      const InstanceGroup& group = *slot->group;
      g.replicas = static_cast<int>(group.size());
      g.memory_bytes = std::max(g.memory_bytes, group.memory_bytes());
      g.queued = group.QueuedQueries();
      g.executing = std::max<int64_t>(group.InFlight() - g.queued, 0);
      g.last_used = group.last_used();
      g.uses_total = group.uses_total();
      g.instances = group.Snapshot(slot->curve);
      const int64_t batch = std::max<int64_t>(slot->record->config.max_batch_size, 1) >= 8 ? 8 : 1;
      if (auto f = group.ObservedSlowdown(slot->curve, batch)) g.observed_slowdown = *f;
    } else {
      g.replicas = slot->loading_replicas;
      g.last_used = SteadyClock::now();
    }
    if (g.device == "cpu") cpu.used_bytes += g.memory_bytes * g.replicas;
    r.groups.push_back(std::move(g));
  }
  r.devices.push_back(cpu);
  return r;
}

int64_t Worker::QueuedQueries() const {
  ReaderLock lock(&mu_);
  int64_t total = 0;
  for (const auto& [_, slot] : slots_) {
    if (slot->group) total += slot->group->QueuedQueries();
  }
  return total;
}

}  // namespace somm
