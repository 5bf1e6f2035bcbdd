// Report: a bench run's results, as the JSON the benchmark scripts consume
// and as the table a person reads. Both come from one BenchReport value.
//
// JSON schema (every key always present; null where the text says "n/a"):
//   {"tool":"somm bench","target":"<--label or url>","protocol":"http|grpc",
//    "model":"digits-mlp","mode":"closed|poisson|trace","batch_size":1,
//    "points":[{"concurrency":4|null,"request_rate":500.0|null,"windows":3,
//               "stable":true,"duration_s":9.0,"count":12345,
//               "throughput_qps":1371.6,"throughput_sps":1371.6,
//               "latency_us":{"p50":..,"p90":..,"p99":..,"p999":..,"mean":..},
//               "errors":{"RESOURCE_EXHAUSTED":3},
//               "slo_ms":null|50.0,"slo_attainment":null|0.97,
//               "server_us":null|{"queue_p50":..,"compute_p50":..,
//                  "overhead_p50":..,"queue_mean":..,"compute_mean":..,
//                  "overhead_mean":..,"client_overhead_p50":..}}]}
// Latencies are microseconds; rates and means are rounded to 0.1, the SLO
// attainment to 1e-4.
//
// Thread-safety: pure functions on values.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "loadgen/measurement.h"

namespace somm::loadgen {

struct BenchReport {
  std::string target;    // --label, else the URL
  std::string protocol;  // http | grpc
  std::string model;
  std::string mode;  // closed | poisson | trace
  int64_t batch_size = 1;
  std::vector<PointResult> points;
};

nlohmann::json ReportToJson(const BenchReport& report);

// The human table: one row per point (load, windows, throughput, latency,
// SLO, errors), then the server-side split per point.
std::string FormatReportTable(const BenchReport& report);

// One progress line for a finished window, e.g.
// "concurrency 4, window 2: 1371.6 q/s, p50 712 us, p99 1290 us".
std::string FormatWindowLine(const std::string& point_label, int window, const PointResult& result);

// "concurrency 4", "rate 500/s" or "trace".
std::string PointLabel(const PointResult& point);

}  // namespace somm::loadgen
