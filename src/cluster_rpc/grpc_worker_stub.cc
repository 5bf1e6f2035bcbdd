#include "cluster_rpc/grpc_worker_stub.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <vector>
#include <utility>

#include "cluster/cluster_state_json.h"
#include "cluster_rpc/cluster_codec.h"
#include "common/serial_executor.h"
#include "proto/cluster.grpc.pb.h"
#include "transport/grpc/async_unary.h"
#include "transport/grpc/grpc_runtime.h"
#include "transport/grpc/grpc_tls.h"

namespace somm {

namespace pb = cluster_codec::pb;
using grpc_transport::FromGrpcStatus;

// Every ClientContext holds a reference to the channel, and gRPC 1.51 must
// not lose its last channel on one of its own callback threads: the release
// may shut down the callback completion queue whose thread is running it,
// which then joins itself (seen as "assertion failed: prior > 0" and crashes
// when a stub went while its calls finished). So the Impl, which holds the
// channel, is shared by the stub and its calls in flight, and whoever drops
// the last reference hands it to a thread of its own to close.
struct GrpcWorkerStub::Impl {
  // One reference; a call's is released only after its context is gone.
  class Ref {
   public:
    explicit Ref(Impl* impl) : impl_(impl) { impl_->refs.fetch_add(1, std::memory_order_relaxed); }
    ~Ref() { Release(impl_); }
    Ref(const Ref&) = delete;
    Ref& operator=(const Ref&) = delete;
    Impl* operator->() const { return impl_; }

   private:
    Impl* const impl_;
  };

  // One call in flight: gRPC needs the context and both messages until its
  // callback has run, and the callback frees them. `impl` is declared first
  // so that it is released last, after the context.
  template <typename Request, typename Response, typename Done>
  struct Call {
    explicit Call(Impl* i) : impl(i) {}
    Ref impl;
    grpc::ClientContext context;
    Request request;
    Response response;
    grpc::Status status;  // the outcome, when started on the options' queue
    Done done;
  };

  // Starts `call` on the options' queue (`prepare(cq)`: a stub's
  // PrepareAsyncX bound to the call); `finish(call, status)` then runs on
  // one of its threads. False: no queue, or it is closed; nothing was
  // started.
  template <typename Call, typename Prepare, typename Finish>
  bool StartOnQueue(Call* call, Prepare prepare, Finish finish) {
    if (!options.queue) return false;
    return grpc_async::StartClientCall(*options.queue, &call->context, prepare, &call->response,
                                       &call->status,
                                       [call, finish] { finish(call, call->status); });
  }

