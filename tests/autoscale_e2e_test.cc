// Worker autoscaling end to end: a real cluster (redis-server, a controller
// with the local provisioner, two workers, a router: processes of the built
// binary on loopback) whose workers' memory budgets hold one model each.
// A load step on three models does not fit: the controller starts a third
// worker, which then serves. When the load falls to one model, a worker
// drains and exits 0, and every query is answered 200.
#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "cluster_process.h"
#include "e2e_fixture.h"

namespace somm::testing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

const std::vector<std::string> kModels = {"big-a", "big-b", "big-c"};
// One budget per worker: one of these models (resnet18 at 32x32, 44.7 MiB of
// weights; a load adds 47-50 MiB to a worker, 66 MiB for its first) fits,
// two do not, and the controller's guess for an unmeasured one (twice the
// file, 89.5 MiB) fits an empty worker.
constexpr char kBudgetMb[] = "92";

// Three copies of the demo resnet18 (its weights shared by a link), taking
// 3x32x32 images so that queries are cheap and memory is what runs short.
std::string MakeRepository(const std::string& demo) {
  namespace fs = std::filesystem;
  const fs::path repo =
      fs::temp_directory_path() / ("somm_autoscale_repo_" + std::to_string(getpid()));
  fs::remove_all(repo);
  for (const std::string& m : kModels) {
    fs::create_directories(repo / m);
    std::ofstream(repo / m / "model.yaml") << "name: " << m << R"(
platform: torchscript
max_batch_size: 8
inputs: [{name: image, datatype: FP32, shape: [3, 32, 32]}]
outputs: [{name: logits, datatype: FP32, shape: [1000]}]
dynamic_batching: {max_queue_delay_us: 1000}
instance_count: 1
intra_op_threads: 1
)";
    fs::create_directory_symlink(fs::absolute(fs::path(demo) / "resnet18" / "1"), repo / m / "1");
  }
  return repo.string();
}

std::string ImageBody() {
  std::vector<float> pixels(3 * 32 * 32);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<float>(i % 97) / 97.0f;
  json body;
  body["inputs"] = json::array(
      {{{"name", "image"}, {"datatype", "FP32"}, {"shape", {1, 3, 32, 32}}, {"data", pixels}}});
  return body.dump();
}

// What the clients saw, per phase.
struct Tally {
  int sent = 0;
  std::map<int, int> by_status;                              // HTTP status (0 = no answer) -> count
  std::map<std::string, std::map<std::string, int>> served;  // model -> worker -> 200s
  std::string first_error;
};

