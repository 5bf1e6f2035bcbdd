#include "cluster_rpc/control_service.h"

#include <grpcpp/grpcpp.h>

#include <mutex>
#include <utility>

#include "common/serial_executor.h"
#include "frontend/grpc/somm_codec.h"
#include "proto/control.grpc.pb.h"
#include "proto/somm.pb.h"
#include "transport/grpc/grpc_runtime.h"
#include "transport/grpc/grpc_tls.h"

namespace somm {
namespace {

namespace pb = ::somm::control_rpc;
using grpc::CallbackServerContext;
using grpc::ServerUnaryReactor;
using grpc_transport::ToGrpcStatus;

ServerUnaryReactor* FinishNow(CallbackServerContext* context, const Status& status) {
  ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

class SommControlService final : public pb::SommControl::CallbackService {
 public:
  SommControlService(ControlClient& controller, ControlService::Resolver resolve,
                     std::function<bool()> is_leader)
      : controller_(controller),
        resolve_(std::move(resolve)),
        is_leader_(std::move(is_leader)) {}

  ServerUnaryReactor* EnsureLoaded(CallbackServerContext* context,
                                   const pb::EnsureLoadedRequest* request,
                                   pb::EnsureLoadedResponse* response) override {
    if (!is_leader_()) return FinishNow(context, Unavailable("not the leader controller"));
    StatusOr<VersionPtr> version = resolve_(request->model(), request->version());
    if (!version.ok()) return FinishNow(context, version.status());
    HardwareConfig hw;
    const std::string& device = request->hardware().device();
    if (device != "cpu" && device != "cuda") {
      return FinishNow(context, InvalidArgument("hardware.device '" + device + "' is not cpu or cuda"));
    }
    hw.device = device == "cuda" ? DeviceKind::kCuda : DeviceKind::kCpu;
    hw.device_index = request->hardware().index();
    hw.threads = std::max(1, request->hardware().threads());
    ServerUnaryReactor* reactor = context->DefaultReactor();
    controller_.EnsureLoaded(
        *version, request->variant(), hw, std::max(1, request->replicas()), request->reason(),
        request->urgent(),
        [reactor, response](const Status& s, const std::string& worker) {
          response->set_worker(worker);
          reactor->Finish(ToGrpcStatus(s));
        },
        request->query_waits());
    return reactor;
  }

  ServerUnaryReactor* LoadModel(CallbackServerContext* context, const pb::ModelRequest* request,
                                pb::ModelResponse*) override {
    return Repository(context, request->name(), true);
  }
  ServerUnaryReactor* UnloadModel(CallbackServerContext* context, const pb::ModelRequest* request,
                                  pb::ModelResponse*) override {
    return Repository(context, request->name(), false);
  }

  // Both return at once (the job runs on the registry's thread), so they
  // run on gRPC's thread.
  ServerUnaryReactor* StartVariantJob(CallbackServerContext* context,
                                      const pb::VariantJobRequest* request,
                                      pb::ModelResponse*) override {
    if (!is_leader_()) return FinishNow(context, Unavailable("not the leader controller"));
    return FinishNow(context, controller_.StartVariantJob(request->name(), request->version()));
  }
  ServerUnaryReactor* GetVariantJob(CallbackServerContext* context, const pb::ModelRequest* request,
                                    pb::VariantJobStatus* response) override {
    if (!is_leader_()) return FinishNow(context, Unavailable("not the leader controller"));
    StatusOr<RegistrationStatus> status = controller_.GetRegistrationStatus(request->name());
    if (!status.ok()) return FinishNow(context, status.status());
    ::somm::GetVariantsResponse encoded;
    grpc_codec::EncodeRegistrationStatus(*status, &encoded);
    encoded.SerializeToString(response->mutable_get_variants_response());
    return FinishNow(context, Status::Ok());
  }

  ServerUnaryReactor* RecentActions(CallbackServerContext* context,
                                    const pb::RecentActionsRequest* request,
                                    pb::RecentActionsResponse* response) override {
    if (!is_leader_()) return FinishNow(context, Unavailable("not the leader controller"));
    ::somm::RecentDecisionsResponse encoded;
    grpc_codec::EncodeDecisions(controller_.RecentActions(request->limit()), &encoded);
    encoded.SerializeToString(response->mutable_recent_decisions_response());
    for (const auto& [kind, n] : controller_.ActionTotals()) {
      (*response->mutable_action_totals())[kind] = n;
    }
    return FinishNow(context, Status::Ok());
  }

  ServerUnaryReactor* ChangeRollout(CallbackServerContext* context,
                                    const pb::RolloutChangeRequest* request,
                                    pb::RolloutViewResponse* response) override {
    if (!is_leader_()) return FinishNow(context, Unavailable("not the leader controller"));
    StatusOr<RolloutChange> change = RolloutChangeFromJson(request->name(), request->change_json());
    if (!change.ok()) return FinishNow(context, change.status());
    // A started canary loads: in order with the repository calls, off the
    // callback thread.
    ServerUnaryReactor* reactor = context->DefaultReactor();
    const bool posted = serial_.Post([this, reactor, response, change = std::move(change).value()] {
      StatusOr<RolloutView> view = controller_.ChangeRollout(change);
      if (view.ok()) response->set_view_json(RolloutViewToJson(*view));
      reactor->Finish(ToGrpcStatus(view.status()));
    });
    if (!posted) reactor->Finish(ToGrpcStatus(Unavailable("controller is shutting down")));
    return reactor;
  }

  ServerUnaryReactor* GetRollout(CallbackServerContext* context, const pb::ModelRequest* request,
                                 pb::RolloutViewResponse* response) override {
    if (!is_leader_()) return FinishNow(context, Unavailable("not the leader controller"));
    StatusOr<RolloutView> view = controller_.GetRollout(request->name());
    if (view.ok()) response->set_view_json(RolloutViewToJson(*view));
    return FinishNow(context, view.status());
  }

  void Stop() { serial_.Shutdown(); }

 private:
  ServerUnaryReactor* Repository(CallbackServerContext* context, const std::string& name,
                                 bool load) {
    if (!is_leader_()) return FinishNow(context, Unavailable("not the leader controller"));
    ServerUnaryReactor* reactor = context->DefaultReactor();
    const bool posted = serial_.Post([this, reactor, name, load] {
      const Status s = load ? controller_.LoadModel(name) : controller_.UnloadModel(name);
      reactor->Finish(ToGrpcStatus(s));
    });
    if (!posted) reactor->Finish(ToGrpcStatus(Unavailable("controller is shutting down")));
    return reactor;
  }

  ControlClient& controller_;
  const ControlService::Resolver resolve_;
  const std::function<bool()> is_leader_;
  // The blocking repository calls, one after another, off gRPC's threads.
  SerialExecutor serial_{"somm-control"};
};

}  // namespace

struct ControlService::Impl {
  Impl(ControlClient& c, Resolver r, std::function<bool()> l)
      : service(c, std::move(r), std::move(l)) {}
  SommControlService service;
  int port = 0;
  std::once_flag shutdown_once;
  std::unique_ptr<grpc::Server> server;  // last: destroyed first
};

StatusOr<std::unique_ptr<ControlService>> ControlService::Start(
    ControlClient& controller, Resolver resolve, std::function<bool()> is_leader,
    ControlServiceOptions options) {
  if (options.port < 0 || options.port > 65535) {
    return InvalidArgument("control service port " + std::to_string(options.port) +
                           " is not in 0..65535");
  }
  grpc_transport::TurnOffAbslDeadlockDetection();
  auto impl = std::make_unique<Impl>(controller, std::move(resolve), std::move(is_leader));
  const std::string where = options.address + ":" + std::to_string(options.port);
  grpc::ServerBuilder builder;
  auto credentials = grpc_tls::ClusterServerCredentials(options.tls);
  if (!credentials.ok()) return credentials.status();
  builder.AddListeningPort(where, *credentials, &impl->port);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.RegisterService(&impl->service);
  impl->server = builder.BuildAndStart();
  if (!impl->server || impl->port == 0) {
    if (impl->server) impl->server->Shutdown();
    impl->server.reset();
    return Unavailable("control service cannot listen on " + where +
                       " (address invalid or port in use)");
  }
  return std::unique_ptr<ControlService>(new ControlService(std::move(impl)));
}

ControlService::ControlService(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ControlService::~ControlService() { Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1)); }

int ControlService::port() const { return impl_->port; }

void ControlService::Shutdown(std::chrono::system_clock::time_point deadline) {
  std::call_once(impl_->shutdown_once, [&] {
    if (impl_->server) impl_->server->Shutdown(deadline);
    impl_->service.Stop();
  });
}

}  // namespace somm
