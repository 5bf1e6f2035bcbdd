#include "cluster_rpc/worker_service.h"

#include <grpcpp/grpcpp.h>
#include <pthread.h>

#include <condition_variable>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "cluster/cluster_state_json.h"
#include "cluster_rpc/cluster_codec.h"
#include "common/mutex.h"
#include "frontend/grpc/grpc_codec.h"
#include "frontend/grpc/grpc_tls.h"
#include "proto/cluster.grpc.pb.h"

namespace somm {

namespace pb = cluster_codec::pb;
using grpc_codec::ToGrpcStatus;

// The service is gRPC's asynchronous API on one completion queue that the
// service's own threads poll (Triton's shape), not the callback API: in gRPC
// 1.51 every callback completion wakes gRPC's "nexting" threads as well,
// while here the thread that polls the socket runs the handler itself and
// the batcher thread that finishes a query writes its answer directly. That
// saves the worker 5-30 us of CPU per query; latency is the same
// (bench/grpc_rtt.cc, and "The gRPC hop" in docs/cluster.md).
namespace worker_service_internal {

struct Core {
  Core(Worker& w, WorkerService::Resolver r) : worker(w), resolve(std::move(r)) {}

  // Runs `op`, which starts an operation on the completion queue (asks for a
  // call or writes an answer), unless the queue has been shut down: starting
  // one on a queue that is shut down aborts the process. A reader lock, so
  // answers from many batcher threads do not queue behind each other; Close
  // takes it as a writer. False: not run, and the caller frees its call.
  template <typename Op>
  bool OnOpenQueue(Op&& op) {
    ReaderLock lock(&cq_mu);
    if (!cq_open) return false;
    op();
    return true;
  }

  // Asks gRPC for the next call of one method (a `Call` below).
  template <typename Call>
  void Ask() {
    auto* call = new Call(this);
    if (!OnOpenQueue([call] { call->Ask(); })) delete call;
  }

  // Brackets the time a handler may still run a worker callback, from the
  // moment its call is taken off the queue: Close must not free the service
  // while a callback may still touch it.
  void Begin() {
    MutexLock lock(&mu);
    ++waiting;
  }
  void End() {
    MutexLock lock(&mu);
    if (--waiting == 0) idle.notify_all();
  }

  void Poll();
  void Close(std::chrono::system_clock::time_point deadline);

  Worker& worker;
  const WorkerService::Resolver resolve;
  int port = 0;
  // In this order: gRPC wants the server gone before its completion queue,
  // and both before the service.
  pb::SommWorker::AsyncService service;
  std::unique_ptr<grpc::ServerCompletionQueue> cq;
  std::unique_ptr<grpc::Server> server;
  std::vector<std::thread> threads;
  SharedMutex cq_mu;
  bool cq_open SOMM_GUARDED_BY(cq_mu) = true;
  Mutex mu;
  int waiting SOMM_GUARDED_BY(mu) = 0;
  std::condition_variable_any idle;
  std::once_flag shutdown_once;
};

}  // namespace worker_service_internal

struct WorkerService::Impl : worker_service_internal::Core {
  using Core::Core;
};

using worker_service_internal::Core;

namespace {

// One unary call, from gRPC's offer to its answer; it is the tag of both
// events on the completion queue and frees itself after the second.
class CallBase {
 public:
  virtual ~CallBase() = default;
  // `ok` false: the offer failed (the service is shutting down) or the
  // answer was not sent (the client went away); either way nothing is left.
  void Proceed(bool ok) {
    if (answering_ || !ok) {
      delete this;
      return;
    }
    answering_ = true;  // before Handle: the answer may come on another thread
    AskNext();
    Handle();
  }

 protected:
  virtual void AskNext() = 0;
  virtual void Handle() = 0;

 private:
  bool answering_ = false;
};

template <typename Request, typename Response>
class UnaryCall : public CallBase {
 protected:
  explicit UnaryCall(Core* impl) : impl_(impl) {}

