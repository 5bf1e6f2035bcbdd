#include "controller/controller.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <future>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "controller/placement.h"

namespace somm {
namespace {

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

cluster::Action ActionFor(cluster::Action::Kind kind, const VersionRecord& v,
                          const std::string& variant, const HardwareConfig& hw, int replicas,
                          const std::string& reason) {
  cluster::Action a;
  a.kind = kind;
  a.model = v.config.name;
  a.version = v.version;
  a.variant = variant;
  a.hardware = hw;
  a.device = Device{hw.device, hw.device_index}.ToString();
  a.replicas = replicas;
  a.reason = reason;
  return a;
}

}  // namespace

Controller::Controller(ControllerOptions options, ModelCatalog& catalog, Registrar* registrar,
                       cluster::ClusterStateStore& store, WorkerDirectory& workers,
                       ServingMetrics& metrics, DecisionLog& log)
    : options_(std::move(options)),
      clock_(options_.clock != nullptr ? *options_.clock : Clock::Real()),
      catalog_(catalog),
      registrar_(registrar),
      store_(store),
      workers_(workers),
      metrics_(metrics),
      log_(log) {}

Controller::~Controller() { Stop(); }

void Controller::Start() {
  loop_thread_ = std::thread([this] { Loop(); });
}

void Controller::Stop() {
  stopping_ = true;
  {
    MutexLock lock(&loop_mu_);
    loop_stop_ = true;
  }
  loop_cv_.notify_all();
  if (loop_thread_.joinable()) loop_thread_.join();
}

HardwareConfig Controller::BaseHardware(const VersionRecord& v) const {
  HardwareConfig hw;
  hw.device = options_.device.kind;
  hw.device_index = options_.device.index;
  hw.threads = v.config.intra_op_threads;
  return hw;
}

Status Controller::StartVariantJob(const std::string& name, int64_t version) {
  if (stopping_) return Unavailable("server is shutting down");
  SOMM_ASSIGN_OR_RETURN(VersionPtr v, catalog_.Resolve(name, std::to_string(version)));
  if (registrar_ != nullptr) registrar_->StartVariantJob(v->config, v->version);
  return Status::Ok();
}

StatusOr<RegistrationStatus> Controller::GetRegistrationStatus(const std::string& name) {
  return registrar_ != nullptr ? registrar_->GetRegistrationStatus(name)
                               : PublishedVariants(catalog_, name);
}

void Controller::RecordControl(const std::string& kind, const std::string& model,
                               const std::string& label, const std::string& hardware,
                               const std::string& reason) {
  metrics_.RecordControlAction(kind);
  spdlog::info("control {} {}: {}", kind, label, reason);
  DecisionRecord r;
  r.unix_ms = NowUnixMs();
  r.target = model;
  r.requirements = "controller";
  r.outcome = "control:" + kind;
  r.variant = label;
  r.hardware = hardware;
  r.reason = reason;
  log_.Add(std::move(r));
}

namespace {

// model + ":" + version into *key, over what it held: the tick builds
// one per model of the cluster, into one buffer, allocation-free once warm.
void SetVersionKey(std::string* key, const std::string& model, int64_t version) {
  char digits[24];
  const auto printed = std::to_chars(digits, digits + sizeof digits, version);
  key->assign(model).append(1, ':').append(digits, printed.ptr);
}

// g.worker + "/" + GroupLabel(g) into *key, the same way (one per group).
void SetUsesKey(std::string* key, const cluster::GroupState& g) {
  char digits[24];
  const auto printed = std::to_chars(digits, digits + sizeof digits, g.version);
  key->assign(g.worker).append(1, '/').append(g.model).append(1, ':');
  key->append(digits, printed.ptr).append(1, ':').append(g.variant).append(1, '@');
  key->append(g.hardware.Name());
}

// A counter by key: the one there (fresh = false), else `value` put in.
template <typename Map>
std::pair<typename Map::iterator, bool> FindOrPut(Map& map, const std::string& key,
                                                  int64_t value) {
  auto it = map.find(key);
  if (it != map.end()) return {it, false};
  return {map.emplace(key, value).first, true};
}

}  // namespace

void Controller::SendEvictions(std::vector<cluster::Action> evictions, const std::string& why,
                               bool urgent, std::function<void(Status)> then) {
  // `then` runs once every eviction has answered, with the first refusal.
  struct Join {
    std::mutex mu;
    size_t left = 0;
    Status first;
    std::function<void(Status)> then;
  };
  auto join = std::make_shared<Join>();
  join->left = evictions.size();
  join->then = std::move(then);
  auto answered = [join](const Status& s) {
    std::function<void(Status)> run;
    Status result;
    {
      std::lock_guard lock(join->mu);
      if (!s.ok() && join->first.ok()) join->first = s;
      if (--join->left > 0 || !join->then) return;
      run = std::move(join->then);
      result = join->first;
    }
    run(result);
  };
  if (evictions.empty()) {
    if (join->then) join->then(Status::Ok());
    return;
  }
  for (cluster::Action& e : evictions) {
    const std::string victim = cluster::GroupLabel(e);
    const std::string reason = e.reason + " (" + why + ")";
    const std::string model = e.model;
    const std::string hardware = e.hardware.Name();
    const std::string worker = e.worker;
    WorkerAction evict;
    evict.action = std::move(e);
    evict.urgent = urgent;
    evict.only_if_idle = true;
    {
      // Gone from the moment it is sent: a query the worker turns away
      // meanwhile must not find it "present" in a view that still shows it.
      MutexLock lock(&placement_mu_);
      evicted_[{worker, victim}] = Now() + kReportWithin;
      ChangedPlacement();
    }
    Send(std::move(evict), [this, victim, reason, model, hardware, worker, answered](Status s) {
      if (s.ok()) {
        {
          MutexLock lock(&placement_mu_);
          evicted_[{worker, victim}] = Now() + kReportWithin;
          ChangedPlacement();
        }
        RecordControl("evict", model, victim, hardware, reason);
      } else {
        spdlog::warn("control: eviction of {} not carried out: {}", victim, s.message());
        // Busy after all (the store's view trails the worker): no victim
        // until the store has caught up.
        MutexLock lock(&placement_mu_);
        evicted_.erase({worker, victim});
        busy_[{worker, victim}] = Now() + kReportWithin;
        ChangedPlacement();
      }
      answered(s.ok() ? s : Status(s.code(), "eviction of " + victim + " refused: " + s.message()));
    });
  }
}

void Controller::UnloadGroups(const std::string& model,
                              const std::function<bool(const cluster::GroupState&)>& which,
                              const std::string& reason) {
  const auto snapshot = ReadStore(true);
  for (const auto& g : snapshot->groups) {
    if (g.model != model || !which(g)) continue;
    WorkerAction a;
    a.action.kind = cluster::Action::kUnload;
    a.action.worker = g.worker;
    a.action.model = g.model;
    a.action.version = g.version;
    a.action.variant = g.variant;
    a.action.hardware = g.hardware;
    a.action.device = g.device;
    a.action.reason = reason;
    a.pinned = true;  // the repository API overrides static pinning
    a.urgent = true;
    Status s = SendAndWait(std::move(a));
    if (!s.ok()) spdlog::warn("model {}: {} not unloaded: {}", model, cluster::GroupLabel(g), s.message());
  }
}

void Controller::Send(WorkerAction action, std::function<void(Status)> done) {
  std::shared_ptr<WorkerStub> stub = workers_.Find(action.action.worker);
  if (!stub) {
    done(Unavailable("worker '" + action.action.worker + "' is not in the cluster (any more)"));
    return;
  }
  stub->Apply(std::move(action), std::move(done));
}

Status Controller::SendAndWait(WorkerAction action) {
  auto promise = std::make_shared<std::promise<Status>>();
  auto future = promise->get_future();
  Send(std::move(action), [promise](Status s) { promise->set_value(std::move(s)); });
  return future.get();
}

void Controller::EnsureLoaded(VersionPtr version, const std::string& variant,
                              const HardwareConfig& hw, int replicas, const std::string& reason,
                              bool urgent, LoadDone done, bool query_waits) {
  LoadOn("", std::move(version), variant, hw, replicas, reason, urgent, std::move(done),
         query_waits);
}

void Controller::LoadOn(std::string worker, VersionPtr version, const std::string& variant,
                        const HardwareConfig& hw, int replicas, const std::string& reason,
                        bool urgent, LoadDone done, bool query_waits) {
  if (stopping_) {
    done(Unavailable("server is shutting down"), "");
    return;
  }
  replicas = std::max(replicas, 1);
  const std::string label = cluster::GroupLabel(version->config.name, version->version, variant, hw);
  // Replicas already there or on their way count; only the rest is placed.
  // On a given worker only its share counts. Otherwise every worker's share
  // does, and the rest joins the largest (spreading a group over workers is
  // the control loop's: Scale()).
  const bool given = !worker.empty();
  int have_total = 0;
  int have_here = 0;
  bool present = false;
  {
    // The store's view less what DropUnreachable() drops, read in place: a
    // copy of the whole state per load cost more than the load's placement.
    const auto snapshot = store_.Read();
    MutexLock lock(&placement_mu_);
    PruneDropped();
    for (const auto& g : snapshot->groups) {
      if (!control::HasLabel(g, label) || Dropped(g)) continue;
      if (given) {
        if (g.worker == worker) {
          have_here += g.replicas;
          present = true;
        }
        continue;
      }
      have_total += g.replicas;
      if (!present || g.replicas > have_here) {
        have_here = g.replicas;
        worker = g.worker;
        present = true;
      }
    }
  }
  if (given) have_total = have_here;
  const int missing = std::max(replicas - have_total, 0);
  replicas = present ? have_here + missing : replicas;  // what the worker's share becomes
  bool guessed = false;
  const int64_t per_replica = EstimateBytes(*version, variant, hw, &guessed);
  auto evictions = Reserve(label, per_replica * missing, &worker);
  if (!evictions.ok()) {
    done(evictions.status(), "");
    return;
  }
  // The load goes once its evictions are done: one refused (its group was
  // busy after all) would leave the load without room, so it is placed again
  // without that victim (each round rules out one more, so this ends), and
  // the worker scaler hears that memory ran short.
  auto send_load = [this, label, worker, given, version, variant, hw, replicas, reason, urgent,
                    query_waits, present, guessed, done](Status evicted) mutable {
    if (!evicted.ok()) {
      Release(worker, label, /*loaded_new=*/false, /*measure=*/guessed);
      {
        MutexLock lock(&placement_mu_);
        NoteShortfall(evicted.message() + " (to make room for " + label + ")");
      }
      if (given || stopping_) {
        done(ResourceExhausted("no room for " + label + " on " + worker + ": " + evicted.message()), "");
      } else {
        EnsureLoaded(version, variant, hw, replicas, reason, urgent, std::move(done), query_waits);
      }
      return;
    }
    WorkerAction load;
    load.action = ActionFor(cluster::Action::kLoad, *version, variant, hw, replicas, reason);
    load.action.worker = worker;
    load.version = version;
    load.urgent = urgent;
    load.pinned = !options_.managed;
    const auto t0 = std::chrono::steady_clock::now();
    Send(std::move(load), [this, label, worker, version, variant, hw, replicas, reason, urgent,
                           query_waits, present, guessed, t0, done = std::move(done)](Status s) mutable {
      Release(worker, label, /*loaded_new=*/s.ok() && !present, /*measure=*/guessed);
      if (s.code() == StatusCode::kUnavailable && !worker.empty() && !stopping_) {
        // The worker is gone or draining: place again without it (each round
        // leaves one more worker out, so this ends).
        spdlog::warn("control: worker {} did not take {} ({}); placing it elsewhere", worker, label,
                     s.message());
        MarkUnreachable(worker);
        EnsureLoaded(version, variant, hw, replicas, reason, urgent, std::move(done), query_waits);
        return;
      }
      if (s.ok() && !present) {
        const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now() - t0)
                            .count();
        if (urgent && query_waits) metrics_.RecordColdStart(version->config.name);
        RecordControl("load", version->config.name, label + (worker.empty() ? "" : " on " + worker), hw.Name(),
                      "x" + std::to_string(replicas) + " in " + std::to_string(ms) + " ms" +
                          (urgent && query_waits ? " (on a query's critical path)" : "") + ": " +
                          reason);
      }
      // The size was a guess: if what was measured took the device over its
      // budget, others make room now.
      if (s.ok() && !present && guessed && options_.managed) FitBudget(worker, label);
      done(s, s.ok() ? worker : "");
    });
  };
  SendEvictions(std::move(evictions).value(), "to make room for " + label, urgent,
                std::move(send_load));
}

