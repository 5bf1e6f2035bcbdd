// somm as a cluster, end to end: a real redis-server, a controller, two
// workers and a router, each a process of the built binary, on loopback.
// Queries go through the router exactly as to `somm serve`; answers must
// equal libtorch's; a worker killed with SIGKILL under load loses no query.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "cluster_process.h"
#include "e2e_fixture.h"

namespace somm::testing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

std::string DigitBody(const std::vector<float>& pixels) {
  json body;
  body["inputs"] = json::array({{{"name", "pixels"},
                                 {"datatype", "FP32"},
                                 {"shape", {1, 64}},
                                 {"data", pixels}}});
  return body.dump();
}

class ClusterE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    demo_ = new std::string(DemoRepository());
    digits_ = new HeldOutDigits(LoadHeldOutDigits(*demo_));
    repo_ = new std::string(MakeTestRepository(*demo_, "cluster"));
    cluster_ = new ClusterProcesses(SommBinary(), *repo_);
  }
  static void TearDownTestSuite() {
    delete cluster_;
    if (repo_) std::filesystem::remove_all(*repo_);
    delete repo_;
    delete digits_;
    delete demo_;
  }
  void SetUp() override {
    ASSERT_GE(digits_->pixels.size(), 100u) << "no held-out digits (run scripts/setup first)";
    ASSERT_TRUE(cluster_->ok()) << cluster_->error() << "\n" << cluster_->Logs();
  }
  static inline std::string* demo_ = nullptr;
  static inline std::string* repo_ = nullptr;
  static inline HeldOutDigits* digits_ = nullptr;
  static inline ClusterProcesses* cluster_ = nullptr;
};

TEST_F(ClusterE2eTest, RouterInFrontOfTwoWorkersAnswersAsLibtorchDoes) {
  httplib::Client c("127.0.0.1", cluster_->http_port());
  c.set_read_timeout(60, 0);
  for (const std::string& model : kDigitsModels) {
    const std::string file = *repo_ + "/" + model + "/1/model.pt";
    for (size_t i = 0; i < 20; ++i) {
      const auto expected = TorchReference(file, {digits_->pixels[i]});
      auto r = c.Post("/v2/models/" + model + "/infer", DigitBody(digits_->pixels[i]),
                      "application/json");
      ASSERT_TRUE(r) << model;
      ASSERT_EQ(r->status, 200) << model << ": " << r->body << "\n" << cluster_->Logs();
      const json j = json::parse(r->body);
      const auto got = j["outputs"][0]["data"].get<std::vector<float>>();
      ASSERT_EQ(got.size(), expected.size());
      for (size_t k = 0; k < got.size(); ++k) EXPECT_NEAR(got[k], expected[k], 1e-5) << model;
      EXPECT_FALSE(j["parameters"]["somm_worker"].get<std::string>().empty());
    }
  }
}

TEST_F(ClusterE2eTest, BadInputGetsTheSameClearErrorThroughTheRouter) {
  httplib::Client c("127.0.0.1", cluster_->http_port());
  json bad = json::parse(DigitBody(digits_->pixels[0]));
  bad["inputs"][0]["name"] = "nope";
  auto r = c.Post("/v2/models/digits-mlp/infer", bad.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_NE(r->body.find("pixels"), std::string::npos) << r->body;
  auto missing = c.Post("/v2/models/no-such-model/infer", DigitBody(digits_->pixels[0]),
                        "application/json");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404) << missing->body;
}

