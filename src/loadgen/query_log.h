// Query log and timeline: what a trace replay did, query by query and second
// by second, as CSV for tools (bench/managed_report.py) to plot and judge.
// The one-row-per-run report (report.h) cannot show a burst or a cold start;
// these can.
//
// Query log (`somm bench --trace T --query-log FILE`), one row per query in
// order of scheduled arrival:
//   scheduled_ms,sent_ms,done_ms,latency_ms,model,slo_ms,code,queue_us,compute_us,server_us,error
//   * times in milliseconds from the replay's origin, 3 decimals;
//     latency_ms = done - scheduled (measurement.h's convention);
//   * slo_ms is the query's own SLO, else the run's --slo-ms, else empty;
//   * code is the status code name (OK, RESOURCE_EXHAUSTED, ...);
//   * queue_us, compute_us, server_us: the server's timing, empty if absent;
//   * error: the message of a failed query, in double quotes (RFC 4180:
//     embedded quotes doubled; line breaks become spaces).
//
// Timeline (`--timeline FILE`), one row per (second, model) with at least
// one query scheduled in that second, seconds ascending, then models by name:
//   second,model,sent,ok,slo_met,late,rejected,expired,failed,p50_ms,p99_ms
//   * second: floor(scheduled time / 1 s) from the origin: a query belongs
//     to the second it was due, so the row lines up with the offered load;
//   * sent: queries due in that second; ok = answered successfully;
//   * slo_met: ok within its SLO; late: ok but over its SLO (queries without
//     an SLO count in neither);
//   * rejected: RESOURCE_EXHAUSTED (full queue, SLO admission) or
//     UNAVAILABLE (model not loaded, shutting down): the server said no;
//   * expired: DEADLINE_EXCEEDED: admitted, then dropped because its
//     deadline passed while it queued (somm's SLO-aware batcher);
//   * failed: every other error (including the client's own, e.g. a broken
//     connection);
//   * p50_ms, p99_ms: latency of the ok queries (empty when none).
//
// Thread-safety: pure functions on values.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "loadgen/measurement.h"

namespace somm::loadgen {

struct TimelineRow {
  int64_t second = 0;
  std::string model;
  int64_t sent = 0;
  int64_t ok = 0;
  int64_t slo_met = 0;
  int64_t late = 0;
  int64_t rejected = 0;
  int64_t expired = 0;
  int64_t failed = 0;
  std::optional<double> p50_ms;
  std::optional<double> p99_ms;
};

// `origin_ns`: the replay's origin on the records' clock. `default_slo_ms`:
// the run's --slo-ms, for queries without their own.
void WriteQueryLogCsv(const std::vector<QueryRecord>& records, int64_t origin_ns,
                      std::optional<double> default_slo_ms, std::ostream& out);

std::vector<TimelineRow> BuildTimeline(const std::vector<QueryRecord>& records, int64_t origin_ns,
                                       std::optional<double> default_slo_ms);

void WriteTimelineCsv(const std::vector<TimelineRow>& rows, std::ostream& out);

}  // namespace somm::loadgen
