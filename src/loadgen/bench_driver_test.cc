// The load loops and MeasureBench against an in-memory OIP twin. Assertions
// are on what was sent and recorded, never on how fast: the only timing facts
// used are lower bounds (a sleep lasts at least as long as asked).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "loadgen/bench.h"
#include "loadgen/load_driver.h"

namespace somm::loadgen {
namespace {

using ::testing::HasSubstr;

// What every fake client shares: its behaviour and what it saw.
struct FakeServer {
  std::chrono::microseconds service_time{200};
  bool with_timing = true;
  std::string known_model_prefix = "digits";
  std::mutex mu;
  std::map<std::string, int> queries_by_model;  // guarded by mu
  std::map<double, int> queries_by_slo;         // guarded by mu
  std::atomic<int> in_flight{0};
  std::atomic<int> max_in_flight{0};
};

class FakeClient : public BenchClient {
 public:
  explicit FakeClient(FakeServer* server) : server_(server) {}

  StatusOr<InferenceResponse> Infer(const InferenceRequest& request) override {
    if (!request.model_name.starts_with(server_->known_model_prefix)) {
      return NotFound("unknown model '" + request.model_name + "'");
    }
    const int now = ++server_->in_flight;
    int seen = server_->max_in_flight.load();
    while (now > seen && !server_->max_in_flight.compare_exchange_weak(seen, now)) {
    }
    std::this_thread::sleep_for(server_->service_time);
    --server_->in_flight;
    {
      std::lock_guard<std::mutex> lock(server_->mu);
      ++server_->queries_by_model[request.model_name];
      if (auto it = request.parameters.find("latency_slo_ms"); it != request.parameters.end()) {
        ++server_->queries_by_slo[std::get<double>(it->second)];
      }
    }
    InferenceResponse response;
    response.model_name = request.model_name;
    if (server_->with_timing) {
      response.parameters = {{"somm_queue_us", int64_t{10}},
                             {"somm_compute_us", int64_t{150}},
                             {"somm_server_us", int64_t{180}}};
    }
    return response;
  }
  StatusOr<bool> ServerReady() override { return true; }
  StatusOr<ModelMetadata> Metadata(const std::string& model) override {
    ModelMetadata md;
    md.name = model;
    md.inputs = {{"pixels", "FP32", {-1, 4}}};
    return md;
  }

 private:
  FakeServer* server_;
};

class FakeFactory : public ClientFactory {
 public:
  explicit FakeFactory(FakeServer* server) : server_(server) {}
  StatusOr<std::unique_ptr<BenchClient>> NewClient() override {
    return std::unique_ptr<BenchClient>(std::make_unique<FakeClient>(server_));
  }