// The operator's actions page through a router: the router makes no control
// action itself, so it lists the leader controller's (over its RPC), and the
// loads that the first test's queries caused are among them, each with its
// reason. Task decisions carry the latency the query then took.
TEST_F(ClusterE2eTest, ARoutersActionsAreTheLeadersAndItsDecisionsShowActualLatency) {
  httplib::Client c("127.0.0.1", cluster_->http_port());
  c.set_read_timeout(60, 0);
  auto infer = c.Post("/v2/models/digits-mlp/infer", DigitBody(digits_->pixels[0]),
                      "application/json");
  ASSERT_TRUE(infer);
  ASSERT_EQ(infer->status, 200) << infer->body;
  auto r = c.Get("/v2/somm/actions?limit=100");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json actions = json::parse(r->body)["actions"];
  bool load_seen = false;
  for (const json& a : actions) {
    EXPECT_FALSE(a["reason"].get<std::string>().empty()) << a.dump();
    if (a["kind"] == "load" && a["target"] == "digits-mlp") load_seen = true;
  }
  EXPECT_TRUE(load_seen) << "no load of digits-mlp among the router's actions: " << r->body
                         << "\n" << cluster_->Logs();
  // The overview's counts by kind are the leader's too: the router's own
  // registry has none.
  auto o = c.Get("/v2/somm/overview");
  ASSERT_TRUE(o);
  ASSERT_EQ(o->status, 200) << o->body;
  const json counts = json::parse(o->body)["control_actions_total"];
  EXPECT_GE(counts.value("load", 0), 1) << o->body;

  // A variant named explicitly is logged as a decision; once answered, its
  // row has the measured latency.
  auto explicit_query = c.Post("/v2/models/digits-mlp:1:ts-fp32/infer",
                               DigitBody(digits_->pixels[1]), "application/json");
  ASSERT_TRUE(explicit_query);
  ASSERT_EQ(explicit_query->status, 200) << explicit_query->body;
  auto d = c.Get("/v2/somm/decisions?limit=10");
  ASSERT_TRUE(d);
  ASSERT_EQ(d->status, 200) << d->body;
  const json decisions = json::parse(d->body)["decisions"];
  ASSERT_FALSE(decisions.empty()) << d->body;
  EXPECT_EQ(decisions[0]["outcome"], "explicit") << d->body;
  EXPECT_EQ(decisions[0]["status"], "OK") << d->body;
  EXPECT_GT(decisions[0].value("actual_latency_ms", -1.0), 0.0) << d->body;
}

// How stale a view gets is on the metrics of every process that keeps one:
// the router and the controller time each report a heartbeat's notice
// brought, from its write in Redis to their view holding it.
TEST_F(ClusterE2eTest, RouterAndControllerTimeHowStaleTheirViewIs) {
  auto count_of = [this](int port, const std::string& process_prefix) -> double {
    const std::string body = cluster_->Metrics(port);
    const std::string name = "somm_cluster_view_lag_seconds_count{process=\"" + process_prefix;
    const size_t at = body.find(name);
    if (at == std::string::npos) return -1;
    const size_t value = body.find("} ", at);
    return value == std::string::npos ? -1 : std::stod(body.substr(value + 2));
  };
  // Heartbeats come every second: a few seconds bring some.
  double router = -1, controller = -1;
  for (int i = 0; i < 100 && (router <= 0 || controller <= 0); ++i) {
    router = count_of(cluster_->routers()[0].metrics_port, "router:");
    controller = count_of(cluster_->controller_metrics_port(0), "controller:");
    if (router <= 0 || controller <= 0) std::this_thread::sleep_for(100ms);
  }
  EXPECT_GT(router, 0) << "no timed report on the router's metrics";
  EXPECT_GT(controller, 0) << "no timed report on the controller's metrics";
}

