#include "client/grpc_client.h"

#include <grpcpp/grpcpp.h>

#include <cstdlib>
#include <utility>

#include "frontend/grpc/grpc_codec.h"
#include "frontend/grpc/somm_codec.h"
#include "frontend/grpc/task_codec.h"
#include "proto/inference.grpc.pb.h"
#include "proto/somm.grpc.pb.h"
#include "transport/grpc/grpc_runtime.h"
#include "transport/grpc/grpc_tls.h"

namespace somm {

using grpc_transport::FromGrpcStatus;

struct GrpcClient::Impl {
  std::string target;
  GrpcClientOptions options;
  std::string authorization;  // "Bearer <key>", or "" without a key
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub;  // thread-safe
  std::unique_ptr<somm::SommControl::Stub> control;             // thread-safe

  // A fresh context per call: gRPC contexts are single-use and not shared.
  std::unique_ptr<grpc::ClientContext> Context() const {
    auto ctx = std::make_unique<grpc::ClientContext>();
    if (options.call_timeout.count() > 0) {
      ctx->set_deadline(std::chrono::system_clock::now() + options.call_timeout);
    }
    if (!authorization.empty()) ctx->AddMetadata("authorization", authorization);
    return ctx;
  }
};

StatusOr<std::unique_ptr<GrpcClient>> GrpcClient::Connect(const std::string& target,
                                                          GrpcClientOptions options) {
  if (target.empty()) return InvalidArgument("gRPC target is empty");
  grpc_transport::TurnOffAbslDeadlockDetection();
  auto impl = std::make_unique<Impl>();
  impl->target = target;
  impl->options = options;
  const char* env_key = std::getenv("SOMM_API_KEY");
  const std::string key = !options.api_key.empty() ? options.api_key : env_key ? env_key : "";
  if (!key.empty()) impl->authorization = "Bearer " + key;
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_message_bytes);
  args.SetMaxSendMessageSize(options.max_message_bytes);
  auto credentials = grpc_tls::ChannelCredentials(options.tls);
  if (!credentials.ok()) return credentials.status();
  impl->channel = grpc::CreateCustomChannel(target, *credentials, args);
  if (!impl->channel) return InvalidArgument("cannot create a gRPC channel to '" + target + "'");
  if (options.connect_timeout.count() > 0 &&
      !impl->channel->WaitForConnected(std::chrono::system_clock::now() +
                                       options.connect_timeout)) {
    // A plaintext client and a TLS server (or the other way round) look the
    // same as a server that is down to gRPC: say which to check.
    const std::string hint =
        options.tls.enabled()
            ? " over TLS (is the server's port TLS, signed by --tls-ca, and, if it requires "
              "client certificates, are --tls-cert and --tls-key given?)"
            : " in plaintext (if the server uses TLS, pass --tls-ca)";
    return Unavailable("cannot connect to gRPC server at '" + target + "' within " +
                       std::to_string(options.connect_timeout.count()) + " ms" + hint);
  }
  impl->stub = inference::GRPCInferenceService::NewStub(impl->channel);
  impl->control = somm::SommControl::NewStub(impl->channel);
  return std::unique_ptr<GrpcClient>(new GrpcClient(std::move(impl)));
}

GrpcClient::GrpcClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GrpcClient::~GrpcClient() = default;

const std::string& GrpcClient::target() const { return impl_->target; }

StatusOr<bool> GrpcClient::ServerLive() const {
  inference::ServerLiveResponse response;
  SOMM_RETURN_IF_ERROR(
      FromGrpcStatus(impl_->stub->ServerLive(impl_->Context().get(), {}, &response)));
  return response.live();
}

StatusOr<bool> GrpcClient::ServerReady() const {
  inference::ServerReadyResponse response;
  SOMM_RETURN_IF_ERROR(
      FromGrpcStatus(impl_->stub->ServerReady(impl_->Context().get(), {}, &response)));
  return response.ready();
}

StatusOr<bool> GrpcClient::ModelReady(const std::string& name, const std::string& version) const {
  inference::ModelReadyRequest request;
  request.set_name(name);
  request.set_version(version);
  inference::ModelReadyResponse response;
  SOMM_RETURN_IF_ERROR(
      FromGrpcStatus(impl_->stub->ModelReady(impl_->Context().get(), request, &response)));
  return response.ready();
}

StatusOr<ServerMetadata> GrpcClient::GetServerMetadata() const {
  inference::ServerMetadataResponse response;
  SOMM_RETURN_IF_ERROR(
      FromGrpcStatus(impl_->stub->ServerMetadata(impl_->Context().get(), {}, &response)));
  return grpc_codec::DecodeServerMetadata(response);
}

StatusOr<ModelMetadata> GrpcClient::GetModelMetadata(const std::string& name,
                                                     const std::string& version) const {
  inference::ModelMetadataRequest request;
  request.set_name(name);
  request.set_version(version);
  inference::ModelMetadataResponse response;
  SOMM_RETURN_IF_ERROR(
      FromGrpcStatus(impl_->stub->ModelMetadata(impl_->Context().get(), request, &response)));
  return grpc_codec::DecodeModelMetadata(response);
}

