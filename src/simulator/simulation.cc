#include "simulator/simulation.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <fstream>
#include <limits>
#include <random>
#include <set>
#include <string_view>
#include <unordered_map>

#include <absl/container/flat_hash_map.h>

#include "controller/controller.h"
#include "loadgen/measurement.h"
#include "loadgen/request_builder.h"
#include "metrics/serving_metrics.h"
#include "node/component_options.h"
#include "registry/model_catalog.h"
#include "router/router.h"
#include "simulator/elected_controllers.h"
#include "simulator/event_loop.h"
#include "simulator/policy_replay.h"
#include "simulator/router_fleet.h"
#include "simulator/simulated_store.h"
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

// The workers by id. A dead worker is still found (routers send it queries
// until its lease lapses and they fail) but gives no report (Ids() is whom
// the controller's fresh reports come from: heartbeats stop at once); Drop()
// is the lapse.
class Directory : public WorkerDirectory {
 public:
  void Add(SimulatedWorker* w) {
    by_id_[w->id()] = w;
    order_.push_back(w);
    ids_valid_ = false;
  }
  void Kill(SimulatedWorker* w) {
    w->Kill();
    ids_valid_ = false;
  }
  void Drop(const std::string& id) {
    by_id_.erase(id);
    order_.erase(std::remove_if(order_.begin(), order_.end(),
                                [&id](SimulatedWorker* w) { return w->id() == id; }),
                 order_.end());
    ids_valid_ = false;
  }
  std::shared_ptr<WorkerStub> Find(const std::string& worker) override {
    SimulatedWorker* w = nullptr;
    if (worker.empty()) {
      if (order_.size() == 1) w = order_.front();
    } else if (auto it = by_id_.find(worker); it != by_id_.end()) {
      w = it->second;
    }
    // Not owning: the Simulation's workers outlive every stub handed out.
    return w == nullptr ? nullptr : std::shared_ptr<WorkerStub>(std::shared_ptr<WorkerStub>(), w);
  }
  // Called per query by the router: built once per change of membership.
  std::vector<std::string> Ids() override {
    if (!ids_valid_) {
      ids_.clear();
      for (SimulatedWorker* w : order_) {
        if (!w->dead()) ids_.push_back(w->id());
      }
      ids_valid_ = true;
    }
    return ids_;
  }

 private:
  std::unordered_map<std::string, SimulatedWorker*> by_id_;
  std::vector<SimulatedWorker*> order_;
  std::vector<std::string> ids_;
  bool ids_valid_ = false;
};

template <typename T>
double Percentile(const std::vector<T>& sorted, double p) {
  if (sorted.empty()) return 0;
  const size_t rank = static_cast<size_t>(std::ceil(p * static_cast<double>(sorted.size())));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

// Whether the router refused a query because no candidate it could use
// honours the query's min_accuracy or max_cost: the selector's errors for
// those (selector.h: FailedPrecondition for the accuracy floor,
// ResourceExhausted naming "max_cost" for the ceiling; an SLO it cannot meet
// now is ResourceExhausted naming "latency_slo_ms", a capacity refusal).
bool IsConstraintRefusal(const Status& s) {
  constexpr std::string_view kAccuracy = "cannot meet min_accuracy=";
  constexpr std::string_view kCost = "cannot meet max_cost=";
  const std::string& m = s.message();
  return (s.code() == StatusCode::kFailedPrecondition && m.starts_with(kAccuracy)) ||
         (s.code() == StatusCode::kResourceExhausted && m.starts_with(kCost));
}

// "20", "12.5": an SLO as make_trace.py writes it (%g).
std::string SloKey(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", ms);
  return buf;
}

}  // namespace

StatusOr<std::vector<ZoneSpec>> ReadClusterFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot read cluster description " + path);
  std::vector<ZoneSpec> zones;
  try {
    const auto j = nlohmann::json::parse(in);
    for (const auto& z : j.at("zones")) {
      ZoneSpec spec;
      spec.name = z.value("name", "");
      spec.workers = z.at("workers").get<int>();
      spec.cores = z.value("cores", spec.cores);
      spec.memory_bytes = z.value("memory_mb", spec.memory_bytes >> 20) << 20;
      if (spec.workers < 0 || spec.cores < 1 || spec.memory_bytes <= 0) {
        return InvalidArgument(path + ": zone '" + spec.name +
                               "' needs workers >= 0, cores >= 1 and memory_mb > 0");
      }
      zones.push_back(spec);
    }
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(path + ": " + e.what() +
                           " (expected {\"zones\": [{\"name\", \"workers\", \"cores\", "
                           "\"memory_mb\"}]})");
  }
  if (zones.empty()) return InvalidArgument(path + ": no zones");
  return zones;
}

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
    case Policy::kClairvoyant:
      return "clairvoyant";
  }
  return "?";
}

