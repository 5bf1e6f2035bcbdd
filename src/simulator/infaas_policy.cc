#include "simulator/infaas_policy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace somm::sim::infaas {

namespace {

// Replicas of `c` that carry `rate_qps` at `utilization` of their capacity.
int ReplicasFor(const Candidate& c, double rate_qps, double utilization) {
  return std::max(1, static_cast<int>(std::ceil(rate_qps / (utilization * c.capacity_qps))));
}

bool Meets(const Candidate& c, std::optional<double> slo_ms) {
  return !slo_ms || c.batch1_ms <= *slo_ms;
}

// Candidate indices in cost order (price per query, then batch-1 latency).
std::vector<size_t> CostOrder(const std::vector<Candidate>& cands) {
  std::vector<size_t> order(cands.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&cands](size_t a, size_t b) {
    if (cands[a].UsdPerQuery() != cands[b].UsdPerQuery()) {
      return cands[a].UsdPerQuery() < cands[b].UsdPerQuery();
    }
    return cands[a].batch1_ms < cands[b].batch1_ms;
  });
  return order;
}

}  // namespace

double InstanceUtilization(const std::vector<Candidate>& cands, const InstanceView& inst) {
  const Candidate& c = cands[inst.candidate];
  return inst.rate_qps / (std::max(inst.replicas, 1) * c.capacity_qps);
}

double WorkerUtilization(const std::vector<Candidate>& cands,
                         const std::vector<InstanceView>& on_worker, int cores) {
  double busy = 0;
  for (const InstanceView& inst : on_worker) {
    const Candidate& c = cands[inst.candidate];
    // Each replica keeps its threads busy for its share of the load, at most all the time.
    busy += std::min(InstanceUtilization(cands, inst), 1.0) * inst.replicas * c.cores;
  }
  return busy / std::max(cores, 1);
}

double BlacklistedUntil(double utilization, double now_s, double until_s, const InfaasOptions& o) {
  return utilization >= o.overload_utilization ? std::max(until_s, now_s + o.blacklist_s) : until_s;
}

Selection SelectVariant(const std::vector<Candidate>& cands,
                        const std::vector<InstanceView>& instances,
                        const std::vector<WorkerView>& workers, std::optional<double> slo_ms,
                        const InfaasOptions& o) {
  Selection sel;
  const std::vector<size_t> order = CostOrder(cands);
  // Fast path: the top few feasible candidates, loaded, on a healthy worker.
  int looked = 0;
  for (size_t c : order) {
    if (!Meets(cands[c], slo_ms)) continue;
    if (looked++ >= o.fast_path_candidates) break;
    int best = -1;
    double best_util = 1.0;  // saturated instances are not taken here
    for (size_t i = 0; i < instances.size(); ++i) {
      const InstanceView& inst = instances[i];
      if (inst.candidate != c || inst.ready_in_ms > 0 || workers[inst.worker].blacklisted) continue;
      const double u = InstanceUtilization(cands, inst);
      if (u < best_util) {
        best_util = u;
        best = static_cast<int>(i);
      }
    }
    if (best >= 0) {
      sel.candidate = c;
      sel.instance = best;
      sel.fast_path = true;
      sel.ok = true;
      return sel;
    }
  }
  // Slow path: every candidate, with the penalty of what is not loaded.
  // The worker a new instance of `c` would go on: the healthy one with the
  // most free cores that holds it.
  auto place = [&](const Candidate& c, bool allow_blacklisted) {
    int best = -1;
    for (size_t w = 0; w < workers.size(); ++w) {
      const WorkerView& wv = workers[w];
      if ((wv.blacklisted && !allow_blacklisted) || wv.free_cores < c.cores ||
          wv.free_bytes < c.memory_bytes) {
        continue;
      }
      if (best < 0 || wv.free_cores > workers[best].free_cores) best = static_cast<int>(w);
    }
    return best;
  };
  struct Option {
    size_t candidate;
    int instance;
    int worker;
    double latency_ms;
    double usd;
  };
  std::vector<Option> options;
  for (size_t c : order) {
    const Candidate& cand = cands[c];
    for (size_t i = 0; i < instances.size(); ++i) {
      const InstanceView& inst = instances[i];
      if (inst.candidate != c || workers[inst.worker].blacklisted) continue;
      const double over = std::max(0.0, InstanceUtilization(cands, inst) - 1.0);
      options.push_back({c, static_cast<int>(i), inst.worker,
                         cand.batch1_ms + inst.ready_in_ms + over * cand.batch1_ms,
                         cand.UsdPerQuery()});
    }
    const int w = place(cand, false);
    if (w >= 0) options.push_back({c, -1, w, cand.batch1_ms + cand.load_ms, cand.UsdPerQuery()});
  }
  const Option* pick = nullptr;
  for (const Option& opt : options) {  // cost order already; the first that meets wins
    if (!slo_ms || opt.latency_ms <= *slo_ms) {
      pick = &opt;
      break;
    }
  }
  sel.meets_slo = pick != nullptr;
  if (pick == nullptr) {
    for (const Option& opt : options) {
      if (pick == nullptr || opt.latency_ms < pick->latency_ms) pick = &opt;
    }
  }
  if (pick == nullptr) {
    // Every worker is blacklisted or full: any instance at all, best effort.
    for (size_t i = 0; i < instances.size(); ++i) {
      sel.candidate = instances[i].candidate;
      sel.instance = static_cast<int>(i);
      sel.meets_slo = false;
      sel.ok = true;
      if (instances[i].ready_in_ms == 0) break;
    }
    if (!sel.ok) {
      for (size_t c : order) {
        const int w = place(cands[c], true);
        if (w >= 0) {
          sel.candidate = c;
          sel.worker = w;
          sel.meets_slo = false;
          sel.ok = true;
          break;
        }
      }
    }
    return sel;
  }
  sel.candidate = pick->candidate;
  sel.instance = pick->instance;
  sel.worker = pick->worker;
  sel.ok = true;
  return sel;
}

