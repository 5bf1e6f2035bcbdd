// FakeWorkerStub: a WorkerStub with no worker behind it, for the tests of
// the router and the controller. Test-only; never linked into somm itself.
// FakeWorkerDirectory puts several of them (each with its id and zone)
// behind one WorkerDirectory, for a cluster of workers.
//
// It keeps a table of groups as a Worker would and reports it to the
// cluster-state store after every change, as LocalWorkerStub::Publish does
// for a Worker: a load counts (loading, at its requested replicas) from the
// moment it is received, and a kLoad for a group already loading joins that
// load instead of starting another (worker.h: "a load already under way is
// joined, never repeated").
//
// The test decides when loads finish: with `hold_loads`, a load (and a
// resize) waits until Complete() finishes it, with success or an error, so a
// test can look at the system while it is in flight. Unloads and evictions
// are carried out at once. Every action received is recorded, in order.
//
// Execute answers at once, inside the call: NotFound (leaving the request
// as it was) when the group is not loaded here, the status set with
// Refuse() (as a worker's queue refuses: RESOURCE_EXHAUSTED), else every
// model output as a copy of the first input, from the group's first
// instance (or the one asked for). It stands in for a local worker, or with
// SetRemote() for one in another process.
//
// Thread-safety: every method may be called concurrently. Callbacks run with
// no lock held; the store is told before any `done` runs.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "cluster/cluster_state_store.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "worker/worker_directory.h"
#include "worker/worker_api.h"

namespace somm::testing {

class FakeWorkerStub : public WorkerStub {
 public:
  struct Options {
    std::string id = "fake";
    std::string zone;  // its reports' zone
    int64_t budget_bytes = int64_t{1} << 40;  // the CPU's memory budget
    int cores = 8;
    // Loads and resizes wait for Complete(); otherwise they finish inside Apply().
    bool hold_loads = false;
    // Stamps last_used; the controller's clock in controller tests (null =
    // Clock::Real()). It must outlive the stub.
    const Clock* clock = nullptr;
    // Groups with queries in flight that the reports do not show: they
    // refuse an eviction or unload that must find them idle, as a worker does.
    std::set<std::string> busy;
  };

  explicit FakeWorkerStub(cluster::ClusterStateStore& store) : FakeWorkerStub(store, Options()) {}
  FakeWorkerStub(cluster::ClusterStateStore& store, Options options)
      : store_(store), options_(std::move(options)) {}

  // --- WorkerStub ---

  const std::string& id() const override { return options_.id; }
  bool local() const override { return !remote_.load(); }
  void SetRemote(bool remote) { remote_ = remote; }
  // Executes answer `refusal` through `done` from now on (Ok: answer again).
  void Refuse(Status refusal) {
    MutexLock lock(&mu_);
    refusal_ = std::move(refusal);
  }

  Status Execute(ExecuteRequest& request, ExecuteCallback done) override {
    ExecuteResult result;
    Status refused;
    {
      MutexLock lock(&mu_);
      auto it = groups_.find(request.group);
      if (it == groups_.end() || it->second.loading) {
        return NotFound("instance group " + request.group + " is not loaded on worker " +
                        options_.id);
      }
      Group& g = it->second;
      executed_.push_back(request);
      if (request.shared_inputs != nullptr) {  // the caller's: kept as they are now
        executed_.back().inputs = *request.shared_inputs;
        executed_.back().shared_inputs = nullptr;
      }
      refused = refusal_;
      if (refused.ok()) {
        ++g.uses;
        g.last_used = Now();
        const ModelConfig& config = g.version->config;
        const std::vector<Tensor>& inputs = request.Inputs();
        for (const TensorSpec& spec : config.outputs) {
          Tensor out = inputs.empty() ? Tensor{} : inputs[0];
          out.name = spec.name;
          result.outputs.push_back(std::move(out));
        }
        result.stats.batch_size = config.max_batch_size > 0 && !inputs.empty() &&
                                          !inputs[0].shape.empty()
                                      ? inputs[0].shape[0]
                                      : 1;
        result.stats.queue_ns = 1000;
        result.stats.compute_ns = 2000;
        result.stats.first_in_batch = true;  // every Execute is a batch of its own
        result.instance_id = request.instance_id >= 0 ? request.instance_id : g.instance_ids.at(0);
        result.device = Device{g.hardware.device, g.hardware.device_index}.ToString();
      }
    }
    if (!refused.ok()) {
      done(std::move(refused));
      return Status::Ok();
    }
    request.inputs.clear();  // taken
    done(std::move(result));
    return Status::Ok();
  }

