#include "simulator/zoo.h"

#include <algorithm>
#include <set>

#include "selector/selector.h"

namespace somm::sim {

StatusOr<TraceZoo> PublishTraceZoo(ModelCatalog& registry, const loadgen::Trace& trace) {
  TraceZoo zoo;
  std::set<std::string> named;
  std::set<std::string> tasks;
  for (const auto& q : trace.queries) {
    if (!q.task.empty()) {
      tasks.insert(q.task);
    } else if (q.model.empty()) {
      return InvalidArgument("trace line " + std::to_string(q.line) +
                             " names neither a model nor a task");
    } else {
      named.insert(q.model);
    }
    if (!q.task.empty() || q.min_accuracy || q.max_cost) zoo.constraints = true;
  }
  std::map<std::string, std::vector<VersionPtr>> read;  // published, by model
  for (const std::string& name : named) {
    std::vector<RepositoryEntry> problems;
    std::vector<VersionPtr> versions = registry.Read(name, &problems);
    if (versions.empty()) {
      std::string why = problems.empty() ? "no version" : problems[0].reason;
      return NotFound("model '" + name + "' of the trace: not in repository " +
                      registry.repository_path() + " (" + why + ")");
    }
    read[name] = versions;
    registry.Publish(name, std::move(versions), std::move(problems));
  }
  std::map<std::string, std::vector<std::string>> task_models;
  if (!tasks.empty()) {
    // Every folder is read for its task: a task row may land on any model
    // registered for it, as live, where the registry holds them all.
    for (const std::string& name : registry.ListModelFolders()) {
      if (read.count(name) == 0) {
        std::vector<RepositoryEntry> problems;
        std::vector<VersionPtr> versions = registry.Read(name, &problems);
        if (versions.empty() || tasks.count(versions.front()->config.task) == 0) continue;
        // A model of the task with no usable profile cannot be simulated
        // (the simulator runs profiled variants only): the task is served
        // by the others, as live while its variants are being profiled.
        if (BestBatch1Ms(*versions.front()) <= 0) continue;
        read[name] = versions;
        registry.Publish(name, std::move(versions), std::move(problems));
      }
      const std::string& task = read.at(name).front()->config.task;
      if (tasks.count(task) > 0) task_models[task].push_back(name);
    }
  }
  auto target = [&registry](const std::string& label,
                            const std::vector<std::string>& models) -> StatusOr<RowTarget> {
    RowTarget t;
    t.label = label;
    for (const std::string& name : models) {
      SOMM_ASSIGN_OR_RETURN(VersionPtr v, registry.Resolve(name, ""));
      const double b1 = BestBatch1Ms(*v);
      if (b1 > 0 && (t.best_b1_ms == 0 || b1 < t.best_b1_ms)) t.best_b1_ms = b1;
      t.versions.push_back(std::move(v));
    }
    return t;
  };
  for (const std::string& name : named) {
    SOMM_ASSIGN_OR_RETURN(zoo.by_model[name], target(name, {name}));
  }
  for (const std::string& task : tasks) {
    auto it = task_models.find(task);
    if (it == task_models.end()) {
      return NotFound("task '" + task + "' of the trace: no model of repository " +
                      registry.repository_path() + " serves it");
    }
    SOMM_ASSIGN_OR_RETURN(zoo.by_task[task], target("task:" + task, it->second));
  }
  for (const auto& [name, versions] : read) zoo.models.push_back(name);
  zoo.named.assign(named.begin(), named.end());
  return zoo;
}

bool Feasible(const RowTarget& target, const loadgen::TraceQuery& q, const PriceList& prices) {
  if (!q.min_accuracy && !q.max_cost) {
    return !q.latency_slo_ms || *q.latency_slo_ms >= target.best_b1_ms;
  }
  for (const VersionPtr& v : target.versions) {
    for (const VariantProfile& p : v->profiles) {
      if (!p.usable) continue;
      if (q.min_accuracy && (!p.accuracy || *p.accuracy < *q.min_accuracy)) continue;
      for (const HardwareProfile& hp : p.hardware) {
        const double ms = Batch1Ms(hp);
        if (ms <= 0 || (q.latency_slo_ms && ms > *q.latency_slo_ms)) continue;
        if (q.max_cost &&
            QueryChargeUsd(prices.PerSecond(hp.hardware), hp.latency.Predict(1), 1, 1) >
                *q.max_cost) {
          continue;
        }
        return true;
      }
    }
  }
  return false;
}

bool Honours(const Candidate& c, const loadgen::TraceQuery& q) {
  if (q.min_accuracy && (!c.accuracy || *c.accuracy < *q.min_accuracy)) return false;
  return !q.max_cost || c.charge_usd <= *q.max_cost;
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
      c.max_batch = v.config.max_batch_size;
      c.usd_per_s = prices.PerSecond(hp.hardware);
      c.charge_usd = QueryChargeUsd(c.usd_per_s, hp.latency.Predict(1), 1, 1);
      c.capacity_qps = CapacityWithin(c, v.config.max_batch_size, 1e300);
      if (c.batch1_ms <= 0 || c.capacity_qps <= 0) continue;
      out.push_back(std::move(c));
    }
  }
  return out;
}

}  // namespace somm::sim
