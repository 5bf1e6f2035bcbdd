#include "cluster/cluster_state_store.h"

#include <utility>

namespace somm::cluster {

namespace {

// Sets `*out` to the concatenation of `parts` element by element: the
// elements already in `*out` are assigned over (their strings and vectors
// keep their memory), the rest constructed, the surplus dropped.
template <typename T, typename Parts>
void AssignConcatenation(const Parts& parts, std::vector<T>* out) {
  size_t total = 0;
  for (const std::vector<T>* part : parts) total += part->size();
  // One allocation at most: at 1,000 workers, growing the vector report by
  // report moved every group already merged about ten times over.
  out->reserve(total);
  size_t at = 0;
  for (const std::vector<T>* part : parts) {
    for (const T& item : *part) {
      if (at < out->size()) {
        (*out)[at] = item;
      } else {
        out->push_back(item);
      }
      ++at;
    }
  }
  out->resize(at);
}

}  // namespace

ClusterState MergeClusterState(const std::map<std::string, WorkerReport>& workers,
                               const std::map<std::string, std::vector<ModelDemand>>& demand) {
  ClusterState state;
  MergeClusterStateInto(workers, demand, &state);
  return state;
}

void MergeClusterStateInto(const std::map<std::string, WorkerReport>& workers,
                           const std::map<std::string, std::vector<ModelDemand>>& demand,
                           ClusterState* out) {
  ClusterState& state = *out;
  std::vector<const std::vector<DeviceState>*> devices;
  std::vector<const std::vector<GroupState>*> groups;
  devices.reserve(workers.size());
  groups.reserve(workers.size());
  for (const auto& [id, report] : workers) {
    devices.push_back(&report.devices);
    groups.push_back(&report.groups);
  }
  AssignConcatenation(devices, &state.devices);
  AssignConcatenation(groups, &state.groups);
  size_t at = 0;
  for (const auto& [id, report] : workers) {
    for (size_t i = 0; i < report.groups.size(); ++i) state.groups[at++].zone = report.zone;
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
  state.demand.clear();
  for (auto& [_, d] : sum) state.demand.push_back(std::move(d));
}

}  // namespace somm::cluster