Status Controller::LoadModel(const std::string& name, bool startup) {
  if (!IsValidModelName(name)) return InvalidArgument("invalid model name '" + name + "'");
  if (stopping_) return Unavailable("server is shutting down");
  MutexLock lifecycle(&lifecycle_mu_);
  std::error_code ec;
  const std::string& repo = catalog_.repository_path();
  if (!std::filesystem::is_directory(std::filesystem::path(repo) / name, ec)) {
    return ModelCatalog::UnknownModel(name);  // names no folder of this machine
  }
  std::vector<RepositoryEntry> problems;
  std::vector<VersionPtr> versions = catalog_.Read(name, &problems);
  const std::vector<std::string> serving = catalog_.VersionsOf(name);
  std::vector<VersionPtr> loaded;
  for (const VersionPtr& v : versions) {
    const bool reload =
        std::find(serving.begin(), serving.end(), v->version_str) != serving.end();
    const HardwareConfig hw = BaseHardware(*v);
    const std::string as_registered = AsRegisteredVariant(*v);
    const auto t0 = std::chrono::steady_clock::now();
    std::promise<Status> p;
    auto f = p.get_future();
    if (reload) {
      // Every worker's share of the group reloads, at its size.
      const std::string label = cluster::GroupLabel(v->config.name, v->version, as_registered, hw);
      std::vector<std::pair<std::string, int>> shares;
      for (const auto& g : store_.Read()->groups) {
        if (control::HasLabel(g, label)) shares.emplace_back(g.worker, g.replicas);
      }
      if (shares.empty()) shares.emplace_back("", v->config.instance_count);  // the only worker
      Status reloaded;
      for (const auto& [worker, replicas] : shares) {
        WorkerAction a;
        a.action = ActionFor(cluster::Action::kLoad, *v, as_registered, hw, replicas,
                             "reload (repository API)");
        a.action.worker = worker;
        a.version = v;
        a.reload = true;
        a.urgent = true;
        a.pinned = !options_.managed;
        Status one = SendAndWait(std::move(a));
        if (!one.ok() && reloaded.ok()) reloaded = one;
      }
      p.set_value(reloaded);
    } else {
      EnsureLoaded(v, as_registered, hw, v->config.instance_count,
                   "configured instances (model.yaml)", startup,
                   [&p](const Status& s, const std::string&) { p.set_value(s); },
                   /*query_waits=*/false);
    }
    Status s = f.get();
    if (s.ok()) {
      spdlog::info("loaded model {} version {} ({} instance(s) on {}, {} ms, {} profiled variants)",
                   name, v->version, v->config.instance_count, options_.device.ToString(),
                   std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::steady_clock::now() - t0)
                       .count(),
                   v->profiles.size());
      loaded.push_back(v);
    } else {
      // The reason goes to clients (the index, the load's answer): without
      // the repository's path.
      problems.push_back(
          {name, v->version_str, "UNAVAILABLE", catalog_.WithoutPaths(s.message())});
    }
  }
  std::string why;
  for (const auto& p : problems) {
    why += (why.empty() ? "" : "; ") + p.reason;
    spdlog::error("model {} version {}: {}", name, p.version.empty() ? "-" : p.version, p.reason);
  }
  if (loaded.empty() && !serving.empty()) {
    // A broken reload must not take down a model that is serving.
    return InvalidArgument("failed to reload model '" + name +
                           "', previous versions keep serving: " + why);
  }
  catalog_.Publish(name, loaded, problems);
  // The model's rollout, as saved (rollout.h): its split holds across a
  // restart or a reload.
  if (auto rollout = LoadRollout(repo, name); rollout.ok()) {
    catalog_.SetRollout(name, std::move(rollout).value());
  }
  // Versions no longer selected go once the new ones are up.
  UnloadGroups(
      name,
      [&loaded](const cluster::GroupState& g) {
        return std::none_of(loaded.begin(), loaded.end(),
                            [&g](const VersionPtr& v) { return v->version == g.version; });
      },
      "version no longer served");
  if (loaded.empty()) return InvalidArgument("failed to load model '" + name + "': " + why);
  return Status::Ok();
}

