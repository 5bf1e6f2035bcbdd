#include "simulator/policy_replay.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <ranges>
#include <memory>
#include <set>
#include <tuple>
#include <utility>

#include "cluster/in_memory_store.h"
#include "simulator/event_loop.h"
#include "simulator/simulated_worker.h"
#include "simulator/zoo.h"

namespace somm::sim {

namespace {

using TimePoint = EventLoop::TimePoint;
using Nanos = std::chrono::nanoseconds;

double Seconds(EventLoop::Duration d) { return std::chrono::duration<double>(d).count(); }

struct ZooModel {
  std::string name;
  VersionPtr version;
  std::vector<Candidate> cands;
  double best_b1_ms = 0;
  size_t base = 0;  // the as-registered candidate on the model's configured threads
};

// One candidate of a model loaded on one worker.
struct Instance {
  const ZooModel* model = nullptr;
  size_t cand = 0;
  int worker = 0;
  int replicas = 0;
  std::string label;
  TimePoint ready_at;
  TimePoint last_used;
  int64_t sent_period = 0;  // queries sent since the period began
  double rate_qps = 0;      // over the last full period
  double tightest_slo_ms = 0;
  TimePoint underloaded_since = TimePoint::max();
  int64_t in_flight = 0;
  bool waited_for = false;  // a query waited for its load (a cold start)
  std::string replaced_by;  // an upgrade or downgrade waiting to be ready
};

// The world both replays share, and the mechanism that carries decisions out.
class Harness {
 public:
  Harness(const SimulationOptions& options, const loadgen::Trace& trace)
      : options_(options), trace_(trace) {}

  Status Init() {
    if (options_.workers < 1 && options_.zones.empty()) {
      return InvalidArgument("--workers must be at least 1");
    }
    if (options_.time_scale <= 0) return InvalidArgument("--time-scale must be positive");
    // The fleet is the simulation's, as RunPolicy builds it: the cluster
    // description's zones, or `workers` alike.
    std::vector<ZoneSpec> zones = options_.zones;
    if (zones.empty()) {
      zones.push_back({"", options_.workers, options_.worker_cores, options_.worker_memory_bytes});
    }
    int max_cores = 0;
    for (const ZoneSpec& z : zones) {
      for (int k = 0; k < z.workers; ++k) {
        SimulatedWorkerOptions wo;
        const int i = static_cast<int>(workers_.size());
        wo.id = "sim-" + std::to_string(i);
        wo.zone = z.name;
        wo.budget_bytes = z.memory_bytes;
        wo.cores = z.cores;
        wo.latency_noise_sigma = options_.latency_noise_sigma;
        wo.seed = options_.seed * 1000003 + static_cast<uint64_t>(i);
        wo.prices = options_.prices;
        workers_.push_back(std::make_unique<SimulatedWorker>(loop_, store_, wo));
        cores_.push_back(z.cores);
        memory_.push_back(z.memory_bytes);
        max_cores = std::max(max_cores, z.cores);
      }
    }
    if (workers_.empty()) return InvalidArgument("the cluster has no workers");
    RegistryOptions ro;
    ro.repository_path = options_.repository;
    registry_ = std::make_unique<ModelRegistry>(ro, backend_);
    SOMM_ASSIGN_OR_RETURN(trace_zoo_, PublishTraceZoo(*registry_, trace_));
    for (const std::string& name : trace_zoo_.models) {
      SOMM_ASSIGN_OR_RETURN(VersionPtr v, registry_->Resolve(name, ""));
      ZooModel& m = zoo_[name];
      m.name = name;
      m.version = v;
      m.cands = Candidates(*v, options_.prices, max_cores);
      if (m.cands.empty()) {
        return FailedPrecondition("model '" + name + "' has no usable profiled variant");
      }
      m.best_b1_ms = BestBatch1Ms(*v);
      for (size_t k = 0; k < m.cands.size(); ++k) {
        if (m.cands[k].variant == kAsRegistered &&
            m.cands[k].hardware.threads == v->config.intra_op_threads) {
          m.base = k;
        }
      }
      for (const Candidate& c : m.cands) max_load_ms_ = std::max(max_load_ms_, c.load_ms);
    }
    for (const auto& [label, target] : trace_zoo_.by_model) models_of_[&target] = {&zoo_.at(label)};
    for (const auto& [task, target] : trace_zoo_.by_task) {
      for (const VersionPtr& v : target.versions) {
        models_of_[&target].push_back(&zoo_.at(v->config.name));
      }
    }
    used_cores_.assign(workers_.size(), 0);
    used_bytes_.assign(workers_.size(), 0);
    changed_.assign(workers_.size(), false);
    outcomes_.resize(trace_.queries.size());
    return Status::Ok();
  }

