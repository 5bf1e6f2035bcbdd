#include "loadgen/query_log.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <utility>

#include "loadgen/stats.h"

namespace somm::loadgen {
namespace {

// Milliseconds with 3 decimals: the log is read by tools, so one fixed form.
std::string Ms(int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(ns) / 1e6);
  return buf;
}

std::string Number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string Optional(const std::optional<int64_t>& v) {
  return v ? std::to_string(*v) : std::string();
}

// RFC 4180 quoting; a line break would split the row, so it becomes a space.
std::string Quoted(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"') {
      out += "\"\"";
    } else if (c == '\n' || c == '\r') {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out + "\"";
}

bool IsRejection(StatusCode code) {
  return code == StatusCode::kResourceExhausted || code == StatusCode::kUnavailable;
}

std::vector<const QueryRecord*> InScheduledOrder(const std::vector<QueryRecord>& records) {
  std::vector<const QueryRecord*> sorted;
  sorted.reserve(records.size());
  for (const QueryRecord& r : records) sorted.push_back(&r);
  std::stable_sort(sorted.begin(), sorted.end(), [](const QueryRecord* a, const QueryRecord* b) {
    return std::pair(a->scheduled_ns, a->sent_ns) < std::pair(b->scheduled_ns, b->sent_ns);
  });
  return sorted;
}

}  // namespace

void WriteQueryLogCsv(const std::vector<QueryRecord>& records, int64_t origin_ns,
                      std::optional<double> default_slo_ms, std::ostream& out) {
  out << "scheduled_ms,sent_ms,done_ms,latency_ms,model,slo_ms,code,queue_us,compute_us,"
         "server_us,error\n";
  for (const QueryRecord* r : InScheduledOrder(records)) {
    const std::optional<double> slo = r->slo_ms ? r->slo_ms : default_slo_ms;
    out << Ms(r->scheduled_ns - origin_ns) << ',' << Ms(r->sent_ns - origin_ns) << ','
        << Ms(r->done_ns - origin_ns) << ',' << Ms(r->done_ns - r->scheduled_ns) << ',' << r->model
        << ',' << (slo ? Number(*slo) : "") << ',' << StatusCodeName(r->code) << ','
        << Optional(r->queue_us) << ',' << Optional(r->compute_us) << ',' << Optional(r->server_us)
        << ',' << (r->code == StatusCode::kOk ? "" : Quoted(r->error_message)) << '\n';
  }
}

std::vector<TimelineRow> BuildTimeline(const std::vector<QueryRecord>& records, int64_t origin_ns,
                                       std::optional<double> default_slo_ms) {
  struct Bucket {
    TimelineRow row;
    std::vector<int64_t> latencies_ns;
  };
  std::map<std::pair<int64_t, std::string>, Bucket> buckets;
  for (const QueryRecord& r : records) {
    const int64_t offset = r.scheduled_ns - origin_ns;
    // Floor, not truncation: a query due before the origin is second -1.
    const int64_t second =
        offset >= 0 ? offset / 1000000000 : -((-offset + 999999999) / 1000000000);
    Bucket& b = buckets[{second, r.model}];
    TimelineRow& row = b.row;
    ++row.sent;
    if (r.code == StatusCode::kOk) {
      ++row.ok;
      const int64_t latency_ns = r.done_ns - r.scheduled_ns;
      b.latencies_ns.push_back(latency_ns);
      const std::optional<double> slo = r.slo_ms ? r.slo_ms : default_slo_ms;
      if (slo) ++(static_cast<double>(latency_ns) <= *slo * 1e6 ? row.slo_met : row.late);
    } else if (IsRejection(r.code)) {
      ++row.rejected;
    } else if (r.code == StatusCode::kDeadlineExceeded) {
      ++row.expired;
    } else {
      ++row.failed;
    }
  }
  std::vector<TimelineRow> rows;
  rows.reserve(buckets.size());
  for (auto& [key, b] : buckets) {
    b.row.second = key.first;
    b.row.model = key.second;
    if (!b.latencies_ns.empty()) {
      std::sort(b.latencies_ns.begin(), b.latencies_ns.end());
      b.row.p50_ms = static_cast<double>(PercentileOfSorted(b.latencies_ns, 50)) / 1e6;
      b.row.p99_ms = static_cast<double>(PercentileOfSorted(b.latencies_ns, 99)) / 1e6;
    }
    rows.push_back(std::move(b.row));
  }
  return rows;
}

void WriteTimelineCsv(const std::vector<TimelineRow>& rows, std::ostream& out) {
  out << "second,model,sent,ok,slo_met,late,rejected,expired,failed,p50_ms,p99_ms\n";
  auto ms = [](const std::optional<double>& v) {
    if (!v) return std::string();
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f", *v);
    return std::string(buf);
  };
  for (const TimelineRow& r : rows) {
    out << r.second << ',' << r.model << ',' << r.sent << ',' << r.ok << ',' << r.slo_met << ','
        << r.late << ',' << r.rejected << ',' << r.expired << ',' << r.failed << ',' << ms(r.p50_ms)
        << ',' << ms(r.p99_ms) << '\n';
  }
}

}  // namespace somm::loadgen
