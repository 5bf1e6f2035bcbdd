// ModelManager's managed runtime: the mechanism that carries out the control
// policies (control/placement.h, control/autoscaler.h). The policies decide;
// this file gathers their input (a ClusterState snapshot), runs the control
// loop and loads, resizes, evicts and unloads instance groups. Every action is
// logged with its reason, to spdlog, the decision log and the metrics.
//
// Locking: placement_mu_ serialises every load, resize and unload (so two
// loads never count the same free memory); it is taken before mu_ and any
// LoadedVersion lock, never after.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <thread>

#include "control/autoscaler.h"
#include "control/placement.h"
#include "serving/model_manager_internal.h"
#include "variants/host_probe.h"
#include "variants/variant_pipeline.h"

namespace somm {
namespace {

constexpr int64_t kMiB = 1024 * 1024;
std::string DeviceName(const HardwareConfig& hw) {
  return Device{hw.device, hw.device_index}.ToString();
}

std::optional<VariantProfile> FindProfile(const ModelManager::LoadedVersion& lv,
                                          const std::string& variant) {
  std::lock_guard<std::mutex> lock(lv.variants_mu);
  for (const auto& p : lv.profiles) {
    if (p.variant == variant) return p;
  }
  return std::nullopt;
}

// How `variant` loads on `hw`: as profiled, or, for the variant as registered
// before any profile exists, as the model's config says.
StatusOr<LoadOptions> VariantLoadOptions(const ModelManager::LoadedVersion& lv,
                                         const std::optional<VariantProfile>& profile,
                                         const std::string& variant, const HardwareConfig& hw) {
  if (profile) return LoadOptionsForVariant(lv.config, *profile, hw);
  if (variant != kAsRegistered) {
    return NotFound("model '" + lv.config.name + "' version " + lv.version_str +
                    " has no profiled variant '" + variant + "'");
  }
  LoadOptions load = lv.base_load;
  load.intra_op_threads = hw.threads;
  load.device = Device{hw.device, hw.device_index};
  return load;
}

std::shared_ptr<InstanceGroup> FindGroup(ModelManager::LoadedVersion& lv, const std::string& key) {
  std::lock_guard<std::mutex> lock(lv.variants_mu);
  auto g = lv.groups.find(key);
  return g == lv.groups.end() ? nullptr : g->second;
}

}  // namespace

// The snapshot the policies read, plus where each model version lives.
struct ModelManager::ControlSnapshot {
  control::ClusterState state;
  std::map<std::string, std::shared_ptr<LoadedVersion>> versions;  // "model:version"
  double slowdown = 1.0;  // live batches over profiled latency (>= 1)
};

ModelManager::ControlSnapshot ModelManager::Snapshot(double tick_s) {
  ControlSnapshot snap;
  const auto now = control::Clock::now();
  control::DeviceState cpu;
  cpu.name = "cpu";
  cpu.budget_bytes = memory_budget_bytes_;
  cpu.cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::shared_ptr<LoadedVersion>> all;
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    for (const auto& [_, entry] : models_) {
      for (const auto& [__, lv] : entry->versions) all.push_back(lv);
    }
  }
  // Profiles are measured on a quiet machine; live batches run slower when the
  // machine is busy (the load generator, other models, other processes). The
  // batchers learn how much slower; the slowest recently used group's factor
  // calibrates every option's latency, so capacity is planned on what the
  // machine delivers now, not on the profile alone.
  double slowdown = 1.0;
  for (const auto& lv : all) {
    std::lock_guard<std::mutex> lock(lv->variants_mu);
    for (const auto& p : lv->profiles) {
      for (const auto& hp : p.hardware) {
        auto g = lv->groups.find(GroupKey(p.variant, hp.hardware));
        if (g == lv->groups.end()) continue;
        if (now - g->second->last_used() > std::chrono::seconds(10)) continue;
        const int64_t batch = std::max<int64_t>(lv->config.max_batch_size, 1) >= 8 ? 8 : 1;
        if (auto f = g->second->ObservedSlowdown(hp.latency, batch)) {
          slowdown = std::max(slowdown, std::min(*f, 20.0));
        }
      }
    }
  }
  snap.slowdown = slowdown;
  for (const auto& lv : all) {
    snap.versions[lv->config.name + ":" + lv->version_str] = lv;
    const int64_t max_batch = std::max<int64_t>(lv->config.max_batch_size, 1);
    std::lock_guard<std::mutex> lock(lv->variants_mu);
    std::map<std::string, const HardwareProfile*> profiled;  // group key -> profile
    for (const auto& p : lv->profiles) {
      for (const auto& hp : p.hardware) {
        profiled[GroupKey(p.variant, hp.hardware)] = &hp;
        if (!p.usable) continue;
        control::VariantOption o;
        o.model = lv->config.name;
        o.version = lv->version;
        o.variant = p.variant;
        o.hardware = hp.hardware;
        o.device = DeviceName(hp.hardware);
        o.accuracy = p.accuracy;
        o.latency = hp.latency;
        for (auto& point : o.latency.points) point.latency_ms *= slowdown;
        o.latency.intercept_ms *= slowdown;
        o.latency.slope_ms *= slowdown;
        o.max_batch = max_batch;
        o.memory_bytes = static_cast<int64_t>(hp.peak_memory_mb * kMiB);
        o.load_ms = hp.load_time_ms;
        snap.state.options.push_back(std::move(o));
      }
    }
    for (const auto& [key, group] : lv->groups) {
      control::GroupState g;
      g.model = lv->config.name;
      g.version = lv->version;
      g.variant = key.substr(0, key.find('@'));
      g.hardware = group->hardware();
      g.device = DeviceName(group->hardware());
      g.replicas = static_cast<int>(group->size());
      g.memory_bytes = group->memory_bytes();
      g.queued = group->QueuedQueries();
      g.executing = std::max<int64_t>(group->InFlight() - g.queued, 0);
      g.last_used = group->last_used();
      if (tick_s > 0) g.recent_rate_qps = static_cast<double>(group->TakeUses()) / tick_s;
      auto hp = profiled.find(key);
      g.load_ms = hp != profiled.end() ? hp->second->load_time_ms : 0;
      g.pinned = lv->pinned;
      if (g.device == "cpu") cpu.used_bytes += g.memory_bytes * g.replicas;
      snap.state.groups.push_back(std::move(g));
    }
    if (tick_s > 0) {
      control::ModelDemand d;
      d.model = lv->config.name;
      d.version = lv->version;
      d.rate_qps = static_cast<double>(lv->arrivals.exchange(0)) / tick_s;
      const int64_t slo_us = lv->tightest_slo_us.exchange(INT64_MAX);
      if (slo_us != INT64_MAX) d.latency_slo_ms = static_cast<double>(slo_us) / 1000.0;
      const int64_t acc = lv->strictest_accuracy_ppm.exchange(0);
      if (acc > 0) d.min_accuracy = static_cast<double>(acc) / 1e6;
      snap.state.demand.push_back(std::move(d));
    }
  }
  snap.state.devices.push_back(cpu);
  return snap;
}