  EventLoop& loop() { return loop_; }
  std::map<std::string, ZooModel>& zoo() { return zoo_; }
  std::map<std::string, Instance>& instances() { return instances_; }
  // The instances of `m`, in key order: their keys start with the group
  // label's "model:" (a query's loop over every instance of a 1,000-worker
  // cluster cost more than all the rest of the replay).
  auto InstancesOf(const ZooModel& m) {
    return std::ranges::subrange(instances_.lower_bound(m.name + ":"),
                                 instances_.lower_bound(m.name + ";"));
  }
  double max_load_ms() const { return max_load_ms_; }
  int workers() const { return static_cast<int>(workers_.size()); }
  int Cores(int w) const { return cores_[w]; }
  const TraceZoo& trace_zoo() const { return trace_zoo_; }
  // The models a row may be served by (its model, or its task's).
  const std::vector<const ZooModel*>& ModelsOf(const loadgen::TraceQuery& q) const {
    return models_of_.at(&trace_zoo_.TargetOf(q));
  }
  const SimulationOptions& options() const { return options_; }
  const loadgen::Trace& trace() const { return trace_; }
  TimePoint t0() const { return t0_; }
  // A trace query's arrival, on the virtual clock.
  TimePoint ArrivalOf(size_t i) const {
    return t0_ + FromMs(trace_.queries[i].timestamp_ms / options_.time_scale);
  }

  int FreeCores(int w) const { return cores_[w] - used_cores_[w]; }
  int64_t FreeBytes(int w) const { return memory_[w] - used_bytes_[w]; }
  // The workers whose cores or memory changed since the last call, each
  // once: a replay that keeps per-worker views refreshes only these
  // (rebuilding 1,000 views per query was most of the INFaaS replay's time).
  // Bounded by the workers, also for a replay that never asks.
  std::vector<int> TakeChangedWorkers() {
    for (int w : changed_workers_) changed_[w] = false;
    return std::exchange(changed_workers_, {});
  }

  static std::string Key(const std::string& label, int w) {
    return label + "@" + std::to_string(w);
  }

  // Holds `replicas` of candidate `c` on worker `w` (a load, a resize, or
  // with 0 an unload). Returns the instance's key ("" when unloaded).
  StatusOr<std::string> Set(const ZooModel& m, size_t c, int w, int replicas,
                            bool replaced = false) {
    const Candidate& cand = m.cands[c];
    const std::string label =
        cluster::GroupLabel(m.name, m.version->version, cand.variant, cand.hardware);
    const std::string key = Key(label, w);
    auto it = instances_.find(key);
    WorkerAction wa;
    cluster::Action& a = wa.action;
    a.worker = workers_[w]->id();
    a.model = m.name;
    a.version = m.version->version;
    a.variant = cand.variant;
    a.hardware = cand.hardware;
    a.replicas = replicas;
    wa.version = m.version;
    const char* kind = "resize";
    if (replicas == 0) {
      if (it == instances_.end()) return std::string();
      a.kind = cluster::Action::kUnload;
      a.cause = replaced ? cluster::Action::Cause::kReplaced : cluster::Action::Cause::kDemand;
      kind = "unload";
    } else if (it == instances_.end()) {
      a.kind = cluster::Action::kLoad;
      kind = "load";
    } else {
      if (it->second.replicas == replicas) return key;
      a.kind = cluster::Action::kSetReplicas;
    }
    Status status = Unavailable("no answer");
    workers_[w]->Apply(std::move(wa), [&status](Status s) { status = std::move(s); });
    SOMM_RETURN_IF_ERROR(status);
    ++actions_by_kind_[kind];
    const int before = it == instances_.end() ? 0 : it->second.replicas;
    used_cores_[w] += (replicas - before) * cand.cores;
    used_bytes_[w] = workers_[w]->used_bytes();
    if (!changed_[w]) {
      changed_[w] = true;
      changed_workers_.push_back(w);
    }
    if (replicas == 0) {
      instances_.erase(it);
      return std::string();
    }
    const TimePoint now = loop_.Now();
    if (it == instances_.end()) {
      Instance inst;
      inst.model = &m;
      inst.cand = c;
      inst.worker = w;
      inst.label = label;
      inst.ready_at = now + FromMs(cand.load_ms);
      inst.last_used = now;
      it = instances_.emplace(key, std::move(inst)).first;
    } else if (replicas > it->second.replicas) {
      // New replicas load; the old ones serve meanwhile.
      it->second.ready_at = std::max(it->second.ready_at, now);
    }
    it->second.replicas = replicas;
    return key;
  }

