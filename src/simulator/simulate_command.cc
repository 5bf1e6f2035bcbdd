#include "simulator/simulate_command.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <stdexcept>
#include <thread>
#include <vector>

#include "common/host_probe.h"
#include "router/routing_policy.h"
#include "cluster/memory_budget.h"
#include "loadgen/trace.h"

namespace somm::sim {

CLI::App* AddSimulateCommand(CLI::App& app, SimulateCommandOptions* o) {
  auto* cmd = app.add_subcommand(
      "simulate",
      "Replay a trace through somm's router and controller on simulated workers and a virtual "
      "clock, per provisioning policy");
  cmd->add_option("--repository,--model-repository,--repo", o->simulation.repository,
                  "Model repository with persisted variant profiles")
      ->required();
  cmd->add_option("--trace", o->trace,
                  "Trace CSV (as `somm bench --trace` replays); a row with a task is a model-less "
                  "query, and every policy honours min_accuracy and max_cost or refuses the row "
                  "(refused_constraint in the JSON)")
      ->required();
  cmd->add_option("--workers", o->simulation.workers, "Simulated workers")->capture_default_str();
  cmd->add_option("--routers", o->simulation.routers,
                  "Routers in front of the workers (somm and static policies): queries go to "
                  "them round-robin, each reads the cluster state through its own lagged view, "
                  "and the controllers see their demand merged")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--policy", o->policy,
                  "somm, static-peak, static-avg, infaas, clairvoyant (alias: oracle) or all. "
                  "Static policies serve a "
                  "task through the cheapest of its models whose as-registered accuracy meets the "
                  "strictest min_accuracy the trace asks of it (static_task_models in the JSON)")
      ->capture_default_str();
  cmd->add_option("--json-file", o->json_path, "Write the results as JSON to this file");
  // The spelling before the CLI's names were made one (as somm bench's):
  // still parsed, left out of --help.
  cmd->add_option("--json", o->json_path)->group("");
  cmd->add_option("--seed", o->simulation.seed, "Seed of the latency noise and the router's draws")
      ->capture_default_str();
  cmd->add_option("--time-scale", o->simulation.time_scale,
                  "Trace seconds per simulated second (as somm bench --time-scale)")
      ->capture_default_str();
  cmd->add_option("--worker-cores", o->worker_cores, "Cores per worker (0 = this machine's)")
      ->capture_default_str();
  cmd->add_option("--worker-memory-mb", o->worker_memory_mb,
                  "CPU memory budget per worker (0 = half of this machine's available memory)")
      ->capture_default_str();
  cmd->add_option("--latency-noise-sigma", o->simulation.latency_noise_sigma,
                  "Log-normal sigma on each batch's profiled latency (0 = exact)")
      ->capture_default_str();
  cmd->add_option("--view-lag-ms", o->simulation.view_lag_ms,
                  "How long a worker's report takes to reach the router's view (the live "
                  "median, docs/cluster-state.md)")
      ->capture_default_str();
  cmd->add_option("--control-tick-ms", o->simulation.control_tick_ms, "Controller tick")
      ->capture_default_str();
  cmd->add_option("--idle-unload-s", o->simulation.idle_unload_s,
                  "Unload a model's instances after this long without queries (0 = default)")
      ->capture_default_str();
  cmd->add_option("--clairvoyant-interval-s,--oracle-interval-s", o->simulation.oracle.interval_s,
                  "The clairvoyant heuristic's planning interval")
      ->capture_default_str();
  cmd->add_option("--infaas", o->infaas,
                  "NAME=VALUE (repeatable): one of the INFaaS policy's thresholds "
                  "(infaas_policy.h, InfaasOptions; the released values by default), e.g. "
                  "blacklist_latency_factor=2.5");
  cmd->add_option("--static-peak-replicas", o->static_peak_replicas,
                  "MODEL=N (repeatable): static-peak's replicas of MODEL instead of the "
                  "profile-sized plan");
  cmd->add_option("--static-avg-replicas", o->static_avg_replicas,
                  "MODEL=N (repeatable): static-avg's replicas of MODEL instead of the "
                  "profile-sized plan");
  cmd->add_option("--cluster", o->cluster_file,
                  "Cluster description (JSON: {\"zones\": [{\"name\", \"workers\", \"cores\", "
                  "\"memory_mb\"}]}) instead of --workers, --worker-cores, --worker-memory-mb");
  cmd->add_option("--fail-at", o->simulation.fail_at_s,
                  "Seconds into the replay at which workers die (somm policy; < 0 = never)")
      ->capture_default_str();
  cmd->add_option("--fail-fraction", o->simulation.fail_fraction,
                  "Share of the workers (of --fail-zone) that die at --fail-at")
      ->capture_default_str();
  cmd->add_option("--fail-zone", o->simulation.fail_zone,
                  "Only this zone's workers die (a correlated failure)");
  cmd->add_option("--lease-s", o->simulation.lease_s,
                  "A dead worker's report leaves the store this long after it died (the live "
                  "--lease-ms)")
      ->capture_default_str();
  cmd->add_option("--kill-leader-at", o->simulation.kill_leader_at_s,
                  "Seconds into the replay at which the leader controller dies; the standby "
                  "takes over once its lease lapses (somm policy; < 0 = never)")
      ->capture_default_str();
  cmd->add_option("--leader-lease-s", o->simulation.leader_lease_s,
                  "The leader controller's lease (the live --leader-lease-ms)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--routing-policy", o->simulation.routing_policy,
                  "The router's routing policy (as somm serve's): p2c or least-wait")
      ->capture_default_str()
      ->check([](const std::string& name) {
        auto policy = RoutingPolicy::ByName(name);
        return policy.ok() ? std::string() : policy.status().message();
      });
  cmd->add_option("--provision-delay-s", o->simulation.provision_delay_s,
                  "A replacement worker joins this long after it is asked for")
      ->capture_default_str();
  cmd->add_option("--log-level", o->log_level,
                  "Log level of the simulated router and controller (info: every control action)")
      ->capture_default_str()
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  return cmd;
}

