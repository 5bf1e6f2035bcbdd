// The worker RPC end to end on loopback: a real Worker (with a fake backend
// whose model echoes x as y) behind WorkerService, reached through
// GrpcWorkerStub.
#include <gtest/gtest.h>

#include <grpcpp/alarm.h>
#include <grpcpp/grpcpp.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <set>
#include <thread>

#include "cluster_rpc/grpc_worker_stub.h"
#include "cluster_rpc/worker_pool.h"
#include "cluster_rpc/worker_service.h"
#include "common/testing/thread_names.h"
#include "metrics/serving_metrics.h"
#include "runtime/torch/torch_registration.h"
#include "transport/grpc/async_unary.h"

namespace somm {
namespace {

using namespace std::chrono_literals;
// These tests' models are torchscript's: their as-registered variant is
// torchscript's first (runtime/torch/torch_registration.h).
constexpr const char* kAsRegistered = kVariantFp32;

// A bound on waits, so that a bug fails the test instead of hanging it; no
// test relies on its length.
constexpr auto kFailAfter = 20s;

// Echoes x as y, after `delay` (for deadline tests).
class EchoModel : public ExecutableModel {
 public:
  explicit EchoModel(const std::atomic<int>& delay_ms) : delay_ms_(delay_ms) {}
  Status Execute(const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs) override {
    if (delay_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_.load()));
    Tensor out = inputs[0];
    out.name = "y";
    outputs->push_back(std::move(out));
    return Status::Ok();
  }

 private:
  const std::atomic<int>& delay_ms_;
};

class FakeBackend : public Backend {
 public:
  std::string Name() const override { return "fake"; }
  std::vector<Device> Devices() const override { return {Device{}}; }
  StatusOr<std::unique_ptr<ExecutableModel>> Load(const LoadOptions&) override {
    return std::unique_ptr<ExecutableModel>(std::make_unique<EchoModel>(delay_ms));
  }
  std::atomic<int> delay_ms{0};
};

HardwareConfig Cpu1() { return {DeviceKind::kCpu, 0, 1}; }

// Version 1 of `name`: x FP32 [2] -> y FP32 [2], batching up to 4; no
// repository behind it (the fake backend reads no file).
VersionPtr Model(const std::string& name) {
  auto v = std::make_shared<VersionRecord>();
  v->config.name = name;
  v->config.max_batch_size = 4;
  v->config.inputs = {{"x", DataType::kFp32, {2}}};
  v->config.outputs = {{"y", DataType::kFp32, {2}}};
  v->version = 1;
  v->version_str = "1";
  v->path = "/nonexistent/" + name + "/1/model.pt";
  return v;
}

std::string Label(const std::string& model) {
  return cluster::GroupLabel(model, 1, kAsRegistered, Cpu1());
}

WorkerAction LoadOf(const std::string& model) {
  WorkerAction w;
  w.action.kind = cluster::Action::kLoad;
  w.action.model = model;
  w.action.version = 1;
  w.action.variant = kAsRegistered;
  w.action.hardware = Cpu1();
  w.action.device = "cpu";
  w.action.replicas = 1;
  w.action.reason = "test";
  w.urgent = true;
  return w;
}

ExecuteRequest QueryFor(const std::string& model) {
  ExecuteRequest r;
  r.group = Label(model);
  const float values[] = {1.5f, -2.0f};
  r.inputs.push_back(Tensor{"x", DataType::kFp32, {1, 2},
                            std::string(reinterpret_cast<const char*>(values), sizeof(values))});
  return r;
}

class ClusterRpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WorkerOptions o;
    o.id = "w1";
    o.memory_budget_bytes = int64_t{1} << 30;
    worker_ = std::make_unique<Worker>(o, backend_, metrics_);
    auto service = WorkerService::Start(
        *worker_, [](const std::string& model, int64_t version) -> StatusOr<VersionPtr> {
          if (model != "echo" || version != 1) {
            return NotFound("model '" + model + "' version " + std::to_string(version) +
                            " is not in the repository");
          }
          return Model(model);
        });
    ASSERT_TRUE(service.ok()) << service.status().ToString();
    service_ = std::move(service).value();
    address_ = "127.0.0.1:" + std::to_string(service_->port());
    stub_ = std::make_unique<GrpcWorkerStub>("w1", address_);
  }
  void TearDown() override {
    stub_.reset();
    if (service_) service_->Shutdown(1s);
    worker_->Shutdown();
  }

  Status Apply(WorkerAction action) {
    auto p = std::make_shared<std::promise<Status>>();
    std::future<Status> f = p->get_future();
    stub_->Apply(std::move(action), [p](Status s) { p->set_value(std::move(s)); });
    if (f.wait_for(kFailAfter) != std::future_status::ready) return Internal("apply hung");
    return f.get();
  }

  // Runs `request` through the stub; checks that done runs exactly once.
  StatusOr<ExecuteResult> Execute(ExecuteRequest& request) {
    auto p = std::make_shared<std::promise<StatusOr<ExecuteResult>>>();
    auto calls = std::make_shared<std::atomic<int>>(0);
    std::future<StatusOr<ExecuteResult>> f = p->get_future();
    Status taken = stub_->Execute(request, [p, calls](StatusOr<ExecuteResult> r) {
      if (calls->fetch_add(1) == 0) p->set_value(std::move(r));
    });
    if (!taken.ok()) return taken;
    if (f.wait_for(kFailAfter) != std::future_status::ready) return Internal("execute hung");
    StatusOr<ExecuteResult> result = f.get();
    std::this_thread::sleep_for(10ms);  // a second call of done would show by now
    EXPECT_EQ(calls->load(), 1);
    return result;
  }

  FakeBackend backend_;
  NullServingMetrics metrics_;
  std::unique_ptr<Worker> worker_;
  std::unique_ptr<WorkerService> service_;
  std::string address_;
  std::unique_ptr<GrpcWorkerStub> stub_;
};