bool Underloaded(const std::vector<Candidate>& cands, const InstanceView& inst,
                 double tightest_slo_ms, const InfaasOptions& o) {
  const Candidate& c = cands[inst.candidate];
  if (inst.replicas > 1) {
    return inst.rate_qps < o.scale_down_utilization * (inst.replicas - 1) * c.capacity_qps;
  }
  for (const Candidate& d : cands) {
    if (d.usd_per_s < c.usd_per_s && (tightest_slo_ms <= 0 || d.batch1_ms <= tightest_slo_ms) &&
        inst.rate_qps <= o.scale_down_utilization * d.capacity_qps) {
      return true;
    }
  }
  return false;
}

ScaleDecision ScaleInstance(const std::vector<Candidate>& cands, const InstanceView& inst,
                            const WorkerView& worker, double underloaded_for_s, double idle_for_s,
                            double tightest_slo_ms, const InfaasOptions& o) {
  ScaleDecision d;
  const Candidate& c = cands[inst.candidate];
  if (idle_for_s >= o.idle_unload_s) {
    d.kind = ScaleDecision::kUnload;
    d.reason = "idle " + std::to_string(static_cast<int>(idle_for_s)) + " s";
    return d;
  }
  if (inst.ready_in_ms > 0) return d;  // still loading: judged once it serves
  const double util = InstanceUtilization(cands, inst);
  if (util > o.scale_up_utilization) {
    const int need = ReplicasFor(c, inst.rate_qps, o.scale_up_utilization);
    const int extra_cores_here = worker.free_cores + inst.replicas * c.cores;
    double best_usd = need * c.usd_per_s;
    for (size_t k = 0; k < cands.size(); ++k) {
      const Candidate& u = cands[k];
      if (k == inst.candidate || u.capacity_qps <= c.capacity_qps) continue;
      if (tightest_slo_ms > 0 && u.batch1_ms > tightest_slo_ms) continue;
      const int n = ReplicasFor(u, inst.rate_qps, o.scale_up_utilization);
      if (n * u.usd_per_s < best_usd && n * u.cores <= extra_cores_here) {
        best_usd = n * u.usd_per_s;
        d.kind = ScaleDecision::kUpgrade;
        d.to_candidate = k;
        d.replicas = n;
      }
    }
    if (d.kind == ScaleDecision::kUpgrade) {
      d.reason = "load " + std::to_string(inst.rate_qps) + " qps over capacity: upgrade";
      return d;
    }
    const int fit = std::min(need, inst.replicas + worker.free_cores / std::max(c.cores, 1));
    if (fit > inst.replicas) {
      d.kind = ScaleDecision::kSetReplicas;
      d.replicas = fit;
      d.reason = "load " + std::to_string(inst.rate_qps) + " qps over capacity: replicate";
    }
    return d;
  }
  if (underloaded_for_s < o.scale_down_delay_s) return d;
  if (inst.replicas > 1) {
    d.kind = ScaleDecision::kSetReplicas;
    d.replicas = inst.replicas - 1;
    d.reason = "underloaded: one replica fewer";
    return d;
  }
  // Downgrade: the cheapest candidate that meets the tightest recent SLO and
  // carries the load below the scale-down share.
  double best_usd = c.usd_per_s;
  for (size_t k = 0; k < cands.size(); ++k) {
    const Candidate& u = cands[k];
    if (u.usd_per_s >= best_usd) continue;
    if (tightest_slo_ms > 0 && u.batch1_ms > tightest_slo_ms) continue;
    if (inst.rate_qps > o.scale_down_utilization * u.capacity_qps) continue;
    best_usd = u.usd_per_s;
    d.kind = ScaleDecision::kDowngrade;
    d.to_candidate = k;
    d.replicas = 1;
    d.reason = "underloaded: downgrade";
  }
  return d;
}

}  // namespace somm::sim::infaas
