#include "simulator/simulation.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "cluster/in_memory_store.h"
#include "controller/controller.h"
#include "loadgen/request_builder.h"
#include "metrics/serving_metrics.h"
#include "registry/model_registry.h"
#include "router/router.h"
#include "simulator/event_loop.h"
#include "simulator/policy_replay.h"
#include "simulator/simulated_worker.h"
#include "simulator/zoo.h"

namespace somm::sim {

namespace {

using std::chrono::duration_cast;
using Nanos = std::chrono::nanoseconds;


// The controller's counters, as somm_cold_starts_total and
// somm_control_actions_total count them live.
class CountingMetrics : public NullServingMetrics {
 public:
  void RecordColdStart(const std::string&) override { ++cold_starts; }
  void RecordControlAction(const std::string& kind) override { ++actions[kind]; }
  int64_t cold_starts = 0;
  std::map<std::string, int64_t> actions;
};

class Directory : public WorkerDirectory {
 public:
  explicit Directory(std::vector<std::unique_ptr<SimulatedWorker>>& workers) : workers_(workers) {}
  std::shared_ptr<WorkerStub> Find(const std::string& worker) override {
    for (auto& w : workers_) {
      if (w->id() == worker || (worker.empty() && workers_.size() == 1)) {
        return std::shared_ptr<WorkerStub>(std::shared_ptr<WorkerStub>(), w.get());
      }
    }
    return nullptr;
  }
  std::vector<std::string> Ids() override {
    std::vector<std::string> ids;
    for (auto& w : workers_) ids.push_back(w->id());
    return ids;
  }

