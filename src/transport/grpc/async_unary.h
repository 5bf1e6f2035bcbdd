// Unary calls on gRPC's completion-queue API, served by threads of our own
// (Triton's shape): every method of the OIP frontend and of the cluster
// worker's service. In gRPC 1.51 the callback API wakes gRPC's own "nexting"
// threads for every completion; here the thread that polls the queue runs
// the handler itself, and whichever thread finishes the work (a batcher's)
// writes the answer directly. That saves 5-30 us of CPU per call
// (bench/grpc_rtt.cc; "The gRPC hop" in docs/history/router-hop.md). And a server with
// no method left on the callback API starts no nexting threads at all,
// which would otherwise poll the process's sockets beside the queue's
// threads (MethodTable below).
//
// Contract:
//   * A service declares one UnaryCall subclass per method: Ask() requests
//     the next call of that method on the queue (with the call as its tag);
//     Handle() serves it and calls Finish, at once or later from any thread.
//     Each answered offer is renewed (AskNext) before Handle runs.
//   * Set-up: build the server with one queue from
//     ServerBuilder::AddCompletionQueue, Open() the CallQueue with it, Ask()
//     for the first calls, then StartThreads().
//   * Stop: grpc::Server::Shutdown(deadline), then Close(). From Close on,
//     answers are dropped (the call is freed; gRPC has cancelled it), the
//     queue is drained, the threads joined, and Close returns only once
//     every handler's work bracketed by Begin/End has ended. Destroy the
//     grpc::Server before the CallQueue.
//   * Client calls may share the queue (StartClientCall below). Close
//     cancels those still in flight (the server's Shutdown before it has
//     already waited for the calls they serve), then waits for them to end.
//   * Thread-safe; Close is idempotent (the destructor calls it).
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <unordered_set>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "transport/grpc/grpc_runtime.h"

namespace somm::grpc_async {

class CallQueue {
 public:
  CallQueue() = default;
  ~CallQueue() { Close(); }
  CallQueue(const CallQueue&) = delete;
  CallQueue& operator=(const CallQueue&) = delete;

  void Open(std::unique_ptr<grpc::ServerCompletionQueue> cq) { cq_ = std::move(cq); }
  grpc::ServerCompletionQueue* cq() const { return cq_.get(); }

  // Runs `op`, which starts an operation on the queue (asks for a call or
  // writes an answer), unless the queue is closed: starting one on a queue
  // that is shut down aborts the process. A reader lock, so that answers
  // from many batcher threads do not queue behind each other; Close takes
  // it as a writer. False: not run, and the caller frees its call.
  template <typename Op>
  bool OnOpenQueue(Op&& op) {
    ReaderLock lock(&open_mu_);
    if (!open_) return false;
    op();
    return true;
  }

  // Offers one call of a method: `new Call(args...)`, then its Ask().
  template <typename Call, typename... Args>
  void Ask(Args... args) {
    auto* call = new Call(args...);
    if (!OnOpenQueue([call] { call->Ask(); })) delete call;
  }

  // Brackets work a handler started that may still answer (and touch the
  // service) later: Close waits for it.
  void Begin();
  void End();

  // `n` threads poll the queue, named `name` (as seen in top -H). The
  // first always waits on it; the others only while calls overlap (below).
  void StartThreads(int n, const char* name);

  // Calls the queue's threads have in hand: a served call from the offer's
  // answer until its answer has gone (Call counts it), a client call from
  // its start to its end (StartClientCall). A client call is also cancelled
  // by Close until it ends. ClientCallStarted returns whether the call was
  // started off the queue's threads (a REST query's worker call), which its
  // ClientCallEnded is given back.
  void CallStarted() { Started(false); }
  void CallEnded() { Ended(false); }
  bool ClientCallStarted(grpc::ClientContext* call);
  void ClientCallEnded(grpc::ClientContext* call, bool started_off_queue);

  // How many threads past the first wait on gRPC now (for tests).
  int HelpersPolling() const { return helpers_.load() - parked_.load(); }
  void Close();

 private:
  void Started(bool off_queue);
  void Ended(bool off_queue);
  void Poll(const char* name);
  void Help(const char* name);