StatusOr<InferenceResponse> GrpcClient::Infer(const InferenceRequest& request) const {
  inference::ModelInferRequest wire;
  SOMM_RETURN_IF_ERROR(grpc_codec::EncodeInferRequest(request, &wire));
  inference::ModelInferResponse response;
  SOMM_RETURN_IF_ERROR(
      FromGrpcStatus(impl_->stub->ModelInfer(impl_->Context().get(), wire, &response)));
  StatusOr<InferenceResponse> decoded = grpc_codec::DecodeInferResponse(&response);
  if (!decoded.ok()) {
    // The server answered OK with something malformed: say whose fault it is.
    return Internal("malformed response from '" + impl_->target +
                    "': " + decoded.status().message());
  }
  return decoded;
}

StatusOr<std::vector<RepositoryEntry>> GrpcClient::RepositoryIndex(bool ready_only) const {
  inference::RepositoryIndexRequest request;
  request.set_ready(ready_only);
  inference::RepositoryIndexResponse response;
  SOMM_RETURN_IF_ERROR(
      FromGrpcStatus(impl_->stub->RepositoryIndex(impl_->Context().get(), request, &response)));
  std::vector<RepositoryEntry> entries;
  entries.reserve(response.models_size());
  for (const auto& m : response.models()) {
    entries.push_back({m.name(), m.version(), m.state(), m.reason()});
  }
  return entries;
}

Status GrpcClient::LoadModel(const std::string& name) const {
  inference::RepositoryModelLoadRequest request;
  request.set_model_name(name);
  inference::RepositoryModelLoadResponse response;
  return FromGrpcStatus(
      impl_->stub->RepositoryModelLoad(impl_->Context().get(), request, &response));
}

Status GrpcClient::UnloadModel(const std::string& name) const {
  inference::RepositoryModelUnloadRequest request;
  request.set_model_name(name);
  inference::RepositoryModelUnloadResponse response;
  return FromGrpcStatus(
      impl_->stub->RepositoryModelUnload(impl_->Context().get(), request, &response));
}

StatusOr<InferenceResponse> GrpcClient::InferTask(const std::string& task,
                                                  const InferenceRequest& request) const {
  if (task.empty()) return InvalidArgument("task-form inference names no task");
  InferenceRequest task_form = request;
  task_form.model_name.clear();
  task_form.model_version.clear();
  task_form.parameters["task"] = task;
  return Infer(task_form);
}

Status GrpcClient::Register(const RegistrationRequest& request) const {
  somm::RegisterModelRequest wire;
  grpc_codec::EncodeRegistration(request, &wire);
  somm::RegisterModelResponse response;
  return FromGrpcStatus(impl_->control->RegisterModel(impl_->Context().get(), wire, &response));
}

StatusOr<RegistrationStatus> GrpcClient::GetVariants(const std::string& name) const {
  somm::GetVariantsRequest request;
  request.set_name(name);
  somm::GetVariantsResponse response;
  SOMM_RETURN_IF_ERROR(
      FromGrpcStatus(impl_->control->GetVariants(impl_->Context().get(), request, &response)));
  StatusOr<RegistrationStatus> status = grpc_codec::DecodeRegistrationStatus(response);
  if (!status.ok()) {
    return Internal("malformed response from '" + impl_->target +
                    "': " + status.status().message());
  }
  return status;
}

StatusOr<std::vector<DecisionRecord>> GrpcClient::RecentDecisions(size_t limit) const {
  if (limit < 1 || limit > grpc_codec::kMaxDecisionLimit) {
    return InvalidArgument("decision limit must be between 1 and " +
                           std::to_string(grpc_codec::kMaxDecisionLimit));
  }
  somm::RecentDecisionsRequest request;
  request.set_limit(static_cast<uint32_t>(limit));
  somm::RecentDecisionsResponse response;
  SOMM_RETURN_IF_ERROR(FromGrpcStatus(
      impl_->control->RecentDecisions(impl_->Context().get(), request, &response)));
  return grpc_codec::DecodeDecisions(response);
}

StatusOr<std::vector<TaskDescription>> GrpcClient::Tasks(const std::string& task) const {
  somm::TasksResponse response;
  if (task.empty()) {
    SOMM_RETURN_IF_ERROR(FromGrpcStatus(
        impl_->control->ListTasks(impl_->Context().get(), somm::ListTasksRequest(), &response)));
  } else {
    somm::DescribeTaskRequest request;
    request.set_task(task);
    SOMM_RETURN_IF_ERROR(FromGrpcStatus(
        impl_->control->DescribeTask(impl_->Context().get(), request, &response)));
  }
  return grpc_codec::DecodeTasks(response);
}

StatusOr<std::string> GrpcClient::Rollout(const std::string& model,
                                          const std::string& change_json) const {
  somm::RolloutResponse response;
  if (change_json.empty()) {
    somm::GetRolloutRequest request;
    request.set_model_name(model);
    SOMM_RETURN_IF_ERROR(
        FromGrpcStatus(impl_->control->GetRollout(impl_->Context().get(), request, &response)));
  } else {
    somm::RolloutRequest request;
    request.set_model_name(model);
    request.set_change_json(change_json);
    // A started canary loads first: no deadline beyond the context's.
    SOMM_RETURN_IF_ERROR(
        FromGrpcStatus(impl_->control->Rollout(impl_->Context().get(), request, &response)));
  }
  return response.rollout_json();
}

StatusOr<std::string> GrpcClient::OperatorCall(const std::string& method, const std::string& path,
                                               const std::string& body) const {
  somm::OperatorCallRequest request;
  request.set_method(method);
  request.set_path(path);
  request.set_body(body);
  somm::OperatorCallResponse response;
  SOMM_RETURN_IF_ERROR(
      FromGrpcStatus(impl_->control->OperatorCall(impl_->Context().get(), request, &response)));
  return response.body();
}

}  // namespace somm