  // Answers the call; the answer's completion frees it. Once the service
  // has shut its queue down nobody can be answered (gRPC has cancelled the
  // call), so the call is freed here instead.
  void Finish(const Status& status) {
    const bool written = impl_->OnOpenQueue([&] {
      if (status.ok()) {
        responder_.Finish(response_, grpc::Status::OK, this);
      } else {
        responder_.FinishWithError(ToGrpcStatus(status), this);
      }
    });
    if (!written) delete this;
  }

  Core* const impl_;
  grpc::ServerContext context_;
  Request request_;
  Response response_;
  grpc::ServerAsyncResponseWriter<Response> responder_{&context_};
};

class ExecuteCall final : public UnaryCall<pb::ExecuteRequest, pb::ExecuteResponse> {
 public:
  explicit ExecuteCall(Core* impl) : UnaryCall(impl) {}
  void Ask() {
    impl_->service.RequestExecute(&context_, &request_, &responder_, impl_->cq.get(),
                                  impl_->cq.get(), this);
  }

 private:
  void AskNext() override { impl_->Ask<ExecuteCall>(); }
  void Handle() override {
    ExecuteRequest query;
    // The message is this call's alone: moving the input bytes out saves a
    // copy of every input per query.
    Status decoded = cluster_codec::DecodeExecuteRequest(std::move(request_), &query);
    if (!decoded.ok()) return Finish(decoded);
    query.deadline = cluster_codec::FromCallDeadline(context_.deadline());
    // The callback runs on a batcher thread, or here: when an idle instance
    // runs the query inline (WorkerOptions::inline_max_compute_us) or the
    // queue refuses it; after a client's deadline has passed gRPC has already
    // answered and Finish only frees the call.
    // The call may be gone once answered, so the end is told to `core`.
    Core* core = impl_;
    core->Begin();
    Status taken = impl_->worker.Execute(query, [this, core](StatusOr<ExecuteResult> result) {
      if (result.ok()) {
        cluster_codec::EncodeExecuteResult(std::move(result).value(), &response_);
        Finish(Status::Ok());
      } else {
        Finish(result.status());
      }
      core->End();
    });
    // Not taken (the group is not loaded here): the callback will not run.
    if (!taken.ok()) {
      Finish(taken);
      core->End();
    }
  }
};

class ApplyCall final : public UnaryCall<pb::ApplyRequest, pb::ApplyResponse> {
 public:
  explicit ApplyCall(Core* impl) : UnaryCall(impl) {}
  void Ask() {
    impl_->service.RequestApply(&context_, &request_, &responder_, impl_->cq.get(), impl_->cq.get(),
                                this);
  }

 private:
  void AskNext() override { impl_->Ask<ApplyCall>(); }
  void Handle() override {
    WorkerAction action;
    Status decoded = cluster_codec::DecodeAction(request_, &action);
    if (!decoded.ok()) return Finish(decoded);
    if (action.action.kind == cluster::Action::kLoad) {
      StatusOr<VersionPtr> version = impl_->resolve(action.action.model, action.action.version);
      if (!version.ok()) return Finish(version.status());
      if (!*version) {
        return Finish(Internal("resolver gave no record for model '" + action.action.model +
                               "' version " + std::to_string(action.action.version)));
      }
      action.version = std::move(version).value();
    }
    Core* core = impl_;  // as in ExecuteCall
    core->Begin();
    impl_->worker.Apply(std::move(action), [this, core](Status status) {
      Finish(status);
      core->End();
    });
  }
};

class ReportCall final : public UnaryCall<pb::ReportRequest, pb::ReportResponse> {
 public:
  explicit ReportCall(Core* impl) : UnaryCall(impl) {}
  void Ask() {
    impl_->service.RequestReport(&context_, &request_, &responder_, impl_->cq.get(),
                                 impl_->cq.get(), this);
  }