  // Sends trace query `i` to an instance; records its outcome.
  void Dispatch(size_t i, Instance& inst) {
    const loadgen::TraceQuery& q = trace_.queries[i];
    const TimePoint now = loop_.Now();
    // Counted per load a query waits for, as the controller counts
    // somm_cold_starts_total, not per waiting query.
    if (inst.ready_at > now && !inst.waited_for) {
      inst.waited_for = true;
      ++cold_starts_;
    }
    ++inst.sent_period;
    inst.last_used = now;
    if (!q.task.empty()) outcomes_[i].served_by = inst.model->name;
    if (q.latency_slo_ms &&
        (inst.tightest_slo_ms == 0 || *q.latency_slo_ms < inst.tightest_slo_ms)) {
      inst.tightest_slo_ms = *q.latency_slo_ms;
    }
    ++inst.in_flight;
    ExecuteRequest req;
    req.group = inst.label;
    if (q.latency_slo_ms) req.deadline = ArrivalOf(i) + FromMs(*q.latency_slo_ms);
    const std::string key = Key(inst.label, inst.worker);
    Status s = workers_[inst.worker]->Execute(req, [this, i, key](StatusOr<ExecuteResult> r) {
      Finish(i, r.ok() ? Status::Ok() : r.status());
      if (auto it = instances_.find(key); it != instances_.end()) --it->second.in_flight;
    });
    if (!s.ok()) {
      --inst.in_flight;
      Finish(i, s);
    }
  }

  // Query `i` refused: no candidate the policy may use honours its
  // min_accuracy or max_cost.
  void Refuse(size_t i, const std::string& why) {
    Finish(i, FailedPrecondition(why));
    outcomes_[i].refused_constraint = true;
  }

  void Finish(size_t i, const Status& s) {
    QueryOutcome& o = outcomes_[i];
    o.done = true;
    o.code = s.code();
    o.latency_ms = std::chrono::duration<double, std::milli>(loop_.Now() - ArrivalOf(i)).count();
  }

  // The replay: the warm-up (`prepare` at the loop's start, then the
  // longest load), every query through `arrive`, `tick` every `period`
  // until the last arrival; then the summary.
  StatusOr<PolicyResult> Run(const std::string& name, const std::function<Status()>& prepare,
                             const std::function<void(size_t)>& arrive,
                             const std::function<void()>& tick, EventLoop::Duration period,
                             EventLoop::Duration warm_up) {
    SOMM_RETURN_IF_ERROR(prepare());
    t0_ = loop_.Now() + warm_up;
    loop_.RunUntil(t0_);
    PolicyResult result;
    result.policy = name;
    result.constraints = trace_zoo_.constraints;
    const double last_ms = trace_.queries.empty() ? 0 : trace_.queries.back().timestamp_ms;
    const TimePoint t_end = t0_ + FromMs(last_ms / options_.time_scale);
    result.duration_s = Seconds(t_end - t0_);
    auto replica_seconds = [this] {
      double s = 0;
      for (const auto& w : workers_) s += w->ReplicaSeconds();
      return s;
    };
    auto usd = [this] {
      double s = 0;
      for (const auto& w : workers_) s += w->Usd();
      return s;
    };
    const double rs0 = replica_seconds();
    const double usd0 = usd();
    const int64_t cold0 = cold_starts_;
    const auto actions0 = actions_by_kind_;
    loop_.At(t_end, [&] {
      result.instance_seconds = replica_seconds() - rs0;
      result.usd = usd() - usd0;
      result.cold_starts = cold_starts_ - cold0;
      for (const auto& [kind, n] : actions_by_kind_) {
        auto it = actions0.find(kind);
        const int64_t d = n - (it == actions0.end() ? 0 : it->second);
        if (d > 0) result.control_actions_by_kind[kind] = d;
        result.control_actions += d;
      }
    });
    std::function<void()> tick_fn = [&] {
      tick();
      if (loop_.Now() + period <= t_end) loop_.After(period, tick_fn);
    };
    loop_.At(t0_ + period, tick_fn);
    for (size_t i = 0; i < trace_.queries.size(); ++i) {
      const loadgen::TraceQuery& q = trace_.queries[i];
      QueryOutcome& o = outcomes_[i];
      o.slo_ms = q.latency_slo_ms;
      if (!q.task.empty() || q.min_accuracy || q.max_cost) {
        const RowTarget& target = trace_zoo_.TargetOf(q);
        o.model = &target.label;
        o.feasible = Feasible(target, q, options_.prices);
      } else {
        o.model = &q.model;
        if (q.latency_slo_ms) o.feasible = *q.latency_slo_ms >= zoo_.at(q.model).best_b1_ms;
      }
    }
    std::function<void(size_t)> next = [&](size_t i) {
      arrive(i);
      if (i + 1 < trace_.queries.size()) loop_.At(ArrivalOf(i + 1), [&next, i] { next(i + 1); });
    };
    if (!trace_.queries.empty()) loop_.At(ArrivalOf(0), [&next] { next(0); });
    loop_.Run();
    SummarizeOutcomes(outcomes_, &result);
    result.worker_seconds = static_cast<double>(workers_.size()) * result.duration_s;
    result.mean_replicas = result.duration_s > 0 ? result.instance_seconds / result.duration_s : 0;
    result.events = loop_.events_run();
    return result;
  }

