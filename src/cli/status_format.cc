#include "cli/status_format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

namespace somm {
namespace {

using nlohmann::json;

std::string Printf(const char* format, double a) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, a);
  return buf;
}

std::string Bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int i = 0;
  while (b >= 1024 && i < 4) {
    b /= 1024;
    ++i;
  }
  return Printf(i == 0 ? "%.0f" : "%.1f", b) + " " + units[i];
}

std::string Percent(double met, double all) {
  return all > 0 ? Printf("%.1f %%", 100.0 * met / all) : "-";
}

double Num(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}

// Columns padded to their widest cell.
std::string Table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    width.resize(std::max(width.size(), row.size()));
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
    }
    out += line + "\n";
  }
  return out;
}

// The q-quantile (ms) of the queries between two cumulative histograms.
std::optional<double> Quantile(const std::vector<double>& le_ms, const std::vector<double>& counts,
                               double q) {
  if (counts.empty() || counts.back() <= 0) return std::nullopt;
  const double rank = q * counts.back();
  double prev_bound = 0, prev_count = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] >= rank) {
      if (!std::isfinite(le_ms[i])) return prev_bound;
      const double in_bucket = counts[i] - prev_count;
      return prev_bound +
             (le_ms[i] - prev_bound) * (in_bucket > 0 ? (rank - prev_count) / in_bucket : 1);
    }
    prev_bound = le_ms[i];
    prev_count = counts[i];
  }
  return prev_bound;
}

// Summed over models: bounds and cumulative counts, `older` subtracted.
void Histogram(const json& o, const json* older, std::vector<double>& le_ms,
               std::vector<double>& counts) {
  std::map<double, double> sum;
  auto add = [&sum](const json& ov, double sign) {
    for (const json& m : ov.value("models", json::array())) {
      const json& le = m["latency"]["le_ms"];
      const json& c = m["latency"]["cumulative"];
      for (size_t i = 0; i < le.size() && i < c.size(); ++i) {
        const double bound = le[i].is_null() ? INFINITY : le[i].get<double>();
        sum[bound] += sign * c[i].get<double>();
      }
    }
  };
  add(o, 1);
  if (older != nullptr) add(*older, -1);
  for (const auto& [bound, n] : sum) {
    le_ms.push_back(bound);
    counts.push_back(n);
  }
}

std::string Clock(int64_t unix_ms) {
  const std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[16];
  std::strftime(buf, sizeof buf, "%H:%M:%S", &tm);
  return buf;
}

}  // namespace

StatusOr<std::string> FormatStatus(const StatusViews& views, const StatusFormatOptions& options) {
  json o, w, a, prev;
  try {
    o = json::parse(views.overview);
    w = json::parse(views.workers);
    a = json::parse(views.actions);
    if (options.previous_overview) prev = json::parse(*options.previous_overview);
  } catch (const std::exception& e) {
    return Internal(std::string("malformed operator view: ") + e.what());
  }
  const json& c = o["cluster"];
  std::string out = "somm at " + options.url + ": " + Printf("%.0f", Num(c, "workers")) +
                    " worker(s), " + Printf("%.0f", Num(c, "replicas")) + " replica(s), memory " +
                    Bytes(Num(c, "memory_used_bytes")) + " / " +
                    Bytes(Num(c, "memory_budget_bytes")) + ", " +
                    Printf("$%.4f", Num(c, "cost_usd_per_hour")) + "/h, in flight " +
                    Printf("%.0f", Num(o, "inflight_queries")) + "\n";
  // Load: over the refresh interval with --watch, else since start.
  const json totals = o.value("totals", json::object());
  const json* older = prev.is_object() ? &prev : nullptr;
  const json old_totals = older ? older->value("totals", json::object()) : json::object();
  const double dt = older ? (Num(o, "unix_ms") - Num(*older, "unix_ms")) / 1000.0 : 0;
  auto delta = [&](const char* k) { return Num(totals, k) - Num(old_totals, k); };
  std::vector<double> le, counts;
  Histogram(o, older, le, counts);
  const auto p50 = Quantile(le, counts, 0.5), p99 = Quantile(le, counts, 0.99);
  out += older ? "last " + Printf("%.1f", dt) +
                     " s: " + Printf("%.1f q/s", dt > 0 ? delta("success") / dt : 0)
               : "since start: " + Printf("%.0f answered", delta("success"));
  out += ", " + Printf("%.0f failed", delta("failure")) + ", SLO attainment " +
         Percent(delta("slo_met_queries"), delta("slo_queries")) + ", p50 " +
         (p50 ? Printf("%.3g ms", *p50) : std::string("-")) + ", p99 " +
         (p99 ? Printf("%.3g ms", *p99) : std::string("-")) + "\n\n";

  // Models: counters from the overview, load from the workers' groups.
  std::map<std::string, double> rate, replicas;
  std::vector<std::vector<std::string>> workers = {
      {"WORKER", "ZONE", "MEMORY", "QUEUED", "INSTANCES"}};
  for (const json& wk : w.value("workers", json::array())) {
    double used = 0, budget = 0;
    for (const json& d : wk["devices"]) {
      used += Num(d, "used_bytes");
      budget += Num(d, "budget_bytes");
    }
    std::string held;
    for (const json& g : wk["groups"]) {
      const std::string model = g.value("model", "");
      rate[model] += Num(g, "recent_rate_qps");
      replicas[model] += Num(g, "replicas");
      if (!held.empty()) held += ", ";
      held += model + ":" + g.value("variant", "") + "@" + g.value("hardware", "") + " x" +
              Printf("%.0f", Num(g, "replicas")) + (g.value("loading", false) ? " (loading)" : "");
    }
    const std::string zone = wk.value("zone", "");
    workers.push_back({wk.value("worker", ""), zone.empty() ? "-" : zone,
                       Bytes(used) + " / " + Bytes(budget), Printf("%.0f", Num(wk, "queued")),
                       held.empty() ? "-" : held});
  }
  std::vector<std::vector<std::string>> models = {
      {"MODEL", "VERSION", "REPLICAS", "LOAD Q/S", "ANSWERED", "FAILED", "SLO ATTAINMENT"}};
  for (const json& m : o.value("models", json::array())) {
    const std::string name = m.value("model", "");
    if (name.empty()) continue;
    double failed = 0;
    for (const auto& [reason, n] : m["failure_total"].items()) failed += n.get<double>();
    models.push_back({name, m.value("version", ""), Printf("%.0f", replicas[name]),
                      Printf("%.1f", rate[name]), Printf("%.0f", Num(m, "success_total")),
                      Printf("%.0f", failed),
                      Percent(Num(m, "slo_met_queries_total"), Num(m, "slo_queries_total"))});
  }
  out += Table(models) + "\n" + Table(workers) + "\n";
  std::vector<std::vector<std::string>> actions = {{"TIME", "ACTION", "GROUP", "REASON"}};
  for (const json& x : a.value("actions", json::array())) {
    if (actions.size() > options.actions) break;
    actions.push_back({Clock(x.value("unix_ms", int64_t{0})), x.value("kind", ""),
                       x.value("group", "").empty() ? x.value("target", "") : x.value("group", ""),
                       x.value("reason", "")});
  }
  out += actions.size() > 1 ? "RECENT ACTIONS\n" + Table(actions) : "no control action yet\n";
  return out;
}

}  // namespace somm