 private:
  void AskNext() override { impl_->Ask<ReportCall>(); }
  void Handle() override {
    response_.set_report_json(
        cluster::WorkerReportToJson(impl_->worker.Report(), cluster::Clock::now()));
    Finish(Status::Ok());
  }
};

std::string HostPort(const std::string& address, int port) {
  const bool ipv6 = address.find(':') != std::string::npos && address.front() != '[';
  return (ipv6 ? "[" + address + "]" : address) + ":" + std::to_string(port);
}

}  // namespace

void Core::Poll() {
  pthread_setname_np(pthread_self(), "somm-worker-rpc");  // as seen in top -H
  void* tag;
  bool ok;
  while (cq->Next(&tag, &ok)) static_cast<CallBase*>(tag)->Proceed(ok);
}

void Core::Close(std::chrono::system_clock::time_point deadline) {
  // gRPC's Shutdown lets the calls still running answer until the deadline,
  // then cancels them. A call taken off the queue just before may still be
  // answered after it, and a worker callback may run later still: answers
  // from then on are dropped (OnOpenQueue), and the service waits for the
  // callbacks before it is freed.
  if (server) server->Shutdown(deadline);
  {
    WriterLock lock(&cq_mu);
    cq_open = false;
  }
  if (cq) cq->Shutdown();
  for (std::thread& t : threads) t.join();
  threads.clear();
  MutexLock lock(&mu);
  while (waiting > 0) idle.wait(mu.native());
}

StatusOr<std::unique_ptr<WorkerService>> WorkerService::Start(Worker& worker, Resolver resolve,
                                                              WorkerServiceOptions options) {
  if (options.port < 0 || options.port > 65535) {
    return InvalidArgument("worker service port " + std::to_string(options.port) +
                           " is not in 0..65535");
  }
  if (options.max_message_bytes <= 0) {
    return InvalidArgument("worker service max_message_bytes must be positive, got " +
                           std::to_string(options.max_message_bytes));
  }
  if (options.completion_threads < 1) {
    return InvalidArgument("worker service completion_threads must be at least 1, got " +
                           std::to_string(options.completion_threads));
  }
  if (options.address.empty()) return InvalidArgument("worker service listen address is empty");
  if (!resolve) return InvalidArgument("worker service needs a model version resolver");

  grpc_codec::TurnOffAbslDeadlockDetection();
  auto impl = std::make_unique<Impl>(worker, std::move(resolve));
  const std::string where = HostPort(options.address, options.port);
  grpc::ServerBuilder builder;
  auto credentials = grpc_tls::ServerCredentials(options.tls);
  if (!credentials.ok()) return credentials.status();
  builder.AddListeningPort(where, *credentials, &impl->port);
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.SetMaxSendMessageSize(options.max_message_bytes);
  // A taken port must be an error, not a port silently shared (gRPC turns
  // SO_REUSEPORT on by default).
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // GrpcWorkerStub pings a connection that has calls in flight to notice a
  // worker that vanished without closing it (a query waits without a
  // deadline, a load for minutes); gRPC's default would answer pings this
  // frequent with GOAWAY ("too many pings").
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  builder.RegisterService(&impl->service);
  impl->cq = builder.AddCompletionQueue();
  impl->server = builder.BuildAndStart();
  if (!impl->server || impl->port == 0) {
    impl->Close(std::chrono::system_clock::now());
    return Unavailable("worker service cannot listen on " + where +
                       " (address invalid or port in use)");
  }
  // One open offer per method and thread, so that a burst of calls finds
  // one ready while the threads are busy; each answered offer is renewed.
  for (int i = 0; i < options.completion_threads; ++i) {
    impl->Ask<ExecuteCall>();
    impl->Ask<ApplyCall>();
    impl->Ask<ReportCall>();
  }
  for (int i = 0; i < options.completion_threads; ++i) {
    impl->threads.emplace_back([p = impl.get()] { p->Poll(); });
  }
  return std::unique_ptr<WorkerService>(new WorkerService(std::move(impl)));
}

WorkerService::WorkerService(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

WorkerService::~WorkerService() { Shutdown(std::chrono::seconds(1)); }

int WorkerService::port() const { return impl_->port; }

void WorkerService::Shutdown(std::chrono::system_clock::time_point deadline) {
  std::call_once(impl_->shutdown_once, [&] { impl_->Close(deadline); });
}

}  // namespace somm
