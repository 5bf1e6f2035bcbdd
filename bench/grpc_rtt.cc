// bench_grpc_rtt: the floor of one unary gRPC round trip on this machine, by
// server and client shape, for messages the size of a cluster Execute call
// (somm.cluster.SommWorker/Execute, proto/cluster.proto). It tells what the
// router hop (bench/router_hop.sh) could cost at best, and which shape of
// gRPC's C++ API gets closest.
//
// Servers (each in a child process of its own, this binary with --serve):
//   callback  CallbackService; the handler answers through DefaultReactor
//   sync      synchronous Service, SetSyncServerOption(1 CQ, 1..2 pollers)
//   cq1, cq2  async service on one completion queue polled by 1 or 2 of
//             our own threads (Triton's shape)
// With --handoff, every server answers from another thread (as the worker's
// batcher does); the sync handler then blocks until that thread is done.
// Clients (in this process):
//   callback  stub->async()->Execute, completions on gRPC's own threads
//   sync      blocking stub->Execute on the calling thread(s)
//   cq        PrepareAsyncExecute on one completion queue, one Next thread
// For each pair: p50/p99 of --queries round trips at concurrency 1, then
// queries/s over --window-s at concurrency --concurrency (closed loop).
//
// Usage: build/bench/bench_grpc_rtt [--queries N] [--concurrency C]
//          [--window-s S] [--bytes B] [--handoff]
//          [--servers "callback sync cq1 cq2"] [--clients "callback sync cq"]
#include <grpcpp/grpcpp.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "proto/cluster.grpc.pb.h"

extern char** environ;

namespace {

namespace pb = somm::cluster;
using Clock = std::chrono::steady_clock;

// ---- the answer, and the optional handoff to another thread ---------------

void Answer(const pb::ExecuteRequest& request, pb::ExecuteResponse* response) {
  pb::Tensor* out = response->add_outputs();
  out->set_name("logits");
  out->set_datatype("FP32");
  out->add_shape(1);
  out->add_shape(10);
  out->set_data(std::string(40, '\1'));
  response->set_queue_ns(1000);
  response->set_compute_ns(2000);
  response->set_batch_size(1);
  response->set_instance_id(request.instance_id() < 0 ? 0 : request.instance_id());
  response->set_device("cpu");
  response->set_first_in_batch(true);
}

// One thread that runs what it is given, in order: the stand-in for a
// batcher's instance thread.
class Handoff {
 public:
  Handoff() : thread_([this] { Run(); }) {}
  ~Handoff() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  void Post(std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(fn));
    }
    cv_.notify_one();
  }

 private:
  void Run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      auto fn = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      fn();
      lock.lock();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  std::thread thread_;
};

// ---- servers ---------------------------------------------------------------

class CallbackServer final : public pb::SommWorker::CallbackService {
 public:
  explicit CallbackServer(Handoff* handoff) : handoff_(handoff) {}
  grpc::ServerUnaryReactor* Execute(grpc::CallbackServerContext* context,
                                    const pb::ExecuteRequest* request,
                                    pb::ExecuteResponse* response) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    auto finish = [=] {
      Answer(*request, response);
      reactor->Finish(grpc::Status::OK);
    };
    if (handoff_) {
      handoff_->Post(finish);
    } else {
      finish();
    }
    return reactor;
  }

 private:
  Handoff* handoff_;
};

class SyncServer final : public pb::SommWorker::Service {
 public:
  explicit SyncServer(Handoff* handoff) : handoff_(handoff) {}
  grpc::Status Execute(grpc::ServerContext*, const pb::ExecuteRequest* request,
                       pb::ExecuteResponse* response) override {
    if (!handoff_) {
      Answer(*request, response);
      return grpc::Status::OK;
    }
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    handoff_->Post([&] {
      Answer(*request, response);
      std::lock_guard<std::mutex> lock(mu);
      done = true;
      cv.notify_one();
    });
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done; });
    return grpc::Status::OK;
  }

 private:
  Handoff* handoff_;
};

// One Execute call of the async server: asked for, then answered.
struct AsyncCall {
  grpc::ServerContext context;
  pb::ExecuteRequest request;
  pb::ExecuteResponse response;
  grpc::ServerAsyncResponseWriter<pb::ExecuteResponse> responder{&context};
  bool answered = false;
};