  static void Release(Impl* impl) {
    if (impl->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    // Made on first use, after gRPC's own statics, so it is destroyed (and
    // closes what is left) before them.
    static SerialExecutor closer("somm-grpc-close");
    if (!closer.Post([impl] { delete impl; })) delete impl;  // at exit
  }

  // "worker w1 (10.0.0.5:7001): <message>", keeping the code: which worker
  // failed is what a router's or controller's log needs.
  Status Named(Status s) const {
    if (s.ok()) return s;
    return Status(s.code(), "worker " + worker + " (" + address + "): " + s.message());
  }

  // The result of an Execute call.
  StatusOr<ExecuteResult> ExecuteResultOf(const grpc::Status& status,
                                          pb::ExecuteResponse* response) const {
    if (!status.ok()) return Named(FromGrpcStatus(status));
    StatusOr<ExecuteResult> result = cluster_codec::DecodeExecuteResult(response);
    // The worker answered OK with something malformed: its bug.
    if (!result.ok()) {
      return Named(Internal("malformed execute response: " + result.status().message()));
    }
    return result;
  }

  std::atomic<int64_t> refs{1};  // the stub's, plus one per call in flight
  std::string worker;
  std::string address;
  GrpcWorkerStubOptions options;
  std::unique_ptr<pb::SommWorker::Stub> stub;  // thread-safe; holds the one channel
  // Execute on the same channel, its request as bytes (ExecuteRequestBytes).
  std::unique_ptr<grpc::TemplatedGenericStub<grpc::ByteBuffer, pb::ExecuteResponse>> execute_stub;
};

namespace {

const std::string kExecuteMethod = "/somm.cluster.SommWorker/Execute";

// The Execute request's bytes without a copy of the input data: each
// input's data is a slice of the router's shared inputs, and the slice
// holds a reference to them until gRPC has sent it
// (cluster_codec::EncodeExecuteRequestWire).
grpc::ByteBuffer ExecuteRequestBytes(const ExecuteRequest& request) {
  using SharedInputs = std::shared_ptr<const std::vector<Tensor>>;
  cluster_codec::ExecuteRequestWire wire = cluster_codec::EncodeExecuteRequestWire(request);
  const std::vector<Tensor>& inputs = request.Inputs();
  std::vector<grpc::Slice> slices;
  slices.reserve(2 * inputs.size() + 1);
  for (size_t i = 0; i < wire.heads.size(); ++i) {
    if (!wire.heads[i].empty()) slices.emplace_back(wire.heads[i]);
    if (i == inputs.size() || inputs[i].data.empty()) continue;
    const std::string& data = inputs[i].data;
    if (request.shared_inputs == nullptr) {  // the request's own: copied
      slices.emplace_back(data);
      continue;
    }
    slices.emplace_back(
        const_cast<char*>(data.data()), data.size(),
        [](void* keep) { delete static_cast<SharedInputs*>(keep); },
        new SharedInputs(request.shared_inputs));
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

}  // namespace

void GrpcWorkerStub::ImplRelease::operator()(Impl* impl) const { Impl::Release(impl); }

GrpcWorkerStub::GrpcWorkerStub(std::string worker, std::string address,
                               GrpcWorkerStubOptions options)
    : impl_(new Impl) {
  grpc_transport::TurnOffAbslDeadlockDetection();
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
  // The router retries a failed query itself, on another worker
  // (Router::Retry); gRPC's retry filter would only buffer every message it
  // sends, for a transparent retry onto the same worker. Nor is anything
  // compressed on this hop. Each call then passes two filters fewer.
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  args.SetInt(GRPC_ARG_ENABLE_PER_MESSAGE_COMPRESSION, 0);
  if (options.tls.enabled() && !options.tls.server_name.empty()) {
    args.SetSslTargetNameOverride(options.tls.server_name);
  }
  auto credentials = grpc_tls::ChannelCredentials(options.tls);
  if (!credentials.ok()) {
    // The files were checked at the process's start; one gone since fails
    // closed: credentials that trust no server.
    spdlog::error("worker {}: {}", impl_->worker, credentials.status().message());
    credentials = grpc::SslCredentials(grpc::SslCredentialsOptions{});
  }
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateCustomChannel(impl_->address, *credentials, args);
  impl_->stub = pb::SommWorker::NewStub(channel);
  impl_->execute_stub =
      std::make_unique<grpc::TemplatedGenericStub<grpc::ByteBuffer, pb::ExecuteResponse>>(channel);
}

GrpcWorkerStub::~GrpcWorkerStub() = default;

const std::string& GrpcWorkerStub::id() const { return impl_->worker; }

const std::string& GrpcWorkerStub::address() const { return impl_->address; }

Status GrpcWorkerStub::Execute(ExecuteRequest& request, ExecuteCallback done) {
  using ExecuteCall = Impl::Call<grpc::ByteBuffer, pb::ExecuteResponse, ExecuteCallback>;
  auto owned = std::make_unique<ExecuteCall>(impl_.get());
  owned->done = std::move(done);
  owned->request = ExecuteRequestBytes(request);
  std::chrono::system_clock::time_point deadline;
  // A best-effort query is answered late rather than not at all, so its SLO
  // cannot be the call's deadline: it travels without one (its batcher then
  // does not cut waiting short for it).
  if (!request.best_effort && cluster_codec::ToCallDeadline(request.deadline, &deadline)) {
    owned->context.set_deadline(deadline);
  }
  // The call is gRPC's until its end, which takes it back (gRPC ends it
  // exactly once, whatever the outcome).
  ExecuteCall* call = owned.release();
  auto finish = [](ExecuteCall* call, const grpc::Status& status) {
    std::unique_ptr<ExecuteCall> owned(call);
    StatusOr<ExecuteResult> result = owned->impl->ExecuteResultOf(status, &owned->response);
    // The answer first: the call is freed (its context, the gRPC call under
    // it) once the query's client has been answered, not before.
    owned->done(std::move(result));
  };
  auto* stub = impl_->execute_stub.get();
  auto prepare = [stub, call](grpc::CompletionQueue* cq) {
    return stub->PrepareUnaryCall(&call->context, kExecuteMethod, call->request, cq);
  };
  if (impl_->StartOnQueue(call, prepare, finish)) return Status::Ok();
  stub->UnaryCall(&call->context, kExecuteMethod, grpc::StubOptions(), &call->request,
                  &call->response, [call, finish](grpc::Status status) { finish(call, status); });
  return Status::Ok();
}

void GrpcWorkerStub::Apply(WorkerAction action, std::function<void(Status)> done) {
  using ApplyCall = Impl::Call<pb::ApplyRequest, pb::ApplyResponse, std::function<void(Status)>>;
  auto owned = std::make_unique<ApplyCall>(impl_.get());
  owned->done = std::move(done);
  cluster_codec::EncodeAction(action, &owned->request);
  ApplyCall* call = owned.release();  // as in Execute
  auto finish = [](ApplyCall* call, const grpc::Status& status) {
    std::unique_ptr<ApplyCall> owned(call);
    Status result = owned->impl->Named(FromGrpcStatus(status));
    std::function<void(Status)> done = std::move(owned->done);
    owned.reset();
    done(std::move(result));
  };
  auto* stub = impl_->stub.get();
  auto prepare = [stub, call](grpc::CompletionQueue* cq) {
    return stub->PrepareAsyncApply(&call->context, call->request, cq);
  };
  if (impl_->StartOnQueue(call, prepare, finish)) return;
  impl_->stub->async()->Apply(&call->context, &call->request, &call->response,
                              [call, finish](grpc::Status status) { finish(call, status); });
}

cluster::WorkerReport GrpcWorkerStub::Report() {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + impl_->options.report_timeout);
  pb::ReportResponse response;
  Status status = FromGrpcStatus(impl_->stub->Report(&context, pb::ReportRequest(), &response));
  if (status.ok()) {
    StatusOr<cluster::WorkerReport> report =
        cluster::WorkerReportFromJson(response.report_json(), Clock::Real().Now());
    if (report.ok()) return std::move(report).value();
    status = Internal("malformed report: " + report.status().message());
  }
  spdlog::warn("report: {}", impl_->Named(status).ToString());
  cluster::WorkerReport empty;
  empty.worker = impl_->worker;
  return empty;
}

}  // namespace somm
