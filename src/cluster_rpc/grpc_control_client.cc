#include "cluster_rpc/grpc_control_client.h"

#include <algorithm>

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "frontend/grpc/somm_codec.h"
#include "proto/control.grpc.pb.h"
#include "proto/somm.pb.h"
#include "transport/grpc/async_unary.h"
#include "transport/grpc/grpc_runtime.h"
#include "transport/grpc/grpc_tls.h"

namespace somm {

namespace pb = ::somm::control_rpc;

// Calls that only hand over or read a variant job's state: a leader that
// does not answer within this is as good as none.
constexpr std::chrono::seconds kQuickCallTimeout{10};

namespace {

// One blocking call of `method` on the leader's stub, bounded by `timeout`.
template <typename Request, typename Response>
Status CallLeader(pb::SommControl::Stub& stub,
                  grpc::Status (pb::SommControl::Stub::*method)(grpc::ClientContext*,
                                                                const Request&, Response*),
                  std::chrono::milliseconds timeout, const Request& request, Response* response) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + timeout);
  return grpc_transport::FromGrpcStatus((stub.*method)(&context, request, response));
}

pb::ModelRequest Named(const std::string& name) {
  pb::ModelRequest request;
  request.set_name(name);
  return request;
}

}  // namespace

struct GrpcControlClient::Channel {
  std::string address;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::SommControl::Stub> stub;
};

GrpcControlClient::GrpcControlClient(std::function<std::string()> leader, Device device,
                                     std::chrono::milliseconds load_timeout,
                                     crypto::TlsClientFiles tls)
    : leader_(std::move(leader)), device_(device), load_timeout_(load_timeout),
      tls_(std::move(tls)) {
  grpc_transport::TurnOffAbslDeadlockDetection();
}

GrpcControlClient::~GrpcControlClient() = default;

void GrpcControlClient::UseQueue(std::shared_ptr<grpc_async::CallQueue> queue) {
  MutexLock lock(&mu_);
  queue_ = std::move(queue);
}

StatusOr<std::shared_ptr<GrpcControlClient::Channel>> GrpcControlClient::Leader() {
  const std::string address = leader_();
  if (address.empty()) return Unavailable("no controller holds the leader lease now");
  MutexLock lock(&mu_);
  if (!channel_ || channel_->address != address) {
    auto c = std::make_shared<Channel>();
    c->address = address;
    auto credentials = grpc_tls::ChannelCredentials(tls_);
    if (!credentials.ok()) return credentials.status();
    grpc::ChannelArguments args;
    if (tls_.enabled() && !tls_.server_name.empty()) args.SetSslTargetNameOverride(tls_.server_name);
    c->channel = grpc::CreateCustomChannel(address, *credentials, args);
    c->stub = pb::SommControl::NewStub(c->channel);
    channel_ = std::move(c);
  }
  return channel_;
}

HardwareConfig GrpcControlClient::BaseHardware(const VersionRecord& v) const {
  HardwareConfig hw;
  hw.device = device_.kind;
  hw.device_index = device_.index;
  hw.threads = v.config.intra_op_threads;
  return hw;
}

void GrpcControlClient::EnsureLoaded(VersionPtr version, const std::string& variant,
                                     const HardwareConfig& hw, int replicas,
                                     const std::string& reason, bool urgent, LoadDone done,
                                     bool query_waits) {
  auto leader = Leader();
  if (!leader.ok()) return done(leader.status(), "");
  struct Call {
    grpc::ClientContext context;
    pb::EnsureLoadedRequest request;
    pb::EnsureLoadedResponse response;
    grpc::Status status;               // the outcome, when started on the queue
    std::shared_ptr<Channel> channel;  // kept alive for the call
    LoadDone done;
  };
  auto call = std::make_shared<Call>();
  call->channel = *leader;
  call->done = std::move(done);
  call->context.set_deadline(std::chrono::system_clock::now() + load_timeout_);
  auto& r = call->request;
  r.set_model(version->config.name);
  r.set_version(version->version);
  r.set_variant(variant);
  r.mutable_hardware()->set_device(hw.device == DeviceKind::kCuda ? "cuda" : "cpu");
  r.mutable_hardware()->set_index(hw.device_index);
  r.mutable_hardware()->set_threads(hw.threads);
  r.set_replicas(replicas);
  r.set_reason(reason);
  r.set_urgent(urgent);
  r.set_query_waits(query_waits);
  auto finish = [call](const grpc::Status& s) {
    Status status = grpc_transport::FromGrpcStatus(s);
    if (!status.ok()) {
      status = Status(status.code(),
                      "controller at " + call->channel->address + ": " + status.message());
    }
    call->done(status, status.ok() ? call->response.worker() : "");
  };
  std::shared_ptr<grpc_async::CallQueue> queue;
  {
    MutexLock lock(&mu_);
    queue = queue_;
  }
  if (queue && grpc_async::StartClientCall(
                   *queue, &call->context,
                   [&](grpc::CompletionQueue* cq) {
                     return call->channel->stub->PrepareAsyncEnsureLoaded(&call->context,
                                                                          call->request, cq);
                   },
                   &call->response, &call->status, [call, finish] { finish(call->status); })) {
    return;
  }
  call->channel->stub->async()->EnsureLoaded(&call->context, &call->request, &call->response,
                                             [finish](grpc::Status s) { finish(s); });
}