// Open-loop load on one model: `streams` threads, each sending on its own
// fixed schedule (rate / streams per second) whatever the answers take, so a
// slow answer delays only its own stream.
class Load {
 public:
  Load(int port, std::string model, double rate, int streams, std::mutex* mu, Tally** tally)
      : model_(std::move(model)) {
    const auto period = std::chrono::duration_cast<SteadyClock::duration>(
        std::chrono::duration<double>(streams / rate));
    for (int s = 0; s < streams; ++s) {
      threads_.emplace_back([=, this] {
        const std::string body = ImageBody();
        httplib::Client c("127.0.0.1", port);
        c.set_read_timeout(30, 0);
        auto next = SteadyClock::now() + period * s / streams;
        while (!stop_) {
          std::this_thread::sleep_until(next);
          next += period;
          auto r = c.Post("/v2/models/" + model_ + "/infer", body, "application/json");
          std::lock_guard lock(*mu);
          Tally& t = **tally;
          ++t.sent;
          const int status = r ? r->status : 0;
          ++t.by_status[status];
          if (status == 200) {
            const json j = json::parse(r->body, nullptr, false);
            if (j.is_object() && j.contains("parameters")) {
              ++t.served[model_][j["parameters"].value("somm_worker", "")];
            }
          } else if (t.first_error.empty()) {
            t.first_error = model_ + ": " + std::to_string(status) + " " + (r ? r->body : "");
          }
        }
      });
    }
  }
  ~Load() { Stop(); }
  void Stop() {
    stop_ = true;
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

 private:
  const std::string model_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

bool Registered(const ClusterProcesses& cluster, const std::string& id) {
  const auto ids = cluster.RegisteredWorkers();
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

std::string Describe(const Tally& t) {
  std::string out = "sent " + std::to_string(t.sent);
  for (const auto& [status, n] : t.by_status) {
    out += ", " + (status == 0 ? std::string("unanswered") : std::to_string(status)) + ": " +
           std::to_string(n);
  }
  return out + (t.first_error.empty() ? "" : " (first error: " + t.first_error + ")");
}

double Seconds(SteadyClock::duration d) { return std::chrono::duration<double>(d).count(); }

TEST(AutoscaleE2eTest, ALoadStepStartsAThirdWorkerThatServesAndAFallDrainsOneWithoutFailures) {
  const std::string demo = DemoRepository();
  ASSERT_TRUE(std::filesystem::exists(demo + "/resnet18/1/model.pt"))
      << "no demo resnet18 (run scripts/setup first)";
  const std::string repo = MakeRepository(demo);
  struct RemoveAtEnd {
    std::string path;
    ~RemoveAtEnd() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  } remove_repo{repo};
  ClusterOptions options;
  options.workers = 2;
  options.worker_args = {"--memory-budget-mb", kBudgetMb};
  // Scale-in after 5 s spare instead of 5 min; a group is in use for 5 s
  // after its last query instead of a minute.
  options.controller_args = {
      "--provisioner", "local", "--min-workers", "1", "--max-workers", "3", "--scale-in-after-s",
      "5", "--scale-cooldown-s", "5",
      // a worker's first load measures 66 MiB: 72% of a budget
      "--scale-in-fill", "0.8", "--worker-in-use-window-s", "5", "--local-worker-args",
      std::string("--memory-budget-mb ") + kBudgetMb + " --lease-ms 1500 --heartbeat-ms 500"};
  ClusterProcesses cluster(SommBinary(), repo, options);
  ASSERT_TRUE(cluster.ok()) << cluster.error() << "\n" << cluster.Logs();
  const std::string third = "controller-0-worker-0";  // the provisioner's first
  ASSERT_FALSE(Registered(cluster, third));
  std::this_thread::sleep_for(3s);  // the start's loads and evictions settle

  std::mutex mu;
  Tally step, fall;
  Tally* tally = &step;
  // 1. The load step: 20 queries/s on each of three models.
  const auto t0 = SteadyClock::now();
  std::vector<std::unique_ptr<Load>> loads;
  for (const std::string& m : kModels) {
    loads.push_back(std::make_unique<Load>(cluster.http_port(), m, 20, 4, &mu, &tally));
  }
  double registered_s = -1, served_s = -1;
  std::string busiest;  // the model the third worker serves most
  while (SteadyClock::now() - t0 < 60s && served_s < 0) {
    if (registered_s < 0 && Registered(cluster, third))
      registered_s = Seconds(SteadyClock::now() - t0);
    {
      std::lock_guard lock(mu);
      int most = 0;
      for (const auto& [model, workers] : step.served) {
        auto it = workers.find(third);
        if (it != workers.end() && it->second > most) {
          most = it->second;
          busiest = model;
        }
      }
      if (most >= 20) served_s = Seconds(SteadyClock::now() - t0);
    }
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_GE(registered_s, 0) << "no third worker within 60 s; " << Describe(step) << "\n"
                             << cluster.Logs();
  ASSERT_GE(served_s, 0) << "the third worker served no model; " << Describe(step) << "\n"
                         << cluster.Logs();
  std::this_thread::sleep_for(2s);  // the three workers serving together

  // 2. The load falls to one model at 5 queries/s: the one the third worker
  // serves, so that its drain moves live traffic.
  std::unique_ptr<Load> light;
  {
    std::lock_guard lock(mu);
    tally = &fall;
  }
  const auto t1 = SteadyClock::now();
  light = std::make_unique<Load>(cluster.http_port(), busiest, 5, 1, &mu, &tally);
  loads.clear();  // stops the step's streams
  double left_s = -1, exited_s = -1;
  const std::regex exited("worker " + third + " \\(pid \\d+\\) exited with status (\\d+)");
  std::smatch m;
  std::string logs;
  while (SteadyClock::now() - t1 < 60s && (left_s < 0 || exited_s < 0)) {
    if (left_s < 0 && !Registered(cluster, third)) left_s = Seconds(SteadyClock::now() - t1);
    logs = cluster.Logs();
    if (exited_s < 0 && std::regex_search(logs, m, exited)) {
      exited_s = Seconds(SteadyClock::now() - t1);
      EXPECT_EQ(m[1], "0") << "the drained worker's exit status";
    }
    std::this_thread::sleep_for(100ms);
  }
  std::this_thread::sleep_for(2s);  // the light load goes on after the drain
  light->Stop();
  const double total_s = Seconds(SteadyClock::now() - t0);

  const std::string text = cluster.Metrics(cluster.controller_metrics_port(0));
  const double outs =
      MetricValue(text, "somm_worker_scale_steps_total{direction=\"out\",reason=\"placement\"}");
  const double ins =
      MetricValue(text, "somm_worker_scale_steps_total{direction=\"in\",reason=\"spare\"}");

  std::printf(
      "autoscale: step %s; fall %s; third worker registered %.2f s and served %.2f s after the "
      "step; it left routing %.2f s and exited %.2f s after the fall (served %s); scale steps out "
      "%.0f in %.0f; %.1f s in all\n",
      Describe(step).c_str(), Describe(fall).c_str(), registered_s, served_s, left_s, exited_s,
      busiest.c_str(), outs, ins, total_s);

  ASSERT_GE(left_s, 0) << "the third worker never left routing; " << Describe(fall) << "\n" << logs;
  ASSERT_GE(exited_s, 0) << "the third worker never exited; " << Describe(fall) << "\n" << logs;
  EXPECT_GE(outs, 1) << text;
  EXPECT_GE(ins, 1) << text;
  EXPECT_GT(fall.sent, 0);
  // The must-show: the drain under live load fails no query. (During the
  // step, before the third worker is up, a query whose model cannot be
  // placed is refused, 429; the figures above count them.)
  EXPECT_EQ(fall.by_status[200], fall.sent) << Describe(fall);
  // Once drained, the model it served is answered by the others.
  int after_drain = 0;
  for (const auto& [worker, n] : fall.served[busiest]) {
    if (worker != third) after_drain += n;
  }
  EXPECT_GT(after_drain, 0);
}

}  // namespace
}  // namespace somm::testing
