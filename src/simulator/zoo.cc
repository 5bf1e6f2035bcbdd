#include "simulator/zoo.h"

#include <algorithm>
#include <set>

namespace somm::sim {

StatusOr<std::vector<std::string>> TraceModels(const loadgen::Trace& trace) {
  std::set<std::string> models;
  for (const auto& q : trace.queries) {
    if (q.model.empty()) {
      return Unimplemented("trace line " + std::to_string(q.line) +
                           " names no model: the simulator replays model rows only (task-only "
                           "rows are not simulated yet)");
    }
    models.insert(q.model);
  }
  return std::vector<std::string>(models.begin(), models.end());
}

Status PublishZoo(ModelRegistry& registry, const std::vector<std::string>& models) {
  for (const std::string& name : models) {
    std::vector<RepositoryEntry> problems;
    std::vector<VersionPtr> versions = registry.Read(name, &problems);
    if (versions.empty()) {
      std::string why = problems.empty() ? "no version" : problems[0].reason;
      return NotFound("model '" + name + "' of the trace: not in repository " +
                      registry.options().repository_path + " (" + why + ")");
    }
    registry.Publish(name, std::move(versions), std::move(problems));
  }
  return Status::Ok();
}

double Batch1Ms(const HardwareProfile& hp) {
  for (const LatencyPoint& p : hp.latency.points) {
    if (p.batch == 1) return p.latency_ms;
  }
  return hp.latency.Predict(1);
}

double BestBatch1Ms(const VersionRecord& v) {
  double best = 0;
  for (const VariantProfile& p : v.profiles) {
    if (!p.usable) continue;
    for (const HardwareProfile& hp : p.hardware) {
      const double ms = Batch1Ms(hp);
      if (ms > 0 && (best == 0 || ms < best)) best = ms;
    }
  }
  return best;
}

double CapacityWithin(const Candidate& c, int64_t max_batch, double max_batch_ms) {
  double best = 0;
  for (const LatencyPoint& p : c.profile->latency.points) {
    if (p.batch <= std::max<int64_t>(max_batch, 1) && p.latency_ms > 0 &&
        p.latency_ms <= max_batch_ms) {
      best = std::max(best, static_cast<double>(p.batch) * 1000.0 / p.latency_ms);
    }
  }
  return best;
}

std::vector<Candidate> Candidates(const VersionRecord& v, const PriceList& prices, int max_cores) {
  std::vector<Candidate> out;
  for (const VariantProfile& p : v.profiles) {
    if (!p.usable) continue;
    for (const HardwareProfile& hp : p.hardware) {
      // The simulated workers are CPU machines.
      if (hp.hardware.device != DeviceKind::kCpu || hp.hardware.threads > max_cores) continue;
      Candidate c;
      c.variant = p.variant;
      c.hardware = hp.hardware;
      c.profile = &hp;
      c.accuracy = p.accuracy;
      c.batch1_ms = Batch1Ms(hp);
      c.load_ms = hp.load_time_ms;
      c.memory_bytes = static_cast<int64_t>(hp.peak_memory_mb * 1024 * 1024);
      c.cores = std::max(hp.hardware.threads, 1);
      c.usd_per_s = prices.PerSecond(hp.hardware);
      c.capacity_qps = CapacityWithin(c, v.config.max_batch_size, 1e300);
      if (c.batch1_ms <= 0 || c.capacity_qps <= 0) continue;
      out.push_back(std::move(c));
    }
  }
  return out;
}

}  // namespace somm::sim
