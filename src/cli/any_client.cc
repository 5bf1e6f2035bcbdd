#include "cli/any_client.h"

#include <utility>

namespace somm {

StatusOr<AnyClient> AnyClient::Create(const ClientOptions& o) {
  SOMM_ASSIGN_OR_RETURN(const ClientTarget target, ResolveClientTarget(o));
  AnyClient c;
  if (o.protocol == "grpc") {
    GrpcClientOptions grpc_options;
    grpc_options.tls = o.tls;
    grpc_options.api_key = o.api_key;
    SOMM_ASSIGN_OR_RETURN(c.grpc_, GrpcClient::Connect(target.host_port, grpc_options));
    return c;
  }
  SOMM_ASSIGN_OR_RETURN(c.http_, MakeHttpClient(o));
  return c;
}

StatusOr<ModelMetadata> AnyClient::Metadata(const std::string& model, const std::string& version) {
  return grpc_ ? grpc_->GetModelMetadata(model, version) : http_->ModelMetadata(model, version);
}

StatusOr<InferenceResponse> AnyClient::Infer(const InferenceRequest& r, bool binary) {
  return grpc_ ? grpc_->Infer(r) : http_->Infer(r, binary);
}

StatusOr<InferenceResponse> AnyClient::InferTask(const std::string& task, const InferenceRequest& r,
                                                 bool binary) {
  return grpc_ ? grpc_->InferTask(task, r) : http_->InferTask(task, r, binary);
}

StatusOr<std::vector<RepositoryEntry>> AnyClient::Index() {
  return grpc_ ? grpc_->RepositoryIndex(false) : http_->RepositoryIndex();
}

Status AnyClient::Register(const RegistrationRequest& r) {
  return grpc_ ? grpc_->Register(r) : http_->Register(r);
}

StatusOr<RegistrationStatus> AnyClient::GetVariants(const std::string& name) {
  return grpc_ ? grpc_->GetVariants(name) : http_->GetVariants(name);
}

StatusOr<std::vector<DecisionRecord>> AnyClient::RecentDecisions(size_t limit) {
  return grpc_ ? grpc_->RecentDecisions(limit) : http_->RecentDecisions(limit);
}

StatusOr<std::string> AnyClient::Rollout(const std::string& model, const std::string& change_json) {
  return grpc_ ? grpc_->Rollout(model, change_json) : http_->Rollout(model, change_json);
}

StatusOr<std::vector<TaskDescription>> AnyClient::Tasks(const std::string& task) {
  return grpc_ ? grpc_->Tasks(task) : http_->Tasks(task);
}

StatusOr<std::string> AnyClient::GetBody(const std::string& path) {
  return grpc_ ? grpc_->OperatorCall("GET", path) : http_->GetBody(path);
}

StatusOr<std::string> AnyClient::PostBody(const std::string& path, const std::string& body) {
  return grpc_ ? grpc_->OperatorCall("POST", path, body) : http_->PostBody(path, body);
}

}  // namespace somm
