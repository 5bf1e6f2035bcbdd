#include "loadgen/bench.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <thread>
#include <tuple>

#include "loadgen/load_driver.h"
#include "loadgen/query_log.h"
#include "loadgen/request_builder.h"
#include "loadgen/schedule.h"
#include "loadgen/trace.h"

namespace somm::loadgen {
namespace {

void SleepUntilNs(int64_t t_ns) {
  std::this_thread::sleep_until(
      std::chrono::steady_clock::time_point(std::chrono::nanoseconds(t_ns)));
}

int64_t SecondsToNs(double s) { return static_cast<int64_t>(s * 1e9); }

std::string Mode(const BenchOptions& o) {
  if (!o.trace.empty()) return "trace";
  if (o.request_rate > 0) return "poisson";
  return "closed";
}

// How one closed or Poisson point is measured.
struct WindowPlan {
  double warmup_s = 0;
  double window_s = 0;
  int max_windows = 0;
  double stability_pct = 0;
  int fixed_windows = 0;  // > 0: exactly this many windows, no early stop
};

// The records that completed before window_end, from the sink and from
// `carry` (drained earlier but finished later); the rest stay in `carry`.
std::vector<QueryRecord> TakeWindow(RecordSink& sink, int64_t window_end,
                                    std::vector<QueryRecord>* carry) {
  std::vector<QueryRecord> records = sink.Drain();
  records.insert(records.end(), std::make_move_iterator(carry->begin()),
                 std::make_move_iterator(carry->end()));
  carry->clear();
  std::vector<QueryRecord> window;
  for (QueryRecord& r : records) {
    (r.done_ns < window_end ? window : *carry).push_back(std::move(r));
  }
  return window;
}

// Measures one point whose load started at origin_ns and is feeding `sink`.
// Records belong to the window in which they completed.
PointResult MeasurePoint(RecordSink& sink, int64_t origin_ns, const WindowPlan& plan,
                         const AggregateOptions& aggregate, const std::string& label,
                         std::ostream& progress) {
  const int64_t window_ns = SecondsToNs(plan.window_s);
  int64_t window_end = origin_ns + SecondsToNs(plan.warmup_s);
  SleepUntilNs(window_end);
  std::vector<QueryRecord> carry;
  TakeWindow(sink, window_end, &carry);  // the warm-up, discarded
  const int limit = plan.fixed_windows > 0 ? plan.fixed_windows : plan.max_windows;
  std::deque<std::vector<QueryRecord>> kept;  // the windows the row reports
  std::vector<WindowSummary> summaries;
  std::string stop_reason = plan.fixed_windows > 0 ? "duration" : "max-windows";
  while (static_cast<int>(summaries.size()) < limit) {
    window_end += window_ns;
    SleepUntilNs(window_end);
    std::vector<QueryRecord> window = TakeWindow(sink, window_end, &carry);
    AggregateOptions a = aggregate;
    a.duration_s = plan.window_s;
    const PointResult w = Aggregate(window, a);
    summaries.push_back(SummarizeWindow(w));
    progress << FormatWindowLine(label, static_cast<int>(summaries.size()), w) << std::endl;
    kept.push_back(std::move(window));
    if (plan.fixed_windows == 0 && kept.size() > static_cast<size_t>(kStabilityWindows)) {
      kept.pop_front();
    }
    if (plan.fixed_windows == 0 && IsStable(summaries, plan.stability_pct)) {
      stop_reason = "stable";
      break;
    }
  }
  std::vector<QueryRecord> reported;
  for (auto& w : kept) reported.insert(reported.end(), w.begin(), w.end());
  AggregateOptions a = aggregate;
  a.duration_s = plan.window_s * static_cast<double>(kept.size());
  PointResult result = Aggregate(reported, a);
  result.windows = static_cast<int>(summaries.size());
  result.stable = IsStable(summaries, plan.stability_pct);
  result.stop_reason = stop_reason;
  return result;
}

// The requests a run sends, one per model (trace rows add their parameters
// to copies; see PlanTrace).
class RequestSet {
 public:
  static StatusOr<RequestSet> Build(const BenchOptions& o, const std::vector<std::string>& models,
                                    BenchClient& client) {
    RequestSet set;
    std::optional<InferenceRequest> from_file;
    if (!o.input.empty()) {
      SOMM_ASSIGN_OR_RETURN(from_file, LoadRequestFile(o.input));
      SOMM_RETURN_IF_ERROR(ReplicateBatch(o.batch_size, &*from_file));
    }
    std::optional<std::string> bytes;
    if (!o.input_bytes.empty()) {
      SOMM_ASSIGN_OR_RETURN(bytes, ReadBytesFile(o.input_bytes));
    }
    for (const std::string& model : models) {
      InferenceRequest request;
      if (from_file) {
        request = *from_file;
      } else if (bytes) {
        StatusOr<ModelMetadata> md = client.Metadata(model);
        if (!md.ok()) {
          return Status(md.status().code(), "cannot fill --input-bytes for model '" + model +
                                                "' without its metadata (" + md.status().message() +
                                                ")");
        }
        SOMM_ASSIGN_OR_RETURN(request, BytesRequest(*md, *bytes, o.batch_size));
      } else {
        StatusOr<ModelMetadata> md = client.Metadata(model);
        if (!md.ok()) {
          return Status(md.status().code(), "cannot build synthetic inputs for model '" + model +
                                                "' without its metadata (" + md.status().message() +
                                                "); pass --input FILE.json");
        }
        SOMM_ASSIGN_OR_RETURN(request, SyntheticRequest(*md, o.batch_size, o.seed));
      }
      request.model_name = model;
      // A trace row's own SLO replaces it (ApplyTraceQuery).
      if (o.send_slo) request.parameters["latency_slo_ms"] = o.slo_ms;
      set.by_model_.emplace(model, std::move(request));
    }
    return set;
  }