void ModelManager::RecordControl(const std::string& kind, const std::string& model,
                                 const std::string& group, const std::string& hardware,
                                 const std::string& reason) {
  metrics_.RecordControlAction(kind);
  for (const auto& d : Snapshot(0).state.devices) metrics_.SetMemory(d.name, d.used_bytes, d.budget_bytes);
  spdlog::info("control {} {}: {}", kind, group, reason);
  DecisionRecord r;
  r.unix_ms = NowUnixMs();
  r.target = model;
  r.requirements = "controller";
  r.outcome = "control:" + kind;
  r.variant = group;
  r.hardware = hardware;
  r.reason = reason;
  decisions_.Add(std::move(r));
}

void ModelManager::PublishReplicaMetrics(LoadedVersion& lv) {
  int64_t total = 0;
  std::vector<std::tuple<std::string, std::string, int64_t, int64_t>> rows;
  {
    std::lock_guard<std::mutex> lock(lv.variants_mu);
    for (const auto& [key, group] : lv.groups) {
      rows.emplace_back(key.substr(0, key.find('@')), group->hardware().Name(),
                        static_cast<int64_t>(group->size()), group->memory_bytes());
      total += static_cast<int64_t>(group->size());
    }
  }
  for (const auto& [variant, hw, n, bytes] : rows) {
    metrics_.SetReplicas(lv.config.name, lv.version_str, variant, hw, n, bytes);
  }
  if (lv.metrics) lv.metrics->SetInstancesLoaded(total);
}