TEST_F(ClusterRpcTest, LoadThenExecuteEchoesAndLeavesTheInputs) {
  ASSERT_TRUE(Apply(LoadOf("echo")).ok());
  EXPECT_TRUE(worker_->HasGroup(Label("echo")));

  ExecuteRequest request = QueryFor("echo");
  request.deadline = SteadyClock::now() + 10s;
  const std::string bytes = request.inputs[0].data;
  StatusOr<ExecuteResult> r = Execute(request);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->outputs.size(), 1u);
  EXPECT_EQ(r->outputs[0].name, "y");
  EXPECT_EQ(r->outputs[0].datatype, DataType::kFp32);
  EXPECT_EQ(r->outputs[0].shape, (Shape{1, 2}));
  EXPECT_EQ(r->outputs[0].data, bytes);
  EXPECT_EQ(r->stats.batch_size, 1);
  EXPECT_TRUE(r->stats.first_in_batch);  // the router counts the batch by it
  EXPECT_GE(r->stats.compute_ns, 0);
  EXPECT_GE(r->instance_id, 0);
  EXPECT_EQ(r->device, "cpu");
  // The router may retry elsewhere: the inputs are still there.
  ASSERT_EQ(request.inputs.size(), 1u);
  EXPECT_EQ(request.inputs[0].data, bytes);
  EXPECT_EQ(request.inputs[0].name, "x");

  // No deadline works too.
  ExecuteRequest no_deadline = QueryFor("echo");
  EXPECT_TRUE(Execute(no_deadline).ok());
}

// A router shares its inputs with the stub (ExecuteRequest::shared_inputs),
// which sends their bytes from where they lie: the stub's reference alone
// keeps them until gRPC has sent them, and it lets go of them afterwards.
TEST_F(ClusterRpcTest, SharedInputsAreKeptUntilSentThenReleased) {
  ASSERT_TRUE(Apply(LoadOf("echo")).ok());
  ExecuteRequest request = QueryFor("echo");
  const std::string bytes = request.inputs[0].data;
  auto shared = std::make_shared<const std::vector<Tensor>>(std::move(request.inputs));
  std::weak_ptr<const std::vector<Tensor>> watch = shared;
  request.inputs.clear();
  request.shared_inputs = std::move(shared);
  auto p = std::make_shared<std::promise<StatusOr<ExecuteResult>>>();
  std::future<StatusOr<ExecuteResult>> f = p->get_future();
  ASSERT_TRUE(
      stub_->Execute(request, [p](StatusOr<ExecuteResult> r) { p->set_value(std::move(r)); }).ok());
  request.shared_inputs.reset();  // the stub's reference is the only one left
  ASSERT_EQ(f.wait_for(kFailAfter), std::future_status::ready);
  StatusOr<ExecuteResult> r = f.get();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->outputs.size(), 1u);
  EXPECT_EQ(r->outputs[0].data, bytes);
  // gRPC drops the sent bytes' slices when the call is done with them.
  for (int i = 0; i < 500 && !watch.expired(); ++i) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(watch.expired()) << "the stub still holds the inputs after the answer";
}

