// Measurement: what each query experienced (QueryRecord) and what a set of
// them adds up to (PointResult), the numbers of one report row.
//
// Conventions, all decided here:
//   * Latency runs from the query's *scheduled* time to its answer. In a
//     closed loop that is when it was sent; in an open loop or a trace replay
//     it is the planned arrival, so time spent waiting for a free sender
//     counts (no coordinated omission).
//   * count, throughput and latency percentiles cover successful queries;
//     failures are counted per status code name in `errors`.
//   * samples/s = queries/s x samples per query (the batch size).
//   * SLO attainment (Clockwork/AlpaServe): of the queries that carry an SLO
//     (their own, else the run's --slo-ms), the fraction that succeeded AND
//     answered within it. Rejected, failed and late queries are all misses.
//   * Server-side split, from successful answers that carry somm_queue_us,
//     somm_compute_us and somm_server_us: queue, compute and overhead =
//     server - queue - compute (p50 and mean); client overhead = the client
//     call's duration (sent -> done, so an open loop's local wait is left
//     out) - server_us (p50). Absent when no answer carries the timing.
//
// Thread-safety: pure functions on values.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "loadgen/stability.h"
#include "loadgen/stats.h"
#include "common/status.h"
#include "api/inference.h"

namespace somm::loadgen {

struct QueryRecord {
  // Nanoseconds on one monotonic clock, from any common origin.
  int64_t scheduled_ns = 0;
  int64_t sent_ns = 0;
  int64_t done_ns = 0;
  std::string model;  // the request's model name
  StatusCode code = StatusCode::kOk;
  std::string error_message;     // set only when code is not OK
  std::optional<double> slo_ms;  // the query's own SLO (trace column)
  // The server's timing parameters; nullopt when the answer lacks them.
  std::optional<int64_t> queue_us;
  std::optional<int64_t> compute_us;
  std::optional<int64_t> server_us;

  int64_t LatencyUs() const { return (done_ns - scheduled_ns) / 1000; }
};

// Copies somm_queue_us / somm_compute_us / somm_server_us out of a
// response's parameters into `record` (integer-valued parameters only).
void RecordServerTiming(const Parameters& response_parameters, QueryRecord* record);

// Calls visit(key, value) for each "key=value" of somm's compact explanation
// ("decision=... queue_us=41 compute_us=12 ... reason=<the rest>"), in
// order, up to its reason, whose text may hold anything. Words without "="
// are passed over.
template <typename Visit>
void ForEachCompactField(std::string_view explanation, Visit visit) {
  size_t at = 0;
  while (at < explanation.size() && !explanation.substr(at).starts_with("reason=")) {
    size_t end = explanation.find(' ', at);
    if (end == std::string_view::npos) end = explanation.size();
    const std::string_view word = explanation.substr(at, end - at);
    if (const size_t eq = word.find('='); eq != std::string_view::npos) {
      visit(word.substr(0, eq), word.substr(eq + 1));
    }
    at = end + 1;
  }
}

struct ServerSplit {
  int64_t queue_p50 = 0;
  int64_t compute_p50 = 0;
  int64_t overhead_p50 = 0;
  double queue_mean = 0;
  double compute_mean = 0;
  double overhead_mean = 0;
  int64_t client_overhead_p50 = 0;
};

// One report row.
struct PointResult {
  // Which load: exactly one of these is set for closed and Poisson points;
  // neither for a trace replay.
  std::optional<int> concurrency;
  std::optional<double> request_rate;

  int windows = 0;          // measurement windows run (1 for a trace replay)
  bool stable = false;      // the last 3 windows agreed (see stability.h)
  std::string stop_reason;  // "stable", "max-windows", "duration" or "trace"
  double duration_s = 0;    // time the numbers below cover

  int64_t count = 0;  // successful queries
  double throughput_qps = 0;
  double throughput_sps = 0;
  LatencySummary latency_us;
  std::map<std::string, int64_t> errors;  // status code name -> queries
  // The first message seen per status code name, so the table can say why
  // (not in the JSON: its schema is fixed).
  std::map<std::string, std::string> error_examples;
  std::optional<double> slo_ms;          // the run's --slo-ms
  std::optional<double> slo_attainment;  // nullopt when no query had an SLO
  std::optional<ServerSplit> server_us;
};

struct AggregateOptions {
  double duration_s = 0;
  int64_t samples_per_query = 1;
  std::optional<double> default_slo_ms;  // --slo-ms
};

// Fills the measured fields of a PointResult (not concurrency, request_rate,
// windows, stable or stop_reason).
PointResult Aggregate(const std::vector<QueryRecord>& records, const AggregateOptions& options);

// What the stability rule needs from an aggregated window.
WindowSummary SummarizeWindow(const PointResult& window);

}  // namespace somm::loadgen
