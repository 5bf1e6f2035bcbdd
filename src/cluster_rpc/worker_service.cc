#include "cluster_rpc/worker_service.h"

#include <grpcpp/grpcpp.h>

#include <mutex>
#include <utility>

#include "cluster/cluster_state_json.h"
#include "cluster_rpc/cluster_codec.h"
#include "proto/cluster.grpc.pb.h"
#include "transport/grpc/async_unary.h"
#include "transport/grpc/grpc_runtime.h"
#include "transport/grpc/grpc_tls.h"

namespace somm {

namespace pb = cluster_codec::pb;

// The service is gRPC's asynchronous API on one completion queue that the
// service's own threads poll (transport/grpc/async_unary.h), not the callback
// API: that saves the worker 5-30 us of CPU per query; latency is the same
// (bench/grpc_rtt.cc, and "The gRPC hop" in docs/history/router-hop.md).
namespace worker_service_internal {

struct Core {
  Core(Worker& w, WorkerService::Resolver r) : worker(w), resolve(std::move(r)) {}

  void Close(std::chrono::system_clock::time_point deadline) {
    if (server) server->Shutdown(deadline);
    queue.Close();
  }

  Worker& worker;
  const WorkerService::Resolver resolve;
  int port = 0;
  // In this order: gRPC wants the server gone before its completion queue,
  // and both before the service.
  pb::SommWorker::AsyncService service;
  grpc_async::CallQueue queue;
  std::unique_ptr<grpc::Server> server;
  std::once_flag shutdown_once;
};

}  // namespace worker_service_internal

struct WorkerService::Impl : worker_service_internal::Core {
  using Core::Core;
};

using worker_service_internal::Core;

namespace {

// A call of one of the service's methods; `core` outlives it (Close waits).
template <typename Request, typename Response>
class WorkerCall : public grpc_async::UnaryCall<Request, Response> {
 protected:
  explicit WorkerCall(Core* core) : grpc_async::UnaryCall<Request, Response>(&core->queue),
                                    core_(core) {}
  Core* const core_;
};

class ExecuteCall final : public WorkerCall<pb::ExecuteRequest, pb::ExecuteResponse> {
 public:
  explicit ExecuteCall(Core* core) : WorkerCall(core) {}
  void Ask() {
    core_->service.RequestExecute(&context_, &request_, &responder_, queue_->cq(), queue_->cq(),
                                  this);
  }

 private:
  void AskNext() override { queue_->Ask<ExecuteCall>(core_); }
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
    // The call may be gone once answered, so the end is told to `queue`.
    grpc_async::CallQueue* queue = queue_;
    queue->Begin();
    Status taken = core_->worker.Execute(query, [this, queue](StatusOr<ExecuteResult> result) {
      if (result.ok()) {
        cluster_codec::EncodeExecuteResult(std::move(result).value(), &response_);
        Finish(Status::Ok());
      } else {
        Finish(result.status());
      }
      queue->End();
    });
    // Not taken (the group is not loaded here): the callback will not run.
    if (!taken.ok()) {
      Finish(taken);
      queue->End();
    }
  }
};

class ApplyCall final : public WorkerCall<pb::ApplyRequest, pb::ApplyResponse> {
 public:
  explicit ApplyCall(Core* core) : WorkerCall(core) {}
  void Ask() {
    core_->service.RequestApply(&context_, &request_, &responder_, queue_->cq(), queue_->cq(),
                                this);
  }

 private:
  void AskNext() override { queue_->Ask<ApplyCall>(core_); }
  void Handle() override {
    WorkerAction action;
    Status decoded = cluster_codec::DecodeAction(request_, &action);
    if (!decoded.ok()) return Finish(decoded);
    if (action.action.kind == cluster::Action::kLoad) {
      StatusOr<VersionPtr> version = core_->resolve(action.action.model, action.action.version);
      if (!version.ok()) return Finish(version.status());
      if (!*version) {
        return Finish(Internal("resolver gave no record for model '" + action.action.model +
                               "' version " + std::to_string(action.action.version)));
      }
      action.version = std::move(version).value();
    }
    grpc_async::CallQueue* queue = queue_;  // as in ExecuteCall
    queue->Begin();
    core_->worker.Apply(std::move(action), [this, queue](Status status) {
      Finish(status);
      queue->End();
    });
  }
};

class ReportCall final : public WorkerCall<pb::ReportRequest, pb::ReportResponse> {
 public:
  explicit ReportCall(Core* core) : WorkerCall(core) {}
  void Ask() {
    core_->service.RequestReport(&context_, &request_, &responder_, queue_->cq(), queue_->cq(),
                                 this);
  }

 private:
  void AskNext() override { queue_->Ask<ReportCall>(core_); }
  void Handle() override {
    response_.set_report_json(
        cluster::WorkerReportToJson(core_->worker.Report(), Clock::Real().Now()));
    Finish(Status::Ok());
  }
};

std::string HostPort(const std::string& address, int port) {
  const bool ipv6 = address.find(':') != std::string::npos && address.front() != '[';
  return (ipv6 ? "[" + address + "]" : address) + ":" + std::to_string(port);
}

}  // namespace

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

  grpc_transport::TurnOffAbslDeadlockDetection();
  auto impl = std::make_unique<Impl>(worker, std::move(resolve));
  const std::string where = HostPort(options.address, options.port);
  grpc::ServerBuilder builder;
  auto credentials = grpc_tls::ClusterServerCredentials(options.tls);
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
  // Routers and the controller never compress (GrpcWorkerStub): without the
  // compression filter each call passes one filter fewer each way.
  builder.AddChannelArgument(GRPC_ARG_ENABLE_PER_MESSAGE_COMPRESSION, 0);
  builder.RegisterService(&impl->service);
  impl->queue.Open(builder.AddCompletionQueue());
  impl->server = builder.BuildAndStart();
  if (!impl->server || impl->port == 0) {
    impl->Close(std::chrono::system_clock::now());
    return Unavailable("worker service cannot listen on " + where +
                       " (address invalid or port in use)");
  }
  // One open offer per method and thread, so that a burst of calls finds
  // one ready while the threads are busy; each answered offer is renewed.
  for (int i = 0; i < options.completion_threads; ++i) {
    impl->queue.Ask<ExecuteCall>(impl.get());
    impl->queue.Ask<ApplyCall>(impl.get());
    impl->queue.Ask<ReportCall>(impl.get());
  }
  impl->queue.StartThreads(options.completion_threads, "somm-worker-rpc");
  return std::unique_ptr<WorkerService>(new WorkerService(std::move(impl)));
}

WorkerService::WorkerService(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

WorkerService::~WorkerService() { Shutdown(std::chrono::seconds(1)); }

int WorkerService::port() const { return impl_->port; }

void WorkerService::Shutdown(std::chrono::system_clock::time_point deadline) {
  std::call_once(impl_->shutdown_once, [&] { impl_->Close(deadline); });
}

}  // namespace somm