Status GrpcControlClient::LoadModel(const std::string& name, bool) {
  SOMM_ASSIGN_OR_RETURN(std::shared_ptr<Channel> c, Leader());
  pb::ModelResponse response;
  return CallLeader(*c->stub, &pb::SommControl::Stub::LoadModel, load_timeout_, Named(name),
                    &response);
}

Status GrpcControlClient::UnloadModel(const std::string& name) {
  SOMM_ASSIGN_OR_RETURN(std::shared_ptr<Channel> c, Leader());
  pb::ModelResponse response;
  return CallLeader(*c->stub, &pb::SommControl::Stub::UnloadModel, load_timeout_, Named(name),
                    &response);
}

Status GrpcControlClient::StartVariantJob(const std::string& name, int64_t version) {
  SOMM_ASSIGN_OR_RETURN(std::shared_ptr<Channel> c, Leader());
  pb::VariantJobRequest request;
  request.set_name(name);
  request.set_version(version);
  pb::ModelResponse response;
  return CallLeader(*c->stub, &pb::SommControl::Stub::StartVariantJob,
                    std::chrono::milliseconds(kQuickCallTimeout), request, &response);
}

StatusOr<RegistrationStatus> GrpcControlClient::GetRegistrationStatus(const std::string& name) {
  SOMM_ASSIGN_OR_RETURN(std::shared_ptr<Channel> c, Leader());
  pb::VariantJobStatus response;
  SOMM_RETURN_IF_ERROR(CallLeader(*c->stub, &pb::SommControl::Stub::GetVariantJob,
                                  std::chrono::milliseconds(kQuickCallTimeout), Named(name),
                                  &response));
  ::somm::GetVariantsResponse decoded;
  if (!decoded.ParseFromString(response.get_variants_response())) {
    return Internal("controller at " + c->address + ": an unreadable variant job status for '" +
                    name + "'");
  }
  return grpc_codec::DecodeRegistrationStatus(decoded);
}

std::vector<DecisionRecord> GrpcControlClient::RecentActions(size_t limit) {
  StatusOr<std::vector<DecisionRecord>> actions = [&]() -> StatusOr<std::vector<DecisionRecord>> {
    SOMM_ASSIGN_OR_RETURN(std::shared_ptr<Channel> c, Leader());
    pb::RecentActionsRequest request;
    request.set_limit(static_cast<uint32_t>(std::min<size_t>(limit, 100000)));
    pb::RecentActionsResponse response;
    SOMM_RETURN_IF_ERROR(CallLeader(*c->stub, &pb::SommControl::Stub::RecentActions,
                                    std::chrono::milliseconds(kQuickCallTimeout), request,
                                    &response));
    ::somm::RecentDecisionsResponse decoded;
    if (!decoded.ParseFromString(response.recent_decisions_response())) {
      return Internal("controller at " + c->address + ": an unreadable list of actions");
    }
    return grpc_codec::DecodeDecisions(decoded);
  }();
  if (!actions.ok()) {
    spdlog::warn("recent control actions: {}", actions.status().message());
    return {};
  }
  return std::move(actions).value();
}

std::map<std::string, int64_t> GrpcControlClient::ActionTotals() {
  StatusOr<std::map<std::string, int64_t>> totals =
      [&]() -> StatusOr<std::map<std::string, int64_t>> {
    SOMM_ASSIGN_OR_RETURN(std::shared_ptr<Channel> c, Leader());
    pb::RecentActionsRequest request;
    request.set_limit(0);  // the counts alone
    pb::RecentActionsResponse response;
    SOMM_RETURN_IF_ERROR(CallLeader(*c->stub, &pb::SommControl::Stub::RecentActions,
                                    std::chrono::milliseconds(kQuickCallTimeout), request,
                                    &response));
    return std::map<std::string, int64_t>(response.action_totals().begin(),
                                          response.action_totals().end());
  }();
  if (!totals.ok()) {
    spdlog::warn("control action counts: {}", totals.status().message());
    return {};
  }
  return std::move(totals).value();
}

namespace {

StatusOr<RolloutView> ViewFrom(const std::string& address, const pb::RolloutViewResponse& r) {
  auto view = RolloutViewFromJson(r.view_json());
  if (!view.ok()) {
    return Internal("controller at " + address + ": an unreadable rollout: " +
                    view.status().message());
  }
  return view;
}

}  // namespace

StatusOr<RolloutView> GrpcControlClient::ChangeRollout(const RolloutChange& change) {
  SOMM_ASSIGN_OR_RETURN(std::shared_ptr<Channel> c, Leader());
  pb::RolloutChangeRequest request;
  request.set_name(change.model);
  request.set_change_json(RolloutChangeToJson(change));
  pb::RolloutViewResponse response;
  // A started canary loads first: the load's timeout.
  SOMM_RETURN_IF_ERROR(CallLeader(*c->stub, &pb::SommControl::Stub::ChangeRollout, load_timeout_,
                                  request, &response));
  return ViewFrom(c->address, response);
}

StatusOr<RolloutView> GrpcControlClient::GetRollout(const std::string& model) {
  SOMM_ASSIGN_OR_RETURN(std::shared_ptr<Channel> c, Leader());
  pb::RolloutViewResponse response;
  SOMM_RETURN_IF_ERROR(CallLeader(*c->stub, &pb::SommControl::Stub::GetRollout,
                                  std::chrono::milliseconds(kQuickCallTimeout), Named(model),
                                  &response));
  return ViewFrom(c->address, response);
}

}  // namespace somm
