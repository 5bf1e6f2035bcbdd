#include "simulator/policy_replay.h"

#include "simulator/replay_harness.h"

namespace somm::sim {

using replay::Grow;
using replay::Harness;
using replay::Instance;
using replay::Seconds;
using replay::TimePoint;
using replay::ZooModel;

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

}  // namespace somm::sim