  void Apply(WorkerAction action, std::function<void(Status)> done) override {
    const cluster::Action& a = action.action;
    const std::string label = cluster::GroupLabel(a);
    enum { kNow, kHeld, kStartedNow } what = kNow;
    Status now;
    {
      MutexLock lock(&mu_);
      actions_.push_back(action);
      actions_cv_.notify_all();
      auto it = groups_.find(label);
      switch (a.kind) {
        case cluster::Action::kLoad:
          if (it == groups_.end()) {
            if (!action.version) {
              now = InvalidArgument("load of " + label + " names no model version");
              break;
            }
            Group& g = groups_[label];
            g.version = action.version;
            g.variant = a.variant;
            g.hardware = a.hardware;
            g.replicas = std::max(a.replicas, 1);
            g.memory_bytes = ProfiledBytes(*action.version, a.variant, a.hardware);
            g.pinned = action.pinned;
            g.loading = true;
            g.waiters.push_back(std::move(done));
            ++loads_started_;
            pending_.push_back({label, /*resize=*/false, g.replicas});
            what = options_.hold_loads ? kHeld : kStartedNow;
          } else if (it->second.loading) {
            it->second.waiters.push_back(std::move(done));  // joins the load under way
            return;
          } else if (a.replicas > it->second.replicas) {
            pending_.push_back({label, /*resize=*/true, a.replicas, std::move(done)});
            what = options_.hold_loads ? kHeld : kStartedNow;
          }
          break;
        case cluster::Action::kSetReplicas:
          if (it == groups_.end() || it->second.loading) {
            now = NotFound(label + " is not loaded on worker " + options_.id);
            break;
          }
          pending_.push_back({label, /*resize=*/true, std::max(a.replicas, 1), std::move(done)});
          what = options_.hold_loads ? kHeld : kStartedNow;
          break;
        case cluster::Action::kUnload:
        case cluster::Action::kEvict:
          if (it == groups_.end() || it->second.loading) break;
          if (action.only_if_idle && options_.busy.count(label)) {
            now = FailedPrecondition(label + " has 1 queries in flight");
            break;
          }
          if (it->second.pinned && !action.pinned) {
            now = FailedPrecondition(label + " is pinned (static provisioning)");
            break;
          }
          groups_.erase(it);
          break;
      }
    }
    Publish();
    if (what == kStartedNow) {
      Complete(label);
    } else if (what == kNow) {
      done(std::move(now));
    }
  }

  cluster::WorkerReport Report() override {
    MutexLock lock(&mu_);
    return ReportLocked();
  }

  // Puts the report into the store, as LocalWorkerStub::Publish does (a test
  // calls it once first, as the embedded server does at start; every change
  // afterwards publishes by itself). Reports carry a sequence, so racing
  // ones settle right.
  void Publish() { store_.PutWorker(Report()); }

  // --- For the test ---

  // A loaded, idle group (pinned when `pinned`), reported at once.
  void AddGroup(VersionPtr version, const std::string& variant, const HardwareConfig& hw,
                int replicas = 1, bool pinned = false) {
    {
      MutexLock lock(&mu_);
      Group& g = groups_[cluster::GroupLabel(version->config.name, version->version, variant, hw)];
      g.memory_bytes = ProfiledBytes(*version, variant, hw);
      g.version = std::move(version);
      g.variant = variant;
      g.hardware = hw;
      g.replicas = replicas;
      g.pinned = pinned;
      g.last_used = Now();
      for (int i = 0; i < replicas; ++i) g.instance_ids.push_back(next_instance_id_++);
    }
    Publish();
  }