  const InferenceRequest& For(const std::string& model) const { return by_model_.at(model); }
  const std::map<std::string, InferenceRequest>& all() const { return by_model_; }

 private:
  std::map<std::string, InferenceRequest> by_model_;
};

std::vector<std::string> ModelsOf(const BenchOptions& o, const Trace* trace) {
  std::vector<std::string> models{o.model};
  if (trace == nullptr) return models;
  for (const TraceQuery& q : trace->queries) {
    if (!q.model.empty() && std::find(models.begin(), models.end(), q.model) == models.end()) {
      models.push_back(q.model);
    }
  }
  return models;
}

// Checks the server, builds every request and sends one probe query per
// model: a wrong model name or input is one clear error, not a table of
// NOT_FOUND. The control connection closes on return: a server with a
// thread per connection (the FastAPI peer's uvicorn workers, cpp-httplib)
// must not hold a thread for it while the load runs.
StatusOr<RequestSet> PrepareRequests(const BenchOptions& o, const Trace* trace,
                                     ClientFactory& factory) {
  SOMM_ASSIGN_OR_RETURN(std::unique_ptr<BenchClient> control, factory.NewClient());
  // Reachable, but not necessarily ready as a whole: under Triton's strict
  // readiness a server with one model not loaded answers not ready while
  // it serves the others. The probe query below decides for the models
  // measured, as perf_analyzer's first query does.
  SOMM_RETURN_IF_ERROR(control->ServerReady().status());
  SOMM_ASSIGN_OR_RETURN(RequestSet requests, RequestSet::Build(o, ModelsOf(o, trace), *control));
  for (const auto& [model, request] : requests.all()) {
    StatusOr<InferenceResponse> probe = control->Infer(request);
    if (!probe.ok()) {
      return Status(probe.status().code(),
                    "probe query to model '" + model + "' failed: " + probe.status().message());
    }
  }
  return requests;
}

// One shared request per distinct (model, parameters) of the trace, so a
// long trace of large inputs does not hold a copy per row. std::map nodes do
// not move, so the pointers in the plan stay valid.
using TraceKey = std::tuple<std::string, std::string, std::optional<double>, std::optional<double>,
                            std::optional<double>>;

std::vector<PlannedQuery> PlanTrace(const Trace& trace, const BenchOptions& o,
                                    const RequestSet& requests,
                                    std::map<TraceKey, InferenceRequest>* shared) {
  std::vector<PlannedQuery> plan;
  plan.reserve(trace.queries.size());
  for (const TraceQuery& q : trace.queries) {
    const std::string& model = q.model.empty() ? o.model : q.model;
    const TraceKey key{model, q.task, q.latency_slo_ms, q.min_accuracy, q.max_cost};
    auto it = shared->find(key);
    if (it == shared->end()) {
      InferenceRequest request = requests.For(model);
      ApplyTraceQuery(q, &request);
      it = shared->emplace(key, std::move(request)).first;
    }
    const auto offset_ns = static_cast<int64_t>(q.timestamp_ms * 1e6 / o.time_scale);
    plan.push_back(PlannedQuery{offset_ns, &it->second, q.latency_slo_ms});
  }
  return plan;
}

// Writes --query-log and --timeline (query_log.h) of a finished replay.
Status WriteReplayLogs(const BenchOptions& o, const std::vector<QueryRecord>& records,
                       int64_t origin_ns, std::optional<double> default_slo_ms) {
  auto write = [](const std::string& path, const char* flag, auto&& fill) -> Status {
    if (path.empty()) return Status::Ok();
    std::ofstream out(path);
    fill(out);
    out.flush();
    if (!out) return Internal(std::string("cannot write ") + flag + " file '" + path + "'");
    return Status::Ok();
  };
  SOMM_RETURN_IF_ERROR(write(o.query_log_path, "--query-log-file", [&](std::ostream& out) {
    WriteQueryLogCsv(records, origin_ns, default_slo_ms, out);
  }));
  return write(o.timeline_path, "--timeline-file", [&](std::ostream& out) {
    WriteTimelineCsv(BuildTimeline(records, origin_ns, default_slo_ms), out);
  });
}

// How often a trace replay reports progress: a 10-minute replay should not
// run silent.
constexpr double kTraceProgressS = 10;

StatusOr<PointResult> ReplayTrace(const BenchOptions& o, const Trace& trace,
                                  const RequestSet& requests, const AggregateOptions& aggregate,
                                  ClientFactory& factory, std::ostream& progress) {
  if (o.warmup_s > 0) {
    std::vector<const InferenceRequest*> warm;
    for (const auto& [model, request] : requests.all()) warm.push_back(&request);
    RecordSink discard;
    ClosedLoop loop(&factory, warm, 1, &discard);
    SOMM_RETURN_IF_ERROR(loop.Start());
    SleepUntilNs(NowNs() + SecondsToNs(o.warmup_s));
    loop.Stop();
  }
  std::map<TraceKey, InferenceRequest> shared;
  const std::vector<PlannedQuery> plan = PlanTrace(trace, o, requests, &shared);
  if (plan.empty()) return InvalidArgument("trace '" + o.trace + "' has no queries");
  // Read by this thread for progress while the dispatcher advances it.
  std::atomic<size_t> next{0};
  RecordSink sink;
  OpenLoop loop(
      &factory,
      [&]() -> std::optional<PlannedQuery> {
        const size_t i = next.load();
        if (i == plan.size()) return std::nullopt;
        next.store(i + 1);
        return plan[i];
      },
      o.senders, &sink);
  progress << "trace: replaying " << plan.size() << " queries over "
           << static_cast<double>(plan.back().offset_ns) / 1e9 << " s" << std::endl;
  SOMM_RETURN_IF_ERROR(loop.Start());
  {
    // The origin on the wall clock, so that tools can line the query log up
    // with what they sampled elsewhere (bench/managed.sh reads this line).
    const double now_unix_s =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    char line[64];
    std::snprintf(line, sizeof line, "trace: origin unix_s=%.3f",
                  now_unix_s - static_cast<double>(NowNs() - loop.origin_ns()) / 1e9);
    progress << line << std::endl;
  }
  std::vector<QueryRecord> records;
  records.reserve(plan.size());
  const int64_t end_ns = loop.origin_ns() + plan.back().offset_ns;
  int64_t last_tick_ns = loop.origin_ns();
  for (int tick = 1; last_tick_ns < end_ns; ++tick) {
    const int64_t tick_ns = std::min(last_tick_ns + SecondsToNs(kTraceProgressS), end_ns);
    SleepUntilNs(tick_ns);
    std::vector<QueryRecord> done = sink.Drain();
    AggregateOptions a = aggregate;
    a.duration_s = static_cast<double>(tick_ns - last_tick_ns) / 1e9;
    const PointResult w = Aggregate(done, a);
    char label[96];
    std::snprintf(label, sizeof label, "trace %.0f s (%zu/%zu due)",
                  static_cast<double>(tick_ns - loop.origin_ns()) / 1e9, next.load(), plan.size());
    std::string line = FormatWindowLine(label, tick, w);
    if (w.slo_attainment) {
      char slo[48];
      std::snprintf(slo, sizeof slo, ", SLO met %.2f%%", *w.slo_attainment * 100);
      line += slo;
    }
    progress << line << std::endl;
    records.insert(records.end(), std::make_move_iterator(done.begin()),
                   std::make_move_iterator(done.end()));
    last_tick_ns = tick_ns;
  }
  loop.WaitUntilDone();
  std::vector<QueryRecord> rest = sink.Drain();
  records.insert(records.end(), std::make_move_iterator(rest.begin()),
                 std::make_move_iterator(rest.end()));
  int64_t last_ns = loop.origin_ns() + plan.back().offset_ns;
  for (const QueryRecord& r : records) last_ns = std::max(last_ns, r.done_ns);
  AggregateOptions a = aggregate;
  a.duration_s = static_cast<double>(last_ns - loop.origin_ns()) / 1e9;
  PointResult result = Aggregate(records, a);
  result.windows = 1;
  result.stop_reason = "trace";
  SOMM_RETURN_IF_ERROR(WriteReplayLogs(o, records, loop.origin_ns(), aggregate.default_slo_ms));
  return result;
}

}  // namespace

Status ValidateBenchOptions(const BenchOptions& o) {
  if (o.model.empty()) return InvalidArgument("MODEL is required");
  const int modes =
      (o.concurrency > 0) + !o.concurrency_range.empty() + (o.request_rate > 0) + !o.trace.empty();
  if (modes > 1) {
    return InvalidArgument(
        "give at most one of --concurrency, --concurrency-range, --request-rate, --trace");
  }
  if (o.concurrency < 0) return InvalidArgument("--concurrency must be positive");
  if (o.request_rate < 0) return InvalidArgument("--request-rate must be positive");
  if (o.duration_s < 0 || (o.duration_s > 0 && o.request_rate <= 0)) {
    return InvalidArgument("--duration applies to --request-rate runs and must be positive");
  }
  if (o.warmup_s < 0) return InvalidArgument("--warmup must not be negative");
  if (o.window_s <= 0) return InvalidArgument("--window must be positive");
  if (o.stability_pct <= 0) return InvalidArgument("--stability-pct must be positive");
  if (o.max_windows < 1) return InvalidArgument("--max-windows must be at least 1");
  if (o.slo_ms < 0) return InvalidArgument("--slo must not be negative");
  if (o.send_slo && o.slo_ms <= 0) return InvalidArgument("--send-slo needs --slo");
  if (o.batch_size < 1) return InvalidArgument("--batch-size must be at least 1");
  if (o.senders < 1) return InvalidArgument("--senders must be at least 1");
  if (o.time_scale <= 0) return InvalidArgument("--time-scale must be positive");
  if ((!o.query_log_path.empty() || !o.timeline_path.empty()) && o.trace.empty()) {
    return InvalidArgument("--query-log-file and --timeline-file apply to --trace runs");
  }
  if (!o.concurrency_range.empty()) {
    SOMM_RETURN_IF_ERROR(ParseConcurrencyRange(o.concurrency_range).status());
  }
  if (!o.input.empty() && !o.input_bytes.empty()) {
    return InvalidArgument("give at most one of --input and --input-bytes");
  }
  return Status::Ok();
}

StatusOr<BenchReport> MeasureBench(const BenchOptions& o, ClientFactory& factory,
                                   std::ostream& progress) {
  SOMM_RETURN_IF_ERROR(ValidateBenchOptions(o));
  std::optional<Trace> trace;
  if (!o.trace.empty()) {
    SOMM_ASSIGN_OR_RETURN(trace, LoadTraceCsv(o.trace));
  }

  SOMM_ASSIGN_OR_RETURN(const RequestSet requests,
                        PrepareRequests(o, trace ? &*trace : nullptr, factory));

  BenchReport report;
  report.target = o.label.empty() ? o.url : o.label;
  report.protocol = o.protocol;
  report.model = o.model;
  report.mode = Mode(o);
  report.batch_size = o.batch_size;
  AggregateOptions aggregate;
  aggregate.samples_per_query = SamplesPerQuery(requests.For(o.model));
  if (o.slo_ms > 0) aggregate.default_slo_ms = o.slo_ms;
  WindowPlan plan{o.warmup_s, o.window_s, o.max_windows, o.stability_pct, 0};

  if (report.mode == "trace") {
    SOMM_ASSIGN_OR_RETURN(PointResult point,
                          ReplayTrace(o, *trace, requests, aggregate, factory, progress));
    report.points.push_back(std::move(point));
  } else if (report.mode == "poisson") {
    if (o.duration_s > 0) {
      plan.fixed_windows = std::max(1, static_cast<int>(std::lround(o.duration_s / o.window_s)));
      plan.window_s = o.duration_s / plan.fixed_windows;
    }
    PoissonArrivals arrivals(o.request_rate, o.seed);
    const InferenceRequest* request = &requests.For(o.model);
    RecordSink sink;
    OpenLoop loop(
        &factory,
        [&]() -> std::optional<PlannedQuery> {
          return PlannedQuery{arrivals.NextOffsetNs(), request, std::nullopt};
        },
        o.senders, &sink);
    SOMM_RETURN_IF_ERROR(loop.Start());
    PointResult label;
    label.request_rate = o.request_rate;
    PointResult point =
        MeasurePoint(sink, loop.origin_ns(), plan, aggregate, PointLabel(label), progress);
    loop.Stop();
    point.request_rate = o.request_rate;
    report.points.push_back(std::move(point));
  } else {
    std::vector<int> points{std::max(o.concurrency, 1)};
    if (!o.concurrency_range.empty()) {
      SOMM_ASSIGN_OR_RETURN(points, ParseConcurrencyRange(o.concurrency_range));
    }
    for (const int c : points) {
      RecordSink sink;
      ClosedLoop loop(&factory, {&requests.For(o.model)}, c, &sink);
      SOMM_RETURN_IF_ERROR(loop.Start());
      PointResult point = MeasurePoint(sink, NowNs(), plan, aggregate,
                                       "concurrency " + std::to_string(c), progress);
      loop.Stop();
      point.concurrency = c;
      report.points.push_back(std::move(point));
    }
  }
  return report;
}

int RunBench(const BenchOptions& o) {
  auto fail = [](const Status& s) {
    std::fprintf(stderr, "error: %s\n", s.ToString().c_str());
    return 1;
  };
  if (Status s = ValidateBenchOptions(o); !s.ok()) return fail(s);
  StatusOr<std::unique_ptr<ClientFactory>> factory =
      MakeOipClientFactory(OipTarget{o.url, o.protocol, o.binary || !o.input_bytes.empty(),
                                     o.api_key, o.tls});
  if (!factory.ok()) return fail(factory.status());
  StatusOr<BenchReport> report = MeasureBench(o, **factory, std::cerr);
  if (!report.ok()) return fail(report.status());
  std::fputs(FormatReportTable(*report).c_str(), stdout);
  if (!o.json_path.empty()) {
    std::ofstream out(o.json_path);
    out << ReportToJson(*report).dump(2) << "\n";
    if (!out) return fail(Internal("cannot write --json-file '" + o.json_path + "'"));
  }
  return 0;
}

}  // namespace somm::loadgen