  // With gRPC 1.51's epoll poller one thread at a time waits in epoll_wait;
  // each time it wakes it hands that turn to another thread waiting on the
  // queue, with a futex. With two threads waiting, a router's gRPC query
  // made six context switches at concurrency 1 against 1.6 with one thread,
  // and its p50 was 40 us longer. So the threads past the first (helpers)
  // wait on gRPC only while queries overlap: a query holds at most two calls
  // (its own and its worker's), so a third means another is under way.
  // A call started off the queue's threads counts as overlap too: with the
  // first thread alone, a REST query through a router took 55-65 us more at
  // concurrency 1 (docs/history/router-hop.md, "One thread waits on gRPC at a time").
  static constexpr int kOverlapFrom = 3;
  static constexpr std::chrono::milliseconds kLinger{2};
  static constexpr std::chrono::milliseconds kOverlapWait{100};
  bool Overlapping() const;
  std::atomic<int> calls_{0};
  std::atomic<int> calls_off_queue_{0};
  std::atomic<int64_t> last_overlap_ns_{0};  // steady clock
  std::atomic<int> helpers_{0};
  std::atomic<int> parked_{0};
  Mutex park_mu_;
  std::condition_variable_any park_cv_;
  bool closing_ SOMM_GUARDED_BY(park_mu_) = false;

  std::unique_ptr<grpc::ServerCompletionQueue> cq_;
  std::vector<std::thread> threads_;
  SharedMutex open_mu_;
  bool open_ SOMM_GUARDED_BY(open_mu_) = true;
  Mutex pending_mu_;
  int pending_ SOMM_GUARDED_BY(pending_mu_) = 0;
  std::condition_variable_any idle_;
  Mutex client_mu_;
  std::unordered_set<grpc::ClientContext*> client_calls_ SOMM_GUARDED_BY(client_mu_);
  std::once_flag closed_;
};

// What the queue's threads take off it: each event's tag is one of these.
class Tag {
 public:
  virtual ~Tag() = default;
  virtual void Proceed(bool ok) = 0;
};

// A tag that runs `f(ok)` once, then frees itself.
template <typename F>
class OneShot final : public Tag {
 public:
  explicit OneShot(F f) : f_(std::move(f)) {}
  void Proceed(bool ok) override {
    f_(ok);
    delete this;
  }

 private:
  F f_;
};

// Starts a unary client call on `queue`, whose threads then take its answer:
// `prepare(cq)` is a stub's PrepareAsyncX bound to `context` and a request;
// once the call has ended (`status` and `response` filled), one of the
// queue's threads runs `done()`, which may free the context. A process that
// serves gRPC and calls other servers (a router) puts both on one queue, so
// that the thread that wakes for an answer is the one that handles it: with
// a second queue, or gRPC's callback threads, polling beside it, gRPC's
// poller hands wake-ups from one thread to another (docs/cluster.md, the
// router hop). False: the queue is closed and nothing was started.
template <typename Prepare, typename Response, typename Done>
bool StartClientCall(CallQueue& queue, grpc::ClientContext* context, Prepare prepare,
                     Response* response, grpc::Status* status, Done done) {
  return queue.OnOpenQueue([&] {
    const bool off_queue = queue.ClientCallStarted(context);
    // The reader lives in the call's arena: dropping the pointer frees nothing.
    auto reader = prepare(queue.cq());
    reader->StartCall();
    reader->Finish(response, status,
                   new OneShot([&queue, context, off_queue, done = std::move(done)](bool) mutable {
                     queue.ClientCallEnded(context, off_queue);
                     done();
                   }));
  });
}

// One unary call, from gRPC's offer to its answer: the tag of both events on
// the queue; it frees itself after the second.
class Call : public Tag {
 public:
  explicit Call(CallQueue* queue) : queue_(queue) {}
  ~Call() override {
    if (answering_) queue_->CallEnded();
  }
  // `ok` false: the offer failed (the server is shutting down) or the answer
  // was not sent (the client went away); either way nothing is left to do.
  void Proceed(bool ok) override {
    if (answering_ || !ok) {
      delete this;
      return;
    }
    answering_ = true;  // before Handle: the answer may come on another thread
    queue_->CallStarted();
    AskNext();
    Handle();
  }