 private:
  const SimulationOptions& options_;
  const loadgen::Trace& trace_;
  EventLoop loop_;
  cluster::InMemoryClusterStateStore store_;
  NoBackend backend_;
  std::unique_ptr<ModelRegistry> registry_;
  TraceZoo trace_zoo_;
  std::map<std::string, ZooModel> zoo_;
  std::map<const RowTarget*, std::vector<const ZooModel*>> models_of_;
  std::vector<std::unique_ptr<SimulatedWorker>> workers_;
  std::vector<int> cores_;        // per worker, from its zone
  std::vector<int64_t> memory_;  // per worker: its memory budget
  std::map<std::string, Instance> instances_;  // by Key
  std::vector<int> used_cores_;       // per worker: its instances' replicas x cores
  std::vector<int64_t> used_bytes_;  // per worker: its instances' memory
  std::vector<int> changed_workers_;  // since the last TakeChangedWorkers
  std::vector<bool> changed_;         // per worker: listed in changed_workers_
  std::vector<QueryOutcome> outcomes_;
  std::map<std::string, int64_t> actions_by_kind_;
  int64_t cold_starts_ = 0;
  double max_load_ms_ = 0;
  TimePoint t0_;
};

// Places `n` more replicas of candidate `c` of `m`: first on the workers
// that hold it, then on the ones with the most free cores (and the memory).
int Grow(Harness& h, const ZooModel& m, size_t c, int n, const std::vector<bool>* avoid) {
  const Candidate& cand = m.cands[c];
  std::vector<int> order(h.workers());
  for (int w = 0; w < h.workers(); ++w) order[w] = w;
  std::map<int, int> held;
  for (const auto& [key, inst] : h.InstancesOf(m)) {
    if (inst.model == &m && inst.cand == c) held[inst.worker] = inst.replicas;
  }
  std::vector<int> free(h.workers());
  for (int w = 0; w < h.workers(); ++w) free[w] = h.FreeCores(w);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    if (held.count(a) != held.count(b)) return held.count(a) > held.count(b);
    return free[a] > free[b];
  });
  int placed = 0;
  for (int w : order) {
    if (placed >= n) break;
    if (avoid != nullptr && (*avoid)[w]) continue;
    int fit = std::min(n - placed, free[w] / std::max(cand.cores, 1));
    if (cand.memory_bytes > 0) {
      fit = static_cast<int>(std::min<int64_t>(fit, h.FreeBytes(w) / cand.memory_bytes));
    }
    if (fit <= 0) continue;
    auto it = held.find(w);
    const int have = it == held.end() ? 0 : it->second;
    if (h.Set(m, c, w, have + fit).ok()) placed += fit;
  }
  return placed;
}

}  // namespace

