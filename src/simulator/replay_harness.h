// The world the INFaaS and oracle replays share (policy_replay.cc,
// oracle_replay.cc): the simulated workers and their instances, the event
// loop, and the mechanism that carries a policy's decisions out (loads,
// replica changes, queries to instances), so that the two policies differ
// only in what they decide. Internal to the simulator.
//
// Thread-safety: single-threaded, like the event loop it drives.
#pragma once

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
#include "simulator/policy_replay.h"

namespace somm::sim::replay {

using TimePoint = EventLoop::TimePoint;
using Nanos = std::chrono::nanoseconds;

inline double Seconds(EventLoop::Duration d) { return std::chrono::duration<double>(d).count(); }

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
  int64_t in_flight = 0;
  int64_t done_period = 0;       // answered since the period began
  double latency_ms_period = 0;  // their latencies from arrival, summed
  bool waited_for = false;       // a query waited for its load (a cold start)
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
    registry_ = std::make_unique<ModelCatalog>(options_.repository);
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
        if (m.cands[k].variant == AsRegisteredVariant(*v) &&
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
    busy_core_s_.assign(workers_.size(), 0.0);
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
  // Core-seconds worker `w` computed since the last call (each answered
  // query's share of its batch's compute, times its threads): what a CPU
  // utilisation monitor on the worker would see.
  double TakeBusyCoreSeconds(int w) { return std::exchange(busy_core_s_[w], 0.0); }
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
    ++inst.in_flight;
    ExecuteRequest req;
    req.group = inst.label;
    if (q.latency_slo_ms) req.deadline = ArrivalOf(i) + FromMs(*q.latency_slo_ms);
    const std::string key = Key(inst.label, inst.worker);
    const int w = inst.worker;
    const int cores = inst.model->cands[inst.cand].cores;
    Status s = workers_[w]->Execute(req, [this, i, key, w, cores](StatusOr<ExecuteResult> r) {
      Finish(i, r.ok() ? Status::Ok() : r.status());
      if (r.ok() && r->stats.batch_size > 0) {
        busy_core_s_[w] += 1e-9 * static_cast<double>(r->stats.compute_ns) * cores /
                           static_cast<double>(r->stats.batch_size);
      }
      if (auto it = instances_.find(key); it != instances_.end()) {
        --it->second.in_flight;
        ++it->second.done_period;
        it->second.latency_ms_period += outcomes_[i].latency_ms;
      }
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
    // The timeline, as the router's policies have it (simulation.cc): the
    // replicas at the end of each second (the fleet's workers beside them),
    // then the outcomes by arrival second.
    const size_t seconds = static_cast<size_t>(std::ceil(result.duration_s)) + 1;
    result.timeline.assign(seconds, {});
    std::function<void(size_t)> sample = [&](size_t second) {
      int64_t replicas = 0;
      for (const auto& w : workers_) replicas += w->replicas();
      result.timeline[second].replicas = replicas;
      result.timeline[second].workers = static_cast<int>(workers_.size());
      if (second + 1 < seconds) {
        loop_.At(t0_ + std::chrono::seconds(second + 2), [&sample, second] { sample(second + 1); });
      }
    };
    loop_.At(t0_ + std::chrono::seconds(1), [&sample] { sample(0); });
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
    for (size_t i = 0; i < outcomes_.size(); ++i) {
      const size_t second = std::min(
          seconds - 1,
          static_cast<size_t>(trace_.queries[i].timestamp_ms / 1000.0 / options_.time_scale));
      PolicyResult::Second& b = result.timeline[second];
      ++b.arrivals;
      const QueryOutcome& o = outcomes_[i];
      if (!o.feasible) continue;
      ++b.feasible;
      if (o.done && o.code == StatusCode::kOk && (!o.slo_ms || o.latency_ms <= *o.slo_ms)) ++b.met;
    }
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
  std::unique_ptr<ModelCatalog> registry_;
  TraceZoo trace_zoo_;
  std::map<std::string, ZooModel> zoo_;
  std::map<const RowTarget*, std::vector<const ZooModel*>> models_of_;
  std::vector<std::unique_ptr<SimulatedWorker>> workers_;
  std::vector<int> cores_;        // per worker, from its zone
  std::vector<int64_t> memory_;  // per worker: its memory budget
  std::map<std::string, Instance> instances_;  // by Key
  std::vector<int> used_cores_;       // per worker: its instances' replicas x cores
  std::vector<double> busy_core_s_;   // per worker: computed since TakeBusyCoreSeconds
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
inline int Grow(Harness& h, const ZooModel& m, size_t c, int n,
                const std::vector<bool>* avoid) {
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

}  // namespace somm::sim::replay