TEST_F(ClusterRpcTest, ConcurrentQueriesShareTheStubAndEachGetsItsOwnAnswer) {
  ASSERT_TRUE(Apply(LoadOf("echo")).ok());
  constexpr int kQueries = 64;
  std::vector<std::promise<StatusOr<ExecuteResult>>> answers(kQueries);
  std::vector<std::string> sent(kQueries);
  for (int i = 0; i < kQueries; ++i) {
    ExecuteRequest request = QueryFor("echo");
    const float values[] = {static_cast<float>(i), static_cast<float>(-i)};
    request.inputs[0].data.assign(reinterpret_cast<const char*>(values), sizeof(values));
    sent[i] = request.inputs[0].data;
    ASSERT_TRUE(stub_->Execute(request, [&answers, i](StatusOr<ExecuteResult> r) {
                       answers[i].set_value(std::move(r));
                     }).ok());
  }
  for (int i = 0; i < kQueries; ++i) {
    auto f = answers[i].get_future();
    ASSERT_EQ(f.wait_for(kFailAfter), std::future_status::ready) << i;
    StatusOr<ExecuteResult> r = f.get();
    ASSERT_TRUE(r.ok()) << i << ": " << r.status().ToString();
    ASSERT_EQ(r->outputs.size(), 1u);
    EXPECT_EQ(r->outputs[0].data, sent[i]) << i;
  }
}

// Regression: a stub dropped while its calls were finishing lost its channel
// on a gRPC callback thread; with the server gone as well, gRPC's shared
// callback queue shut down from one of its own threads and the process
// aborted ("ref_counted.h: assertion failed: prior > 0") as the next server
// started.
TEST_F(ClusterRpcTest, StubDroppedWithCallsInFlightDoesNotCrashTheNextServer) {
  ASSERT_TRUE(Apply(LoadOf("echo")).ok());
  stub_.reset();
  for (int round = 0; round < 10; ++round) {
    constexpr int kQueries = 16;
    auto answered = std::make_shared<std::atomic<int>>(0);
    auto all = std::make_shared<std::promise<void>>();
    auto stub = std::make_unique<GrpcWorkerStub>("w1", address_);
    for (int i = 0; i < kQueries; ++i) {
      ExecuteRequest request = QueryFor("echo");
      // Answered or cancelled by the shutdown below: either is fine here.
      ASSERT_TRUE(stub->Execute(request, [answered, all](StatusOr<ExecuteResult>) {
                        if (answered->fetch_add(1) + 1 == kQueries) all->set_value();
                      }).ok());
    }
    stub.reset();  // the calls finish without it...
    service_->Shutdown(std::chrono::system_clock::now());
    service_.reset();  // ...and without the server
    ASSERT_EQ(all->get_future().wait_for(kFailAfter), std::future_status::ready);
    auto service = WorkerService::Start(*worker_, [](const std::string& m, int64_t) {
      return StatusOr<VersionPtr>(Model(m));
    });
    ASSERT_TRUE(service.ok()) << service.status().ToString();
    service_ = std::move(service).value();
    address_ = "127.0.0.1:" + std::to_string(service_->port());
  }
  stub_ = std::make_unique<GrpcWorkerStub>("w1", address_);
  ExecuteRequest request = QueryFor("echo");
  EXPECT_TRUE(Execute(request).ok());
}

TEST_F(ClusterRpcTest, UnknownGroupIsNotFoundThroughDone) {
  ExecuteRequest request = QueryFor("echo");
  StatusOr<ExecuteResult> r = Execute(request);
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound) << r.status().ToString();
  EXPECT_NE(r.status().message().find(Label("echo")), std::string::npos) << r.status().ToString();
  EXPECT_EQ(request.inputs.size(), 1u);
}

TEST_F(ClusterRpcTest, ResolverErrorIsTheApplysError) {
  Status s = Apply(LoadOf("missing"));
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
  EXPECT_NE(s.message().find("not in the repository"), std::string::npos) << s.ToString();
  EXPECT_FALSE(worker_->HasGroup(Label("missing")));
}