// Last: it kills a worker.
TEST_F(ClusterE2eTest, ZKillingAWorkerUnderLoadLosesNoQuery) {
  // Open-loop load on two models from four clients; one worker is killed
  // (SIGKILL) a second in.
  const std::vector<std::string> models = {"digits-mlp", "digits-cnn"};
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::map<int, int> by_status;  // HTTP status (0 = no answer) -> count
  int sent = 0;
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&, t] {
      httplib::Client c("127.0.0.1", cluster_->http_port());
      c.set_read_timeout(30, 0);
      size_t i = static_cast<size_t>(t);
      while (!stop.load()) {
        const std::string& model = models[i % models.size()];
        auto r = c.Post("/v2/models/" + model + "/infer",
                        DigitBody(digits_->pixels[i % digits_->pixels.size()]), "application/json");
        {
          std::lock_guard lock(mu);
          ++sent;
          ++by_status[r ? r->status : 0];
        }
        ++i;
        std::this_thread::sleep_for(10ms);  // about 100 q/s per client
      }
    });
  }
  std::this_thread::sleep_for(1s);
  // The worker that holds digits-mlp's group dies.
  const auto& victim = cluster_->workers()[0];
  ASSERT_EQ(kill(victim.pid, SIGKILL), 0);
  const auto killed_at = std::chrono::steady_clock::now();
  double left_after_s = -1;
  while (std::chrono::steady_clock::now() - killed_at < 6s) {
    const auto ids = cluster_->RegisteredWorkers();
    if (left_after_s < 0 && std::find(ids.begin(), ids.end(), victim.id) == ids.end()) {
      left_after_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
    }
    std::this_thread::sleep_for(50ms);
  }
  stop = true;
  for (auto& t : clients) t.join();

  int ok = by_status[200];
  std::string summary = "sent " + std::to_string(sent) + ":";
  for (const auto& [status, n] : by_status) summary += " " + std::to_string(status) + "=" + std::to_string(n);
  std::printf("[cluster kill -9] %s; the dead worker left routing after %.2f s (lease 1.5 s)\n",
              summary.c_str(), left_after_s);
  EXPECT_EQ(by_status[0], 0) << "unanswered queries: " << summary;
  EXPECT_GE(ok, sent * 99 / 100) << summary << "\n" << cluster_->Logs();
  ASSERT_GE(left_after_s, 0) << "the dead worker never left routing";
  EXPECT_LE(left_after_s, 1.5 + 1.0);
}

// Each failure test runs its own cluster: two routers, a leader controller
// and a standby, two workers.
class ClusterFailureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    demo_ = DemoRepository();
    digits_ = LoadHeldOutDigits(demo_);
    ASSERT_GE(digits_.pixels.size(), 100u) << "no held-out digits (run scripts/setup first)";
    repo_ = MakeTestRepository(demo_, "cluster-failure");
    ClusterOptions o;
    o.routers = 2;
    o.controllers = 2;
    cluster_ = std::make_unique<ClusterProcesses>(SommBinary(), repo_, o);
    ASSERT_TRUE(cluster_->ok()) << cluster_->error() << "\n" << cluster_->Logs();
  }
  void TearDown() override {
    cluster_.reset();
    std::filesystem::remove_all(repo_);
  }

  struct Counts {
    int sent = 0;
    std::map<int, int> by_status;  // 0 = no router answered
    std::string Summary() const {
      std::string out = "sent " + std::to_string(sent) + ":";
      for (const auto& [status, n] : by_status) {
        out += " " + (status == 0 ? std::string("unanswered") : std::to_string(status)) + "=" +
               std::to_string(n);
      }
      return out;
    }
  };
  // Open-loop load from four clients on two models while `during` runs.
  // Each client was given every router: it sends to one and, when that one
  // cannot be reached, to the next (what a client with two addresses does).
  Counts LoadWhile(const std::function<void()>& during) {
    const std::vector<std::string> models = {"digits-mlp", "digits-cnn"};
    std::atomic<bool> stop{false};
    std::mutex mu;
    Counts counts;
    std::vector<std::thread> clients;
    for (int t = 0; t < 4; ++t) {
      clients.emplace_back([&, t] {
        size_t router = static_cast<size_t>(t) % cluster_->routers().size();
        size_t i = static_cast<size_t>(t);
        while (!stop.load()) {
          const std::string& model = models[i % models.size()];
          const std::string body = DigitBody(digits_.pixels[i % digits_.pixels.size()]);
          int status = 0;
          for (size_t tries = 0; tries < cluster_->routers().size() && status == 0; ++tries) {
            httplib::Client c("127.0.0.1", cluster_->routers()[router].http_port);
            c.set_read_timeout(30, 0);
            c.set_connection_timeout(1, 0);
            auto r = c.Post("/v2/models/" + model + "/infer", body, "application/json");
            if (r) {
              status = r->status;
            } else {
              router = (router + 1) % cluster_->routers().size();
            }
          }
          {
            std::lock_guard lock(mu);
            ++counts.sent;
            ++counts.by_status[status];
          }
          ++i;
          std::this_thread::sleep_for(10ms);
        }
      });
    }
    std::this_thread::sleep_for(1s);
    during();
    std::this_thread::sleep_for(1s);
    stop = true;
    for (auto& t : clients) t.join();
    return counts;
  }
  void ExpectNothingLost(const Counts& counts, const std::string& what) {
    std::printf("[cluster %s] %s\n", what.c_str(), counts.Summary().c_str());
    EXPECT_EQ(counts.by_status.count(0) ? counts.by_status.at(0) : 0, 0)
        << what << ": unanswered queries; " << counts.Summary();
    const int ok = counts.by_status.count(200) ? counts.by_status.at(200) : 0;
    EXPECT_GE(ok, counts.sent * 99 / 100) << what << ": " << counts.Summary() << "\n"
                                          << cluster_->Logs();
  }

  std::string demo_, repo_;
  HeldOutDigits digits_;
  std::unique_ptr<ClusterProcesses> cluster_;
};

