// The Redis cluster-state store against a real redis-server on loopback,
// started by the test (scripts/setup installs redis-server).
#include "redis/redis_cluster_state_store.h"

#include "cluster/cluster_state_json.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <thread>

namespace somm::redis {
namespace {

using namespace std::chrono_literals;
using cluster::WorkerReport;

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

// A redis-server process of its own, soft state only (no persistence).
class RedisServer {
 public:
  explicit RedisServer(int port) : port_(port) { Start(); }
  ~RedisServer() { Kill(); }
  void Start() {
    pid_ = fork();
    if (pid_ == 0) {
      // Dies with the test, whatever kills it, and never holds the test's
      // output open (CTest waits for that to close).
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      const int devnull = open("/dev/null", O_WRONLY);
      dup2(devnull, STDOUT_FILENO);
      dup2(devnull, STDERR_FILENO);
      const std::string port = std::to_string(port_);
      execlp("redis-server", "redis-server", "--port", port.c_str(), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--loglevel", "warning", nullptr);
      _exit(127);
    }
  }
  // SIGKILL: what a crash or an OOM kill does.
  void Kill() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  RedisEndpoint endpoint() const { return RedisEndpoint{"127.0.0.1", port_, 500ms}; }
  // Waits (bounded) until it answers PING.
  bool WaitReady() {
    RedisConnection c(endpoint());
    for (int i = 0; i < 200; ++i) {
      auto r = c.Command({"PING"});
      if (r.ok() && r->str == "PONG") return true;
      std::this_thread::sleep_for(25ms);
    }
    return false;
  }

 private:
  int port_;
  pid_t pid_ = -1;
};

// Polls `done` until it holds; false after 10 s.
bool Eventually(const std::function<bool()>& done) {
  for (int i = 0; i < 1000; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

WorkerReport Report(const std::string& worker, const std::string& incarnation, int64_t sequence,
                    const std::string& model = "digits-mlp") {
  WorkerReport r;
  r.worker = worker;
  r.incarnation = incarnation;
  r.address = "127.0.0.1:9" + std::to_string(sequence % 1000);
  r.sequence = sequence;
  r.devices.push_back(cluster::DeviceState{"cpu", int64_t{1} << 30, 0, 2, worker});
  cluster::GroupState g;
  g.model = model;
  g.variant = "ts-fp32";
  g.worker = worker;
  g.device = "cpu";
  g.instances.push_back(cluster::InstanceState{1, 0, {}});
  r.groups.push_back(g);
  return r;
}

class RedisStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<RedisServer>(FreePort());
    ASSERT_TRUE(server_->WaitReady()) << "redis-server did not start (is it installed? scripts/setup)";
  }
  std::unique_ptr<RedisClusterStateStore> Open(std::chrono::milliseconds lease = 3000ms,
                                               bool watch = true,
                                               std::chrono::milliseconds full_repoll = 10000ms,
                                               std::chrono::milliseconds repoll = 100ms) {
    RedisStoreOptions o;
    o.endpoint = server_->endpoint();
    o.lease = lease;
    o.repoll = repoll;
    o.full_repoll = full_repoll;
    o.watch = watch;
    auto s = RedisClusterStateStore::Open(o);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(s).value() : nullptr;
  }
  static bool Has(const RedisClusterStateStore& s, const std::string& worker) {
    const auto snapshot = s.Read();
    for (const auto& g : snapshot->groups) {
      if (g.worker == worker) return true;
    }
    return false;
  }
  std::unique_ptr<RedisServer> server_;
};

TEST_F(RedisStoreTest, ReportWrittenByOneProcessShowsInAnothersView) {
  auto writer = Open();
  auto reader = Open();
  const uint64_t before = reader->generation();
  ASSERT_TRUE(writer->WriteWorker(Report("w1", NewIncarnation(), 1)).ok());
  ASSERT_TRUE(Eventually([&] { return Has(*reader, "w1"); }));
  EXPECT_GT(reader->generation(), before);
  const auto state = reader->Read();
  ASSERT_EQ(state->devices.size(), 1u);
  EXPECT_EQ(state->devices[0].worker, "w1");
  EXPECT_EQ(reader->Workers().at("w1").address, "127.0.0.1:91");
}

TEST_F(RedisStoreTest, PublishedModelEntryTravelsWithItsCatalogGenerationAndLeavesWithIt) {
  auto leader = Open();
  auto router = Open();
  ASSERT_TRUE(leader->PublishModel("digits-mlp", "g1", R"({"entry": 1})").ok());
  ASSERT_TRUE(Eventually([&] { return router->ReadCatalog().models.count("digits-mlp") == 1; }));
  EXPECT_EQ(router->ReadCatalog().models.at("digits-mlp"), "g1");
  auto entry = router->PublishedModel("digits-mlp");
  ASSERT_TRUE(entry.ok()) << entry.status().ToString();
  EXPECT_EQ(*entry, R"({"entry": 1})");
  // A new generation without an entry keeps the one there (a re-publish
  // after a catalog check); a new entry replaces it.
  ASSERT_TRUE(leader->PublishModel("digits-mlp", "g2", "").ok());
  EXPECT_EQ(router->PublishedModel("digits-mlp").value(), R"({"entry": 1})");
  ASSERT_TRUE(leader->PublishModel("digits-mlp", "g3", R"({"entry": 3})").ok());
  EXPECT_EQ(router->PublishedModel("digits-mlp").value(), R"({"entry": 3})");
  ASSERT_TRUE(leader->RemoveModel("digits-mlp").ok());
  auto gone = router->PublishedModel("digits-mlp");
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.status().code(), StatusCode::kNotFound);
  EXPECT_NE(gone.status().message().find("digits-mlp"), std::string::npos);
}

// The complete mark is part of the catalog: a reader sees it with the
// models, it is no model, and a Redis that restarts empty loses it with them.
TEST_F(RedisStoreTest, TheCatalogsCompleteMarkIsReadWithItAndGoesWithARestart) {
  auto leader = Open();
  auto router = Open();
  std::atomic<int> changes{0};  // counted on the watch thread
  router->SetOnCatalogChange([&changes] { ++changes; });
  ASSERT_TRUE(leader->PublishModel("digits-mlp", "g1", "{}").ok());
  ASSERT_TRUE(Eventually([&] { return router->ReadCatalog().models.count("digits-mlp") == 1; }));
  EXPECT_FALSE(router->ReadCatalog().complete);
  ASSERT_TRUE(leader->MarkCatalogComplete("controller-0|127.0.0.1:1").ok());
  ASSERT_TRUE(Eventually([&] { return router->ReadCatalog().complete; }));
  EXPECT_EQ(router->ReadCatalog().models.size(), 1u) << "the mark is listed as a model";
  EXPECT_GE(changes.load(), 2);

  server_->Kill();
  server_->Start();
  ASSERT_TRUE(server_->WaitReady());
  ASSERT_TRUE(Eventually([&] { return router->ReadCatalog().models.empty(); }));
  EXPECT_FALSE(router->ReadCatalog().complete);
  // Written again model by model: listed, not yet complete.
  ASSERT_TRUE(Eventually([&] { return leader->PublishModel("digits-mlp", "g2", "{}").ok(); }));
  ASSERT_TRUE(Eventually([&] { return router->ReadCatalog().models.count("digits-mlp") == 1; }));
  EXPECT_FALSE(router->ReadCatalog().complete);
}

TEST_F(RedisStoreTest, OlderSequenceAndOlderIncarnationAreRefused) {
  auto store = Open();
  const std::string old_incarnation = NewIncarnation();
  std::this_thread::sleep_for(2ms);  // incarnations order by start time (ms)
  const std::string incarnation = NewIncarnation();
  ASSERT_LT(old_incarnation, incarnation);
  ASSERT_TRUE(store->WriteWorker(Report("w1", incarnation, 5)).ok());
  EXPECT_EQ(store->WriteWorker(Report("w1", incarnation, 4)).code(), StatusCode::kFailedPrecondition);
  const Status stale = store->WriteWorker(Report("w1", old_incarnation, 99));
  EXPECT_EQ(stale.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(stale.message().find("stale process"), std::string::npos) << stale.message();
  EXPECT_TRUE(store->WriteWorker(Report("w1", incarnation, 6)).ok());
  std::this_thread::sleep_for(2ms);
  EXPECT_TRUE(store->WriteWorker(Report("w1", NewIncarnation(), 1)).ok()) << "a restart is accepted";
}

TEST_F(RedisStoreTest, WorkerWithoutHeartbeatDropsOutWhenItsLeaseLapses) {
  auto store = Open(300ms);
  ASSERT_TRUE(store->WriteWorker(Report("alive", NewIncarnation(), 1)).ok());
  const std::string incarnation = NewIncarnation();
  ASSERT_TRUE(store->WriteWorker(Report("dies", incarnation, 1)).ok());
  ASSERT_TRUE(Eventually([&] { return Has(*store, "dies"); }));
  // "alive" keeps beating; "dies" stops.
  int64_t seq = 2;
  ASSERT_TRUE(Eventually([&] {
    EXPECT_TRUE(store->WriteWorker(Report("alive", store->Workers().at("alive").incarnation, seq++)).ok());
    return !Has(*store, "dies");
  }));
  EXPECT_TRUE(Has(*store, "alive"));
  // Pruned from the membership set too.
  RedisConnection c(server_->endpoint());
  auto members = c.Command({"SMEMBERS", "somm:workers"});
  ASSERT_TRUE(members.ok());
  ASSERT_EQ(members->elements.size(), 1u);
  EXPECT_EQ(members->elements[0].str, "alive");
}

TEST_F(RedisStoreTest, RemovedWorkerLeavesAtOnce) {
  auto store = Open();
  ASSERT_TRUE(store->WriteWorker(Report("w1", NewIncarnation(), 1)).ok());
  ASSERT_TRUE(Eventually([&] { return Has(*store, "w1"); }));
  store->RemoveWorker("w1");
  EXPECT_TRUE(Eventually([&] { return !Has(*store, "w1"); }));
}

TEST_F(RedisStoreTest, DemandAddsUpOverRouters) {
  auto store = Open();
  cluster::ModelDemand a;
  a.model = "m";
  a.arrivals_total = 10;
  a.latency_slo_ms = 20;
  cluster::ModelDemand b = a;
  b.arrivals_total = 5;
  b.latency_slo_ms = 8;
  b.min_accuracy = 0.9;
  store->PutDemand("router-a", {a});
  store->PutDemand("router-b", {b});
  ASSERT_TRUE(Eventually([&] {
    const auto s = store->Read();
    return s->demand.size() == 1 && s->demand[0].arrivals_total == 15;
  }));
  const auto d = store->Read()->demand[0];
  EXPECT_EQ(d.latency_slo_ms, 8);
  EXPECT_EQ(d.min_accuracy, 0.9);
}

TEST_F(RedisStoreTest, ViewRecoversAfterARedisRestartOnceWorkersAnnounceAgain) {
  auto writer = Open();
  auto reader = Open();
  const std::string incarnation = NewIncarnation();
  ASSERT_TRUE(writer->WriteWorker(Report("w1", incarnation, 1)).ok());
  ASSERT_TRUE(Eventually([&] { return Has(*reader, "w1"); }));

  server_->Kill();
  const Status down = writer->WriteWorker(Report("w1", incarnation, 2));
  EXPECT_EQ(down.code(), StatusCode::kUnavailable);
  EXPECT_NE(down.message().find(server_->endpoint().ToString()), std::string::npos) << down.message();
  // The last view stays readable meanwhile (soft state: nothing to do).
  EXPECT_TRUE(Has(*reader, "w1"));

  server_->Start();
  ASSERT_TRUE(server_->WaitReady());
  // Redis came back empty; the reader's view keeps the worker for one lease
  // (3 s here), then lets it go, and the worker's next heartbeat brings it
  // back.
  ASSERT_TRUE(Eventually([&] { return !Has(*reader, "w1"); }));
  ASSERT_TRUE(Eventually([&] { return writer->WriteWorker(Report("w1", incarnation, 3)).ok(); }));
  EXPECT_TRUE(Eventually([&] { return Has(*reader, "w1"); }));
}

// Calls of one Redis command since the last CONFIG RESETSTAT.
int64_t CommandCalls(RedisConnection& c, const std::string& command) {
  auto info = c.Command({"INFO", "commandstats"});
  if (!info.ok()) return -1;
  const std::string key = "cmdstat_" + command + ":calls=";
  const size_t at = info->str.find(key);
  return at == std::string::npos ? 0 : std::stoll(info->str.substr(at + key.size()));
}

// A heartbeat's notice carries the report and its lease, so the watchers
// read nothing back: at 1,000 workers and 20 routers that is 40,000 reads a
// second Redis does not serve (docs/cluster-state.md, "Steady-state cost").
TEST_F(RedisStoreTest, AHeartbeatCostsAWatcherNoRead) {
  auto writer = Open(3000ms, /*watch=*/false);
  // Declared before the reader, whose watch thread reports into them.
  std::atomic<int> lags{0};
  std::atomic<double> longest_lag_s{0};
  // Only the full re-read every minute would read them all.
  auto reader = Open(3000ms, /*watch=*/true, /*full_repoll=*/60000ms);
  reader->SetOnViewLag([&](double seconds) {
    ++lags;  // one watch thread: no other writer races the maximum
    if (seconds > longest_lag_s.load()) longest_lag_s.store(seconds);
  });
  constexpr int kWorkers = 40;
  std::vector<std::string> incarnations;
  for (int i = 0; i < kWorkers; ++i) {
    incarnations.push_back(NewIncarnation());
    ASSERT_TRUE(writer->WriteWorker(Report("w" + std::to_string(i), incarnations.back(), 1)).ok());
  }
  ASSERT_TRUE(Eventually([&] { return reader->Workers().size() == kWorkers; }))
      << reader->Workers().size() << " workers in the view, " << reader->read_counts().full
      << " full reads, " << reader->read_counts().partial << " partial";
  std::this_thread::sleep_for(300ms);  // any re-poll the writes started is over
  RedisConnection stats(server_->endpoint());
  ASSERT_TRUE(stats.Command({"CONFIG", "RESETSTAT"}).ok());
  const auto before = reader->read_counts();
  // Ten heartbeats of one worker, each waited for: each shows in the view
  // with what it reported, and none is read back.
  for (int64_t seq = 2; seq <= 11; ++seq) {
    ASSERT_TRUE(writer->WriteWorker(Report("w7", incarnations[7], seq)).ok());
    ASSERT_TRUE(Eventually([&] { return reader->Workers().at("w7").sequence == seq; }));
  }
  EXPECT_TRUE(Has(*reader, "w7"));
  const auto after = reader->read_counts();
  EXPECT_EQ(after.full, before.full) << "a heartbeat made the reader read the whole state";
  EXPECT_EQ(after.partial, before.partial) << "a heartbeat made the reader read its report";
  // The heartbeat script itself reads two fields (incarnation, sequence) of
  // the hash it writes: those are all the HGETs.
  EXPECT_EQ(CommandCalls(stats, "hget"), 2 * 10);
  EXPECT_EQ(CommandCalls(stats, "pttl"), 0);
  EXPECT_EQ(CommandCalls(stats, "smembers"), 0);
  EXPECT_EQ(reader->Workers().size(), static_cast<size_t>(kWorkers));
  // Each report that came with its notice was timed from its write (Redis's
  // clock) to the view: 40 first reports and 10 heartbeats.
  EXPECT_GE(lags.load(), 10);
  EXPECT_LT(longest_lag_s.load(), 5.0) << "a report reached the view later than its TTL";
}

// Every router writes its demand each second; the notice carries it, so a
// watcher reads none back (with R routers that was R reads a second for
// each of them).
TEST_F(RedisStoreTest, ARoutersDemandCostsAWatcherNoRead) {
  auto writer = Open(3000ms, /*watch=*/false);
  // No re-poll either (its GETs of the generation and the leader would
  // count with the demands').
  auto reader = Open(3000ms, /*watch=*/true, /*full_repoll=*/60000ms, /*repoll=*/60000ms);
  // Without a re-poll, a notice sent before the reader listens is lost.
  RedisConnection stats(server_->endpoint());
  ASSERT_TRUE(Eventually([&] {
    auto r = stats.Command({"PUBSUB", "NUMSUB", "somm:changes"});
    return r.ok() && r->elements.size() == 2 && r->elements[1].integer == 1;
  }));
  cluster::ModelDemand d;
  d.model = "m";
  d.latency_slo_ms = 20;
  d.arrivals_total = 1;
  writer->PutDemand("router-a", {d});
  ASSERT_TRUE(Eventually([&] { return reader->Read()->demand.size() == 1; }));
  ASSERT_TRUE(stats.Command({"CONFIG", "RESETSTAT"}).ok());
  const auto before = reader->read_counts();
  // Ten demands of two routers, each waited for: each shows in the view
  // with what it said, and none is read back.
  std::map<std::string, int64_t> last = {{"router-a", 1}};
  for (int64_t n = 2; n <= 11; ++n) {
    const std::string router = n % 2 == 0 ? "router-a" : "router-b";
    d.arrivals_total = n;
    writer->PutDemand(router, {d});
    last[router] = n;
    const int64_t sum = last["router-a"] + last["router-b"];  // the view sums the routers
    ASSERT_TRUE(Eventually([&] {
      const auto s = reader->Read();
      return s->demand.size() == 1 && s->demand[0].arrivals_total == sum;
    })) << "demand " << n;
  }
  const auto after = reader->read_counts();
  EXPECT_EQ(after.full, before.full) << "a demand made the reader read the whole state";
  EXPECT_EQ(after.partial, before.partial) << "a demand made the reader read it back";
  EXPECT_EQ(CommandCalls(stats, "get"), 0);
  EXPECT_EQ(reader->Read()->demand[0].latency_slo_ms, 20);
}

// A notice that names a worker without its report (a removal, or a writer
// that sends the older form) is read back, and only that worker.
TEST_F(RedisStoreTest, ANoticeWithoutTheReportReadsOnlyTheWorkerItNames) {
  auto writer = Open(3000ms, /*watch=*/false);
  auto reader = Open(3000ms, /*watch=*/true, /*full_repoll=*/60000ms);
  const WorkerReport first = Report("w1", NewIncarnation(), 1);
  ASSERT_TRUE(writer->WriteWorker(first).ok());
  ASSERT_TRUE(writer->WriteWorker(Report("w2", NewIncarnation(), 1)).ok());
  ASSERT_TRUE(Eventually([&] { return reader->Workers().size() == 2; }));
  std::this_thread::sleep_for(300ms);  // any re-poll the writes started is over
  RedisConnection c(server_->endpoint());
  const auto before = reader->read_counts();
  ASSERT_TRUE(c.Command({"CONFIG", "RESETSTAT"}).ok());
  // Sequence 2 of w1, written and announced the older way.
  WorkerReport second = first;
  second.sequence = 2;
  ASSERT_TRUE(c.Command({"HSET", "somm:worker:w1", "sequence", "2", "report",
                         cluster::WorkerReportToJson(second, Clock::Real().Now())})
                  .ok());
  auto g = c.Command({"INCR", "somm:generation"});
  ASSERT_TRUE(g.ok());
  ASSERT_TRUE(c.Command({"PUBLISH", "somm:changes", std::to_string(g->integer) + " worker w1"}).ok());
  ASSERT_TRUE(Eventually([&] { return reader->Workers().at("w1").sequence == 2; }));
  const auto after = reader->read_counts();
  EXPECT_EQ(after.full, before.full);
  EXPECT_EQ(after.partial - before.partial, 1);
  EXPECT_EQ(CommandCalls(c, "hget"), 1);
  EXPECT_EQ(CommandCalls(c, "pttl"), 1);
}

TEST_F(RedisStoreTest, ALostNoticeShowsAtTheNextRepoll) {
  auto reader = Open(3000ms, /*watch=*/true, /*full_repoll=*/60000ms);
  // A write that publishes no notice: as if the notice had been lost.
  RedisConnection c(server_->endpoint());
  const WorkerReport report = Report("quiet", NewIncarnation(), 1);
  ASSERT_TRUE(c.Command({"HSET", "somm:worker:quiet", "incarnation", report.incarnation,
                         "sequence", "1", "report",
                         cluster::WorkerReportToJson(report, Clock::Real().Now())})
                  .ok());
  ASSERT_TRUE(c.Command({"PEXPIRE", "somm:worker:quiet", "3000"}).ok());
  ASSERT_TRUE(c.Command({"SADD", "somm:workers", "quiet"}).ok());
  ASSERT_TRUE(c.Command({"INCR", "somm:generation"}).ok());
  EXPECT_TRUE(Eventually([&] { return Has(*reader, "quiet"); }));
}

TEST_F(RedisStoreTest, ALapsedLeaderLeaseLeavesTheViewWithoutANotice) {
  auto holder = Open(3000ms, /*watch=*/false);
  auto reader = Open();
  auto held = holder->HoldLease("c1|127.0.0.1:1", 300ms);
  ASSERT_TRUE(held.ok() && *held);
  ASSERT_TRUE(Eventually([&] { return reader->LeaseHolder() == "c1|127.0.0.1:1"; }));
  EXPECT_TRUE(Eventually([&] { return reader->LeaseHolder().empty(); }));
}

TEST_F(RedisStoreTest, UnreachableRedisIsUnavailableNamingTheAddress) {
  RedisStoreOptions o;
  o.endpoint = RedisEndpoint{"127.0.0.1", FreePort(), 200ms};
  auto s = RedisClusterStateStore::Open(o);
  ASSERT_EQ(s.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(s.status().message().find(o.endpoint.ToString()), std::string::npos);
}

}  // namespace
}  // namespace somm::redis