  // What every group reports its instances measured beyond the profile
  // when they loaded (cluster::GroupState::warm_overhead_ms), reported at once.
  void SetWarmOverheadMs(double ms) {
    {
      MutexLock lock(&mu_);
      warm_overhead_ms_ = ms;
    }
    Publish();
  }

  // Forgets `label` without telling the store, which still shows it: a
  // group unloaded a moment before a query the router routed to it arrives.
  void DropSilently(const std::string& label) {
    MutexLock lock(&mu_);
    groups_.erase(label);
  }

  // Finishes the oldest held load or resize of `label`: with OK the group is
  // up (or resized); with an error a first load's group goes and everything
  // waiting on it gets the error. False when nothing of `label` is held.
  bool Complete(const std::string& label, Status status = Status::Ok()) {
    std::vector<std::function<void(Status)>> waiters;
    {
      MutexLock lock(&mu_);
      auto p = std::find_if(pending_.begin(), pending_.end(),
                            [&](const Pending& x) { return x.label == label; });
      if (p == pending_.end()) return false;
      Pending held = std::move(*p);
      pending_.erase(p);
      auto it = groups_.find(label);
      if (it == groups_.end()) {
        status = Unavailable(label + " was unloaded while it loaded");
        if (held.done) waiters.push_back(std::move(held.done));
      } else if (held.resize) {
        if (status.ok()) Resize(it->second, held.replicas);
        waiters.push_back(std::move(held.done));
      } else {
        Group& g = it->second;
        waiters.swap(g.waiters);
        if (status.ok()) {
          g.loading = false;
          g.last_used = Now();
          const int replicas = g.replicas;
          g.replicas = 0;
          Resize(g, replicas);
        } else {
          groups_.erase(it);
        }
      }
    }
    Publish();
    for (auto& w : waiters) w(status);
    return true;
  }

  // Blocks until at least `n` actions have arrived; false after `timeout`
  // (a guard against a hang, not a timing assertion).
  bool WaitForActions(size_t n, std::chrono::seconds timeout = std::chrono::seconds(30)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    MutexLock lock(&mu_);
    while (actions_.size() < n) {
      if (actions_cv_.wait_until(mu_.native(), deadline) == std::cv_status::timeout) {
        return actions_.size() >= n;
      }
    }
    return true;
  }

  // Every action received, in order.
  std::vector<WorkerAction> actions() const {
    MutexLock lock(&mu_);
    return actions_;
  }
  // The same, each as "<kind> <group label>", e.g. "evict m:1:ts-fp32@cpu1".
  std::vector<std::string> ActionLog() const {
    std::vector<std::string> out;
    for (const WorkerAction& w : actions()) {
      out.push_back(std::string(cluster::ActionKindName(w.action.kind)) + " " +
                    cluster::GroupLabel(w.action));
    }
    return out;
  }
  // Loads actually started (a joined kLoad starts none).
  int loads_started() const {
    MutexLock lock(&mu_);
    return loads_started_;
  }
  // The labels of the held loads and resizes, oldest first.
  std::vector<std::string> Held() const {
    MutexLock lock(&mu_);
    std::vector<std::string> out;
    for (const Pending& p : pending_) out.push_back(p.label);
    return out;
  }
  // Every query executed here, in order.
  std::vector<ExecuteRequest> executed() const {
    MutexLock lock(&mu_);
    return executed_;
  }
  // "loaded", "loading" or "" (absent).
  std::string StateOf(const std::string& label) const {
    MutexLock lock(&mu_);
    auto it = groups_.find(label);
    if (it == groups_.end()) return "";
    return it->second.loading ? "loading" : "loaded";
  }

 private:
  cluster::TimePoint Now() const {
    return (options_.clock != nullptr ? *options_.clock : Clock::Real()).Now();
  }
  struct Group {
    VersionPtr version;
    std::string variant;
    HardwareConfig hardware;
    int replicas = 0;
    int64_t memory_bytes = 0;  // per replica
    bool pinned = false;
    bool loading = false;
    cluster::TimePoint last_used{};
    int64_t uses = 0;
    std::vector<int64_t> instance_ids;
    std::vector<std::function<void(Status)>> waiters;  // of the load under way
  };
  struct Pending {
    std::string label;
    bool resize = false;
    int replicas = 0;
    std::function<void(Status)> done;  // a resize's; a load's wait in Group::waiters
  };