TEST_F(ClusterFailureTest, StandbyControllerTakesOverWhenTheLeaderIsKilled) {
  ASSERT_EQ(cluster_->Leader(), "controller-0");
  double took_over_s = -1;
  const Counts counts = LoadWhile([&] {
    ASSERT_EQ(kill(cluster_->controllers()[0], SIGKILL), 0);
    const auto killed = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - killed < 10s) {
      if (cluster_->Leader() == "controller-1") {
        took_over_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
        break;
      }
      std::this_thread::sleep_for(50ms);
    }
  });
  ExpectNothingLost(counts, "kill -9 leader controller");
  std::printf("[cluster kill -9 leader controller] the standby took the lease after %.2f s "
              "(lease 1.5 s)\n", took_over_s);
  ASSERT_GE(took_over_s, 0) << "the standby never took over\n" << cluster_->Logs();
  EXPECT_LE(took_over_s, 5.0);
  // It acts: the repository API goes to it through a router.
  httplib::Client c("127.0.0.1", cluster_->routers()[1].http_port);
  c.set_read_timeout(60, 0);
  auto unload = c.Post("/v2/repository/models/digits-logistic/unload", "{}", "application/json");
  ASSERT_TRUE(unload);
  EXPECT_EQ(unload->status, 200) << unload->body << "\n" << cluster_->Logs();
  auto load = c.Post("/v2/repository/models/digits-logistic/load", "{}", "application/json");
  ASSERT_TRUE(load);
  EXPECT_EQ(load->status, 200) << load->body;
}

TEST_F(ClusterFailureTest, ClientGivenBothRoutersGoesOnWhenOneIsKilled) {
  const Counts counts = LoadWhile([&] {
    ASSERT_EQ(kill(cluster_->routers()[0].pid, SIGKILL), 0);
    std::this_thread::sleep_for(2s);
  });
  ExpectNothingLost(counts, "kill -9 router");
}

TEST_F(ClusterFailureTest, RoutingRecoversAfterARedisRestart) {
  double recovered_s = -1;
  const Counts counts = LoadWhile([&] {
    cluster_->KillRedis();
    std::this_thread::sleep_for(1s);
    ASSERT_TRUE(cluster_->RestartRedis());
    const auto restarted = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - restarted < 10s) {
      if (cluster_->RegisteredWorkers().size() == cluster_->workers().size() &&
          !cluster_->Leader().empty()) {
        recovered_s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - restarted).count();
        break;
      }
      std::this_thread::sleep_for(50ms);
    }
  });
  ExpectNothingLost(counts, "redis-server restart");
  std::printf("[cluster redis restart] workers and leader back in Redis %.2f s after the "
              "restart\n", recovered_s);
  ASSERT_GE(recovered_s, 0) << cluster_->Logs();
  EXPECT_LE(recovered_s, 5.0);
}

