#include "loadgen/report.h"

#include <cmath>
#include <cstdio>

namespace somm::loadgen {
namespace {

using Json = nlohmann::json;

// Rounds to 1/per_unit (10 = one decimal). Dividing by the integer scale,
// not multiplying by 0.1, gives the double nearest the decimal, so the JSON
// shows 979.8 rather than 979.8000000000001.
double Round(double v, double per_unit) { return std::round(v * per_unit) / per_unit; }

Json OptionalNumber(const std::optional<double>& v, double per_unit) {
  return v ? Json(Round(*v, per_unit)) : Json(nullptr);
}

Json PointToJson(const PointResult& p) {
  Json j;
  j["concurrency"] = p.concurrency ? Json(*p.concurrency) : Json(nullptr);
  j["request_rate"] = OptionalNumber(p.request_rate, 10);
  j["windows"] = p.windows;
  j["stable"] = p.stable;
  j["duration_s"] = Round(p.duration_s, 1000);
  j["count"] = p.count;
  j["throughput_qps"] = Round(p.throughput_qps, 10);
  j["throughput_sps"] = Round(p.throughput_sps, 10);
  j["latency_us"] = {{"p50", p.latency_us.p50},
                     {"p90", p.latency_us.p90},
                     {"p99", p.latency_us.p99},
                     {"p999", p.latency_us.p999},
                     {"mean", Round(p.latency_us.mean, 10)}};
  j["errors"] = Json::object();
  for (const auto& [name, n] : p.errors) j["errors"][name] = n;
  j["slo_ms"] = OptionalNumber(p.slo_ms, 1000);
  j["slo_attainment"] = OptionalNumber(p.slo_attainment, 10000);
  if (p.server_us) {
    const ServerSplit& s = *p.server_us;
    j["server_us"] = {{"queue_p50", s.queue_p50},
                      {"compute_p50", s.compute_p50},
                      {"overhead_p50", s.overhead_p50},
                      {"queue_mean", Round(s.queue_mean, 10)},
                      {"compute_mean", Round(s.compute_mean, 10)},
                      {"overhead_mean", Round(s.overhead_mean, 10)},
                      {"client_overhead_p50", s.client_overhead_p50}};
  } else {
    j["server_us"] = nullptr;
  }
  return j;
}

std::string Printf(const char* format, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof(buf), format, args...);
  return buf;
}

std::string ErrorsText(const PointResult& p) {
  if (p.errors.empty()) return "-";
  std::string text;
  for (const auto& [name, n] : p.errors) {
    if (!text.empty()) text += ", ";
    text += name + ": " + std::to_string(n);
  }
  return text;
}

std::string StableText(const PointResult& p) {
  return p.stop_reason == "trace" ? "n/a" : (p.stable ? "yes" : "no");
}

}  // namespace

std::string PointLabel(const PointResult& p) {
  if (p.concurrency) return "concurrency " + std::to_string(*p.concurrency);
  if (p.request_rate) return Printf("rate %.1f/s", *p.request_rate);
  return "trace";
}

Json ReportToJson(const BenchReport& report) {
  Json j;
  j["tool"] = "somm bench";
  j["target"] = report.target;
  j["protocol"] = report.protocol;
  j["model"] = report.model;
  j["mode"] = report.mode;
  j["batch_size"] = report.batch_size;
  j["points"] = Json::array();
  for (const PointResult& p : report.points) j["points"].push_back(PointToJson(p));
  return j;
}

std::string FormatReportTable(const BenchReport& report) {
  std::string out = Printf("somm bench: %s, model %s, %s, %s load, batch size %lld\n",
                           report.target.c_str(), report.model.c_str(), report.protocol.c_str(),
                           report.mode.c_str(), static_cast<long long>(report.batch_size));
  out += Printf("%-18s %7s %-16s %8s %10s %10s %9s %9s %9s %9s %9s %8s  %s\n", "load", "windows",
                "stable", "count", "queries/s", "samples/s", "p50_us", "p90_us", "p99_us",
                "p99.9_us", "mean_us", "slo_att", "errors");
  for (const PointResult& p : report.points) {
    const std::string slo = p.slo_attainment ? Printf("%.2f%%", *p.slo_attainment * 100) : "n/a";
    const std::string stable =
        p.stop_reason == "trace" ? "n/a" : StableText(p) + " (" + p.stop_reason + ")";
    out +=
        Printf("%-18s %7d %-16s %8lld %10.1f %10.1f %9lld %9lld %9lld %9lld %9.1f %8s  %s\n",
               PointLabel(p).c_str(), p.windows, stable.c_str(), static_cast<long long>(p.count),
               p.throughput_qps, p.throughput_sps, static_cast<long long>(p.latency_us.p50),
               static_cast<long long>(p.latency_us.p90), static_cast<long long>(p.latency_us.p99),
               static_cast<long long>(p.latency_us.p999), p.latency_us.mean, slo.c_str(),
               ErrorsText(p).c_str());
  }
  for (const PointResult& p : report.points) {
    for (const auto& [name, message] : p.error_examples) {
      out += PointLabel(p) + ": first " + name + ": " + message + "\n";
    }
  }
  out +=
      "server-side split (us; overhead = server - queue - compute; client overhead = client "
      "call - server)\n";
  out +=
      Printf("%-18s %10s %12s %13s %11s %13s %14s %19s\n", "load", "queue_p50", "compute_p50",
             "overhead_p50", "queue_mean", "compute_mean", "overhead_mean", "client_overhead_p50");
  for (const PointResult& p : report.points) {
    if (!p.server_us) {
      out += Printf("%-18s %10s %12s %13s %11s %13s %14s %19s\n", PointLabel(p).c_str(), "n/a",
                    "n/a", "n/a", "n/a", "n/a", "n/a", "n/a");
      continue;
    }
    const ServerSplit& s = *p.server_us;
    out += Printf("%-18s %10lld %12lld %13lld %11.1f %13.1f %14.1f %19lld\n", PointLabel(p).c_str(),
                  static_cast<long long>(s.queue_p50), static_cast<long long>(s.compute_p50),
                  static_cast<long long>(s.overhead_p50), s.queue_mean, s.compute_mean,
                  s.overhead_mean, static_cast<long long>(s.client_overhead_p50));
  }
  return out;
}

std::string FormatWindowLine(const std::string& point_label, int window,
                             const PointResult& result) {
  std::string line =
      Printf("%s, window %d: %.1f q/s, p50 %lld us, p99 %lld us", point_label.c_str(), window,
             result.throughput_qps, static_cast<long long>(result.latency_us.p50),
             static_cast<long long>(result.latency_us.p99));
  if (!result.errors.empty()) line += ", errors " + ErrorsText(result);
  return line;
}

}  // namespace somm::loadgen