StatusOr<std::vector<Policy>> ParsePolicies(const std::string& name) {
  const std::vector<Policy> all = {Policy::kSomm, Policy::kStaticPeak, Policy::kStaticAvg,
                                   Policy::kInfaas, Policy::kClairvoyant};
  if (name == "all") return all;
  // The clairvoyant heuristic's old name, so that old commands still run.
  if (name == "oracle") return std::vector<Policy>{Policy::kClairvoyant};
  for (Policy p : all) {
    if (name == PolicyName(p)) return std::vector<Policy>{p};
  }
  return InvalidArgument("unknown policy '" + name +
                         "' (somm, static-peak, static-avg, infaas, clairvoyant or all)");
}

void SummarizeOutcomes(const std::vector<QueryOutcome>& outcomes, PolicyResult* result) {
  std::vector<double> latencies;
  // The trace's queries point at its model names, a few thousand strings
  // for millions of queries: each name's row (and each of its SLOs' rows,
  // keyed by the SLO as printed) is looked up once, not per query.
  std::unordered_map<const std::string*, ModelResult*> model_of;
  std::map<std::pair<ModelResult*, double>, SloResult*> slo_of;
  static const std::string kNoModel;
  for (const QueryOutcome& rec : outcomes) {
    ++result->queries;
    const std::string* name = rec.model != nullptr ? rec.model : &kNoModel;
    auto [mit, fresh_model] = model_of.try_emplace(name, nullptr);
    if (fresh_model) mit->second = &result->models[*name];
    ModelResult& m = *mit->second;
    ++m.queries;
    bool ok_in_time = false;
    if (rec.refused_constraint) {
      ++result->refused_constraint;
      ++m.refused_constraint;
    } else if (!rec.done) {
      ++result->failed;  // never answered: a bug in the simulation, counted as a miss
    } else if (rec.code == StatusCode::kOk) {
      ++result->answered;
      latencies.push_back(rec.latency_ms);
      if (!rec.served_by.empty()) ++result->served_by[*name][rec.served_by];
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
    SloResult* slo = nullptr;
    if (rec.slo_ms) {
      auto [sit, fresh_slo] = slo_of.try_emplace({&m, *rec.slo_ms}, nullptr);
      if (fresh_slo) sit->second = &m.slos[SloKey(*rec.slo_ms)];
      slo = sit->second;
    }
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
  if (options.workers < 1 && options.zones.empty()) {
    return InvalidArgument("--workers must be at least 1");
  }
  if (options.time_scale <= 0) return InvalidArgument("--time-scale must be positive");
  if (options.routers < 1) return InvalidArgument("--routers must be at least 1");
  // INFaaS and the clairvoyant heuristic drive the simulated workers themselves.
  if (policy == Policy::kInfaas) return RunInfaas(options, trace);
  if (policy == Policy::kClairvoyant) return RunOracle(options, trace);
  const bool managed = policy == Policy::kSomm;
  PolicyResult result;
  result.policy = PolicyName(policy);
  if (!managed) {
    SOMM_ASSIGN_OR_RETURN(result.static_replicas,
                          StaticReplicas(options, trace, policy, &result.static_task_models));
  }

  EventLoop loop;
  SimulatedStoreOptions so;
  so.view_lag = duration_cast<EventLoop::Duration>(
      std::chrono::duration<double, std::milli>(std::max(options.view_lag_ms, 0.0)));
  SimulatedStore store(loop, so);
  ModelCatalog registry(options.repository);
  SOMM_ASSIGN_OR_RETURN(const TraceZoo zoo, PublishTraceZoo(registry, trace));
  result.constraints = zoo.constraints;

  // The fleet: the cluster description's zones, or `workers` alike.
  std::vector<ZoneSpec> zones = options.zones;
  if (zones.empty()) {
    zones.push_back({"", options.workers, options.worker_cores, options.worker_memory_bytes});
  }
  std::vector<std::unique_ptr<SimulatedWorker>> workers;
  std::vector<const ZoneSpec*> zone_of;                  // per worker
  std::vector<std::pair<double, double>> worker_alive;  // per worker: [from, until) in s since t0
  int total_workers = 0;
  for (const ZoneSpec& z : zones) total_workers += z.workers;
  Directory directory;
  auto add_worker = [&](const ZoneSpec& z, double from_s) {
    const int i = static_cast<int>(workers.size());
    SimulatedWorkerOptions wo;
    wo.id = "sim-" + std::to_string(i);
    wo.zone = z.name;
    wo.budget_bytes = z.memory_bytes;
    wo.cores = z.cores;
    wo.latency_noise_sigma = options.latency_noise_sigma;
    wo.seed = options.seed * 1000003 + static_cast<uint64_t>(i);
    wo.prices = options.prices;
    // As a cluster's workers: the router retries a query one refuses or
    // fails on another (the simulated queries carry no tensors to copy).
    wo.remote = total_workers > 1;
    workers.push_back(std::make_unique<SimulatedWorker>(loop, store, wo));
    zone_of.push_back(&z);
    worker_alive.push_back({from_s, std::numeric_limits<double>::infinity()});
    directory.Add(workers.back().get());
    workers.back()->Publish();
  };
  for (const ZoneSpec& z : zones) {
    for (int k = 0; k < z.workers; ++k) add_worker(z, 0);
  }
  if (workers.empty()) return InvalidArgument("the cluster has no workers");
  CountingMetrics metrics;
  DecisionLog log(16);

  // A fleet of options.routers routers (router_fleet.h).
  std::unique_ptr<RouterFleet> router;
  ControllerOptions co =
      BuildControllerOptions({options.control_tick_ms, options.idle_unload_s}, managed);
  co.autoscaler = options.autoscaler;
  co.before_tick = [&router] {
    if (router) router->PublishDemand();
  };
  co.clock = &loop.clock();
  // A leader and a standby (elected_controllers.h); the router reaches the
  // leader.
  ElectedControllers controllers(
      loop, 2, std::chrono::milliseconds(std::llround(options.leader_lease_s * 1000)),
      [&](int) {
        return std::make_unique<Controller>(co, registry, /*registrar=*/nullptr, store, directory,
                                            metrics, log);
      });
  std::optional<EventLoop::TimePoint> leader_killed_at;
  controllers.OnElected([&](int i) {
    spdlog::info("simulation: controller-{} took the leader lease", i);
    if (leader_killed_at) {
      result.leader_takeover_s =
          std::chrono::duration<double>(loop.Now() - *leader_killed_at).count();
    }
  });
  controllers.StartElecting();
  RouterFlags router_flags;
  // Nothing reads an answer's explanation here: the compact one (one
  // parameter, the same facts) costs the least to build per query.
  router_flags.explain = "compact";
  router_flags.routing_policy = options.routing_policy;
  SOMM_ASSIGN_OR_RETURN(RouterOptions rto, BuildRouterOptions(router_flags, managed));
  rto.clock = &loop.clock();
  rto.seed = static_cast<uint32_t>(options.seed) | 1u;
  router = std::make_unique<RouterFleet>(options.routers, rto, loop, so.view_lag, registry, store,
                                         directory, controllers, metrics, log);
  result.routers = router->size();

  // Start-up: the configured (or the static plan's) replicas of every model's
  // as-registered variant, as `somm serve` loads them before it listens
  // (static: of the models its plan serves).
  // Per model, looked up by every query of the trace: hashed.
  struct ModelTemplate {
    InferenceRequest request;
    double best_b1_ms = 0;
  };
  absl::flat_hash_map<std::string, ModelTemplate> templates;
  double max_load_ms = 0;
  for (const std::string& model : zoo.models) {
    SOMM_ASSIGN_OR_RETURN(VersionPtr v, registry.Resolve(model, ""));
    if (!managed && result.static_replicas.count(model) == 0) continue;
    const int replicas = managed ? v->config.instance_count : result.static_replicas.at(model);
    Status loaded = Unavailable("no answer");
    controllers.EnsureLoaded(
        v, AsRegisteredVariant(*v), controllers.BaseHardware(*v), replicas,
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
    templates[model].best_b1_ms = BestBatch1Ms(*v);
    SOMM_ASSIGN_OR_RETURN(ModelMetadata meta, router->front().GetModelMetadata(model, ""));
    SOMM_ASSIGN_OR_RETURN(InferenceRequest req, loadgen::SyntheticRequest(meta, 1, options.seed));
    req.model_name = model;
    templates[model].request = std::move(req);
  }
  // A task row's request: the inputs of the task's first model (a task's
  // models share its signature, which the router checks them against), no
  // model named.
  absl::flat_hash_map<std::string, ModelTemplate> task_templates;
  for (const auto& [task, target] : zoo.by_task) {
    const std::string& first = target.versions.front()->config.name;
    SOMM_ASSIGN_OR_RETURN(ModelMetadata meta, router->front().GetModelMetadata(first, ""));
    SOMM_ASSIGN_OR_RETURN(InferenceRequest req, loadgen::SyntheticRequest(meta, 1, options.seed));
    req.model_name.clear();
    task_templates[task].request = std::move(req);
    task_templates[task].best_b1_ms = target.best_b1_ms;
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
    controllers.Tick();
    if (loop.Now() + tick <= t_end + tick) loop.After(tick, tick_fn);
  };
  loop.At(t0 + tick, tick_fn);

  auto since_t0 = [&loop, t0] { return std::chrono::duration<double>(loop.Now() - t0).count(); };
  // The timeline's replicas and live workers, at the end of each second.
  const size_t seconds = static_cast<size_t>(std::ceil(result.duration_s)) + 1;
  result.timeline.assign(seconds, {});
  std::function<void(size_t)> sample = [&](size_t second) {
    int64_t replicas = 0;
    int alive = 0;
    for (const auto& w : workers) {
      replicas += w->replicas();
      alive += w->dead() ? 0 : 1;
    }
    result.timeline[second].replicas = replicas;
    result.timeline[second].workers = alive;
    if (second + 1 < seconds) {
      loop.At(t0 + std::chrono::seconds(second + 2), [&sample, second] { sample(second + 1); });
    }
  };
  loop.At(t0 + std::chrono::seconds(1), [&sample] { sample(0); });

  controllers.StopElectingAt(t_end);
  if (options.kill_leader_at_s >= 0 && managed) {
    loop.At(t0 + FromMs(options.kill_leader_at_s * 1000.0), [&] {
      if (controllers.KillLeader()) {
        leader_killed_at = loop.Now();
        spdlog::info("simulation: the leader controller is killed");
      }
    });
  }

  // Failures: the victims die at once; each one's lease lapses lease_s
  // later (the store drops its report, the directory forgets it), and a
  // replacement in its zone joins provision_delay_s after that.
  if (options.fail_at_s >= 0 && managed) {
    std::vector<size_t> pool;
    for (size_t i = 0; i < workers.size(); ++i) {
      if (options.fail_zone.empty() || zone_of[i]->name == options.fail_zone) pool.push_back(i);
    }
    if (pool.empty()) return InvalidArgument("--fail-zone '" + options.fail_zone + "' has no workers");
    std::mt19937_64 rng(options.seed * 7919 + 17);
    std::shuffle(pool.begin(), pool.end(), rng);
    const size_t n = std::clamp<size_t>(
        static_cast<size_t>(std::llround(options.fail_fraction * static_cast<double>(pool.size()))),
        1, pool.size());
    pool.resize(n);
    const auto lease = FromMs(options.lease_s * 1000.0);
    const auto delay = FromMs(options.provision_delay_s * 1000.0);
    loop.At(t0 + FromMs(options.fail_at_s * 1000.0), [&, pool, lease, delay] {
      for (size_t i : pool) {
        directory.Kill(workers[i].get());
        worker_alive[i].second = since_t0();
        ++result.workers_killed;
        const std::string id = workers[i]->id();
        const ZoneSpec* z = zone_of[i];
        loop.After(lease, [&, id, z, delay] {
          store.RemoveWorker(id);
          directory.Drop(id);
          // Billed from the request: the machine runs while the pod starts.
          const double asked_s = since_t0();
          loop.After(delay, [&, z, asked_s] {
            add_worker(*z, asked_s);
            ++result.workers_replaced;
          });
        });
      }
    });
  }

  std::vector<QueryOutcome> records(trace.queries.size());
  // Reported over predicted cost, from each answer's compact explanation
  // ("... cost_usd=R [cost_capped=true] predicted_cost_usd=P ...").
  std::vector<float> cost_ratios;
  int64_t cost_capped = 0;
  auto note_cost = [&cost_ratios, &cost_capped](const InferenceResponse& response) {
    auto it = response.parameters.find("somm");
    if (it == response.parameters.end()) return;
    const auto* text = std::get_if<std::string>(&it->second);
    if (text == nullptr) return;
    double reported = -1;
    double predicted = -1;
    bool capped = false;
    loadgen::ForEachCompactField(*text, [&](std::string_view key, std::string_view value) {
      auto number = [&value](double* out) {
        std::from_chars(value.data(), value.data() + value.size(), *out);
      };
      if (key == "cost_usd") number(&reported);
      if (key == "predicted_cost_usd") number(&predicted);
      if (key == "cost_capped") capped = value == "true";
    });
    if (!(predicted > 0) || reported < 0) return;
    cost_ratios.push_back(static_cast<float>(reported / predicted));
    if (capped) ++cost_capped;
  };
  std::function<void(size_t)> arrive = [&](size_t i) {
    const loadgen::TraceQuery& tq = trace.queries[i];
    QueryOutcome& rec = records[i];
    rec.slo_ms = tq.latency_slo_ms;
    const bool task_row = !tq.task.empty();
    const ModelTemplate& model =
        task_row ? task_templates.at(tq.task) : templates.at(tq.model);
    if (task_row || tq.min_accuracy || tq.max_cost) {
      const RowTarget& target = zoo.TargetOf(tq);
      rec.model = &target.label;
      rec.feasible = Feasible(target, tq, options.prices);
    } else {
      rec.model = &tq.model;
      if (tq.latency_slo_ms) rec.feasible = *tq.latency_slo_ms >= model.best_b1_ms;
    }
    InferenceRequest req = model.request;
    req.id = std::to_string(i);
    loadgen::ApplyTraceQuery(tq, &req);
    const auto arrived = loop.Now();
    router->Infer(i, std::move(req), [&loop, &rec, arrived, &note_cost,
                                      task_row](StatusOr<InferenceResponse> r) {
      rec.done = true;
      rec.code = r.ok() ? StatusCode::kOk : r.status().code();
      if (r.ok()) {
        note_cost(*r);
        if (task_row) rec.served_by = r->model_name;
      } else {
        rec.refused_constraint = IsConstraintRefusal(r.status());
      }
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
  // What the controllers' next tick would read: every router's demand row,
  // merged.
  router->PublishDemand();
  for (const cluster::ModelDemand& d : store.Read()->demand) {
    result.demand_arrivals += d.arrivals_total;
  }
  router->Shutdown();

  SummarizeOutcomes(records, &result);
  for (const auto& [from, until] : worker_alive) {
    result.worker_seconds += std::max(0.0, std::min(until, result.duration_s) - from);
  }
  for (size_t i = 0; i < records.size(); ++i) {
    const size_t second = std::min(
        seconds - 1,
        static_cast<size_t>(trace.queries[i].timestamp_ms / 1000.0 / options.time_scale));
    PolicyResult::Second& b = result.timeline[second];
    ++b.arrivals;
    if (!records[i].feasible) continue;
    ++b.feasible;
    const QueryOutcome& r = records[i];
    if (r.done && r.code == StatusCode::kOk && (!r.slo_ms || r.latency_ms <= *r.slo_ms)) ++b.met;
  }
  result.view_rebuilds = store.rebuilds();
  if (!cost_ratios.empty()) {
    std::sort(cost_ratios.begin(), cost_ratios.end());
    result.cost.queries = static_cast<int64_t>(cost_ratios.size());
    result.cost.median = Percentile(cost_ratios, 0.5);
    result.cost.p10 = Percentile(cost_ratios, 0.1);
    result.cost.p90 = Percentile(cost_ratios, 0.9);
    result.cost.p99 = Percentile(cost_ratios, 0.99);
    result.cost.max = cost_ratios.back();
    result.cost.capped = cost_capped;
  }
  result.mean_replicas = result.duration_s > 0 ? result.instance_seconds / result.duration_s : 0;
  result.events = loop.events_run();
  return result;
}

StatusOr<bound::CostCurve> CostBound(const SimulationOptions& options,
                                     const loadgen::Trace& trace) {
  int max_cores = options.worker_cores;
  if (!options.zones.empty()) {
    max_cores = 0;
    for (const ZoneSpec& z : options.zones) max_cores = std::max(max_cores, z.cores);
  }
  SOMM_ASSIGN_OR_RETURN(bound::Demand demand,
                        bound::TraceDemand(options.repository, options.prices, max_cores,
                                           options.time_scale, trace));
  return bound::ComputeCostBound(demand);
}

void ApplyCostBound(const bound::CostCurve& curve, PolicyResult* result) {
  result->cost_bound_usd = curve.UsdAt(result->attainment);
  result->cost_over_bound = result->cost_bound_usd > 0 ? result->usd / result->cost_bound_usd : 0;
}

std::string ResultsToJson(const std::vector<PolicyResult>& results,
                          const bound::CostCurve* curve) {
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
    if (r.constraints) j["refused_constraint"] = r.refused_constraint;
    j["late"] = r.late;
    j["p50_ms"] = r.p50_ms;
    j["p99_ms"] = r.p99_ms;
    j["worker_seconds"] = r.worker_seconds;
    j["usd"] = r.usd;
    if (r.cost_bound_usd >= 0) {
      j["cost_bound_usd"] = r.cost_bound_usd;
      j["cost_over_bound"] = r.cost_over_bound;
    }
    j["routers"] = r.routers;
    if (r.routers > 0) j["demand_arrivals"] = r.demand_arrivals;
    j["control_actions"] = r.control_actions;
    j["control_actions_by_kind"] = r.control_actions_by_kind;
    j["queries"] = r.queries;
    j["feasible"] = r.feasible;
    j["met"] = r.met;
    j["answered"] = r.answered;
    j["duration_s"] = r.duration_s;
    j["mean_replicas"] = r.mean_replicas;
    if (!r.static_replicas.empty()) j["static_replicas"] = r.static_replicas;
    if (!r.static_task_models.empty()) j["static_task_models"] = r.static_task_models;
    if (r.constraints) j["served_by"] = r.served_by;
    nlohmann::ordered_json models = nlohmann::ordered_json::object();
    for (const auto& [name, m] : r.models) {
      models[name] = {{"queries", m.queries},
                      {"feasible", m.feasible},
                      {"met", m.met},
                      {"attainment", m.attainment},
                      {"rejections", m.rejections},
                      {"expired", m.expired},
                      {"late", m.late}};
      if (r.constraints) models[name]["refused_constraint"] = m.refused_constraint;
      nlohmann::ordered_json slos = nlohmann::ordered_json::object();
      for (const auto& [slo, c] : m.slos) {
        slos[slo] = {{"queries", c.queries}, {"feasible", c.feasible}, {"met", c.met}};
      }
      models[name]["slos"] = std::move(slos);
    }
    j["models"] = std::move(models);
    j["events"] = r.events;
    if (r.cost.queries > 0) {
      j["cost_reported_over_predicted"] = {
          {"queries", r.cost.queries}, {"p10", r.cost.p10},   {"median", r.cost.median},
          {"p90", r.cost.p90},         {"p99", r.cost.p99},   {"max", r.cost.max},
          {"capped", r.cost.capped}};
    }
    if (!r.timeline.empty()) {
      nlohmann::ordered_json t;
      for (const PolicyResult::Second& b : r.timeline) {
        t["arrivals"].push_back(b.arrivals);
        t["feasible"].push_back(b.feasible);
        t["met"].push_back(b.met);
        t["replicas"].push_back(b.replicas);
        t["workers"].push_back(b.workers);
      }
      j["timeline"] = std::move(t);
      j["workers_killed"] = r.workers_killed;
      j["leader_takeover_s"] = r.leader_takeover_s;
      j["workers_replaced"] = r.workers_replaced;
      j["view_rebuilds"] = r.view_rebuilds;
    }
    policies[r.policy] = std::move(j);
  }
  nlohmann::ordered_json out;
  out["policies"] = std::move(policies);
  if (curve != nullptr) {
    nlohmann::ordered_json points = nlohmann::ordered_json::array();
    for (int i = 0; i <= 20; ++i) {
      const double a = 0.5 + 0.025 * i;
      points.push_back({a, curve->UsdAt(a)});
    }
    out["cost_bound"] = {{"feasible", curve->feasible()},
                         {"usd_at_full_attainment", curve->UsdAt(1)},
                         {"curve", std::move(points)}};
  }
  return out.dump(2) + "\n";
}

}  // namespace somm::sim
