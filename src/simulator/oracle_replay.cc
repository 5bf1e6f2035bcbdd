// The clairvoyant heuristic's replay (policy_replay.h: RunOracle).
#include "simulator/policy_replay.h"

#include "simulator/replay_harness.h"

namespace somm::sim {

using replay::Grow;
using replay::Harness;
using replay::Instance;
using replay::ZooModel;

StatusOr<PolicyResult> RunOracle(const SimulationOptions& options, const loadgen::Trace& trace) {
  const oracle::OracleOptions& oo = options.oracle;
  if (oo.interval_s <= 0 || oo.headroom <= 0) {
    return InvalidArgument("clairvoyant interval and headroom must be positive");
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
      h.Refuse(i, "clairvoyant: no variant of " + h.trace_zoo().TargetOf(trace.queries[i]).label +
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
      h.Finish(i, Unavailable("clairvoyant: no instance placed for " +
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
      h.Finish(i, Unavailable("clairvoyant: no instance of " + q.model + " placed"));
      return;
    }
    h.Dispatch(i, *best);
  };
  return h.Run(
      "clairvoyant", prepare, arrive, [] {}, interval, lead + std::chrono::seconds(1));
}

}  // namespace somm::sim