void ServeAsync(pb::SommWorker::AsyncService* service, grpc::ServerCompletionQueue* cq,
                Handoff* handoff) {
  auto ask = [&] {
    auto* call = new AsyncCall;
    service->RequestExecute(&call->context, &call->request, &call->responder, cq, cq, call);
  };
  void* tag;
  bool ok;
  while (cq->Next(&tag, &ok)) {
    auto* call = static_cast<AsyncCall*>(tag);
    if (call->answered || !ok) {
      if (!call->answered && ok) ask();
      delete call;
      continue;
    }
    ask();
    call->answered = true;
    auto finish = [call] {
      Answer(call->request, &call->response);
      call->responder.Finish(call->response, grpc::Status::OK, call);
    };
    if (handoff) {
      handoff->Post(finish);
    } else {
      finish();
    }
  }
}

int Serve(const std::string& kind, bool handoff_on) {
  std::unique_ptr<Handoff> handoff;
  if (handoff_on) handoff = std::make_unique<Handoff>();
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  CallbackServer callback(handoff.get());
  SyncServer sync(handoff.get());
  pb::SommWorker::AsyncService async;
  std::unique_ptr<grpc::ServerCompletionQueue> cq;
  int cq_threads = 0;
  if (kind == "callback") {
    builder.RegisterService(&callback);
  } else if (kind == "sync") {
    builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::NUM_CQS, 1);
    builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, 1);
    builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, 2);
    builder.RegisterService(&sync);
  } else if (kind == "cq1" || kind == "cq2") {
    builder.RegisterService(&async);
    cq = builder.AddCompletionQueue();
    cq_threads = kind == "cq1" ? 1 : 2;
  } else {
    std::fprintf(stderr, "unknown server '%s'\n", kind.c_str());
    return 2;
  }
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) return 1;
  std::vector<std::thread> threads;
  for (int i = 0; i < cq_threads; ++i) {
    // Enough outstanding requests that a burst of c queries never waits.
    for (int j = 0; j < 32; ++j) {
      auto* call = new AsyncCall;
      async.RequestExecute(&call->context, &call->request, &call->responder, cq.get(), cq.get(),
                           call);
    }
    threads.emplace_back([&] { ServeAsync(&async, cq.get(), handoff.get()); });
  }
  std::printf("%d\n", port);
  std::fflush(stdout);
  // Serve until the parent closes our stdin.
  char byte;
  while (read(0, &byte, 1) > 0) {
  }
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  if (cq) cq->Shutdown();
  for (auto& t : threads) t.join();
  return 0;
}

// A server child: its port, and the pipe whose closing stops it.
struct Child {
  pid_t pid = -1;
  int port = 0;
  int stdin_fd = -1;
};

Child StartServer(const std::string& kind, bool handoff) {
  int to_child[2], from_child[2];
  if (pipe(to_child) != 0 || pipe(from_child) != 0) std::abort();
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, to_child[0], 0);
  posix_spawn_file_actions_adddup2(&actions, from_child[1], 1);
  posix_spawn_file_actions_addclose(&actions, to_child[1]);
  posix_spawn_file_actions_addclose(&actions, from_child[0]);
  std::string serve = "--serve=" + kind;
  std::vector<char*> argv = {const_cast<char*>("bench_grpc_rtt"), serve.data()};
  std::string handoff_flag = "--handoff";
  if (handoff) argv.push_back(handoff_flag.data());
  argv.push_back(nullptr);
  Child child;
  if (posix_spawn(&child.pid, "/proc/self/exe", &actions, nullptr, argv.data(), environ) != 0) {
    std::abort();
  }
  posix_spawn_file_actions_destroy(&actions);
  close(to_child[0]);
  close(from_child[1]);
  char buf[32] = {};
  ssize_t n = read(from_child[0], buf, sizeof(buf) - 1);
  close(from_child[0]);
  child.port = n > 0 ? std::atoi(buf) : 0;
  child.stdin_fd = to_child[1];
  return child;
}

void StopServer(Child& child) {
  close(child.stdin_fd);
  int status;
  waitpid(child.pid, &status, 0);
}

// ---- clients ---------------------------------------------------------------

// Starts one call and runs `done` when it has finished (on whatever thread
// the client shape finishes on). Sync clients instead block in Call().
class Client {
 public:
  virtual ~Client() = default;
  virtual bool blocking() const { return false; }
  virtual void Start(const pb::ExecuteRequest& request, std::function<void(bool)> done) = 0;
  virtual bool Call(const pb::ExecuteRequest&) { return false; }
};