// A registration's variant job runs on the leader and lives in its memory.
// The leader is killed (SIGKILL) while it generates; the standby, taking
// over, finds the version without profiles and generates them again, and a
// client polling the variants through a router sees them READY. Before,
// the model stayed without variants for good.
TEST(ClusterVariantJobTest, AJobTheDeadLeaderDidNotFinishIsRedoneByTheNewOne) {
  const std::string demo = DemoRepository();
  const std::string repo =
      (std::filesystem::temp_directory_path() / ("somm_cluster_job_" + std::to_string(getpid())))
          .string();
  std::filesystem::remove_all(repo);
  std::filesystem::create_directories(repo);
  ClusterOptions o;
  o.controllers = 2;
  o.routers = 2;
  o.wait_for_model = false;  // an empty repository
  o.controller_args = {"--auto-variants", "true"};
  auto cluster = std::make_unique<ClusterProcesses>(SommBinary(), repo, o);
  ASSERT_TRUE(cluster->ok()) << cluster->error() << "\n" << cluster->Logs();
  ASSERT_EQ(cluster->Leader(), "controller-0");

  const std::string dir = demo + "/digits-logistic/1";
  const std::string cmd = SommBinary() + " register late --model " + dir + "/model.pt" +
                          " --task classification/digits --input pixels:FP32:64" +
                          " --output logits:FP32:10 --max-batch-size 64 --validation " + dir +
                          "/validation --url 127.0.0.1:" +
                          std::to_string(cluster->routers()[0].http_port) + " > /dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cluster->Logs();
  httplib::Client c("127.0.0.1", cluster->routers()[1].http_port);
  c.set_read_timeout(30, 0);
  auto state = [&]() -> std::string {
    auto r = c.Get("/v2/repository/models/late/variants");
    if (!r || r->status != 200) return r ? "HTTP " + std::to_string(r->status) : "no answer";
    return json::parse(r->body).value("state", "");
  };
  const std::string before = state();
  ASSERT_EQ(before, "GENERATING") << "the job ended before the leader could be killed";
  ASSERT_EQ(kill(cluster->controllers()[0], SIGKILL), 0);
  const auto killed = std::chrono::steady_clock::now();
  std::string now;
  while (std::chrono::steady_clock::now() - killed < 240s) {
    now = state();
    if (now == "READY" || now == "FAILED") break;
    std::this_thread::sleep_for(250ms);
  }
  const double took_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  std::printf("[cluster variant job] leader killed mid-job; variants %s %.1f s later, from %s\n",
              now.c_str(), took_s, cluster->Leader().c_str());
  EXPECT_EQ(now, "READY") << cluster->Logs();
  EXPECT_EQ(cluster->Leader(), "controller-1");
  auto r = c.Get("/v2/repository/models/late/variants");
  ASSERT_TRUE(r);
  EXPECT_FALSE(json::parse(r->body).value("variants", json::array()).empty()) << r->body;
  cluster.reset();
  std::filesystem::remove_all(repo);
}

// Readiness that means "can serve": a router said ready with no worker left
// to run anything (and, at start, before it knew any model: its first
// metadata read answered 404). Now it is ready only while it sees the leader
// and a live worker and holds the repository's models in its catalog, and a
// worker only while it is registered.
TEST(ClusterReadinessTest, ARouterIsReadyOnlyWhileItCanServe) {
  const std::string repo = MakeTestRepository(DemoRepository(), "cluster-ready");
  ClusterOptions o;
  o.workers = 1;
  auto cluster = std::make_unique<ClusterProcesses>(SommBinary(), repo, o);
  ASSERT_TRUE(cluster->ok()) << cluster->error() << "\n" << cluster->Logs();
  httplib::Client c("127.0.0.1", cluster->http_port());
  c.set_read_timeout(10, 0);
  auto ready = [&] {
    auto r = c.Get("/v2/health/ready");
    return r ? r->status : 0;
  };
  ASSERT_EQ(ready(), 200);
  auto metadata = c.Get("/v2/models/digits-mlp");
  ASSERT_TRUE(metadata);
  EXPECT_EQ(metadata->status, 200) << metadata->body;
  ASSERT_EQ(kill(cluster->workers()[0].pid, SIGKILL), 0);
  // The worker's lease is 1.5 s: within a few seconds the router has no one
  // to send a query to, and says so.
  int status = 200;
  const auto killed = std::chrono::steady_clock::now();
  while (status == 200 && std::chrono::steady_clock::now() - killed < 15s) {
    std::this_thread::sleep_for(100ms);
    status = ready();
  }
  EXPECT_NE(status, 200) << "a router with no live worker said ready\n" << cluster->Logs();
  EXPECT_EQ(c.Get("/v2/health/live")->status, 200) << "liveness stays cheap and true";
  cluster.reset();
  std::filesystem::remove_all(repo);
}

