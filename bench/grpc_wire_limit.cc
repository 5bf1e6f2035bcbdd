// bench_grpc_wire_limit: the gRPC wire limit. A gRPC server that answers
// every call with somm's own response bytes and does next to nothing per
// query, so that a load generator pointed at it measures what the loopback
// wire, gRPC's HTTP/2 stack on both ends and the load generator itself cost:
// for gRPC what nginx answering somm's bytes is for REST (bench/wire_limit.sh).
//
// How: an async generic service (no method is parsed or known in advance) on
// one completion queue polled by --threads threads of its own (default 1:
// somm serve's ModelInfer queue has half the cores, 1 on 2 cores; nginx runs
// one worker). The first call of each method is forwarded, bytes as they
// are, to --upstream (somm serve's gRPC port), and somm's answer is kept;
// every later call of that method is answered with those bytes, unread.
// `somm bench -i grpc` asks ServerReady, ModelMetadata and ModelReady once
// before its load, then ModelInfer: its warm-up fills the cache, and its
// windows see only cached answers. A method that somm answers with an error
// is passed on and never cached.
//
// Usage: build/bench_grpc_wire_limit --upstream HOST:PORT [--port P]
//          [--threads N]
// Prints "listening on PORT" once serving; SIGTERM or SIGINT stops it, and
// it then prints, per method, the calls answered and the bytes kept.
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

// What somm answered to the first call of each method.
class AnswerCache {
 public:
  explicit AnswerCache(std::shared_ptr<grpc::Channel> upstream)
      : stub_(std::move(upstream)) {}

  // The answer for `method`: the cached one, or somm's to `request` (kept
  // when OK). Forwarding blocks the calling thread; it happens once per
  // method, before the load generator's windows.
  grpc::Status Answer(const std::string& method, const grpc::ByteBuffer& request,
                      grpc::ByteBuffer* response) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = answers_.find(method);
      if (it != answers_.end()) {
        *response = it->second.bytes;
        ++it->second.calls;
        return grpc::Status::OK;
      }
    }
    grpc::Status status = Forward(method, request, response);
    if (status.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      Entry& e = answers_[method];
      if (e.calls == 0) e.bytes = *response;
      ++e.calls;
    }
    return status;
  }

  void PrintSummary() {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [method, e] : answers_) {
      std::printf("%s: %lld calls answered with %zu bytes\n", method.c_str(),
                  static_cast<long long>(e.calls), e.bytes.Length());
    }
    std::fflush(stdout);
  }

 private:
  struct Entry {
    grpc::ByteBuffer bytes;
    int64_t calls = 0;
  };

  grpc::Status Forward(const std::string& method, const grpc::ByteBuffer& request,
                       grpc::ByteBuffer* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    grpc::CompletionQueue cq;
    grpc::Status status;
    auto call = stub_.PrepareUnaryCall(&context, method, request, &cq);
    call->StartCall();
    call->Finish(response, &status, &cq);
    void* tag = nullptr;
    bool ok = false;
    cq.Next(&tag, &ok);
    cq.Shutdown();
    while (cq.Next(&tag, &ok)) {
    }
    if (!ok && status.ok()) status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "upstream call failed");
    return status;
  }

  grpc::GenericStub stub_;
  std::mutex mu_;
  std::map<std::string, Entry> answers_;
};

// One call: asked for, its request read, answered, freed. Each step's
// completion comes back here as the tag.
class Call {
 public:
  Call(grpc::AsyncGenericService* service, grpc::ServerCompletionQueue* cq, AnswerCache* cache)
      : service_(service), cq_(cq), cache_(cache), stream_(&context_) {
    service_->RequestCall(&context_, &stream_, cq_, cq_, this);
  }

  void Proceed(bool ok) {
    switch (step_) {
      case Step::kAsked:
        if (!ok) {  // the server is shutting down
          delete this;
          return;
        }
        new Call(service_, cq_, cache_);  // the next call
        step_ = Step::kReading;
        stream_.Read(&request_, this);
        return;
      case Step::kReading: {
        step_ = Step::kAnswering;
        if (!ok) {
          stream_.Finish(grpc::Status(grpc::StatusCode::INTERNAL, "no request message"), this);
          return;
        }
        grpc::Status status = cache_->Answer(context_.method(), request_, &response_);
        if (status.ok()) {
          stream_.WriteAndFinish(response_, grpc::WriteOptions(), grpc::Status::OK, this);
        } else {
          stream_.Finish(status, this);
        }
        return;
      }
      case Step::kAnswering:
        delete this;
        return;
    }
  }

 private:
  enum class Step { kAsked, kReading, kAnswering };
  grpc::AsyncGenericService* const service_;
  grpc::ServerCompletionQueue* const cq_;
  AnswerCache* const cache_;
  grpc::GenericServerContext context_;
  grpc::GenericServerAsyncReaderWriter stream_;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer response_;
  Step step_ = Step::kAsked;
};

std::atomic<bool> g_stop{false};

void OnSignal(int) { g_stop.store(true); }

int Usage(const char* why) {
  std::fprintf(stderr,
               "bench_grpc_wire_limit: %s\nusage: bench_grpc_wire_limit --upstream HOST:PORT "
               "[--port P] [--threads N]\n",
               why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string upstream;
  int port = 0;
  int threads = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) return Usage(("missing value after " + arg).c_str());
    if (arg == "--upstream") {
      upstream = argv[++i];
    } else if (arg == "--port") {
      port = std::atoi(argv[++i]);
    } else if (arg == "--threads") {
      threads = std::atoi(argv[++i]);
    } else {
      return Usage(("unknown argument " + arg).c_str());
    }
  }
  if (upstream.empty()) return Usage("--upstream is required");
  if (threads < 1 || threads > 16) return Usage("--threads must be 1 to 16");
  if (port < 0 || port > 65535) return Usage("--port must be 0 to 65535");

  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  AnswerCache cache(
      grpc::CreateCustomChannel(upstream, grpc::InsecureChannelCredentials(), args));

  grpc::AsyncGenericService service;
  grpc::ServerBuilder builder;
  int bound = 0;
  builder.AddListeningPort("127.0.0.1:" + std::to_string(port), grpc::InsecureServerCredentials(),
                           &bound);
  builder.SetMaxReceiveMessageSize(64 << 20);
  builder.RegisterAsyncGenericService(&service);
  std::unique_ptr<grpc::ServerCompletionQueue> cq = builder.AddCompletionQueue();
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || bound == 0) {
    std::fprintf(stderr, "bench_grpc_wire_limit: cannot listen on port %d\n", port);
    return 1;
  }
  // As many calls asked for as threads poll, so that none waits for another
  // to be asked.
  for (int i = 0; i < threads; ++i) new Call(&service, cq.get(), &cache);
  std::vector<std::thread> pollers;
  for (int i = 0; i < threads; ++i) {
    pollers.emplace_back([&cq] {
      void* tag = nullptr;
      bool ok = false;
      while (cq->Next(&tag, &ok)) static_cast<Call*>(tag)->Proceed(ok);
    });
  }
  signal(SIGTERM, OnSignal);
  signal(SIGINT, OnSignal);
  std::printf("listening on %d\n", bound);
  std::fflush(stdout);
  while (!g_stop.load()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  cq->Shutdown();
  for (auto& t : pollers) t.join();
  cache.PrintSummary();
  return 0;
}