namespace {

// "MODEL=N" items into `*out`.
Status ParseReplicas(const std::vector<std::string>& items, const char* flag,
                     std::map<std::string, int>* out) {
  for (const std::string& item : items) {
    const size_t eq = item.rfind('=');
    int n = 0;
    try {
      if (eq == std::string::npos || eq == 0) throw std::invalid_argument(item);
      size_t used = 0;
      n = std::stoi(item.substr(eq + 1), &used);
      if (used != item.size() - eq - 1 || n < 1) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      return InvalidArgument(std::string(flag) + " '" + item + "': expected MODEL=N, N >= 1");
    }
    (*out)[item.substr(0, eq)] = n;
  }
  return Status::Ok();
}

}  // namespace

int RunSimulate(SimulateCommandOptions o) {
  // The router and the controller log every load and retry at info: tens
  // of thousands of lines in a simulated hour, hence warn unless asked.
  spdlog::set_level(spdlog::level::from_str(o.log_level));
  SimulationOptions& s = o.simulation;
  s.worker_cores = o.worker_cores > 0
                       ? o.worker_cores
                       : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  s.worker_memory_bytes = o.worker_memory_mb > 0
                              ? o.worker_memory_mb * 1024 * 1024
                              : cluster::DefaultMemoryBudget(AvailableMemoryBytes(),
                                                             cluster::kDefaultCpuBudgetFraction);
  if (!o.cluster_file.empty()) {
    auto zones = ReadClusterFile(o.cluster_file);
    if (!zones.ok()) {
      std::fprintf(stderr, "error: %s\n", zones.status().message().c_str());
      return 2;
    }
    s.zones = *zones;
    s.workers = 0;
    for (const ZoneSpec& z : s.zones) s.workers += z.workers;
  }
  for (const Status& st :
       {ParseReplicas(o.static_peak_replicas, "--static-peak-replicas", &s.static_peak_replicas),
        ParseReplicas(o.static_avg_replicas, "--static-avg-replicas", &s.static_avg_replicas)}) {
    if (!st.ok()) {
      std::fprintf(stderr, "error: %s\n", st.message().c_str());
      return 2;
    }
  }
  for (const std::string& item : o.infaas) {
    const size_t eq = item.find('=');
    const Status st = eq == std::string::npos
                          ? InvalidArgument("--infaas '" + item + "': expected NAME=VALUE")
                          : infaas::SetOption(s.infaas, item.substr(0, eq), item.substr(eq + 1));
    if (!st.ok()) {
      std::fprintf(stderr, "error: %s\n", st.message().c_str());
      return 2;
    }
  }
  auto policies = ParsePolicies(o.policy);
  if (!policies.ok()) {
    std::fprintf(stderr, "error: %s\n", policies.status().message().c_str());
    return 2;
  }
  auto trace = loadgen::LoadTraceCsv(o.trace);
  if (!trace.ok()) {
    std::fprintf(stderr, "error: %s\n", trace.status().message().c_str());
    return 2;
  }
  std::fprintf(stderr,
               "simulate: %zu queries, %d worker(s) of %d cores and %lld MiB, %d router(s), "
               "seed %llu\n",
               trace->queries.size(), s.workers, s.worker_cores,
               static_cast<long long>(s.worker_memory_bytes >> 20), s.routers,
               static_cast<unsigned long long>(s.seed));
  auto bound = CostBound(s, *trace);
  if (!bound.ok()) {
    std::fprintf(stderr, "error: the lower bound on cost: %s\n", bound.status().message().c_str());
    return 1;
  }
  std::fprintf(stderr,
               "lower bound on cost (docs/simulation.md): $%.4f at full attainment of the %lld "
               "feasible queries, $%.4f at 99%%\n",
               bound->UsdAt(1), static_cast<long long>(bound->feasible()), bound->UsdAt(0.99));
  std::vector<PolicyResult> results;
  for (Policy p : *policies) {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = RunPolicy(s, *trace, p);
    if (!r.ok()) {
      std::fprintf(stderr, "error: %s: %s\n", PolicyName(p), r.status().message().c_str());
      return 1;
    }
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(
        stderr,
        "%-12s attainment %.4f (%lld/%lld feasible)  instance-s %.1f (mean %.2f replicas)  $%.4f  "
        "cold starts %lld  rejections %lld  expired %lld  late %lld  p50 %.3f ms  p99 "
        "%.3f ms  actions %lld  [%.1f s wall, %lld events]\n",
        PolicyName(p), r->attainment, static_cast<long long>(r->met),
        static_cast<long long>(r->feasible), r->instance_seconds, r->mean_replicas, r->usd,
        static_cast<long long>(r->cold_starts), static_cast<long long>(r->rejections),
        static_cast<long long>(r->expired), static_cast<long long>(r->late), r->p50_ms, r->p99_ms,
        static_cast<long long>(r->control_actions), wall, static_cast<long long>(r->events));
    ApplyCostBound(*bound, &*r);
    std::fprintf(stderr,
                 "%-12s routers %d  lower bound at its attainment $%.4f  cost / bound %.2fx\n", "",
                 r->routers, r->cost_bound_usd, r->cost_over_bound);
    if (r->constraints) {
      std::string served;
      for (const auto& [task, model] : r->static_task_models) {
        served += "  " + task + " -> " + model;
      }
      std::fprintf(stderr, "%-12s refused: constraint %lld%s\n", "",
                   static_cast<long long>(r->refused_constraint), served.c_str());
    }
    if (r->cost.queries > 0) {
      std::fprintf(stderr,
                   "%-12s cost reported / predicted over %lld queries: p10 %.3f  median %.3f  "
                   "p90 %.3f  p99 %.3f  max %.3f  capped at max_cost %lld\n",
                   "", static_cast<long long>(r->cost.queries), r->cost.p10, r->cost.median,
                   r->cost.p90, r->cost.p99, r->cost.max, static_cast<long long>(r->cost.capped));
    }
    results.push_back(std::move(*r));
  }
  const std::string json = ResultsToJson(results, &*bound);
  if (o.json_path.empty()) {
    std::fputs(json.c_str(), stdout);
  } else {
    std::ofstream out(o.json_path);
    out << json;
    if (!out) {
      std::fprintf(stderr, "error: cannot write %s\n", o.json_path.c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace somm::sim