StatusOr<PolicyResult> RunInfaas(const SimulationOptions& options, const loadgen::Trace& trace) {
  const infaas::InfaasOptions& io = options.infaas;
  Harness h(options, trace);
  SOMM_RETURN_IF_ERROR(h.Init());
  std::vector<double> blacklisted_until(h.workers(), -1);
  auto now_s = [&h] { return Seconds(h.loop().Now() - h.t0()); };
  // Every worker's view, kept as it changes rather than rebuilt per query:
  // the cores and memory of the workers a placement touched, and the
  // blacklist flags whenever one lapses (they are set only at a tick).
  std::vector<infaas::WorkerView> views(h.workers());
  double next_lapse_s = -1;  // when the earliest blacklist still on lapses; -1: refresh now
  auto worker_views = [&]() -> const std::vector<infaas::WorkerView>& {
    for (int w : h.TakeChangedWorkers()) {
      views[w].free_cores = h.FreeCores(w);
      views[w].free_bytes = h.FreeBytes(w);
    }
    const double now = now_s();
    if (next_lapse_s < 0 || now >= next_lapse_s) {
      next_lapse_s = std::numeric_limits<double>::infinity();
      for (int w = 0; w < h.workers(); ++w) {
        views[w].blacklisted = now < blacklisted_until[w];
        if (views[w].blacklisted) next_lapse_s = std::min(next_lapse_s, blacklisted_until[w]);
      }
    }
    return views;
  };
  for (int w = 0; w < h.workers(); ++w) {
    views[w].cores = h.Cores(w);
    views[w].free_cores = h.FreeCores(w);
    views[w].free_bytes = h.FreeBytes(w);
  }
  const double period_s = std::max(io.monitor_interval_s, 1e-3);
  auto view_of = [&](const Instance& inst) {
    infaas::InstanceView v;
    v.candidate = inst.cand;
    v.worker = inst.worker;
    v.replicas = inst.replicas;
    v.ready_in_ms = std::max(0.0, Seconds(inst.ready_at - h.loop().Now()) * 1000);
    // The last period's rate, or this one's so far when it is already higher.
    v.rate_qps = std::max(inst.rate_qps, static_cast<double>(inst.sent_period) / period_s);
    return v;
  };
  // Start as somm does: each model's configured instances of its
  // as-registered variant, where the cores allow; a model left out (a zoo
  // of thousands on a cluster of fewer cores) loads on its first query, as
  // INFaaS loads every variant.
  auto prepare = [&]() -> Status {
    int placed = 0;
    for (auto& [name, m] : h.zoo()) {
      placed += Grow(h, m, m.base, std::max(m.version->config.instance_count, 1), nullptr) > 0;
    }
    if (placed == 0 && !h.zoo().empty()) {
      return FailedPrecondition("start-up: no worker has room for any model");
    }
    return Status::Ok();
  };
  // A task row, or a row with min_accuracy or max_cost: INFaaS's own
  // model-less selection, over every variant of the row's models (all of
  // the task's) that honours the constraints; none: refused.
  auto arrive_pooled = [&](size_t i) {
    const loadgen::TraceQuery& q = trace.queries[i];
    std::vector<Candidate> cands;
    std::vector<std::pair<const ZooModel*, size_t>> origin;  // per pooled candidate
    std::vector<Instance*> insts;
    std::vector<infaas::InstanceView> instance_views;
    for (const ZooModel* m : h.ModelsOf(q)) {
      std::vector<int> pooled(m->cands.size(), -1);
      for (size_t c = 0; c < m->cands.size(); ++c) {
        if (!Honours(m->cands[c], q)) continue;
        pooled[c] = static_cast<int>(cands.size());
        cands.push_back(m->cands[c]);
        origin.emplace_back(m, c);
      }
      for (auto& [key, inst] : h.InstancesOf(*m)) {
        if (inst.model != m || pooled[inst.cand] < 0) continue;
        insts.push_back(&inst);
        infaas::InstanceView v = view_of(inst);
        v.candidate = static_cast<size_t>(pooled[inst.cand]);
        instance_views.push_back(v);
      }
    }
    if (cands.empty()) {
      h.Refuse(i, "infaas: no variant of " + h.trace_zoo().TargetOf(q).label +
                      " honours the query's min_accuracy and max_cost");
      return;
    }
    const infaas::Selection sel =
        infaas::SelectVariant(cands, instance_views, worker_views(), q.latency_slo_ms, io);
    Instance* chosen = nullptr;
    if (sel.ok && sel.instance >= 0) {
      chosen = insts[sel.instance];
    } else if (sel.ok) {
      const auto [m, c] = origin[sel.candidate];
      int have = 0;
      for (const auto& [k, inst] : h.InstancesOf(*m)) {
        if (inst.model == m && inst.cand == c && inst.worker == sel.worker) have = inst.replicas;
      }
      auto placed = h.Set(*m, c, sel.worker, have + 1);
      if (placed.ok()) chosen = &h.instances().at(*placed);
    }
    if (chosen == nullptr) {
      h.Finish(i, Unavailable("infaas: no worker can hold a variant of " +
                              h.trace_zoo().TargetOf(q).label));
      return;
    }
    h.Dispatch(i, *chosen);
  };
  auto arrive = [&](size_t i) {
    const loadgen::TraceQuery& q = trace.queries[i];
    if (!q.task.empty() || q.min_accuracy || q.max_cost) return arrive_pooled(i);
    const ZooModel& m = h.zoo().at(q.model);
    std::vector<const std::string*> keys;
    std::vector<infaas::InstanceView> instance_views;
    for (auto& [key, inst] : h.InstancesOf(m)) {
      // A replaced instance serves until its replacement does (make before
      // break); the fast path prefers whichever is ready.
      if (inst.model != &m) continue;
      keys.push_back(&key);
      instance_views.push_back(view_of(inst));
    }
    const infaas::Selection sel =
        infaas::SelectVariant(m.cands, instance_views, worker_views(), q.latency_slo_ms, io);
    std::string key;
    if (sel.ok && sel.instance >= 0) {
      key = *keys[sel.instance];
    } else if (sel.ok) {
      // One replica more there (a first one, unless the worker already holds
      // the candidate, saturated).
      int have = 0;
      for (const auto& [k, inst] : h.InstancesOf(m)) {
        if (inst.model == &m && inst.cand == sel.candidate && inst.worker == sel.worker) {
          have = inst.replicas;
        }
      }
      auto placed = h.Set(m, sel.candidate, sel.worker, have + 1);
      if (placed.ok()) key = *placed;
    }
    if (key.empty()) {
      h.Finish(i, Unavailable("infaas: no worker can hold a variant of " + q.model));
      return;
    }
    h.Dispatch(i, h.instances().at(key));
  };
  auto tick = [&] {
    const auto now = h.loop().Now();
    for (auto& [key, inst] : h.instances()) {
      inst.rate_qps = static_cast<double>(inst.sent_period) / period_s;
      inst.sent_period = 0;
    }
    // Blacklists from this period's utilisation, summed per worker in one
    // pass over the instances.
    std::vector<double> busy(h.workers(), 0.0);
    for (auto& [key, inst] : h.instances()) {
      busy[inst.worker] +=
          infaas::WorkerUtilization(inst.model->cands, {view_of(inst)}, h.Cores(inst.worker));
    }
    for (int w = 0; w < h.workers(); ++w) {
      blacklisted_until[w] = infaas::BlacklistedUntil(busy[w], now_s(), blacklisted_until[w], io);
    }
    next_lapse_s = -1;
    // Replaced instances go once their replacement serves.
    std::vector<std::string> keys;
    for (auto& [key, inst] : h.instances()) keys.push_back(key);
    for (const std::string& key : keys) {
      auto it = h.instances().find(key);
      if (it == h.instances().end() || it->second.replaced_by.empty()) continue;
      auto by = h.instances().find(it->second.replaced_by);
      if (by == h.instances().end() || by->second.ready_at <= now) {
        const Instance old = it->second;
        (void)h.Set(*old.model, old.cand, old.worker, 0, /*replaced=*/true);
      }
    }
    std::vector<infaas::WorkerView> wv = worker_views();  // a copy: updated below as this tick places
    for (const std::string& key : keys) {
      auto it = h.instances().find(key);
      if (it == h.instances().end() || !it->second.replaced_by.empty()) continue;
      Instance& inst = it->second;
      const ZooModel& m = *inst.model;
      const infaas::InstanceView v = view_of(inst);
      if (infaas::Underloaded(m.cands, v, inst.tightest_slo_ms, io)) {
        inst.underloaded_since = std::min(inst.underloaded_since, now);
      } else {
        inst.underloaded_since = EventLoop::TimePoint::max();
      }
      const double under_s = inst.underloaded_since == EventLoop::TimePoint::max()
                                 ? 0
                                 : Seconds(now - inst.underloaded_since);
      wv[inst.worker].free_cores = h.FreeCores(inst.worker);
      wv[inst.worker].free_bytes = h.FreeBytes(inst.worker);
      const infaas::ScaleDecision d =
          infaas::ScaleInstance(m.cands, v, wv[inst.worker], under_s, Seconds(now - inst.last_used),
                                inst.tightest_slo_ms, io);
      inst.tightest_slo_ms = 0;
      const size_t cand = inst.cand;
      const int w = inst.worker;
      switch (d.kind) {
        case infaas::ScaleDecision::kNone:
          break;
        case infaas::ScaleDecision::kSetReplicas:
          (void)h.Set(m, cand, w, d.replicas);
          inst.underloaded_since = EventLoop::TimePoint::max();
          break;
        case infaas::ScaleDecision::kUnload:
          if (inst.in_flight == 0) (void)h.Set(m, cand, w, 0);
          break;
        case infaas::ScaleDecision::kUpgrade:
        case infaas::ScaleDecision::kDowngrade: {
          if (d.to_candidate == cand) break;
          // The new variant goes on the same worker; the old one stays until
          // it serves (make before break). Its cores are the old one's.
          auto placed = h.Set(m, d.to_candidate, w, d.replicas);
          if (placed.ok()) {
            auto old = h.instances().find(key);
            if (old != h.instances().end()) old->second.replaced_by = *placed;
          }
          break;
        }
      }
    }
  };
  return h.Run(
      "infaas", prepare, arrive, tick,
      std::chrono::duration_cast<EventLoop::Duration>(std::chrono::duration<double>(period_s)),
      FromMs(h.max_load_ms()) + std::chrono::seconds(1));
}

