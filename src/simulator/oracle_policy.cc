#include "simulator/oracle_policy.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace somm::sim::oracle {

double CapacityAtSlo(const Candidate& c, int64_t max_batch, double slo_ms) {
  if (slo_ms <= 0) return c.capacity_qps;
  const double cap = CapacityWithin(c, max_batch, slo_ms / 2);
  if (cap > 0) return cap;
  return c.batch1_ms <= slo_ms ? 1000.0 / c.batch1_ms : 0;
}

ModelPlan PlanInterval(const std::vector<Candidate>& cands, int64_t max_batch,
                       const std::vector<SloDemand>& demand, const OracleOptions& o) {
  ModelPlan plan;
  if (cands.empty()) return plan;
  // Per candidate: the load it carries and the tightest SLO among it.
  std::map<size_t, double> load;
  std::map<size_t, double> tightest;
  for (const SloDemand& d : demand) {
    if (d.candidate && *d.candidate < cands.size()) {
      if (d.peak_qps <= 0) continue;
      load[*d.candidate] += d.peak_qps;
      const double slo = d.slo_ms > 0 ? d.slo_ms : std::numeric_limits<double>::infinity();
      auto [it, fresh] = tightest.emplace(*d.candidate, slo);
      if (!fresh) it->second = std::min(it->second, slo);
      continue;
    }
    size_t best = cands.size();
    double best_price = std::numeric_limits<double>::infinity();
    for (size_t k = 0; k < cands.size(); ++k) {
      const double cap = CapacityAtSlo(cands[k], max_batch, d.slo_ms);
      if (cap <= 0) continue;
      const double price = cands[k].usd_per_s / cap;
      if (price < best_price) {
        best_price = price;
        best = k;
      }
    }
    if (best == cands.size()) {
      // Infeasible for every candidate: the fastest one, best effort.
      best = 0;
      for (size_t k = 1; k < cands.size(); ++k) {
        if (cands[k].batch1_ms < cands[best].batch1_ms) best = k;
      }
    }
    plan.route[d.slo_ms] = best;
    if (d.peak_qps <= 0) continue;
    load[best] += d.peak_qps;
    const double slo = d.slo_ms > 0 ? d.slo_ms : std::numeric_limits<double>::infinity();
    auto [it, fresh] = tightest.emplace(best, slo);
    if (!fresh) it->second = std::min(it->second, slo);
  }
  for (const auto& [k, qps] : load) {
    const double slo = tightest[k];
    double cap = CapacityAtSlo(cands[k], max_batch, std::isinf(slo) ? 0 : slo);
    if (cap <= 0) cap = 1000.0 / cands[k].batch1_ms;
    const int n = std::max(1, static_cast<int>(std::ceil(qps / (o.headroom * cap))));
    plan.replicas[k] = n;
    plan.usd_per_s += n * cands[k].usd_per_s;
  }
  return plan;
}

}  // namespace somm::sim::oracle