Status ModelManager::MakeRoom(int64_t bytes, const std::string& for_what,
                              const std::string& protect) {
  if (!options_.managed || bytes < 0) return Status::Ok();
  ControlSnapshot snap = Snapshot(0);
  for (auto& g : snap.state.groups) {
    if (control::GroupLabel(g) == protect) g.loading = true;  // never its own victim
  }
  auto placed = control::Place(snap.state, bytes, "cpu", control::Clock::now());
  if (!placed.ok()) {
    return ResourceExhausted("cannot place " + for_what + ": " + placed.status().message());
  }
  for (const control::EvictionVictim& victim : placed->victims) {
    const control::GroupState& g = snap.state.groups[victim.group];
    auto lv = snap.versions.find(g.model + ":" + std::to_string(g.version));
    if (lv == snap.versions.end()) continue;
    Status s = UnloadGroup(*lv->second, g.variant, g.hardware,
                           victim.reason + " (to make room for " + for_what + ")",
                           /*only_if_idle=*/true);
    if (!s.ok()) return ResourceExhausted("cannot place " + for_what + ": " + s.message());
  }
  return Status::Ok();
}

StatusOr<std::shared_ptr<InstanceGroup>> ModelManager::EnsureGroup(
    LoadedVersion& lv, const std::string& variant, const HardwareConfig& hw, int replicas,
    const std::string& reason, bool on_critical_path, bool* cold) {
  const std::string key = GroupKey(variant, hw);
  if (auto g = FindGroup(lv, key)) return g;
  // A query waits on a critical-path load: normal priority, not the idle
  // class that keeps background loads out of busy models' way. So do the
  // startup loads: nothing serves yet, and on a busy host an idle-class load
  // would only delay readiness.
  const bool urgent = on_critical_path || !started_;
  if (!urgent && options_.background_pacer) {
    // Before the placement lock: a query's load must never wait for this rest.
    const auto waited = options_.background_pacer->WaitTurn();
    if (waited.count() > 0) {
      const double duty = options_.background_pacer->duty();
      spdlog::info("load of {}:{}:{} waited {:.0f} ms: background loads and unloads are paced "
                   "to {:.0f}% of wall time (--background-duty {:g}), so that back-to-back ones "
                   "leave serving models some rest",
                   lv.config.name, lv.version_str, variant,
                   std::chrono::duration<double, std::milli>(waited).count(), duty * 100, duty);
      metrics_.RecordPacedWait(std::chrono::duration<double>(waited).count());
    }
  }
  std::lock_guard<std::mutex> placement(placement_mu_);
  if (auto g = FindGroup(lv, key)) return g;  // another query or the controller loaded it
  if (shutting_down_) return Unavailable("server is shutting down");
  replicas = std::max(replicas, 1);

  const std::optional<VariantProfile> profile = FindProfile(lv, variant);
  const HardwareProfile* hp = profile ? profile->For(hw) : nullptr;
  SOMM_ASSIGN_OR_RETURN(LoadOptions load, VariantLoadOptions(lv, profile, variant, hw));
  load.urgent = urgent;
  const std::string id = lv.config.name + ":" + lv.version_str + ":" + variant;
  const std::string label = id + "@" + hw.Name();
  int64_t bytes_per = hp ? static_cast<int64_t>(hp->peak_memory_mb * kMiB) : 0;
  std::error_code size_ec;
  const auto file_bytes = static_cast<int64_t>(std::filesystem::file_size(load.model_path, size_ec));
  // Unprofiled: what an earlier load of this file measured, else twice the
  // file (weights plus the framework's copies and workspace) until measured.
  const std::string measure_key = load.model_path + "@" + hw.Name();
  if (bytes_per <= 0) {
    auto m = measured_bytes_.find(measure_key);
    if (m != measured_bytes_.end()) bytes_per = m->second;
  }
  const bool measured_before = bytes_per > 0;
  SOMM_RETURN_IF_ERROR(
      MakeRoom((bytes_per > 0 ? bytes_per : (size_ec ? 0 : 2 * file_bytes)) * replicas, label));

  const auto t0 = SteadyClock::now();
  const int64_t rss0 = ResidentBytes();
  SOMM_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<Batcher>> batchers,
                        LoadReplicas(backend_, lv.config, load, id,
                                     hp ? hp->latency : LatencyCurve{}, 0, replicas, lv.metrics));
  const int64_t load_ms = MicrosSince(t0) / 1000;
  if (!hp) {
    // Unprofiled: account what the load added to the process, at least the
    // file's size (the weights). A reload of freed memory can measure less
    // than the first load did, so the largest measurement stands.
    bytes_per = std::max({bytes_per, (ResidentBytes() - rss0) / replicas,
                          size_ec ? int64_t{0} : file_bytes});
    measured_bytes_[measure_key] = bytes_per;
  }
  auto group = std::make_shared<InstanceGroup>(id, hw, std::move(batchers), bytes_per);
  {
    std::lock_guard<std::mutex> lock(lv.variants_mu);
    lv.groups[key] = group;
  }
  PublishReplicaMetrics(lv);
  if (!hp && !measured_before) {
    // The estimate may have been short: evict others if the measured size
    // took the device over its budget.
    Status s = MakeRoom(0, label, control::GroupLabel(lv.config.name, lv.version, variant, hw));
    if (!s.ok()) spdlog::warn("memory budget exceeded after loading {}: {}", label, s.message());
  }
  if (on_critical_path) metrics_.RecordColdStart(lv.config.name);
  if (cold) *cold = true;
  RecordControl("load", lv.config.name, label, hw.Name(),
                "x" + std::to_string(replicas) + " in " + std::to_string(load_ms) + " ms, " +
                    std::to_string(bytes_per / kMiB) + " MiB each" +
                    (on_critical_path ? " (on a query's critical path)" : "") + ": " + reason);
  return group;
}

