#include "cluster_rpc/grpc_worker_stub.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <utility>

#include "cluster/cluster_state_json.h"
#include "cluster_rpc/cluster_codec.h"
#include "frontend/grpc/grpc_codec.h"
#include "proto/cluster.grpc.pb.h"

namespace somm {

namespace pb = cluster_codec::pb;
using grpc_codec::FromGrpcStatus;

struct GrpcWorkerStub::Impl {
  // One call in flight: gRPC needs the context and both messages until its
  // callback has run, and the callback frees them. `impl` keeps the channel
  // alive when the stub goes first.
  template <typename Request, typename Response, typename Done>
  struct Call {
    std::shared_ptr<Impl> impl;
    grpc::ClientContext context;
    Request request;
    Response response;
    Done done;
  };

  // "worker w1 (10.0.0.5:7001): <message>", keeping the code: which worker
  // failed is what a router's or controller's log needs.
  Status Named(Status s) const {
    if (s.ok()) return s;
    return Status(s.code(), "worker " + worker + " (" + address + "): " + s.message());
  }

  std::string worker;
  std::string address;
  GrpcWorkerStubOptions options;
  std::unique_ptr<pb::SommWorker::Stub> stub;  // thread-safe; holds the one channel
};

GrpcWorkerStub::GrpcWorkerStub(std::string worker, std::string address,
                               GrpcWorkerStubOptions options)
    : impl_(std::make_shared<Impl>()) {
  grpc_codec::TurnOffAbslDeadlockDetection();
  impl_->worker = std::move(worker);
  impl_->address = std::move(address);
  impl_->options = options;
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_message_bytes);
  args.SetMaxSendMessageSize(options.max_message_bytes);
  if (options.keepalive_time.count() > 0) {
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, static_cast<int>(options.keepalive_time.count()));
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                static_cast<int>(options.keepalive_timeout.count()));
    // A query that waits long sends no data; the pings must go on anyway.
    args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  }
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
              static_cast<int>(options.max_reconnect_backoff.count()));
  impl_->stub = pb::SommWorker::NewStub(
      grpc::CreateCustomChannel(impl_->address, grpc::InsecureChannelCredentials(), args));
}

GrpcWorkerStub::~GrpcWorkerStub() = default;

const std::string& GrpcWorkerStub::id() const { return impl_->worker; }

const std::string& GrpcWorkerStub::address() const { return impl_->address; }

Status GrpcWorkerStub::Execute(ExecuteRequest& request, ExecuteCallback done) {
  using ExecuteCall = Impl::Call<pb::ExecuteRequest, pb::ExecuteResponse, ExecuteCallback>;
  auto owned = std::make_unique<ExecuteCall>();
  owned->impl = impl_;
  owned->done = std::move(done);
  cluster_codec::EncodeExecuteRequest(request, &owned->request);
  std::chrono::system_clock::time_point deadline;
  if (cluster_codec::ToCallDeadline(request.deadline, &deadline)) {
    owned->context.set_deadline(deadline);
  }
  // The call is gRPC's until its callback, which takes it back (gRPC runs
  // that callback exactly once, whatever the outcome).
  ExecuteCall* call = owned.release();
  impl_->stub->async()->Execute(
      &call->context, &call->request, &call->response, [call](grpc::Status status) {
        std::unique_ptr<ExecuteCall> owned(call);
        if (!status.ok()) {
          owned->done(owned->impl->Named(FromGrpcStatus(status)));
          return;
        }
        StatusOr<ExecuteResult> result = cluster_codec::DecodeExecuteResult(&owned->response);
        if (!result.ok()) {
          // The worker answered OK with something malformed: its bug.
          owned->done(owned->impl->Named(
              Internal("malformed execute response: " + result.status().message())));
          return;
        }
        owned->done(std::move(result));
      });
  return Status::Ok();
}

void GrpcWorkerStub::Apply(WorkerAction action, std::function<void(Status)> done) {
  using ApplyCall = Impl::Call<pb::ApplyRequest, pb::ApplyResponse, std::function<void(Status)>>;
  auto owned = std::make_unique<ApplyCall>();
  owned->impl = impl_;
  owned->done = std::move(done);
  cluster_codec::EncodeAction(action, &owned->request);
  ApplyCall* call = owned.release();  // as in Execute
  impl_->stub->async()->Apply(&call->context, &call->request, &call->response,
                              [call](grpc::Status status) {
                                std::unique_ptr<ApplyCall> owned(call);
                                owned->done(owned->impl->Named(FromGrpcStatus(status)));
                              });
}

cluster::WorkerReport GrpcWorkerStub::Report() {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + impl_->options.report_timeout);
  pb::ReportResponse response;
  Status status = FromGrpcStatus(impl_->stub->Report(&context, pb::ReportRequest(), &response));
  if (status.ok()) {
    StatusOr<cluster::WorkerReport> report =
        cluster::WorkerReportFromJson(response.report_json(), cluster::Clock::now());
    if (report.ok()) return std::move(report).value();
    status = Internal("malformed report: " + report.status().message());
  }
  spdlog::warn("report: {}", impl_->Named(status).ToString());
  cluster::WorkerReport empty;
  empty.worker = impl_->worker;
  return empty;
}

}  // namespace somm