class CallbackClient final : public Client {
 public:
  explicit CallbackClient(std::shared_ptr<grpc::Channel> ch) : stub_(pb::SommWorker::NewStub(ch)) {}
  void Start(const pb::ExecuteRequest& request, std::function<void(bool)> done) override {
    struct State {
      grpc::ClientContext context;
      pb::ExecuteRequest request;
      pb::ExecuteResponse response;
    };
    auto* s = new State;
    s->request = request;
    stub_->async()->Execute(&s->context, &s->request, &s->response,
                            [s, done = std::move(done)](grpc::Status status) {
                              delete s;
                              done(status.ok());
                            });
  }

 private:
  std::unique_ptr<pb::SommWorker::Stub> stub_;
};

class SyncClient final : public Client {
 public:
  explicit SyncClient(std::shared_ptr<grpc::Channel> ch) : stub_(pb::SommWorker::NewStub(ch)) {}
  bool blocking() const override { return true; }
  void Start(const pb::ExecuteRequest&, std::function<void(bool)>) override { std::abort(); }
  bool Call(const pb::ExecuteRequest& request) override {
    grpc::ClientContext context;
    pb::ExecuteResponse response;
    return stub_->Execute(&context, request, &response).ok();
  }

 private:
  std::unique_ptr<pb::SommWorker::Stub> stub_;
};

class CqClient final : public Client {
 public:
  explicit CqClient(std::shared_ptr<grpc::Channel> ch)
      : stub_(pb::SommWorker::NewStub(ch)), thread_([this] { Run(); }) {}
  ~CqClient() override {
    cq_.Shutdown();
    thread_.join();
  }
  void Start(const pb::ExecuteRequest& request, std::function<void(bool)> done) override {
    auto* s = new State;
    s->done = std::move(done);
    s->reader = stub_->PrepareAsyncExecute(&s->context, request, &cq_);
    s->reader->StartCall();
    s->reader->Finish(&s->response, &s->status, s);
  }

 private:
  struct State {
    grpc::ClientContext context;
    pb::ExecuteResponse response;
    grpc::Status status;
    std::unique_ptr<grpc::ClientAsyncResponseReader<pb::ExecuteResponse>> reader;
    std::function<void(bool)> done;
  };
  void Run() {
    void* tag;
    bool ok;
    while (cq_.Next(&tag, &ok)) {
      auto* s = static_cast<State*>(tag);
      auto done = std::move(s->done);
      bool good = s->status.ok();
      delete s;
      done(good);
    }
  }
  std::unique_ptr<pb::SommWorker::Stub> stub_;
  grpc::CompletionQueue cq_;
  std::thread thread_;
};

std::unique_ptr<Client> MakeClient(const std::string& kind, int port) {
  grpc::ChannelArguments args;
  // A channel of its own per client shape (no subchannel sharing between runs).
  args.SetInt("somm.bench.unique", port * 7 + static_cast<int>(kind.size()));
  auto channel = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port),
                                           grpc::InsecureChannelCredentials(), args);
  if (kind == "callback") return std::make_unique<CallbackClient>(channel);
  if (kind == "sync") return std::make_unique<SyncClient>(channel);
  if (kind == "cq") return std::make_unique<CqClient>(channel);
  std::fprintf(stderr, "unknown client '%s'\n", kind.c_str());
  std::exit(2);
}

// One call, waited for on this thread.
bool RoundTrip(Client& client, const pb::ExecuteRequest& request) {
  if (client.blocking()) return client.Call(request);
  std::mutex mu;
  std::condition_variable cv;
  bool finished = false, good = false;
  client.Start(request, [&](bool ok) {
    std::lock_guard<std::mutex> lock(mu);
    finished = true;
    good = ok;
    cv.notify_one();
  });
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return finished; });
  return good;
}

struct Point {
  double p50_us = 0, p99_us = 0, qps = 0;
  int errors = 0;
};

