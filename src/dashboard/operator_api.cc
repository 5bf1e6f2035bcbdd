#include "dashboard/operator_api.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <utility>

#include "dashboard/prometheus_text.h"

namespace somm::dashboard {
namespace {

using nlohmann::json;

// One model version's counters, as the overview sums them.
struct ModelCounters {
  double success = 0;
  std::map<std::string, double> failures;  // by status code
  double slo_queries = 0;
  double slo_met = 0;
  double instances_loaded = 0;
  std::map<double, double> buckets;  // le (seconds) -> cumulative count
  double count = 0;
  double sum_seconds = 0;
};

std::string Label(const PromSample& s, const char* key) {
  auto it = s.labels.find(key);
  return it == s.labels.end() ? std::string() : it->second;
}

// JSON has no infinity: the +Inf bucket is written as null.
json Number(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

bool Shown(const ModelFilter& visible, const std::string& model) {
  return !visible || visible(model);
}

json CountersJson(const std::vector<PromSample>& samples, const ModelFilter& visible) {
  std::map<std::pair<std::string, std::string>, ModelCounters> models;
  std::map<std::string, double> decisions, cold_starts;
  double inflight = 0, instance_seconds = 0;
  const std::string duration = kRequestDurationFamily;
  for (const PromSample& s : samples) {
    const auto key = std::make_pair(Label(s, "model"), Label(s, "version"));
    if (visible && (key.first.empty() || !visible(key.first))) continue;
    if (s.name == "somm_inference_request_success_total") {
      models[key].success += s.value;
    } else if (s.name == "somm_inference_request_failure_total") {
      models[key].failures[Label(s, "reason")] += s.value;
    } else if (s.name == "somm_slo_queries_total") {
      models[key].slo_queries += s.value;
    } else if (s.name == "somm_slo_met_queries_total") {
      models[key].slo_met += s.value;
    } else if (s.name == "somm_instances_loaded") {
      models[key].instances_loaded += s.value;
    } else if (s.name == duration + "_bucket") {
      const std::string le = Label(s, "le");
      const double bound = le == "+Inf" ? INFINITY : std::strtod(le.c_str(), nullptr);
      models[key].buckets[bound] += s.value;
    } else if (s.name == duration + "_count") {
      models[key].count += s.value;
    } else if (s.name == duration + "_sum") {
      models[key].sum_seconds += s.value;
    } else if (s.name == "somm_selector_decisions_total") {
      decisions[Label(s, "outcome")] += s.value;
    } else if (s.name == "somm_cold_starts_total") {
      cold_starts[Label(s, "model")] += s.value;
    } else if (s.name == "somm_inflight_queries") {
      inflight += s.value;
    } else if (s.name == "somm_instance_seconds_total") {
      instance_seconds += s.value;
    }
  }
  json out;
  json rows = json::array();
  std::map<std::string, double> rejections;
  double success = 0, failure = 0, slo_queries = 0, slo_met = 0;
  for (const auto& [key, m] : models) {
    json row;
    row["model"] = key.first;
    row["version"] = key.second;
    row["success_total"] = m.success;
    row["failure_total"] = m.failures;
    row["slo_queries_total"] = m.slo_queries;
    row["slo_met_queries_total"] = m.slo_met;
    row["instances_loaded"] = m.instances_loaded;
    json le = json::array(), cumulative = json::array();
    for (const auto& [bound, n] : m.buckets) {
      le.push_back(Number(bound * 1000.0));
      cumulative.push_back(n);
    }
    row["latency"] = {{"le_ms", le},
                      {"cumulative", cumulative},
                      {"count", m.count},
                      {"sum_ms", m.sum_seconds * 1000.0}};
    rows.push_back(std::move(row));
    success += m.success;
    for (const auto& [reason, n] : m.failures) {
      rejections[reason] += n;
      failure += n;
    }
    slo_queries += m.slo_queries;
    slo_met += m.slo_met;
  }
  out["models"] = std::move(rows);
  out["totals"] = {{"success", success},
                   {"failure", failure},
                   {"slo_queries", slo_queries},
                   {"slo_met_queries", slo_met}};
  out["failures_by_reason"] = rejections;
  out["decisions_total"] = decisions;
  out["cold_starts_total"] = cold_starts;
  out["inflight_queries"] = inflight;
  out["instance_seconds_total"] = instance_seconds;
  return out;
}

std::string WorkerName(const std::string& worker) { return worker.empty() ? "local" : worker; }

json GroupJson(const cluster::GroupState& g) {
  json instances = json::array();
  for (const cluster::InstanceState& i : g.instances) {
    instances.push_back({{"instance_id", i.instance_id}, {"queued_samples", i.queued_samples}});
  }
  return {{"model", g.model},
          {"version", g.version},
          {"variant", g.variant},
          {"hardware", g.hardware.Name()},
          {"device", g.device},
          {"replicas", g.replicas},
          {"memory_bytes", g.memory_bytes},
          {"queued", g.queued},
          {"executing", g.executing},
          {"loading", g.loading},
          {"pinned", g.pinned},
          {"recent_rate_qps", g.recent_rate_qps},
          {"uses_total", g.uses_total},
          {"instances", std::move(instances)}};
}

}  // namespace

StatusOr<std::string> EncodeOverview(const OperatorApi& server, std::string_view metrics_text,
                                     int64_t unix_ms, const ModelFilter& visible) {
  json out;
  out["unix_ms"] = unix_ms;
  out["metrics"] = !metrics_text.empty();
  if (!metrics_text.empty()) {
    StatusOr<std::vector<PromSample>> samples = ParsePrometheusText(metrics_text);
    if (!samples.ok()) return samples.status();
    out.update(CountersJson(*samples, visible));
  }
  // Control actions are counted where the controller runs (a cluster
  // router's own registry has none: they come from the leader). They name
  // no model, so a user's view has none.
  out["control_actions_total"] =
      visible ? json::object() : json(server.ControlActionTotals());
  const auto view = server.ClusterView();
  const PriceList prices = server.Prices();
  double usd_per_s = 0;
  int64_t replicas = 0, used = 0, budget = 0;
  std::map<std::string, bool> workers;
  if (view) {
    for (const cluster::GroupState& g : view->groups) {
      if (!Shown(visible, g.model)) continue;
      usd_per_s += prices.PerSecond(g.hardware) * g.replicas;
      replicas += g.replicas;
    }
    for (const cluster::DeviceState& d : view->devices) {
      used += d.used_bytes;
      budget += d.budget_bytes;
      workers[WorkerName(d.worker)] = true;
    }
  }
  out["cluster"] = {{"workers", workers.size()},
                    {"replicas", replicas},
                    {"memory_used_bytes", used},
                    {"memory_budget_bytes", budget},
                    {"cost_usd_per_hour", usd_per_s * 3600.0},
                    {"prices",
                     {{"cpu_thread_usd_per_hour", prices.cpu_thread_usd_per_s * 3600.0},
                      {"gpu_usd_per_hour", prices.gpu_usd_per_s * 3600.0}}}};
  return out.dump();
}

std::string EncodeWorkers(const OperatorApi& server, const ModelFilter& visible) {
  const auto view = server.ClusterView();
  json workers = json::array();
  json demand = json::array();
  if (view) {
    // Ordered by worker, as the store hands them out.
    std::map<std::string, json> by_worker;
    auto row = [&by_worker](const std::string& worker) -> json& {
      json& w = by_worker[WorkerName(worker)];
      if (w.is_null()) {
        w = {{"worker", WorkerName(worker)},
             {"zone", ""},
             {"devices", json::array()},
             {"groups", json::array()},
             {"queued", 0},
             {"executing", 0},
             {"replicas", 0}};
      }
      return w;
    };
    for (const cluster::DeviceState& d : view->devices) {
      row(d.worker)["devices"].push_back({{"name", d.name},
                                          {"budget_bytes", d.budget_bytes},
                                          {"used_bytes", d.used_bytes},
                                          {"cores", d.cores}});
    }
    for (const cluster::GroupState& g : view->groups) {
      if (!Shown(visible, g.model)) {
        row(g.worker);  // the worker is still listed, without the group
        continue;
      }
      json& w = row(g.worker);
      if (!g.zone.empty()) w["zone"] = g.zone;
      w["groups"].push_back(GroupJson(g));
      w["queued"] = w["queued"].get<int64_t>() + g.queued;
      w["executing"] = w["executing"].get<int64_t>() + g.executing;
      w["replicas"] = w["replicas"].get<int64_t>() + g.replicas;
    }
    for (auto& [name, w] : by_worker) workers.push_back(std::move(w));
    for (const cluster::ModelDemand& d : view->demand) {
      if (!Shown(visible, d.model)) continue;
      json r = {{"model", d.model},
                {"version", d.version},
                {"rate_qps", d.rate_qps},
                {"arrivals_total", d.arrivals_total},
                {"latency_slo_ms", d.latency_slo_ms}};
      if (d.min_accuracy) r["min_accuracy"] = *d.min_accuracy;
      demand.push_back(std::move(r));
    }
  }
  return json{{"workers", std::move(workers)}, {"demand", std::move(demand)}}.dump();
}

std::string EncodeActions(const std::vector<DecisionRecord>& actions,
                          const ModelFilter& visible) {
  json rows = json::array();
  for (const DecisionRecord& a : actions) {
    // A worker-scaling step names no model ("workers" or the drained one).
    const bool about_workers = a.outcome == "control:scale_out" || a.outcome == "control:scale_in";
    if (!about_workers && !Shown(visible, a.target)) continue;
    std::string kind = a.outcome;
    if (kind.rfind("control:", 0) == 0) kind = kind.substr(8);
    rows.push_back({{"unix_ms", a.unix_ms},
                    {"kind", kind},
                    {"target", a.target},
                    {"group", a.variant},
                    {"hardware", a.hardware},
                    {"reason", a.reason}});
  }
  return json{{"actions", std::move(rows)}}.dump();
}

}  // namespace somm::dashboard
