#include "cli/any_client.h"

#include <charconv>
#include <utility>

namespace somm {

StatusOr<AnyClient> AnyClient::Create(const ClientOptions& o) {
  AnyClient c;
  if (o.protocol == "grpc") {
    GrpcClientOptions grpc_options;
    grpc_options.tls = o.tls;
    SOMM_ASSIGN_OR_RETURN(c.grpc_, GrpcClient::Connect(o.url, grpc_options));
    return c;
  }
  if (o.tls.enabled()) {
    // The REST client is cpp-httplib, whose TLS would bring OpenSSL outside
    // crypto/; curl --cacert speaks to a TLS REST port.
    return InvalidArgument("--tls-ca: the somm client speaks TLS over gRPC only (-i grpc)");
  }
  const auto colon = o.url.rfind(':');
  int port = 0;
  const char* end = o.url.data() + o.url.size();
  if (colon == std::string::npos ||
      std::from_chars(o.url.data() + colon + 1, end, port).ptr != end || port <= 0 ||
      port > 65535) {
    return InvalidArgument("--url must be host:port, got '" + o.url + "'");
  }
  c.http_ = std::make_unique<HttpClient>(o.url.substr(0, colon), port);
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

}  // namespace somm
