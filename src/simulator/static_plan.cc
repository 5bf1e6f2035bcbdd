// The static policies' plan (simulation.h, StaticReplicas and
// StaticTaskModel): what an operator would pin for the trace, sized once
// from the profiles.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "simulator/simulation.h"
#include "simulator/zoo.h"

namespace somm::sim {

namespace {

// One replica's best throughput of `v`'s as-registered variant on its
// intra_op_threads (0: no such profile), and that profile.
double AsRegisteredCapacity(const VersionRecord& v, const HardwareProfile** profile,
                            const VariantProfile** variant) {
  HardwareConfig hw;
  hw.threads = v.config.intra_op_threads;
  const HardwareProfile* hp = nullptr;
  const std::string as_registered = AsRegisteredVariant(v);
  for (const VariantProfile& p : v.profiles) {
    if (p.variant == as_registered && p.For(hw) != nullptr) {
      hp = p.For(hw);
      if (variant != nullptr) *variant = &p;
    }
  }
  if (profile != nullptr) *profile = hp;
  double capacity = 0;
  if (hp != nullptr) {
    const int64_t max_batch = std::max<int64_t>(v.config.max_batch_size, 1);
    for (const LatencyPoint& p : hp->latency.points) {
      if (p.batch <= max_batch && p.latency_ms > 0) {
        capacity = std::max(capacity, static_cast<double>(p.batch) * 1000.0 / p.latency_ms);
      }
    }
  }
  return capacity;
}

}  // namespace

StatusOr<std::string> StaticTaskModel(const std::vector<VersionPtr>& models,
                                      std::optional<double> strictest_accuracy,
                                      const PriceList& prices) {
  const VersionRecord* cheapest_meeting = nullptr;
  double cheapest_usd = 0;
  const VersionRecord* most_accurate = nullptr;
  double best_accuracy = -1;
  for (const VersionPtr& v : models) {
    const HardwareProfile* hp = nullptr;
    const VariantProfile* variant = nullptr;
    const double capacity = AsRegisteredCapacity(*v, &hp, &variant);
    if (capacity <= 0 || variant == nullptr) continue;
    const double usd_per_query = prices.PerSecond(hp->hardware) / capacity;
    const double accuracy = variant->accuracy.value_or(-1);
    // Models come in name order: ties keep the first.
    if (most_accurate == nullptr || accuracy > best_accuracy) {
      most_accurate = v.get();
      best_accuracy = accuracy;
    }
    const bool meets =
        !strictest_accuracy || (variant->accuracy && *variant->accuracy >= *strictest_accuracy);
    if (meets && (cheapest_meeting == nullptr || usd_per_query < cheapest_usd)) {
      cheapest_meeting = v.get();
      cheapest_usd = usd_per_query;
    }
  }
  const VersionRecord* pick = cheapest_meeting != nullptr ? cheapest_meeting : most_accurate;
  if (pick == nullptr) {
    return FailedPrecondition(
        "no model of the task has a profile of its as-registered variant: static provisioning "
        "cannot serve it");
  }
  return pick->config.name;
}

StatusOr<std::map<std::string, int>> StaticReplicas(
    const SimulationOptions& options, const loadgen::Trace& trace, Policy policy,
    std::map<std::string, std::string>* task_models) {
  ModelCatalog registry(options.repository);
  SOMM_ASSIGN_OR_RETURN(TraceZoo zoo, PublishTraceZoo(registry, trace));
  // Each task's model, from the strictest floor the trace asks of it.
  std::map<std::string, std::optional<double>> strictest;
  for (const auto& q : trace.queries) {
    if (q.task.empty()) continue;
    std::optional<double>& s = strictest[q.task];
    if (q.min_accuracy && (!s || *q.min_accuracy > *s)) s = q.min_accuracy;
  }
  std::map<std::string, std::string> task_model;
  for (const auto& [task, target] : zoo.by_task) {
    auto picked = StaticTaskModel(target.versions, strictest[task], options.prices);
    if (!picked.ok())
      return Status(picked.status().code(), "task '" + task + "': " + picked.status().message());
    task_model[task] = *picked;
  }
  std::set<std::string> served(zoo.named.begin(), zoo.named.end());
  for (const auto& [task, model] : task_model) served.insert(model);
  // Queries per simulated second, per model: the busiest one-second bin and
  // the mean over the trace.
  std::map<std::string, std::map<int64_t, int64_t>> bins;
  double last_ms = 0;
  for (const auto& q : trace.queries) {
    const std::string& model = q.task.empty() ? q.model : task_model.at(q.task);
    ++bins[model][static_cast<int64_t>(q.timestamp_ms / 1000.0 / options.time_scale)];
    last_ms = std::max(last_ms, q.timestamp_ms);
  }
  const double duration_s = std::max(last_ms / 1000.0 / options.time_scale, 1e-9);
  std::map<std::string, int> out;
  std::map<std::string, int> threads_of;  // per replica of the sized variant
  const auto& given =
      policy == Policy::kStaticPeak ? options.static_peak_replicas : options.static_avg_replicas;
  for (const std::string& model : served) {
    if (auto it = given.find(model); it != given.end()) {
      if (it->second < 1) {
        return InvalidArgument("static replicas of " + model + " must be at least 1");
      }
      out[model] = it->second;
      continue;
    }
    SOMM_ASSIGN_OR_RETURN(VersionPtr v, registry.Resolve(model, ""));
    const HardwareProfile* hp = nullptr;
    const double capacity = AsRegisteredCapacity(*v, &hp, nullptr);
    if (capacity <= 0) {
      HardwareConfig hw;
      hw.threads = v->config.intra_op_threads;
      return FailedPrecondition("model '" + model + "' has no profile of " +
                                AsRegisteredVariant(*v) + "@" + hw.Name() +
                                ": static provisioning cannot be sized");
    }
    int64_t peak = 0;
    int64_t total = 0;
    for (const auto& [second, n] : bins[model]) {
      peak = std::max(peak, n);
      total += n;
    }
    const double rate = policy == Policy::kStaticPeak ? static_cast<double>(peak)
                                                      : static_cast<double>(total) / duration_s;
    out[model] = std::max(1, static_cast<int>(std::ceil(rate / capacity)));
    threads_of[model] = std::max(v->config.intra_op_threads, 1);
  }
  // A plan beyond the cluster's cores (a spike's peak can be) is scaled down
  // to them, every sized model alike: static provisioning can buy no more.
  int64_t cores = 0;
  for (const ZoneSpec& z : options.zones) cores += static_cast<int64_t>(z.workers) * z.cores;
  if (options.zones.empty()) cores = static_cast<int64_t>(options.workers) * options.worker_cores;
  int64_t wanted = 0;
  for (const auto& [model, threads] : threads_of) wanted += out[model] * threads;
  if (wanted > cores && cores > 0) {
    const double f = static_cast<double>(cores) / static_cast<double>(wanted);
    for (const auto& [model, threads] : threads_of) {
      out[model] = std::max(1, static_cast<int>(std::floor(out[model] * f)));
    }
  }
  if (task_models != nullptr) *task_models = std::move(task_model);
  return out;
}

}  // namespace somm::sim