 private:
  FakeServer* server_;
};

InferenceRequest Request(const std::string& model) {
  InferenceRequest r;
  r.model_name = model;
  r.inputs.push_back(Tensor{"pixels", DataType::kFp32, {1, 4}, std::string(16, '\0')});
  return r;
}

TEST(ClosedLoopTest, KeepsExactlyNQueriesInFlight) {
  FakeServer server;
  FakeFactory factory(&server);
  const InferenceRequest request = Request("digits-mlp");
  RecordSink sink;
  ClosedLoop loop(&factory, {&request}, 3, &sink);
  ASSERT_TRUE(loop.Start().ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  loop.Stop();
  const auto records = sink.Drain();
  EXPECT_GT(records.size(), 3u);
  EXPECT_LE(server.max_in_flight.load(), 3);
  for (const QueryRecord& r : records) {
    EXPECT_EQ(r.code, StatusCode::kOk);
    EXPECT_EQ(r.scheduled_ns, r.sent_ns);
    EXPECT_GE(r.done_ns - r.sent_ns, 200000);
    EXPECT_EQ(r.server_us, 180);
  }
}

TEST(OpenLoopTest, BusySendersDoNotHideQueueingDelay) {
  // Ten queries all due at once, one sender, 5 ms each: the last one waits
  // for nine others, and its latency must say so.
  FakeServer server;
  server.service_time = std::chrono::milliseconds(5);
  FakeFactory factory(&server);
  const InferenceRequest request = Request("digits-mlp");
  int next = 0;
  RecordSink sink;
  OpenLoop loop(
      &factory,
      [&]() -> std::optional<PlannedQuery> {
        if (next == 10) return std::nullopt;
        ++next;
        return PlannedQuery{0, &request, std::nullopt};
      },
      1, &sink);
  ASSERT_TRUE(loop.Start().ok());
  loop.WaitUntilDone();
  auto records = sink.Drain();
  ASSERT_EQ(records.size(), 10u);
  int64_t worst = 0;
  for (const QueryRecord& r : records) {
    EXPECT_EQ(r.scheduled_ns, loop.origin_ns());
    EXPECT_GE(r.sent_ns, r.scheduled_ns);
    worst = std::max(worst, r.LatencyUs());
  }
  EXPECT_GE(worst, 10 * 5000);
}

TEST(OpenLoopTest, ReleasesQueriesNoEarlierThanPlanned) {
  FakeServer server;
  FakeFactory factory(&server);
  const InferenceRequest request = Request("digits-mlp");
  std::vector<PlannedQuery> plan;
  for (int i = 0; i < 20; ++i) plan.push_back(PlannedQuery{i * 1000000, &request, 5.0});
  size_t next = 0;
  RecordSink sink;
  OpenLoop loop(
      &factory,
      [&]() -> std::optional<PlannedQuery> {
        return next < plan.size() ? std::optional(plan[next++]) : std::nullopt;
      },
      4, &sink);
  ASSERT_TRUE(loop.Start().ok());
  loop.WaitUntilDone();
  auto records = sink.Drain();
  ASSERT_EQ(records.size(), 20u);
  std::sort(records.begin(), records.end(),
            [](const auto& a, const auto& b) { return a.scheduled_ns < b.scheduled_ns; });
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_EQ(records[i].scheduled_ns - loop.origin_ns(), static_cast<int64_t>(i) * 1000000);
    EXPECT_GE(records[i].sent_ns, records[i].scheduled_ns);
    EXPECT_EQ(records[i].slo_ms, 5.0);
  }
}

TEST(OpenLoopTest, StopDropsWhatIsStillPlanned) {
  FakeServer server;
  FakeFactory factory(&server);
  const InferenceRequest request = Request("digits-mlp");
  int64_t offset = 0;
  RecordSink sink;
  OpenLoop loop(
      &factory,
      [&]() -> std::optional<PlannedQuery> {
        offset += 1000000;  // an endless schedule, 1000/s
        return PlannedQuery{offset, &request, std::nullopt};
      },
      2, &sink);
  ASSERT_TRUE(loop.Start().ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  loop.Stop();  // must return although the schedule never ends
  EXPECT_LT(sink.Drain().size(), 1000u);
}

BenchOptions FastOptions() {
  BenchOptions o;
  o.model = "digits-mlp";
  o.url = "fake:1";
  o.warmup_s = 0.01;
  o.window_s = 0.03;
  o.max_windows = 4;
  o.stability_pct = 50;
  return o;
}

TEST(MeasureBenchTest, ClosedSweepGivesOnePointPerConcurrency) {
  FakeServer server;
  FakeFactory factory(&server);
  BenchOptions o = FastOptions();
  o.concurrency_range = "1:4:2";
  o.batch_size = 2;
  std::ostringstream progress;
  auto report = MeasureBench(o, factory, progress);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->mode, "closed");
  EXPECT_EQ(report->target, "fake:1");
  ASSERT_EQ(report->points.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const PointResult& p = report->points[i];
    EXPECT_EQ(p.concurrency, 1 << i);
    EXPECT_GE(p.windows, 1);
    EXPECT_LE(p.windows, 4);
    EXPECT_EQ(p.stable, p.stop_reason == "stable");
    EXPECT_GT(p.count, 0);
    EXPECT_DOUBLE_EQ(p.throughput_sps, 2 * p.throughput_qps);
    ASSERT_TRUE(p.server_us.has_value());
    EXPECT_EQ(p.server_us->overhead_p50, 20);
  }
  EXPECT_THAT(progress.str(), HasSubstr("concurrency 4, window 1"));
}

TEST(MeasureBenchTest, PoissonWithDurationMeasuresFixedWindows) {
  FakeServer server;
  server.with_timing = false;
  FakeFactory factory(&server);
  BenchOptions o = FastOptions();
  o.request_rate = 500;
  o.duration_s = 0.1;
  o.window_s = 0.05;
  o.slo_ms = 1000;
  std::ostringstream progress;
  auto report = MeasureBench(o, factory, progress);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_EQ(report->points.size(), 1u);
  const PointResult& p = report->points[0];
  EXPECT_EQ(report->mode, "poisson");
  EXPECT_EQ(p.request_rate, 500);
  EXPECT_FALSE(p.concurrency.has_value());
  EXPECT_EQ(p.windows, 2);
  EXPECT_EQ(p.stop_reason, "duration");
  EXPECT_DOUBLE_EQ(p.duration_s, 0.1);
  EXPECT_FALSE(p.server_us.has_value());
  EXPECT_TRUE(p.slo_attainment.has_value());
}

TEST(MeasureBenchTest, TraceReplaysEveryRowWithItsModelAndSlo) {
  const std::string path = ::testing::TempDir() + "/bench_driver_trace.csv";
  {
    std::ofstream out(path);
    out << "timestamp_ms,model,latency_slo_ms\n";
    for (int i = 0; i < 30; ++i) {
      out << i * 0.5 << "," << (i % 3 == 0 ? "digits-cnn" : "") << "," << (i % 2 ? "7" : "")
          << "\n";
    }
  }
  FakeServer server;
  FakeFactory factory(&server);
  BenchOptions o = FastOptions();
  o.trace = path;
  o.warmup_s = 0;
  o.time_scale = 2;
  o.senders = 4;
  std::ostringstream progress;
  auto report = MeasureBench(o, factory, progress);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_EQ(report->points.size(), 1u);
  const PointResult& p = report->points[0];
  EXPECT_EQ(report->mode, "trace");
  EXPECT_EQ(p.count, 30);
  EXPECT_EQ(p.stop_reason, "trace");
  EXPECT_TRUE(p.slo_attainment.has_value());  // 15 rows carry an SLO
  std::lock_guard<std::mutex> lock(server.mu);
  // One probe per model, then the trace: 10 rows name digits-cnn.
  EXPECT_EQ(server.queries_by_model["digits-cnn"], 1 + 10);
  EXPECT_EQ(server.queries_by_model["digits-mlp"], 1 + 20);
  EXPECT_EQ(server.queries_by_slo[7.0], 15);
  std::remove(path.c_str());
}

// Lines of a file, the header first.
std::vector<std::string> ReadLines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(MeasureBenchTest, TraceWritesQueryLogAndTimeline) {
  const std::string dir = ::testing::TempDir();
  const std::string trace = dir + "/bench_driver_log_trace.csv";
  {
    std::ofstream out(trace);
    out << "timestamp_ms,model,latency_slo_ms\n";
    // Seconds 0 and 1 (at time scale 10: 0 to 0.2 s of wall time).
    for (int i = 0; i < 20; ++i) out << i * 100 << "," << (i % 2 ? "digits-cnn" : "") << ",50\n";
  }
  FakeServer server;
  FakeFactory factory(&server);
  BenchOptions o = FastOptions();
  o.trace = trace;
  o.warmup_s = 0;
  o.time_scale = 10;
  o.senders = 4;
  o.query_log_path = dir + "/bench_driver_queries.csv";
  o.timeline_path = dir + "/bench_driver_timeline.csv";
  std::ostringstream progress;
  auto report = MeasureBench(o, factory, progress);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_THAT(progress.str(), HasSubstr("/20 due), window 1: "));

  const std::vector<std::string> queries = ReadLines(o.query_log_path);
  ASSERT_EQ(queries.size(), 21u);
  EXPECT_THAT(queries[0], HasSubstr("scheduled_ms,sent_ms,done_ms,latency_ms,model,slo_ms,code"));
  // Offsets are the trace's, divided by the time scale; server timing kept.
  EXPECT_THAT(queries[1], ::testing::StartsWith("0.000,"));
  EXPECT_THAT(queries[1], HasSubstr(",digits-mlp,50,OK,10,150,180,"));
  EXPECT_THAT(queries[2], ::testing::StartsWith("10.000,"));
  EXPECT_THAT(queries[2], HasSubstr(",digits-cnn,50,OK,"));

  // Replayed 10x faster, all 20 rows fall in wall-clock second 0.
  const std::vector<std::string> timeline = ReadLines(o.timeline_path);
  ASSERT_EQ(timeline.size(), 3u);
  EXPECT_EQ(timeline[0], "second,model,sent,ok,slo_met,late,rejected,expired,failed,p50_ms,p99_ms");
  EXPECT_THAT(timeline[1], ::testing::StartsWith("0,digits-cnn,10,10,"));
  EXPECT_THAT(timeline[2], ::testing::StartsWith("0,digits-mlp,10,10,"));
  for (const std::string& f : {trace, o.query_log_path, o.timeline_path}) std::remove(f.c_str());
}

TEST(MeasureBenchTest, SendSloPutsTheSloInEveryQueryAndATraceRowsOwnWins) {
  FakeServer server;
  FakeFactory factory(&server);
  BenchOptions o = FastOptions();
  o.concurrency = 2;
  o.slo_ms = 25;
  o.send_slo = true;
  std::ostringstream progress;
  auto report = MeasureBench(o, factory, progress);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  {
    std::lock_guard<std::mutex> lock(server.mu);
    EXPECT_EQ(server.queries_by_slo[25.0], server.queries_by_model["digits-mlp"]);
    EXPECT_GT(server.queries_by_slo[25.0], 1);
    server.queries_by_slo.clear();
    server.queries_by_model.clear();
  }
  // Without --send-slo the SLO only judges the answers.
  o.send_slo = false;
  report = MeasureBench(o, factory, progress);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  {
    std::lock_guard<std::mutex> lock(server.mu);
    EXPECT_TRUE(server.queries_by_slo.empty());
    EXPECT_GT(server.queries_by_model["digits-mlp"], 1);
  }
  // A trace row's own SLO wins; rows without one carry --slo-ms.
  const std::string path = ::testing::TempDir() + "/bench_driver_send_slo.csv";
  {
    std::ofstream out(path);
    out << "timestamp_ms,latency_slo_ms\n";
    for (int i = 0; i < 10; ++i) out << i * 0.5 << "," << (i % 2 ? "7" : "") << "\n";
  }
  BenchOptions t = FastOptions();
  t.trace = path;
  t.warmup_s = 0;
  t.slo_ms = 25;
  t.send_slo = true;
  {
    std::lock_guard<std::mutex> lock(server.mu);
    server.queries_by_slo.clear();
  }
  report = MeasureBench(t, factory, progress);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  std::lock_guard<std::mutex> lock(server.mu);
  EXPECT_EQ(server.queries_by_slo[7.0], 5);
  EXPECT_EQ(server.queries_by_slo[25.0], 1 + 5);  // the probe, then the rows without one
  std::remove(path.c_str());
}

TEST(MeasureBenchTest, SendSloNeedsAnSlo) {
  BenchOptions o = FastOptions();
  o.send_slo = true;
  EXPECT_EQ(ValidateBenchOptions(o).message(), "--send-slo needs --slo");
}

TEST(MeasureBenchTest, QueryLogNeedsATrace) {
  BenchOptions o = FastOptions();
  o.timeline_path = "timeline.csv";  // never written: validation fails first
  EXPECT_THAT(ValidateBenchOptions(o).message(), HasSubstr("apply to --trace runs"));
}

TEST(MeasureBenchTest, UnknownModelFailsAtTheProbe) {
  FakeServer server;
  FakeFactory factory(&server);
  BenchOptions o = FastOptions();
  o.model = "resnet";
  std::ostringstream progress;
  auto report = MeasureBench(o, factory, progress);
  EXPECT_EQ(report.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(report.status().message(), HasSubstr("probe query to model 'resnet'"));
}

TEST(MeasureBenchTest, RejectsConflictingLoads) {
  BenchOptions o = FastOptions();
  o.concurrency = 2;
  o.request_rate = 100;
  EXPECT_THAT(ValidateBenchOptions(o).message(), HasSubstr("at most one"));
  o.request_rate = 0;
  o.duration_s = 5;
  EXPECT_THAT(ValidateBenchOptions(o).message(), HasSubstr("--duration applies to --request-rate runs"));
}

}  // namespace
}  // namespace somm::loadgen