Status ModelManager::SetGroupReplicas(LoadedVersion& lv, const std::string& variant,
                                      const HardwareConfig& hw, int replicas,
                                      const std::string& reason) {
  replicas = std::max(replicas, 1);
  const std::string key = GroupKey(variant, hw);
  std::shared_ptr<InstanceGroup> group = FindGroup(lv, key);
  if (!group) {
    return EnsureGroup(lv, variant, hw, replicas, reason, false).status();
  }
  std::lock_guard<std::mutex> placement(placement_mu_);
  const int have = static_cast<int>(group->size());
  const std::string label = group->variant_id() + "@" + hw.Name();
  if (replicas > have) {
    const int add = replicas - have;
    SOMM_RETURN_IF_ERROR(MakeRoom(group->memory_bytes() * add, label));
    const std::optional<VariantProfile> profile = FindProfile(lv, variant);
    const HardwareProfile* hp = profile ? profile->For(hw) : nullptr;
    SOMM_ASSIGN_OR_RETURN(LoadOptions load, VariantLoadOptions(lv, profile, variant, hw));
    // A scale-up answers load the group already cannot carry: its queries
    // wait on it, so it runs at normal priority.
    load.urgent = true;
    SOMM_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<Batcher>> batchers,
                          LoadReplicas(backend_, lv.config, load, group->variant_id(),
                                       hp ? hp->latency : LatencyCurve{}, have, add, lv.metrics));
    group->AddReplicas(std::move(batchers));
  } else if (replicas < have) {
    group->RemoveReplicas(have - replicas);
  } else {
    return Status::Ok();
  }
  PublishReplicaMetrics(lv);
  RecordControl("set_replicas", lv.config.name, label, hw.Name(),
                std::to_string(have) + " -> " + std::to_string(replicas) + ": " + reason);
  return Status::Ok();
}