// Zones: worker-0 in zone b (with more memory, so the repository's models
// start there unless worker-1 registers first), worker-1 in zone a, and a
// router in zone a. Whichever worker holds digits-mlp, every answer names
// its zone and the reason that fits it; once that worker is killed the
// group serves from the other zone, with the other reason.
TEST(ClusterZoneTest, EveryAnswerNamesTheZoneThatServedItAndWhy) {
  const std::string demo = DemoRepository();
  const HeldOutDigits digits = LoadHeldOutDigits(demo);
  ASSERT_FALSE(digits.pixels.empty()) << "no held-out digits (run scripts/setup first)";
  const std::string repo = MakeTestRepository(demo, "cluster-zones");
  ClusterOptions o;
  o.worker_args_each = {{"--zone", "b", "--memory-budget-mb", "4096"},
                        {"--zone", "a", "--memory-budget-mb", "1024"}};
  o.router_args = {"--zone", "a", "--cross-zone-rtt-ms", "1"};
  auto cluster = std::make_unique<ClusterProcesses>(SommBinary(), repo, o);
  ASSERT_TRUE(cluster->ok()) << cluster->error() << "\n" << cluster->Logs();
  const std::map<std::string, std::string> zone_of = {{"worker-0", "b"}, {"worker-1", "a"}};
  auto reason_for = [](const std::string& zone) {
    return zone == "a" ? std::string("same zone")
                       : std::string("no holder in zone a; cross-zone +1.0 ms");
  };
  httplib::Client c("127.0.0.1", cluster->http_port());
  c.set_read_timeout(60, 0);
  // One query: the worker that served it, after checking its zone and reason.
  auto ask = [&](bool may_load) -> std::string {
    auto r = c.Post("/v2/models/digits-mlp/infer", DigitBody(digits.pixels[0]), "application/json");
    if (!r) return "<no answer>";
    EXPECT_EQ(r->status, 200) << r->body << "\n" << cluster->Logs();
    const json p = json::parse(r->body).value("parameters", json::object());
    const std::string worker = p.value("somm_worker", "");
    const std::string zone = p.value("somm_zone", "");
    const std::string reason = p.value("somm_zone_reason", "");
    EXPECT_EQ(zone, zone_of.count(worker) ? zone_of.at(worker) : "?") << worker;
    if (!(may_load && reason.rfind("loaded for this query", 0) == 0)) {
      EXPECT_EQ(reason, reason_for(zone)) << worker;
    }
    return worker;
  };
  const std::string first = ask(false);
  ASSERT_TRUE(zone_of.count(first)) << first;
  for (int i = 0; i < 4; ++i) EXPECT_EQ(ask(false), first);

  const auto& workers = cluster->workers();
  const auto victim = std::find_if(workers.begin(), workers.end(),
                                   [&](const auto& w) { return w.id == first; });
  ASSERT_NE(victim, workers.end());
  ASSERT_EQ(kill(victim->pid, SIGKILL), 0);
  const auto killed = std::chrono::steady_clock::now();
  while (cluster->RegisteredWorkers().size() > 1 &&
         std::chrono::steady_clock::now() - killed < 20s) {
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_EQ(cluster->RegisteredWorkers().size(), 1u) << cluster->Logs();
  const std::string second = ask(/*may_load=*/true);
  EXPECT_NE(second, first);
  // Until this router's view shows the group there, a query may load it again.
  std::this_thread::sleep_for(1s);
  ASSERT_TRUE(zone_of.count(second)) << second;
  for (int i = 0; i < 4; ++i) EXPECT_EQ(ask(false), second);
  std::printf("[cluster zones] digits-mlp served from %s (zone %s), then, with it killed, from "
              "%s (zone %s)\n",
              first.c_str(), zone_of.at(first).c_str(), second.c_str(),
              zone_of.at(second).c_str());
  cluster.reset();
  std::filesystem::remove_all(repo);
}

}  // namespace
}  // namespace somm::testing
