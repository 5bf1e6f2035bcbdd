#include "cluster/cluster_state_store.h"

#include <utility>

namespace somm::cluster {

ClusterState MergeClusterState(const std::map<std::string, WorkerReport>& workers,
                               const std::map<std::string, std::vector<ModelDemand>>& demand) {
  ClusterState state;
  size_t devices = 0, groups = 0;
  for (const auto& [id, report] : workers) {
    devices += report.devices.size();
    groups += report.groups.size();
  }
  // One allocation each: at 1,000 workers, growing the vectors report by
  // report moved every group already merged about ten times over.
  state.devices.reserve(devices);
  state.groups.reserve(groups);
  for (const auto& [id, report] : workers) {
    state.devices.insert(state.devices.end(), report.devices.begin(), report.devices.end());
    const size_t first = state.groups.size();
    state.groups.insert(state.groups.end(), report.groups.begin(), report.groups.end());
    for (size_t i = first; i < state.groups.size(); ++i) state.groups[i].zone = report.zone;
  }
  std::map<std::pair<std::string, int64_t>, ModelDemand> sum;
  for (const auto& [router, rows] : demand) {
    for (const ModelDemand& d : rows) {
      auto [it, fresh] = sum.try_emplace({d.model, d.version}, d);
      if (fresh) continue;
      ModelDemand& s = it->second;
      s.arrivals_total += d.arrivals_total;
      s.answered_total += d.answered_total;
      s.failed_total += d.failed_total;
      s.latency_ms_total += d.latency_ms_total;
      s.compared_total += d.compared_total;
      s.disagreed_total += d.disagreed_total;
      s.rate_qps += d.rate_qps;
      if (d.latency_slo_ms > 0 && (s.latency_slo_ms <= 0 || d.latency_slo_ms < s.latency_slo_ms)) {
        s.latency_slo_ms = d.latency_slo_ms;
      }
      if (d.min_accuracy && (!s.min_accuracy || *d.min_accuracy > *s.min_accuracy)) {
        s.min_accuracy = d.min_accuracy;
      }
    }
  }
  for (auto& [_, d] : sum) state.demand.push_back(std::move(d));
  return state;
}

}  // namespace somm::cluster