Status ModelManager::UnloadGroup(LoadedVersion& lv, const std::string& variant,
                                 const HardwareConfig& hw, const std::string& reason,
                                 bool only_if_idle) {
  const std::string key = GroupKey(variant, hw);
  std::shared_ptr<InstanceGroup> removed;
  {
    std::lock_guard<std::mutex> lock(lv.variants_mu);
    auto g = lv.groups.find(key);
    if (g == lv.groups.end()) return Status::Ok();
    if (lv.pinned) return FailedPrecondition(g->second->variant_id() + " is pinned (static provisioning)");
    if (only_if_idle && g->second->InFlight() > 0) {
      return FailedPrecondition(g->second->variant_id() + "@" + hw.Name() + " has " +
                                std::to_string(g->second->InFlight()) + " queries in flight");
    }
    removed = std::move(g->second);
    lv.groups.erase(g);
  }
  const std::string label = removed->variant_id() + "@" + hw.Name();
  metrics_.SetReplicas(lv.config.name, lv.version_str, variant, hw.Name(), 0, 0);
  PublishReplicaMetrics(lv);
  // A query routed here a moment ago still holds the group and enqueues on
  // it; the group drains once the last holder lets go.
  removed.reset();
  const std::string kind = reason.rfind("evict", 0) == 0 ? "evict" : "unload";
  RecordControl(kind, lv.config.name, label, hw.Name(), reason);
  return Status::Ok();
}

void ModelManager::ControlLoop() {
  control::AutoscalerMemory memory;
  control::AutoscalerConfig config;
  config.tick_s = options_.control_tick_ms / 1000.0;
  if (options_.idle_unload_s > 0) config.idle_unload_s = options_.idle_unload_s;
  auto last = SteadyClock::now();
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(control_mu_);
      control_cv_.wait_for(lock, std::chrono::milliseconds(options_.control_tick_ms),
                           [this] { return control_stop_; });
      if (control_stop_) return;
    }
    const auto now = SteadyClock::now();
    const double tick_s = std::chrono::duration<double>(now - last).count();
    last = now;
    ControlSnapshot snap = Snapshot(tick_s);
    int64_t replicas = 0;
    for (const auto& g : snap.state.groups) replicas += g.replicas;
    metrics_.AddInstanceSeconds(static_cast<double>(replicas) * tick_s);
    for (const auto& d : snap.state.devices) metrics_.SetMemory(d.name, d.used_bytes, d.budget_bytes);

    control::AutoscalerDecision decision = control::Decide(snap.state, memory, now, config);
    memory = std::move(decision.memory);
    metrics_.SetSlowdown(snap.slowdown);
    for (const auto& d : snap.state.demand) {
      auto m = memory.models.find(d.model + ":" + std::to_string(d.version));
      metrics_.SetRates(d.model, d.rate_qps,
                        m == memory.models.end() ? d.rate_qps : control::Forecast(m->second.holt, 0));
    }
    // Static provisioning keeps the accounting above (instance-seconds,
    // memory, rates) comparable with managed runs, and changes nothing.
    if (!options_.managed) continue;
    for (const std::string& note : decision.notes) spdlog::debug("control: {}", note);
    bool replaced_ok = true;
    for (const control::Action& a : decision.actions) {
      if (shutting_down_) return;
      auto it = snap.versions.find(a.model + ":" + std::to_string(a.version));
      if (it == snap.versions.end()) continue;
      LoadedVersion& lv = *it->second;
      Status s;
      switch (a.kind) {
        case control::Action::kLoad:  // loads the group if absent, else resizes it
        case control::Action::kSetReplicas:
          s = SetGroupReplicas(lv, a.variant, a.hardware, a.replicas, a.reason);
          replaced_ok = s.ok();
          break;
        case control::Action::kUnload: {
          // "replaced by": make before break; only once the new group is up.
          const bool replacement = a.reason.rfind("replaced by", 0) == 0;
          if (replacement && !replaced_ok) continue;
          s = UnloadGroup(lv, a.variant, a.hardware, a.reason, /*only_if_idle=*/!replacement);
          break;
        }
      }
      if (!s.ok()) {
        spdlog::warn("control: {} not carried out: {}", control::ToString(a), s.message());
      }
    }
  }
}

}  // namespace somm