Point Measure(Client& client, const pb::ExecuteRequest& request, int queries, int concurrency,
              double window_s) {
  Point point;
  for (int i = 0; i < 200; ++i) RoundTrip(client, request);  // warm-up
  std::vector<double> us;
  us.reserve(queries);
  for (int i = 0; i < queries; ++i) {
    auto t0 = Clock::now();
    if (!RoundTrip(client, request)) ++point.errors;
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  std::sort(us.begin(), us.end());
  point.p50_us = us[us.size() / 2];
  point.p99_us = us[us.size() * 99 / 100];

  // Closed loop at `concurrency`: each finished call starts the next one.
  std::atomic<int64_t> done{0};
  std::atomic<bool> stop{false};
  const auto end = Clock::now() + std::chrono::duration<double>(window_s);
  if (client.blocking()) {
    std::vector<std::thread> threads;
    for (int i = 0; i < concurrency; ++i) {
      threads.emplace_back([&] {
        while (Clock::now() < end) {
          client.Call(request);
          done.fetch_add(1, std::memory_order_relaxed);
        }
      });
    }
    for (auto& t : threads) t.join();
  } else {
    std::atomic<int> in_flight{concurrency};
    std::mutex mu;
    std::condition_variable cv;
    std::function<void(bool)> next = [&](bool) {
      done.fetch_add(1, std::memory_order_relaxed);
      if (Clock::now() < end) {
        client.Start(request, next);
        return;
      }
      if (in_flight.fetch_sub(1) == 1) {
        std::lock_guard<std::mutex> lock(mu);
        cv.notify_one();
      }
    };
    for (int i = 0; i < concurrency; ++i) client.Start(request, next);
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return in_flight.load() == 0; });
  }
  point.qps = static_cast<double>(done.load()) / window_s;
  return point;
}

std::vector<std::string> Words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int queries = 3000, concurrency = 16, bytes = 256;
  double window_s = 3;
  bool handoff = false;
  std::string servers = "callback sync cq1 cq2", clients = "callback sync cq", serve;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* name) -> const char* {
      std::string prefix = std::string(name) + "=";
      if (a.rfind(prefix, 0) == 0) return argv[i] + prefix.size();
      if (a == name && i + 1 < argc) return argv[++i];
      return nullptr;
    };
    if (a == "--handoff") {
      handoff = true;
    } else if (const char* v = value("--serve")) {
      serve = v;
    } else if (const char* v = value("--queries")) {
      queries = std::atoi(v);
    } else if (const char* v = value("--concurrency")) {
      concurrency = std::atoi(v);
    } else if (const char* v = value("--window-s")) {
      window_s = std::atof(v);
    } else if (const char* v = value("--bytes")) {
      bytes = std::atoi(v);
    } else if (const char* v = value("--servers")) {
      servers = v;
    } else if (const char* v = value("--clients")) {
      clients = v;
    } else {
      std::fprintf(stderr, "bench_grpc_rtt: unknown argument '%s' (see the file's header)\n",
                   a.c_str());
      return 2;
    }
  }
  if (!serve.empty()) return Serve(serve, handoff);
  if (queries < 100 || concurrency < 1 || window_s <= 0 || bytes < 0) {
    std::fprintf(stderr, "bench_grpc_rtt: --queries >= 100, --concurrency >= 1, --window-s > 0\n");
    return 2;
  }

  pb::ExecuteRequest request;
  request.set_group("digits-mlp:1:ts-fp32@cpu1");
  request.set_instance_id(-1);
  pb::Tensor* input = request.add_inputs();
  input->set_name("input");
  input->set_datatype("FP32");
  input->add_shape(1);
  input->add_shape(bytes / 4);
  input->set_data(std::string(bytes, '\2'));

  std::printf("request %zu bytes, %d queries at c=1, c=%d for %.1f s, handoff %s\n",
              request.ByteSizeLong(), queries, concurrency, window_s, handoff ? "on" : "off");
  std::printf("| server | client | p50 us | p99 us | qps c=%d | errors |\n", concurrency);
  std::printf("|---|---|---|---|---|---|\n");
  for (const std::string& s : Words(servers)) {
    Child child = StartServer(s, handoff);
    if (child.port == 0) {
      std::fprintf(stderr, "server %s did not start\n", s.c_str());
      return 1;
    }
    for (const std::string& c : Words(clients)) {
      std::unique_ptr<Client> client = MakeClient(c, child.port);
      Point p = Measure(*client, request, queries, concurrency, window_s);
      std::printf("| %s | %s | %.0f | %.0f | %.0f | %d |\n", s.c_str(), c.c_str(), p.p50_us,
                  p.p99_us, p.qps, p.errors);
      std::fflush(stdout);
    }
    StopServer(child);
  }
  return 0;
}