Status Controller::UnloadModel(const std::string& name) {
  MutexLock lifecycle(&lifecycle_mu_);
  if (!catalog_.Remove(name)) return NotFound("model '" + name + "' is not loaded");
  UnloadGroups(
      name, [](const cluster::GroupState&) { return true; }, "unloaded (repository API)");
  spdlog::info("unloaded model {}", name);
  return Status::Ok();
}

void Controller::Tick() {
  if (options_.before_tick) options_.before_tick();
  MutexLock tick(&tick_mu_);
  const cluster::TimePoint now = Now();
  const double tick_s = last_tick_ ? std::chrono::duration<double>(now - *last_tick_).count()
                                   : options_.control_tick_ms / 1000.0;
  last_tick_ = now;
  ReadTickState();
  cluster::ClusterState& state = tick_state_;
  // Rates from the monotonic counters: this reader's own differences.
  std::string key;  // one buffer for every key below
  for (auto& d : state.demand) {
    SetVersionKey(&key, d.model, d.version);
    auto [it, fresh] = FindOrPut(last_arrivals_, key, d.arrivals_total);
    d.rate_qps = !fresh && tick_s > 0
                     ? static_cast<double>(d.arrivals_total - it->second) / tick_s
                     : 0;
    it->second = d.arrivals_total;
  }
  // Profiles are measured on a quiet machine; live batches run slower when
  // it is busy. The slowest recently used group's factor calibrates every
  // option's latency, so capacity is planned on what the machine delivers now.
  double slowdown = 1.0;
  int64_t replicas = 0;
  for (auto& g : state.groups) {
    // One label may have a share on several workers: each its own counter.
    SetUsesKey(&key, g);
    auto [it, fresh] = FindOrPut(last_uses_, key, g.uses_total);
    g.recent_rate_qps = !fresh && tick_s > 0
                            ? static_cast<double>(g.uses_total - it->second) / tick_s
                            : 0;
    it->second = g.uses_total;
    replicas += g.replicas;
    if (now - g.last_used <= std::chrono::seconds(10) && g.observed_slowdown > 0) {
      slowdown = std::max(slowdown, std::min(g.observed_slowdown, 20.0));
    }
  }
  if (slowdown != tick_options_scaled_by_) {
    // Scaled from the catalog's latencies, whatever the last tick's factor
    // was (only catalog rows carry one: ReadTickState resets it otherwise).
    if (tick_options_scaled_by_ != 1.0) {
      for (size_t i = 0; i < state.options.size(); ++i) {
        state.options[i].latency = catalog_options_[i].latency;
      }
    }
    for (auto& o : state.options) {
      for (auto& point : o.latency.points) point.latency_ms *= slowdown;
      o.latency.intercept_ms *= slowdown;
      o.latency.slope_ms *= slowdown;
    }
    tick_options_scaled_by_ = slowdown;
  }
  metrics_.AddInstanceSeconds(static_cast<double>(replicas) * tick_s);
  TickRollouts(state.demand, now);
  // The autoscaler sizes each group as a whole, over the workers' pooled
  // devices; Scale() spreads what it asks for over the workers.
  // PoolWorkers copies the options as they are: moved in instead (every
  // version's, thousands at scale; state's are not read again).
  std::vector<cluster::VariantOption> options = std::move(state.options);
  state.options.clear();
  cluster::ClusterState pooled_state = control::PoolWorkers(state);
  pooled_state.options = std::move(options);
  const cluster::ClusterState& pooled = pooled_state;
  for (const auto& d : pooled.devices) metrics_.SetMemory(d.name, d.used_bytes, d.budget_bytes);
  metrics_.SetSlowdown(slowdown);

  control::AutoscalerConfig config = options_.autoscaler;
  config.tick_s = options_.control_tick_ms / 1000.0;
  config.prices = options_.prices;
  if (options_.idle_unload_s > 0) config.idle_unload_s = options_.idle_unload_s;
  control::AutoscalerDecision decision = control::Decide(pooled, std::move(memory_), now, config);
  // Back where the next tick assigns over them (read no more in this one).
  state.options = std::move(pooled_state.options);
  memory_ = std::move(decision.memory);
  for (const auto& d : state.demand) {
    SetVersionKey(&key, d.model, d.version);
    auto m = memory_.models.find(key);
    metrics_.SetRates(d.model, d.rate_qps,
                      m == memory_.models.end() ? d.rate_qps : control::Forecast(m->second.holt, 0));
  }
  // Static provisioning keeps the accounting above comparable with managed
  // runs, and changes nothing.
  if (!options_.managed) return;
  for (const std::string& note : decision.notes) spdlog::debug("control: {}", note);
  bool made_ok = true;  // the last load or resize, for the unloads it replaces
  for (const cluster::Action& a : decision.actions) {
    if (stopping_) return;
    auto version = catalog_.Resolve(a.model, std::to_string(a.version));
    const std::string label = cluster::GroupLabel(a);
    Status s;
    switch (a.kind) {
      case cluster::Action::kLoad:
      case cluster::Action::kSetReplicas: {
        if (!version.ok()) {
          s = version.status();
          made_ok = false;
          break;
        }
        s = Scale(a, *version);
        made_ok = s.ok();
        break;
      }
      case cluster::Action::kUnload:
      case cluster::Action::kEvict: {
        const bool replaced = a.cause == cluster::Action::Cause::kReplaced;
        if (replaced && !made_ok) continue;  // make before break
        // Every worker's share of the group goes.
        std::vector<std::string> holders;
        if (!a.worker.empty()) holders.push_back(a.worker);
        for (const auto& g : state.groups) {
          if (a.worker.empty() && control::HasLabel(g, label) &&
              std::find(holders.begin(), holders.end(), g.worker) == holders.end()) {
            holders.push_back(g.worker);
          }
        }
        if (holders.empty()) holders.push_back("");  // the only worker
        for (const std::string& holder : holders) {
          WorkerAction w;
          w.action = a;
          w.action.worker = holder;
          w.only_if_idle = !replaced;
          Status one = SendAndWait(std::move(w));
          if (one.ok()) {
            RecordControl(a.kind == cluster::Action::kEvict ? "evict" : "unload", a.model,
                          label + (holders.size() > 1 ? " on " + holder : ""), a.hardware.Name(),
                          a.reason);
          } else {
            s = one;
          }
        }
        break;
      }
    }
    if (!s.ok()) spdlog::warn("control: {} not carried out: {}", cluster::ToString(a), s.message());
  }
}

