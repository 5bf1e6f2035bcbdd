#include "cluster_rpc/worker_service.h"

#include <grpcpp/grpcpp.h>

#include <mutex>
#include <utility>

#include "cluster/cluster_state_json.h"
#include "cluster_rpc/cluster_codec.h"
#include "frontend/grpc/grpc_codec.h"
#include "proto/cluster.grpc.pb.h"

namespace somm {
namespace {

namespace pb = cluster_codec::pb;
using grpc::CallbackServerContext;
using grpc::ServerUnaryReactor;
using grpc_codec::ToGrpcStatus;

ServerUnaryReactor* FinishNow(CallbackServerContext* context, const Status& status) {
  ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

class SommWorkerService final : public pb::SommWorker::CallbackService {
 public:
  SommWorkerService(Worker& worker, WorkerService::Resolver resolve)
      : worker_(worker), resolve_(std::move(resolve)) {}

  ServerUnaryReactor* Execute(CallbackServerContext* context, const pb::ExecuteRequest* request,
                              pb::ExecuteResponse* response) override {
    ExecuteRequest query;
    // The callback API hands the request over as const, but the message is
    // this call's alone and gRPC reads it no more once the handler runs:
    // moving the input bytes out saves a copy of every input per query.
    Status decoded = cluster_codec::DecodeExecuteRequest(
        std::move(*const_cast<pb::ExecuteRequest*>(request)), &query);
    if (!decoded.ok()) return FinishNow(context, decoded);
    query.deadline = cluster_codec::FromCallDeadline(context->deadline());
    ServerUnaryReactor* reactor = context->DefaultReactor();
    // `response` stays valid until Finish. The callback runs on a batcher
    // thread, or here when the queue refuses the query; after a client's
    // deadline has passed gRPC has already answered and Finish only frees
    // the call.
    Status taken = worker_.Execute(query, [reactor, response](StatusOr<ExecuteResult> result) {
      if (!result.ok()) {
        reactor->Finish(ToGrpcStatus(result.status()));
        return;
      }
      cluster_codec::EncodeExecuteResult(std::move(result).value(), response);
      reactor->Finish(grpc::Status::OK);
    });
    // Not taken (the group is not loaded here): `done` will not run.
    if (!taken.ok()) reactor->Finish(ToGrpcStatus(taken));
    return reactor;
  }

  ServerUnaryReactor* Apply(CallbackServerContext* context, const pb::ApplyRequest* request,
                            pb::ApplyResponse*) override {
    WorkerAction action;
    Status decoded = cluster_codec::DecodeAction(*request, &action);
    if (!decoded.ok()) return FinishNow(context, decoded);
    if (action.action.kind == cluster::Action::kLoad) {
      StatusOr<VersionPtr> version = resolve_(action.action.model, action.action.version);
      if (!version.ok()) return FinishNow(context, version.status());
      if (!*version) {
        return FinishNow(context, Internal("resolver gave no record for model '" +
                                           action.action.model + "' version " +
                                           std::to_string(action.action.version)));
      }
      action.version = std::move(version).value();
    }
    ServerUnaryReactor* reactor = context->DefaultReactor();
    worker_.Apply(std::move(action),
                  [reactor](Status status) { reactor->Finish(ToGrpcStatus(status)); });
    return reactor;
  }

  ServerUnaryReactor* Report(CallbackServerContext* context, const pb::ReportRequest*,
                             pb::ReportResponse* response) override {
    response->set_report_json(
        cluster::WorkerReportToJson(worker_.Report(), cluster::Clock::now()));
    return FinishNow(context, Status::Ok());
  }

 private:
  Worker& worker_;
  const WorkerService::Resolver resolve_;
};

std::string HostPort(const std::string& address, int port) {
  const bool ipv6 = address.find(':') != std::string::npos && address.front() != '[';
  return (ipv6 ? "[" + address + "]" : address) + ":" + std::to_string(port);
}

}  // namespace

struct WorkerService::Impl {
  Impl(Worker& worker, Resolver resolve) : service(worker, std::move(resolve)) {}

  SommWorkerService service;
  int port = 0;
  std::once_flag shutdown_once;
  std::unique_ptr<grpc::Server> server;  // last: destroyed first
};

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
  if (options.address.empty()) return InvalidArgument("worker service listen address is empty");
  if (!resolve) return InvalidArgument("worker service needs a model version resolver");

  grpc_codec::TurnOffAbslDeadlockDetection();
  auto impl = std::make_unique<Impl>(worker, std::move(resolve));
  const std::string where = HostPort(options.address, options.port);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(where, grpc::InsecureServerCredentials(), &impl->port);
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
  impl->server = builder.BuildAndStart();
  if (!impl->server || impl->port == 0) {
    if (impl->server) impl->server->Shutdown();
    impl->server.reset();
    return Unavailable("worker service cannot listen on " + where +
                       " (address invalid or port in use)");
  }
  return std::unique_ptr<WorkerService>(new WorkerService(std::move(impl)));
}

WorkerService::WorkerService(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

WorkerService::~WorkerService() { Shutdown(std::chrono::seconds(1)); }

int WorkerService::port() const { return impl_->port; }

void WorkerService::Shutdown(std::chrono::system_clock::time_point deadline) {
  std::call_once(impl_->shutdown_once, [&] {
    if (impl_->server) impl_->server->Shutdown(deadline);
  });
}

}  // namespace somm