TEST_F(ClusterRpcTest, UnloadNeedsNoRecord) {
  ASSERT_TRUE(Apply(LoadOf("echo")).ok());
  WorkerAction unload = LoadOf("echo");
  unload.action.kind = cluster::Action::kUnload;
  unload.action.cause = cluster::Action::Cause::kIdle;
  unload.action.replicas = 0;
  EXPECT_TRUE(Apply(unload).ok());
  EXPECT_FALSE(worker_->HasGroup(Label("echo")));
}

TEST_F(ClusterRpcTest, PassedDeadlineIsRefusedNotHung) {
  ASSERT_TRUE(Apply(LoadOf("echo")).ok());
  ExecuteRequest request = QueryFor("echo");
  request.deadline = SteadyClock::now() - 1ms;
  StatusOr<ExecuteResult> r = Execute(request);
  EXPECT_TRUE(r.status().code() == StatusCode::kDeadlineExceeded ||
              r.status().code() == StatusCode::kResourceExhausted)
      << r.status().ToString();
}

// A best-effort query is answered late rather than not: its SLO must not
// become the call's deadline (it did, and such queries came back
// DEADLINE_EXCEEDED through a router where `somm serve` answered them).
TEST_F(ClusterRpcTest, BestEffortQueryPastItsSloIsAnsweredNotCutByTheCallDeadline) {
  ASSERT_TRUE(Apply(LoadOf("echo")).ok());
  backend_.delay_ms = 100;
  ExecuteRequest request = QueryFor("echo");
  request.deadline = SteadyClock::now() + 1ms;
  request.best_effort = true;
  StatusOr<ExecuteResult> r = Execute(request);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  backend_.delay_ms = 0;
}

TEST_F(ClusterRpcTest, DeadlineThatPassesWhileExecutingIsDeadlineExceeded) {
  ASSERT_TRUE(Apply(LoadOf("echo")).ok());
  backend_.delay_ms = 500;
  ExecuteRequest request = QueryFor("echo");
  request.deadline = SteadyClock::now() + 50ms;
  StatusOr<ExecuteResult> r = Execute(request);
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded) << r.status().ToString();
  backend_.delay_ms = 0;
}

TEST_F(ClusterRpcTest, ReportRoundTrips) {
  ASSERT_TRUE(Apply(LoadOf("echo")).ok());
  cluster::WorkerReport report = stub_->Report();
  EXPECT_EQ(report.worker, "w1");
  EXPECT_FALSE(report.incarnation.empty());
  ASSERT_EQ(report.groups.size(), 1u);
  EXPECT_EQ(cluster::GroupLabel(report.groups[0]), Label("echo"));
  EXPECT_EQ(report.groups[0].replicas, 1);
  EXPECT_FALSE(report.devices.empty());
}

TEST_F(ClusterRpcTest, AfterShutdownExecuteIsUnavailableThroughDone) {
  ASSERT_TRUE(Apply(LoadOf("echo")).ok());
  service_->Shutdown(1s);
  ExecuteRequest request = QueryFor("echo");
  StatusOr<ExecuteResult> r = Execute(request);
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
  EXPECT_EQ(request.inputs.size(), 1u);

  // A report from a worker that is gone holds only its id.
  cluster::WorkerReport report = stub_->Report();
  EXPECT_EQ(report.worker, "w1");
  EXPECT_TRUE(report.groups.empty());
}

std::string ThisThreadName() {
  char name[16] = {};
  pthread_getname_np(pthread_self(), name, sizeof(name));
  return name;
}

bool AnyThreadNamed(const std::string& wanted) {
  const std::vector<std::string> names = testing::ThreadNames();
  return std::find(names.begin(), names.end(), wanted) != names.end();
}

// A gRPC server with no service, whose one completion queue `threads`
// threads poll: what a router's frontend lends its stubs (queue()).
struct ServerQueue {
  explicit ServerQueue(int threads) {
    grpc::ServerBuilder builder;
    queue->Open(builder.AddCompletionQueue());
    server = builder.BuildAndStart();
    if (server) queue->StartThreads(threads, "test-queue");
  }
  std::shared_ptr<grpc_async::CallQueue> queue = std::make_shared<grpc_async::CallQueue>();
  std::unique_ptr<grpc::Server> server;  // after the queue: destroyed first
};