Status Controller::Scale(const cluster::Action& a, const VersionPtr& version) {
  const std::string label = cluster::GroupLabel(a);
  const int64_t per_replica = EstimateBytes(*version, a.variant, a.hardware);
  control::SpreadDecision spread;
  {
    MutexLock lock(&placement_mu_);
    spread = control::SpreadReplicas(PlacementView(), label, a.replicas, per_replica, "cpu");
  }
  if (spread.shares.empty()) {
    // Held nowhere and no worker has free memory for a replica: placement
    // with evictions, on one worker.
    return LoadAndWait("", a, version, a.replicas);
  }
  if (spread.unplaced > 0) {
    // Where evictions may make room: the largest share's worker.
    auto largest = std::max_element(
        spread.shares.begin(), spread.shares.end(),
        [](const control::ReplicaShare& x, const control::ReplicaShare& y) { return x.want < y.want; });
    largest->want += spread.unplaced;
  }
  const bool several = spread.shares.size() > 1;
  if (several) spdlog::info("control: spread {}: {}", label, spread.reason);
  // Make before break: every share grows before any shrinks.
  Status grown;
  for (const control::ReplicaShare& share : spread.shares) {
    if (share.want <= share.have) continue;
    Status s = share.have == 0 ? LoadAndWait(share.worker, a, version, share.want)
                               : ResizeOn(share, a, version, several ? spread.reason : "");
    if (!s.ok()) {
      spdlog::warn("control: {} on {}: {}", label, share.worker, s.message());
      grown = s;
    }
  }
  for (const control::ReplicaShare& share : spread.shares) {
    if (share.want >= share.have) continue;
    Status s;
    if (share.want > 0) {
      s = ResizeOn(share, a, version, several ? spread.reason : "");
    } else {
      // Its queries go to the other shares; it leaves once idle (a busy one
      // stays until a later tick finds it idle).
      WorkerAction w;
      w.action = a;
      w.action.kind = cluster::Action::kUnload;
      w.action.replicas = 0;
      w.action.worker = share.worker;
      w.only_if_idle = true;
      s = SendAndWait(std::move(w));
      if (s.ok()) {
        RecordControl("unload", a.model, label + " on " + share.worker, a.hardware.Name(),
                      "its share of the group: " + spread.reason + ": " + a.reason);
      }
    }
    if (!s.ok()) spdlog::warn("control: {} on {}: {}", label, share.worker, s.message());
  }
  return grown;
}