  static int64_t ProfiledBytes(const VersionRecord& v, const std::string& variant,
                               const HardwareConfig& hw) {
    for (const VariantProfile& p : v.profiles) {
      if (p.variant != variant) continue;
      if (const HardwareProfile* hp = p.For(hw)) {
        return static_cast<int64_t>(hp->peak_memory_mb * 1024 * 1024);
      }
    }
    return 0;
  }

  void Resize(Group& g, int replicas) SOMM_REQUIRES(mu_) {
    while (static_cast<int>(g.instance_ids.size()) < replicas) {
      g.instance_ids.push_back(next_instance_id_++);
    }
    g.instance_ids.resize(static_cast<size_t>(replicas));
    g.replicas = replicas;
  }

  cluster::WorkerReport ReportLocked() SOMM_REQUIRES(mu_) {
    cluster::WorkerReport r;
    r.worker = options_.id;
    r.incarnation = "fake";
    r.zone = options_.zone;
    r.sequence = ++sequence_;
    cluster::DeviceState cpu;
    cpu.name = "cpu";
    cpu.worker = options_.id;
    cpu.budget_bytes = options_.budget_bytes;
    cpu.cores = options_.cores;
    for (const auto& [label, g] : groups_) {
      cluster::GroupState s;
      s.worker = options_.id;
      s.model = g.version->config.name;
      s.version = g.version->version;
      s.variant = g.variant;
      s.hardware = g.hardware;
      s.device = Device{g.hardware.device, g.hardware.device_index}.ToString();
      s.replicas = g.replicas;
      s.memory_bytes = g.memory_bytes;
      s.pinned = g.pinned;
      s.loading = g.loading;
      s.last_used = g.loading ? Now() : g.last_used;
      s.uses_total = g.uses;
      s.warm_overhead_ms = warm_overhead_ms_;
      for (int64_t id : g.instance_ids) s.instances.push_back({id, 0, {}});
      if (s.device == "cpu") cpu.used_bytes += s.memory_bytes * s.replicas;
      r.groups.push_back(std::move(s));
    }
    r.devices.push_back(cpu);
    return r;
  }

  cluster::ClusterStateStore& store_;
  const Options options_;
  mutable Mutex mu_;
  std::condition_variable_any actions_cv_;
  std::map<std::string, Group> groups_ SOMM_GUARDED_BY(mu_);  // by GroupLabel
  std::deque<Pending> pending_ SOMM_GUARDED_BY(mu_);
  std::vector<WorkerAction> actions_ SOMM_GUARDED_BY(mu_);
  std::vector<ExecuteRequest> executed_ SOMM_GUARDED_BY(mu_);
  Status refusal_ SOMM_GUARDED_BY(mu_);
  double warm_overhead_ms_ SOMM_GUARDED_BY(mu_) = -1;
  std::atomic<bool> remote_{false};
  int loads_started_ SOMM_GUARDED_BY(mu_) = 0;
  int64_t next_instance_id_ SOMM_GUARDED_BY(mu_) = 0;
  int64_t sequence_ SOMM_GUARDED_BY(mu_) = 0;
};

// Several fakes behind one WorkerDirectory, found by their ids. The fakes
// must outlive it.
class FakeWorkerDirectory : public WorkerDirectory {
 public:
  explicit FakeWorkerDirectory(std::vector<FakeWorkerStub*> workers) : workers_(std::move(workers)) {}
  std::shared_ptr<WorkerStub> Find(const std::string& worker) override {
    for (FakeWorkerStub* w : workers_) {
      if (w->id() == worker) return std::shared_ptr<WorkerStub>(std::shared_ptr<WorkerStub>(), w);
    }
    return nullptr;
  }
  std::vector<std::string> Ids() override {
    std::vector<std::string> ids;
    for (FakeWorkerStub* w : workers_) ids.push_back(w->id());
    return ids;
  }

 private:
  const std::vector<FakeWorkerStub*> workers_;  // non-owning
};

}  // namespace somm::testing
