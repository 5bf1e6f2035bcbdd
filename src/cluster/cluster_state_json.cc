#include "cluster/cluster_state_json.h"

#include <nlohmann/json.hpp>

namespace somm::cluster {
namespace {

using nlohmann::json;

double MsBetween(TimePoint from, TimePoint to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

TimePoint Plus(TimePoint t, double ms) {
  return t + std::chrono::duration_cast<TimePoint::duration>(std::chrono::duration<double, std::milli>(ms));
}

json HardwareJson(const HardwareConfig& hw) {
  return {{"device", hw.device == DeviceKind::kCuda ? "cuda" : "cpu"},
          {"index", hw.device_index},
          {"threads", hw.threads}};
}

HardwareConfig HardwareFrom(const json& j) {
  HardwareConfig hw;
  const std::string device = j.at("device").get<std::string>();
  if (device != "cpu" && device != "cuda") throw std::invalid_argument("hardware.device '" + device + "'");
  hw.device = device == "cuda" ? DeviceKind::kCuda : DeviceKind::kCpu;
  hw.device_index = j.at("index").get<int>();
  hw.threads = j.at("threads").get<int>();
  return hw;
}

}  // namespace

std::string WorkerReportToJson(const WorkerReport& report, TimePoint now) {
  json devices = json::array();
  for (const DeviceState& d : report.devices) {
    devices.push_back({{"name", d.name},
                       {"budget_bytes", d.budget_bytes},
                       {"used_bytes", d.used_bytes},
                       {"cores", d.cores}});
  }
  json groups = json::array();
  for (const GroupState& g : report.groups) {
    json instances = json::array();
    for (const InstanceState& i : g.instances) {
      instances.push_back({{"id", i.instance_id},
                           {"queued_samples", i.queued_samples},
                           {"busy_for_ms", std::max(0.0, MsBetween(now, i.busy_until))}});
    }
    groups.push_back({{"model", g.model},
                      {"version", g.version},
                      {"variant", g.variant},
                      {"hardware", HardwareJson(g.hardware)},
                      {"device", g.device},
                      {"replicas", g.replicas},
                      {"memory_bytes", g.memory_bytes},
                      {"queued", g.queued},
                      {"executing", g.executing},
                      {"loading", g.loading},
                      {"last_used_age_ms", std::max(0.0, MsBetween(g.last_used, now))},
                      {"recent_rate_qps", g.recent_rate_qps},
                      {"load_ms", g.load_ms},
                      {"pinned", g.pinned},
                      {"uses_total", g.uses_total},
                      {"observed_slowdown", g.observed_slowdown},
                      {"warm_overhead_ms", g.warm_overhead_ms},
                      {"instances", std::move(instances)}});
  }
  json j = {{"worker", report.worker},     {"incarnation", report.incarnation},
            {"zone", report.zone},         {"address", report.address},
            {"sequence", report.sequence}, {"devices", std::move(devices)},
            {"groups", std::move(groups)}};
  return j.dump();
}

StatusOr<WorkerReport> WorkerReportFromJson(const std::string& text, TimePoint now) {
  try {
    const json j = json::parse(text);
    WorkerReport r;
    r.worker = j.at("worker").get<std::string>();
    r.incarnation = j.at("incarnation").get<std::string>();
    r.zone = j.value("zone", "");
    r.address = j.value("address", "");
    r.sequence = j.at("sequence").get<int64_t>();
    for (const json& d : j.at("devices")) {
      DeviceState s;
      s.name = d.at("name").get<std::string>();
      s.budget_bytes = d.at("budget_bytes").get<int64_t>();
      s.used_bytes = d.at("used_bytes").get<int64_t>();
      s.cores = d.at("cores").get<int>();
      s.worker = r.worker;
      r.devices.push_back(std::move(s));
    }
    for (const json& g : j.at("groups")) {
      GroupState s;
      s.worker = r.worker;
      s.model = g.at("model").get<std::string>();
      s.version = g.at("version").get<int64_t>();
      s.variant = g.at("variant").get<std::string>();
      s.hardware = HardwareFrom(g.at("hardware"));
      s.device = g.at("device").get<std::string>();
      s.replicas = g.at("replicas").get<int>();
      s.memory_bytes = g.at("memory_bytes").get<int64_t>();
      s.queued = g.at("queued").get<int64_t>();
      s.executing = g.at("executing").get<int64_t>();
      s.loading = g.at("loading").get<bool>();
      s.last_used = Plus(now, -g.at("last_used_age_ms").get<double>());
      s.recent_rate_qps = g.at("recent_rate_qps").get<double>();
      s.load_ms = g.at("load_ms").get<double>();
      s.pinned = g.at("pinned").get<bool>();
      s.uses_total = g.at("uses_total").get<int64_t>();
      s.observed_slowdown = g.at("observed_slowdown").get<double>();
      s.warm_overhead_ms = g.value("warm_overhead_ms", -1.0);  // older workers send none
      for (const json& i : g.at("instances")) {
        InstanceState is;
        is.instance_id = i.at("id").get<int64_t>();
        is.queued_samples = i.at("queued_samples").get<int64_t>();
        is.busy_until = Plus(now, i.at("busy_for_ms").get<double>());
        s.instances.push_back(is);
      }
      r.groups.push_back(std::move(s));
    }
    return r;
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("worker report: ") + e.what());
  }
}

std::string DemandToJson(const std::vector<ModelDemand>& demand) {
  json rows = json::array();
  for (const ModelDemand& d : demand) {
    json row = {{"model", d.model},
                {"version", d.version},
                {"rate_qps", d.rate_qps},
                {"latency_slo_ms", d.latency_slo_ms},
                {"arrivals_total", d.arrivals_total}};
    if (d.min_accuracy) row["min_accuracy"] = *d.min_accuracy;
    // Written only when set: most rows have no outcomes to compare yet.
    if (d.answered_total || d.failed_total) {
      row["answered_total"] = d.answered_total;
      row["failed_total"] = d.failed_total;
      row["latency_ms_total"] = d.latency_ms_total;
    }
    if (d.compared_total) {
      row["compared_total"] = d.compared_total;
      row["disagreed_total"] = d.disagreed_total;
    }
    rows.push_back(std::move(row));
  }
  return rows.dump();
}

StatusOr<std::vector<ModelDemand>> DemandFromJson(const std::string& text) {
  try {
    std::vector<ModelDemand> out;
    for (const json& row : json::parse(text)) {
      ModelDemand d;
      d.model = row.at("model").get<std::string>();
      d.version = row.at("version").get<int64_t>();
      d.rate_qps = row.at("rate_qps").get<double>();
      d.latency_slo_ms = row.at("latency_slo_ms").get<double>();
      d.arrivals_total = row.at("arrivals_total").get<int64_t>();
      if (row.contains("min_accuracy")) d.min_accuracy = row.at("min_accuracy").get<double>();
      d.answered_total = row.value("answered_total", int64_t{0});
      d.failed_total = row.value("failed_total", int64_t{0});
      d.latency_ms_total = row.value("latency_ms_total", 0.0);
      d.compared_total = row.value("compared_total", int64_t{0});
      d.disagreed_total = row.value("disagreed_total", int64_t{0});
      out.push_back(std::move(d));
    }
    return out;
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("demand: ") + e.what());
  }
}

}  // namespace somm::cluster