// A router's stubs start their calls on its gRPC frontend's completion queue
// (GrpcWorkerStubOptions::queue): the answers come back on that queue's
// threads, and gRPC's callback threads never start. Once the queue is
// closed, the stub falls back to the callback API and still answers.
TEST_F(ClusterRpcTest, StubOnAServersQueueIsAnsweredByItsThreads) {
  ServerQueue served(1);
  ASSERT_NE(served.server, nullptr);
  GrpcWorkerStubOptions options;
  options.queue = served.queue;
  GrpcWorkerStub stub("w1", address_, options);

  auto applied = std::make_shared<std::promise<std::string>>();
  stub.Apply(LoadOf("echo"), [applied](Status s) {
    applied->set_value(s.ok() ? ThisThreadName() : s.ToString());
  });
  auto a = applied->get_future();
  ASSERT_EQ(a.wait_for(kFailAfter), std::future_status::ready);
  EXPECT_EQ(a.get(), "test-queue");

  auto executed = std::make_shared<std::promise<std::string>>();
  ExecuteRequest request = QueryFor("echo");
  const std::string bytes = request.inputs[0].data;
  ASSERT_TRUE(stub.Execute(request, [executed, bytes](StatusOr<ExecuteResult> r) {
                    if (!r.ok()) return executed->set_value(r.status().ToString());
                    const bool echoed = r->outputs.size() == 1 && r->outputs[0].data == bytes;
                    executed->set_value(echoed ? ThisThreadName() : "a wrong answer");
                  }).ok());
  auto e = executed->get_future();
  ASSERT_EQ(e.wait_for(kFailAfter), std::future_status::ready);
  EXPECT_EQ(e.get(), "test-queue");
  EXPECT_FALSE(AnyThreadNamed("nexting_thread"));

  served.server->Shutdown();
  served.queue->Close();
  ExecuteRequest after = QueryFor("echo");
  auto p = std::make_shared<std::promise<StatusOr<ExecuteResult>>>();
  ASSERT_TRUE(stub.Execute(after, [p](StatusOr<ExecuteResult> r) { p->set_value(std::move(r)); })
                  .ok());
  auto f = p->get_future();
  ASSERT_EQ(f.wait_for(kFailAfter), std::future_status::ready);
  EXPECT_TRUE(f.get().ok());
}

// With gRPC 1.51's epoll poller, every thread waiting on a queue takes turns
// at epoll_wait and hands the turn on with a futex each time it wakes; a
// router's gRPC query paid four such hand-offs at concurrency 1 (the router
// hop in docs/cluster.md). So a queue's second thread waits on gRPC only
// while calls overlap, or while a call started off the queue's threads (a
// REST query's) is in flight: calls that follow one another, each started by
// the answer to the one before, are all answered by the first thread.
TEST_F(ClusterRpcTest, QueueHelpersWaitOnGrpcOnlyWhileCallsOverlap) {
  ASSERT_TRUE(Apply(LoadOf("echo")).ok());
  ServerQueue served(2);
  ASSERT_NE(served.server, nullptr);
  grpc_async::CallQueue& queue = *served.queue;
  GrpcWorkerStubOptions options;
  options.queue = served.queue;
  GrpcWorkerStub stub("w1", address_, options);
  auto helpers_polling_becomes = [&queue](int n) {
    const auto until = std::chrono::steady_clock::now() + kFailAfter;
    while (queue.HelpersPolling() != n && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(1ms);
    }
    return queue.HelpersPolling() == n;
  };
  EXPECT_TRUE(helpers_polling_becomes(0));

  // A call from this thread (as a REST query's) and two more overlapping it:
  // the helper polls until they have ended.
  backend_.delay_ms = 300;
  std::vector<ExecuteRequest> requests(3, QueryFor("echo"));
  auto answered = std::make_shared<std::atomic<int>>(0);
  for (ExecuteRequest& r : requests) {
    ASSERT_TRUE(stub.Execute(r, [answered](StatusOr<ExecuteResult> x) {
                      if (x.ok()) answered->fetch_add(1);
                    }).ok());
  }
  EXPECT_TRUE(helpers_polling_becomes(1)) << "three calls in flight, and the helper waits";
  EXPECT_TRUE(helpers_polling_becomes(0)) << "the calls ended, and the helper still polls";
  EXPECT_EQ(answered->load(), 3);
  backend_.delay_ms = 0;

  // Twenty calls one after another, each started on a queue thread by the
  // answer to the one before (as a gRPC query's worker call is): one thread
  // takes every answer. An alarm starts the first on a queue thread.
  struct Chain {
    GrpcWorkerStub* stub;
    int left = 20;
    ExecuteRequest request;
    std::mutex mu;
    std::set<std::thread::id> threads;
    std::promise<Status> done;
    void Next() {
      request = QueryFor("echo");
      Status taken = stub->Execute(request, [this](StatusOr<ExecuteResult> r) {
        {
          std::lock_guard lock(mu);
          threads.insert(std::this_thread::get_id());
        }
        if (!r.ok()) return done.set_value(r.status());
        if (--left == 0) return done.set_value(Status::Ok());
        Next();
      });
      if (!taken.ok()) done.set_value(taken);
    }
  };
  Chain chain{&stub};
  auto finished = chain.done.get_future();
  grpc::Alarm alarm;
  ASSERT_TRUE(queue.OnOpenQueue([&] {
    alarm.Set(queue.cq(), std::chrono::system_clock::now(),
              new grpc_async::OneShot([&chain](bool) { chain.Next(); }));
  }));
  ASSERT_EQ(finished.wait_for(kFailAfter), std::future_status::ready);
  EXPECT_TRUE(finished.get().ok());
  {
    std::lock_guard lock(chain.mu);
    EXPECT_EQ(chain.threads.size(), 1u) << "answers to calls that never overlapped were handed "
                                           "between the queue's threads";
  }
  served.server->Shutdown();
  served.queue->Close();
}