 private:
  std::vector<std::unique_ptr<SimulatedWorker>>& workers_;  // the Simulation's
};

double Percentile(std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const size_t rank = static_cast<size_t>(std::ceil(p * static_cast<double>(sorted.size())));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

// "20", "12.5": an SLO as make_trace.py writes it (%g).
std::string SloKey(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", ms);
  return buf;
}

}  // namespace

const char* PolicyName(Policy policy) {
  switch (policy) {
    case Policy::kSomm:
      return "somm";
    case Policy::kStaticPeak:
      return "static-peak";
    case Policy::kStaticAvg:
      return "static-avg";
    case Policy::kInfaas:
      return "infaas";
    case Policy::kOracle:
      return "oracle";
  }
  return "?";
}

StatusOr<std::vector<Policy>> ParsePolicies(const std::string& name) {
  const std::vector<Policy> all = {Policy::kSomm, Policy::kStaticPeak, Policy::kStaticAvg,
                                   Policy::kInfaas, Policy::kOracle};
  if (name == "all") return all;
  for (Policy p : all) {
    if (name == PolicyName(p)) return std::vector<Policy>{p};
  }
  return InvalidArgument("unknown policy '" + name +
                         "' (somm, static-peak, static-avg, infaas, oracle or all)");
}

StatusOr<std::map<std::string, int>> StaticReplicas(const SimulationOptions& options,
                                                    const loadgen::Trace& trace, Policy policy) {
  SOMM_ASSIGN_OR_RETURN(std::vector<std::string> models, TraceModels(trace));
  NoBackend backend;
  RegistryOptions ro;
  ro.repository_path = options.repository;
  ModelRegistry registry(ro, backend);
  SOMM_RETURN_IF_ERROR(PublishZoo(registry, models));
  // Queries per simulated second, per model: the busiest one-second bin and
  // the mean over the trace.
  std::map<std::string, std::map<int64_t, int64_t>> bins;
  double last_ms = 0;
  for (const auto& q : trace.queries) {
    ++bins[q.model][static_cast<int64_t>(q.timestamp_ms / 1000.0 / options.time_scale)];
    last_ms = std::max(last_ms, q.timestamp_ms);
  }
  const double duration_s = std::max(last_ms / 1000.0 / options.time_scale, 1e-9);
  std::map<std::string, int> out;
  const auto& given =
      policy == Policy::kStaticPeak ? options.static_peak_replicas : options.static_avg_replicas;
  for (const std::string& model : models) {
    if (auto it = given.find(model); it != given.end()) {
      if (it->second < 1) {
        return InvalidArgument("static replicas of " + model + " must be at least 1");
      }
      out[model] = it->second;
      continue;
    }
    SOMM_ASSIGN_OR_RETURN(VersionPtr v, registry.Resolve(model, ""));
    HardwareConfig hw;
    hw.threads = v->config.intra_op_threads;
    const HardwareProfile* hp = nullptr;
    for (const VariantProfile& p : v->profiles) {
      if (p.variant == kAsRegistered) hp = p.For(hw);
    }
    double capacity = 0;
    if (hp != nullptr) {
      const int64_t max_batch = std::max<int64_t>(v->config.max_batch_size, 1);
      for (const LatencyPoint& p : hp->latency.points) {
        if (p.batch <= max_batch && p.latency_ms > 0) {
          capacity = std::max(capacity, static_cast<double>(p.batch) * 1000.0 / p.latency_ms);
        }
      }
    }
    if (capacity <= 0) {
      return FailedPrecondition("model '" + model + "' has no profile of " + kAsRegistered + "@" +
                                hw.Name() + ": static provisioning cannot be sized");
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
  }
  return out;
}

void SummarizeOutcomes(const std::vector<QueryOutcome>& outcomes, PolicyResult* result) {
  std::vector<double> latencies;
  for (const QueryOutcome& rec : outcomes) {
    ++result->queries;
    ModelResult& m = result->models[rec.model != nullptr ? *rec.model : ""];
    ++m.queries;
    bool ok_in_time = false;
    if (!rec.done) {
      ++result->failed;  // never answered: a bug in the simulation, counted as a miss
    } else if (rec.code == StatusCode::kOk) {
      ++result->answered;
      latencies.push_back(rec.latency_ms);
      ok_in_time = !rec.slo_ms || rec.latency_ms <= *rec.slo_ms;
      if (!ok_in_time) {
        ++result->late;
        ++m.late;
      }
    } else if (rec.code == StatusCode::kResourceExhausted || rec.code == StatusCode::kUnavailable) {
      ++result->rejections;
      ++m.rejections;
    } else if (rec.code == StatusCode::kDeadlineExceeded) {
      ++result->expired;
      ++m.expired;
    } else {
      ++result->failed;
    }
    SloResult* slo = rec.slo_ms ? &m.slos[SloKey(*rec.slo_ms)] : nullptr;
    if (slo != nullptr) ++slo->queries;
    if (rec.feasible) {
      if (slo != nullptr) ++slo->feasible;
      if (slo != nullptr && ok_in_time) ++slo->met;
      ++result->feasible;
      ++m.feasible;
      if (ok_in_time) {
        ++result->met;
        ++m.met;
      }
    }
    if (ok_in_time) result->attainment_all += 1;
  }
  for (auto& [name, m] : result->models) {
    m.attainment =
        m.feasible > 0 ? static_cast<double>(m.met) / static_cast<double>(m.feasible) : 1.0;
  }
  result->attainment = result->feasible > 0 ? static_cast<double>(result->met) /
                                                  static_cast<double>(result->feasible)
                                            : 1.0;
  result->attainment_all =
      result->queries > 0 ? result->attainment_all / static_cast<double>(result->queries) : 1.0;
  std::sort(latencies.begin(), latencies.end());
  result->p50_ms = Percentile(latencies, 0.50);
  result->p99_ms = Percentile(latencies, 0.99);
}

StatusOr<PolicyResult> RunPolicy(const SimulationOptions& options, const loadgen::Trace& trace,
                                 Policy policy) {
  SOMM_ASSIGN_OR_RETURN(std::vector<std::string> models, TraceModels(trace));
  if (options.workers < 1) return InvalidArgument("--workers must be at least 1");
  if (options.time_scale <= 0) return InvalidArgument("--time-scale must be positive");
  // INFaaS and the oracle drive the simulated workers themselves.
  if (policy == Policy::kInfaas) return RunInfaas(options, trace);
  if (policy == Policy::kOracle) return RunOracle(options, trace);
  const bool managed = policy == Policy::kSomm;
  PolicyResult result;
  result.policy = PolicyName(policy);
  if (!managed) {
    SOMM_ASSIGN_OR_RETURN(result.static_replicas, StaticReplicas(options, trace, policy));
  }

  EventLoop loop;
  cluster::InMemoryClusterStateStore store;
  NoBackend backend;
  RegistryOptions ro;
  ro.repository_path = options.repository;
  ModelRegistry registry(ro, backend);
  SOMM_RETURN_IF_ERROR(PublishZoo(registry, models));

  std::vector<std::unique_ptr<SimulatedWorker>> workers;
  for (int i = 0; i < options.workers; ++i) {
    SimulatedWorkerOptions wo;
    wo.id = "sim-" + std::to_string(i);
    wo.budget_bytes = options.worker_memory_bytes;
    wo.cores = options.worker_cores;
    wo.latency_noise_sigma = options.latency_noise_sigma;
    wo.seed = options.seed * 1000003 + static_cast<uint64_t>(i);
    wo.prices = options.prices;
    workers.push_back(std::make_unique<SimulatedWorker>(loop, store, wo));
    workers.back()->Publish();
  }
  Directory directory(workers);
  CountingMetrics metrics;
  DecisionLog log(16);

  std::unique_ptr<Router> router;
  ControllerOptions co;
  co.managed = managed;
  co.control_tick_ms = options.control_tick_ms;
  co.idle_unload_s = options.idle_unload_s;
  co.autoscaler = options.autoscaler;
  co.before_tick = [&router] {
    if (router) router->PublishDemand();
  };
  co.clock = [&loop] { return loop.Now(); };
  Controller controller(co, registry, store, directory, metrics, log);
  RouterOptions rto;
  rto.managed = managed;
  rto.clock = &loop.clock();
  rto.seed = static_cast<uint32_t>(options.seed) | 1u;
  router = std::make_unique<Router>(rto, registry, store, directory, controller, metrics, log);

  // Start-up: the configured (or the static plan's) replicas of every model's
  // as-registered variant, as `somm serve` loads them before it listens.
  std::map<std::string, InferenceRequest> templates;
  std::map<std::string, double> best_b1_ms;
  double max_load_ms = 0;
  for (const std::string& model : models) {
    SOMM_ASSIGN_OR_RETURN(VersionPtr v, registry.Resolve(model, ""));
    const int replicas = managed ? v->config.instance_count : result.static_replicas.at(model);
    Status loaded = Unavailable("no answer");
    controller.EnsureLoaded(
        v, kAsRegistered, controller.BaseHardware(*v), replicas,
        managed ? "configured instances (model.yaml)" : "static provisioning",
        /*urgent=*/true, [&loaded](const Status& s, const std::string&) { loaded = s; },
        /*query_waits=*/false);
    if (!loaded.ok()) {
      return FailedPrecondition("start-up load of " + model + " failed: " + loaded.message());
    }
    for (const VariantProfile& p : v->profiles) {
      for (const HardwareProfile& hp : p.hardware)
        max_load_ms = std::max(max_load_ms, hp.load_time_ms);
    }
    best_b1_ms[model] = BestBatch1Ms(*v);
    SOMM_ASSIGN_OR_RETURN(ModelMetadata meta, router->GetModelMetadata(model, ""));
    SOMM_ASSIGN_OR_RETURN(InferenceRequest req, loadgen::SyntheticRequest(meta, 1, options.seed));
    req.model_name = model;
    templates[model] = std::move(req);
  }
  loop.RunUntil(loop.Now() + FromMs(max_load_ms) + std::chrono::seconds(1));

  // The replay.
  const auto t0 = loop.Now();
  const double last_ms = trace.queries.empty() ? 0 : trace.queries.back().timestamp_ms;
  const auto t_end = t0 + FromMs(last_ms / options.time_scale);
  result.duration_s = std::chrono::duration<double>(t_end - t0).count();
  auto replica_seconds = [&workers] {
    double s = 0;
    for (const auto& w : workers) s += w->ReplicaSeconds();
    return s;
  };
  auto usd = [&workers] {
    double s = 0;
    for (const auto& w : workers) s += w->Usd();
    return s;
  };
  const double replica_s0 = replica_seconds();
  const double usd0 = usd();
  const int64_t cold0 = metrics.cold_starts;
  const auto actions0 = metrics.actions;
  loop.At(t_end, [&] {
    result.instance_seconds = replica_seconds() - replica_s0;
    result.usd = usd() - usd0;
    result.cold_starts = metrics.cold_starts - cold0;
    for (const auto& [kind, n] : metrics.actions) {
      auto it = actions0.find(kind);
      const int64_t d = n - (it == actions0.end() ? 0 : it->second);
      if (d > 0) result.control_actions_by_kind[kind] = d;
      result.control_actions += d;
    }
  });

  const auto tick = std::chrono::milliseconds(std::max(options.control_tick_ms, 1));
  std::function<void()> tick_fn = [&] {
    controller.Tick();
    if (loop.Now() + tick <= t_end + tick) loop.After(tick, tick_fn);
  };
  loop.At(t0 + tick, tick_fn);

  std::vector<QueryOutcome> records(trace.queries.size());
  std::function<void(size_t)> arrive = [&](size_t i) {
    const loadgen::TraceQuery& tq = trace.queries[i];
    QueryOutcome& rec = records[i];
    rec.model = &tq.model;
    rec.slo_ms = tq.latency_slo_ms;
    if (tq.latency_slo_ms) rec.feasible = *tq.latency_slo_ms >= best_b1_ms[tq.model];
    InferenceRequest req = templates.at(tq.model);
    req.id = std::to_string(i);
    loadgen::ApplyTraceQuery(tq, &req);
    const auto arrived = loop.Now();
    router->Infer(std::move(req), [&loop, &rec, arrived](StatusOr<InferenceResponse> r) {
      rec.done = true;
      rec.code = r.ok() ? StatusCode::kOk : r.status().code();
      rec.latency_ms = std::chrono::duration<double, std::milli>(loop.Now() - arrived).count();
    });
    if (i + 1 < trace.queries.size()) {
      loop.At(t0 + FromMs(trace.queries[i + 1].timestamp_ms / options.time_scale),
              [&arrive, i] { arrive(i + 1); });
    }
  };
  if (!trace.queries.empty()) {
    loop.At(t0 + FromMs(trace.queries[0].timestamp_ms / options.time_scale),
            [&arrive] { arrive(0); });
  }
  loop.Run();
  router->Shutdown();

  SummarizeOutcomes(records, &result);
  result.worker_seconds = static_cast<double>(options.workers) * result.duration_s;
  result.mean_replicas = result.duration_s > 0 ? result.instance_seconds / result.duration_s : 0;
  result.events = loop.events_run();
  return result;
}

std::string ResultsToJson(const std::vector<PolicyResult>& results) {
  nlohmann::ordered_json policies = nlohmann::ordered_json::object();
  for (const PolicyResult& r : results) {
    nlohmann::ordered_json j;
    j["attainment"] = r.attainment;
    j["attainment_all"] = r.attainment_all;
    j["instance_seconds"] = r.instance_seconds;
    j["cold_starts"] = r.cold_starts;
    j["rejections"] = r.rejections;
    j["expired"] = r.expired;
    j["failed"] = r.failed;
    j["late"] = r.late;
    j["p50_ms"] = r.p50_ms;
    j["p99_ms"] = r.p99_ms;
    j["worker_seconds"] = r.worker_seconds;
    j["usd"] = r.usd;
    j["control_actions"] = r.control_actions;
    j["control_actions_by_kind"] = r.control_actions_by_kind;
    j["queries"] = r.queries;
    j["feasible"] = r.feasible;
    j["met"] = r.met;
    j["answered"] = r.answered;
    j["duration_s"] = r.duration_s;
    j["mean_replicas"] = r.mean_replicas;
    if (!r.static_replicas.empty()) j["static_replicas"] = r.static_replicas;
    nlohmann::ordered_json models = nlohmann::ordered_json::object();
    for (const auto& [name, m] : r.models) {
      models[name] = {{"queries", m.queries},
                      {"feasible", m.feasible},
                      {"met", m.met},
                      {"attainment", m.attainment},
                      {"rejections", m.rejections},
                      {"expired", m.expired},
                      {"late", m.late}};
      nlohmann::ordered_json slos = nlohmann::ordered_json::object();
      for (const auto& [slo, c] : m.slos) {
        slos[slo] = {{"queries", c.queries}, {"feasible", c.feasible}, {"met", c.met}};
      }
      models[name]["slos"] = std::move(slos);
    }
    j["models"] = std::move(models);
    j["events"] = r.events;
    policies[r.policy] = std::move(j);
  }
  nlohmann::ordered_json out;
  out["policies"] = std::move(policies);
  return out.dump(2) + "\n";
}

}  // namespace somm::sim