 protected:
  virtual void AskNext() = 0;
  virtual void Handle() = 0;

  CallQueue* const queue_;

 private:
  bool answering_ = false;
};

template <typename Request, typename Response>
class UnaryCall : public Call {
 protected:
  explicit UnaryCall(CallQueue* queue) : Call(queue) {}

  // Answers the call (response_ when `status` is OK); the answer's
  // completion frees it, or, once the queue is closed, this does.
  void Finish(const Status& status) {
    const bool written = queue_->OnOpenQueue([&] {
      if (status.ok()) {
        responder_.Finish(response_, grpc::Status::OK, this);
      } else {
        responder_.FinishWithError(grpc_transport::ToGrpcStatus(status), this);
      }
    });
    if (!written) delete this;
  }

  grpc::ServerContext context_;
  Request request_;
  Response response_;
  grpc::ServerAsyncResponseWriter<Response> responder_{&context_};
};

// The methods whose CPU does not matter (metadata, repository, control), on
// the same queue and threads as the hot ones. With gRPC 1.51's epoll poller
// every thread waiting on gRPC takes its turn polling all of the process's
// sockets; while even one method was on the callback API, its two nexting
// threads were among them, picked up answers meant for the queue and woke
// its thread with a futex. Moving the last methods here took `somm serve`'s
// gRPC p50 at concurrency 1 from 185 to 150-160 us, and its CPU per query
// from 135-142 to 105-118 us (docs/performance.md).
//
// A method is served by a handler: handler(context, request, response,
// answer) calls answer(status) exactly once, at once or later from any
// thread (a slow one posts its work elsewhere and answers from there). The
// response is sent when `status` is OK. MethodTable::Serve offers the first
// call; each answered offer is renewed. The table holds the handlers, so it
// must outlive the queue's Close.
using Answer = std::function<void(const Status&)>;
template <typename Request, typename Response>
using Handler =
    std::function<void(const grpc::ServerContext&, const Request&, Response*, Answer)>;

template <typename Service, typename Request, typename Response>
class FunctionCall final : public UnaryCall<Request, Response> {
 public:
  using Writer = grpc::ServerAsyncResponseWriter<Response>;
  using AskFn = void (Service::*)(grpc::ServerContext*, Request*, Writer*, grpc::CompletionQueue*,
                                  grpc::ServerCompletionQueue*, void*);
  struct Method {
    Service* service;
    AskFn ask;
    Handler<Request, Response> handler;
  };

  FunctionCall(CallQueue* queue, const Method* method)
      : UnaryCall<Request, Response>(queue), method_(method) {}
  void Ask() {
    (method_->service->*method_->ask)(&this->context_, &this->request_, &this->responder_,
                                      this->queue_->cq(), this->queue_->cq(), this);
  }

 private:
  void AskNext() override { this->queue_->template Ask<FunctionCall>(this->queue_, method_); }
  void Handle() override {
    CallQueue* queue = this->queue_;  // the call may be gone once answered
    queue->Begin();
    method_->handler(this->context_, this->request_, &this->response_,
                     [this, queue](const Status& status) {
                       this->Finish(status);
                       queue->End();
                     });
  }

  const Method* const method_;
};

class MethodTable {
 public:
  // Serves `ask`'s method (an AsyncService's RequestX) with `handler`.
  template <typename Service, typename Base, typename Request, typename Response>
  void Serve(CallQueue* queue, Service* service,
             void (Base::*ask)(grpc::ServerContext*, Request*,
                               grpc::ServerAsyncResponseWriter<Response>*,
                               grpc::CompletionQueue*, grpc::ServerCompletionQueue*, void*),
             std::type_identity_t<Handler<Request, Response>> handler) {
    using Call = FunctionCall<Service, Request, Response>;
    auto method = std::make_shared<typename Call::Method>(
        typename Call::Method{service, ask, std::move(handler)});
    queue->Ask<Call>(queue, static_cast<const typename Call::Method*>(method.get()));
    methods_.push_back(std::move(method));
  }

 private:
  std::vector<std::shared_ptr<const void>> methods_;
};

}  // namespace somm::grpc_async