// A router's stop closes its queue once its frontends have waited for their
// queries; a worker call still in flight then serves no one, and one with no
// deadline (best effort) could keep the queue, and the router, up for as long
// as the worker takes. Close cancels it instead: its `done` runs with an
// error, before the worker would have answered.
TEST_F(ClusterRpcTest, ClosingTheQueueCancelsItsCallsStillInFlight) {
  ASSERT_TRUE(Apply(LoadOf("echo")).ok());
  ServerQueue served(2);
  ASSERT_NE(served.server, nullptr);
  GrpcWorkerStubOptions options;
  options.queue = served.queue;
  GrpcWorkerStub stub("w1", address_, options);

  backend_.delay_ms = 3000;
  ExecuteRequest request = QueryFor("echo");
  request.best_effort = true;  // no deadline on the call
  auto p = std::make_shared<std::promise<StatusOr<ExecuteResult>>>();
  ASSERT_TRUE(
      stub.Execute(request, [p](StatusOr<ExecuteResult> r) { p->set_value(std::move(r)); }).ok());
  // Most likely executing by then; the test holds either way (a call not yet
  // sent is cancelled too).
  std::this_thread::sleep_for(100ms);
  served.server->Shutdown(std::chrono::system_clock::now());
  auto closed = std::async(std::launch::async, [queue = served.queue] { queue->Close(); });
  ASSERT_EQ(closed.wait_for(kFailAfter), std::future_status::ready);
  auto f = p->get_future();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(0)), std::future_status::ready)
      << "Close returned before the call's done ran";
  StatusOr<ExecuteResult> r = f.get();
  EXPECT_FALSE(r.ok()) << "the call was not cancelled: the worker answered it";
  backend_.delay_ms = 0;
}

TEST_F(ClusterRpcTest, PoolKeepsOneStubPerWorker) {
  std::map<std::string, std::string> addresses = {{"w1", address_}};
  std::mutex mu;
  GrpcWorkerPoolOptions options;
  options.refresh = 0ms;  // every Find reads the provider
  GrpcWorkerPool pool(
      [&] {
        std::lock_guard lock(mu);
        return addresses;
      },
      options);
  std::shared_ptr<WorkerStub> a = pool.Find("w1");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->id(), "w1");
  EXPECT_EQ(pool.Find("w1"), a);
  EXPECT_EQ(pool.Find("w2"), nullptr);
  EXPECT_EQ(pool.Ids(), std::vector<std::string>{"w1"});

  // The stub works.
  auto p = std::make_shared<std::promise<Status>>();
  a->Apply(LoadOf("echo"), [p](Status s) { p->set_value(std::move(s)); });
  auto f = p->get_future();
  ASSERT_EQ(f.wait_for(kFailAfter), std::future_status::ready);
  EXPECT_TRUE(f.get().ok());

  {
    std::lock_guard lock(mu);
    addresses["w1"] = "127.0.0.1:1";  // moved
  }
  std::shared_ptr<WorkerStub> b = pool.Find("w1");
  ASSERT_NE(b, nullptr);
  EXPECT_NE(b, a);
  {
    std::lock_guard lock(mu);
    addresses.clear();  // gone
  }
  EXPECT_EQ(pool.Find("w1"), nullptr);
  EXPECT_TRUE(pool.Ids().empty());
}

}  // namespace
}  // namespace somm
