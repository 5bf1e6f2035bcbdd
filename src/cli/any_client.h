// AnyClient: one interface over the REST and gRPC clients, so each somm
// subcommand is written once. ClientOptions::protocol picks the client;
// calls return what the underlying client returns.
//
// Thread-safety: like HttpClient, not thread-safe; one per command.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cli/client_options.h"
#include "client/grpc_client.h"
#include "client/http_client.h"
#include "common/status.h"

namespace somm {

class AnyClient {
 public:
  // --url as cli/client_options.h reads it, for both protocols.
  static StatusOr<AnyClient> Create(const ClientOptions& options);

  StatusOr<ModelMetadata> Metadata(const std::string& model, const std::string& version);
  StatusOr<InferenceResponse> Infer(const InferenceRequest& request, bool binary);
  StatusOr<InferenceResponse> InferTask(const std::string& task, const InferenceRequest& request,
                                        bool binary);
  StatusOr<std::vector<RepositoryEntry>> Index();
  Status Register(const RegistrationRequest& request);
  StatusOr<RegistrationStatus> GetVariants(const std::string& name);
  StatusOr<std::vector<DecisionRecord>> RecentDecisions(size_t limit);
  StatusOr<std::vector<TaskDescription>> Tasks(const std::string& task);
  StatusOr<std::string> Rollout(const std::string& model, const std::string& change_json);
  // The operator's views and batch jobs under /v2/somm/ (`path` with its
  // query string): REST's GET or POST there, or SommControl/OperatorCall
  // over gRPC, which answers the same JSON body.
  StatusOr<std::string> GetBody(const std::string& path);
  StatusOr<std::string> PostBody(const std::string& path, const std::string& body);

 private:
  std::unique_ptr<GrpcClient> grpc_;
  std::unique_ptr<HttpClient> http_;
};

}  // namespace somm