StatusOr<PolicyResult> RunOracle(const SimulationOptions& options, const loadgen::Trace& trace) {
  const oracle::OracleOptions& oo = options.oracle;
  if (oo.interval_s <= 0 || oo.headroom <= 0) {
    return InvalidArgument("oracle interval and headroom must be positive");
  }
  Harness h(options, trace);
  SOMM_RETURN_IF_ERROR(h.Init());
  // The whole trace, ahead: per interval, model and SLO, queries per second.
  const double last_ms = trace.queries.empty() ? 0 : trace.queries.back().timestamp_ms;
  const size_t intervals =
      static_cast<size_t>(last_ms / options.time_scale / 1000.0 / oo.interval_s) + 1;
  std::map<std::string, std::vector<std::map<double, std::map<int64_t, int64_t>>>> bins;
  for (const auto& [name, m] : h.zoo()) bins[name].resize(intervals);
  // Task rows and rows with min_accuracy or max_cost: classes of one row
  // target, SLO and constraints, each with the candidates of its models
  // that honour them (per model, by candidate).
  struct Class {
    double slo_ms = 0;
    // In the models' name order: ties between them go the same way every run.
    std::vector<std::pair<const ZooModel*, std::vector<bool>>> eligible;
    bool any = false;
    std::vector<std::map<int64_t, int64_t>> bins;  // per interval: per second
  };
  std::vector<Class> classes;
  std::map<std::tuple<const RowTarget*, double, double, double>, int> class_ids;
  std::vector<int> class_of(trace.queries.size(), -1);
  for (size_t i = 0; i < trace.queries.size(); ++i) {
    const loadgen::TraceQuery& q = trace.queries[i];
    const double s = q.timestamp_ms / options.time_scale / 1000.0;
    const size_t k = std::min(intervals - 1, static_cast<size_t>(s / oo.interval_s));
    if (q.task.empty() && !q.min_accuracy && !q.max_cost) {
      ++bins[q.model][k][q.latency_slo_ms.value_or(0)][static_cast<int64_t>(s)];
      continue;
    }
    const auto key = std::make_tuple(&h.trace_zoo().TargetOf(q), q.latency_slo_ms.value_or(0),
                                     q.min_accuracy.value_or(-1), q.max_cost.value_or(-1));
    auto [it, fresh] = class_ids.emplace(key, static_cast<int>(classes.size()));
    if (fresh) {
      Class c;
      c.slo_ms = q.latency_slo_ms.value_or(0);
      c.bins.resize(intervals);
      for (const ZooModel* m : h.ModelsOf(q)) {
        std::vector<bool>& ok = c.eligible.emplace_back(m, std::vector<bool>()).second;
        for (const Candidate& cand : m->cands) {
          ok.push_back(Honours(cand, q));
          c.any = c.any || ok.back();
        }
      }
      classes.push_back(std::move(c));
    }
    class_of[i] = it->second;
    ++classes[it->second].bins[k][static_cast<int64_t>(s)];
  }
  // Per interval, each class's load goes whole to the eligible candidate,
  // of any of its models, with the lowest price per query/s at its SLO
  // (PlanInterval's rule across models), or the fastest eligible one when
  // none can meet the SLO; the models' plans then size it with their own.
  std::vector<std::map<int, std::pair<const ZooModel*, size_t>>> assigned(intervals);
  std::vector<std::map<std::string, std::vector<oracle::SloDemand>>> forced(intervals);
  for (size_t k = 0; k < intervals; ++k) {
    for (size_t id = 0; id < classes.size(); ++id) {
      const Class& c = classes[id];
      if (c.bins[k].empty() || !c.any) continue;
      const ZooModel* best_m = nullptr;
      size_t best_c = 0;
      double best_price = std::numeric_limits<double>::infinity();
      const ZooModel* fast_m = nullptr;
      size_t fast_c = 0;
      for (const auto& [m, ok] : c.eligible) {
        for (size_t j = 0; j < ok.size(); ++j) {
          if (!ok[j]) continue;
          const Candidate& cand = m->cands[j];
          const double cap =
              oracle::CapacityAtSlo(cand, m->version->config.max_batch_size, c.slo_ms);
          if (cap > 0 && cand.usd_per_s / cap < best_price) {
            best_price = cand.usd_per_s / cap;
            best_m = m;
            best_c = j;
          }
          if (fast_m == nullptr || cand.batch1_ms < fast_m->cands[fast_c].batch1_ms) {
            fast_m = m;
            fast_c = j;
          }
        }
      }
      if (best_m == nullptr) {
        best_m = fast_m;
        best_c = fast_c;
      }
      int64_t peak = 0;
      for (const auto& [sec, n] : c.bins[k]) peak = std::max(peak, n);
      assigned[k][static_cast<int>(id)] = {best_m, best_c};
      oracle::SloDemand d{c.slo_ms, static_cast<double>(peak)};
      d.candidate = best_c;
      forced[k][best_m->name].push_back(d);
    }
  }
  std::vector<std::map<std::string, oracle::ModelPlan>> plans(intervals);
  for (size_t k = 0; k < intervals; ++k) {
    for (const auto& [name, m] : h.zoo()) {
      std::vector<oracle::SloDemand> demand;
      for (const auto& [slo, secs] : bins[name][k]) {
        int64_t peak = 0;
        for (const auto& [sec, n] : secs) peak = std::max(peak, n);
        demand.push_back({slo, static_cast<double>(peak)});
      }
      if (auto f = forced[k].find(name); f != forced[k].end()) {
        demand.insert(demand.end(), f->second.begin(), f->second.end());
      }
      plans[k][name] = oracle::PlanInterval(m.cands, m.version->config.max_batch_size, demand, oo);
    }
  }
  // Moves the cluster to plan k: `grow` adds what it lacks (ahead of the
  // interval), otherwise it removes what the plan does not hold.
  auto apply = [&](size_t k, bool grow) {
    for (auto& [name, m] : h.zoo()) {
      const oracle::ModelPlan& plan = plans[k][name];
      for (size_t c = 0; c < m.cands.size(); ++c) {
        auto want_it = plan.replicas.find(c);
        const int want = want_it == plan.replicas.end() ? 0 : want_it->second;
        std::vector<std::pair<std::string, int>> held;  // key, replicas
        int have = 0;
        for (const auto& [key, inst] : h.InstancesOf(m)) {
          if (inst.model == &m && inst.cand == c) {
            held.emplace_back(key, inst.replicas);
            have += inst.replicas;
          }
        }
        if (grow && want > have) {
          Grow(h, m, c, want - have, nullptr);
        } else if (!grow && want < have) {
          int extra = have - want;
          for (auto it = held.rbegin(); it != held.rend() && extra > 0; ++it) {
            const Instance& inst = h.instances().at(it->first);
            if (inst.in_flight > 0 && want == 0) continue;  // drains first
            const int cut = std::min(extra, inst.replicas);
            (void)h.Set(m, c, inst.worker, inst.replicas - cut);
            extra -= cut;
          }
        }
      }
    }
  };
  size_t current = 0;
  const auto lead = FromMs(h.max_load_ms()) + std::chrono::milliseconds(100);
  const auto interval =
      std::chrono::duration_cast<EventLoop::Duration>(std::chrono::duration<double>(oo.interval_s));
  auto prepare = [&]() -> Status {
    apply(0, true);
    // The later intervals: grow a load time ahead, shrink on time.
    for (size_t k = 1; k < intervals; ++k) {
      const auto start = h.loop().Now() + lead + std::chrono::seconds(1) + interval * k;
      h.loop().At(start - lead, [&apply, k] { apply(k, true); });
      h.loop().At(start, [&apply, &current, k] {
        current = k;
        apply(k, false);
        // What found no room ahead (the old interval's replicas held it)
        // loads now, late.
        apply(k, true);
      });
    }
    return Status::Ok();
  };
  // A class's query: to its interval's candidate, else to any instance of a
  // candidate that honours its constraints; refused when none does.
  auto arrive_class = [&](size_t i, const Class& c, int id) {
    if (!c.any) {
      h.Refuse(i, "oracle: no variant of " + h.trace_zoo().TargetOf(trace.queries[i]).label +
                      " honours the query's min_accuracy and max_cost");
      return;
    }
    const auto now = h.loop().Now();
    auto load_of = [now](const Instance& inst) {
      return (inst.ready_at > now ? 1e9 : 0) +
             static_cast<double>(inst.in_flight) / std::max(inst.replicas, 1);
    };
    auto want = assigned[current].find(id);
    Instance* best = nullptr;
    for (int pass = 0; pass < 2 && best == nullptr; ++pass) {
      for (const auto& [m, ok] : c.eligible) {
        if (pass == 0 && (want == assigned[current].end() || want->second.first != m)) continue;
        for (auto& [key, inst] : h.InstancesOf(*m)) {
          if (inst.model != m || !ok[inst.cand]) continue;
          if (pass == 0 && inst.cand != want->second.second) continue;
          if (best == nullptr || load_of(inst) < load_of(*best)) best = &inst;
        }
      }
    }
    if (best == nullptr) {
      h.Finish(i, Unavailable("oracle: no instance placed for " +
                              h.trace_zoo().TargetOf(trace.queries[i]).label));
      return;
    }
    h.Dispatch(i, *best);
  };
  auto arrive = [&](size_t i) {
    const loadgen::TraceQuery& q = trace.queries[i];
    if (class_of[i] >= 0) return arrive_class(i, classes[class_of[i]], class_of[i]);
    const ZooModel& m = h.zoo().at(q.model);
    const oracle::ModelPlan& plan = plans[current][q.model];
    auto route = plan.route.find(q.latency_slo_ms.value_or(0));
    const size_t want = route == plan.route.end() ? m.base : route->second;
    Instance* best = nullptr;
    // Ready instances first (the next interval's, loading ahead, are not
    // yet), then the least queries in flight per replica.
    const auto now = h.loop().Now();
    auto load_of = [now](const Instance& inst) {
      return (inst.ready_at > now ? 1e9 : 0) +
             static_cast<double>(inst.in_flight) / std::max(inst.replicas, 1);
    };
    for (int pass = 0; pass < 2 && best == nullptr; ++pass) {
      for (auto& [key, inst] : h.InstancesOf(m)) {
        if (inst.model != &m || (pass == 0 && inst.cand != want)) continue;
        if (best == nullptr || load_of(inst) < load_of(*best)) best = &inst;
      }
    }
    if (best == nullptr) {
      h.Finish(i, Unavailable("oracle: no instance of " + q.model + " placed"));
      return;
    }
    h.Dispatch(i, *best);
  };
  return h.Run(
      "oracle", prepare, arrive, [] {}, interval, lead + std::chrono::seconds(1));
}

}  // namespace somm::sim
