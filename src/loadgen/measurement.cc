#include "loadgen/measurement.h"

#include <charconv>
#include <numeric>
#include <string_view>

namespace somm::loadgen {
namespace {

std::optional<int64_t> IntParameter(const Parameters& parameters, const char* name) {
  const auto it = parameters.find(name);
  if (it == parameters.end()) return std::nullopt;
  if (const auto* v = std::get_if<int64_t>(&it->second)) return *v;
  // A JSON peer may send timing as a float; accept whole microseconds of it.
  if (const auto* v = std::get_if<double>(&it->second)) return static_cast<int64_t>(*v);
  return std::nullopt;
}

double Mean(const std::vector<int64_t>& values) {
  if (values.empty()) return 0;
  return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

std::optional<ServerSplit> SplitOf(const std::vector<QueryRecord>& records) {
  std::vector<int64_t> queue, compute, overhead, client_overhead;
  for (const QueryRecord& r : records) {
    if (r.code != StatusCode::kOk || !r.queue_us || !r.compute_us || !r.server_us) continue;
    queue.push_back(*r.queue_us);
    compute.push_back(*r.compute_us);
    overhead.push_back(*r.server_us - *r.queue_us - *r.compute_us);
    client_overhead.push_back((r.done_ns - r.sent_ns) / 1000 - *r.server_us);
  }
  if (queue.empty()) return std::nullopt;
  ServerSplit s;
  s.queue_mean = Mean(queue);
  s.compute_mean = Mean(compute);
  s.overhead_mean = Mean(overhead);
  s.queue_p50 = Summarize(std::move(queue)).p50;
  s.compute_p50 = Summarize(std::move(compute)).p50;
  s.overhead_p50 = Summarize(std::move(overhead)).p50;
  s.client_overhead_p50 = Summarize(std::move(client_overhead)).p50;
  return s;
}

// A whole number after "<key>=" in somm's compact explanation, before its
// reason (ForEachCompactField); the first such key decides.
std::optional<int64_t> CompactField(std::string_view s, std::string_view key) {
  std::optional<int64_t> out;
  bool seen = false;
  ForEachCompactField(s, [&](std::string_view k, std::string_view value) {
    if (seen || k != key) return;
    seen = true;
    int64_t v = 0;
    const auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
    if (ec == std::errc() && ptr != value.data()) out = v;
  });
  return out;
}

}  // namespace

void RecordServerTiming(const Parameters& response_parameters, QueryRecord* record) {
  record->queue_us = IntParameter(response_parameters, "somm_queue_us");
  record->compute_us = IntParameter(response_parameters, "somm_compute_us");
  record->server_us = IntParameter(response_parameters, "somm_server_us");
  // A server answering with one compact explanation (somm serve --explain compact).
  const auto it = response_parameters.find("somm");
  if (it == response_parameters.end()) return;
  const auto* s = std::get_if<std::string>(&it->second);
  if (s == nullptr) return;
  if (!record->queue_us) record->queue_us = CompactField(*s, "queue_us");
  if (!record->compute_us) record->compute_us = CompactField(*s, "compute_us");
  if (!record->server_us) record->server_us = CompactField(*s, "server_us");
}

PointResult Aggregate(const std::vector<QueryRecord>& records, const AggregateOptions& options) {
  PointResult p;
  p.duration_s = options.duration_s;
  p.slo_ms = options.default_slo_ms;
  std::vector<int64_t> latencies;
  latencies.reserve(records.size());
  int64_t with_slo = 0;
  int64_t attained = 0;
  for (const QueryRecord& r : records) {
    const bool ok = r.code == StatusCode::kOk;
    if (ok) {
      latencies.push_back(r.LatencyUs());
    } else {
      const std::string name = StatusCodeName(r.code);
      ++p.errors[name];
      p.error_examples.emplace(name, r.error_message);
    }
    const std::optional<double> slo = r.slo_ms ? r.slo_ms : options.default_slo_ms;
    if (slo) {
      ++with_slo;
      if (ok && static_cast<double>(r.done_ns - r.scheduled_ns) <= *slo * 1e6) ++attained;
    }
  }
  p.count = static_cast<int64_t>(latencies.size());
  if (options.duration_s > 0) {
    p.throughput_qps = static_cast<double>(p.count) / options.duration_s;
    p.throughput_sps = p.throughput_qps * static_cast<double>(options.samples_per_query);
  }
  p.latency_us = Summarize(std::move(latencies));
  if (with_slo > 0)
    p.slo_attainment = static_cast<double>(attained) / static_cast<double>(with_slo);
  p.server_us = SplitOf(records);
  return p;
}

WindowSummary SummarizeWindow(const PointResult& window) {
  return WindowSummary{window.throughput_qps, window.latency_us.p99, window.count};
}

}  // namespace somm::loadgen