Status Controller::ResizeOn(const control::ReplicaShare& share, const cluster::Action& a,
                            const VersionPtr& version, const std::string& spread) {
  const std::string label = cluster::GroupLabel(a);
  std::string worker = share.worker;
  // Added replicas are placed (and room made for them) first.
  bool guessed = false;
  auto evictions = Reserve(label, EstimateBytes(*version, a.variant, a.hardware, &guessed) *
                                      std::max(share.want - share.have, 0), &worker);
  if (!evictions.ok()) return evictions.status();
  // Both go to the worker's background lane, in this order.
  SendEvictions(std::move(evictions).value(), "to make room for " + label, /*urgent=*/false);
  WorkerAction w;
  w.action = a;
  w.action.kind = cluster::Action::kSetReplicas;
  w.action.replicas = share.want;
  w.action.worker = worker;
  w.version = version;
  Status s = SendAndWait(std::move(w));
  Release(worker, label, /*loaded_new=*/false, /*measure=*/guessed);
  if (s.ok()) {
    RecordControl("set_replicas", a.model, label + (spread.empty() ? "" : " on " + worker),
                  a.hardware.Name(),
                  std::to_string(share.have) + " -> " + std::to_string(share.want) + ": " +
                      a.reason + (spread.empty() ? "" : " (" + spread + ")"));
  }
  return s;
}

Status Controller::LoadAndWait(const std::string& worker, const cluster::Action& a,
                               const VersionPtr& version, int replicas) {
  std::promise<Status> p;
  auto f = p.get_future();
  LoadOn(worker, version, a.variant, a.hardware, replicas, a.reason, /*urgent=*/false,
         [&p](const Status& r, const std::string&) { p.set_value(r); }, /*query_waits=*/false);
  return f.get();
}

void Controller::Loop() {
  for (;;) {
    {
      MutexLock lock(&loop_mu_);
      if (!loop_stop_) {
        loop_cv_.wait_for(loop_mu_.native(), std::chrono::milliseconds(options_.control_tick_ms));
      }
      if (loop_stop_) return;
    }
    Tick();
  }
}

}  // namespace somm
