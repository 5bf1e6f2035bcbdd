// GrpcClient: a small synchronous Open Inference Protocol (KServe v2) gRPC
// client, used by the somm CLI and the load generator. It speaks the same
// service as Triton's and KServe's servers, so it works against them too; the
// model-less calls use somm's own SommControl service on the same channel.
//
// Contract:
//   * Every call blocks until the server answers or the call's deadline
//     (GrpcClientOptions::call_timeout) passes, and returns a somm Status;
//     gRPC codes map back onto somm codes (grpc_transport::FromGrpcStatus), so
//     NOT_FOUND from the server is StatusCode::kNotFound here.
//   * Infer sends inputs as raw_input_contents and decodes outputs (raw or
//     typed) into somm::Tensor, checking each output's bytes against its
//     shape: a malformed answer is an error, not a bad tensor.
//   * Thread-safe: one client may be shared by any number of threads; each
//     call uses its own gRPC context over one shared channel.
//   * The public header is free of gRPC and generated code.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "crypto/tls_files.h"
#include "api/inference.h"
#include "api/inference_server.h"

namespace somm {

struct GrpcClientOptions {
  // Connect waits this long for the channel to come up and fails with
  // Unavailable otherwise. 0 = do not wait: connect lazily on the first call.
  std::chrono::milliseconds connect_timeout{5000};
  // Deadline of each call. 0 = no deadline.
  std::chrono::milliseconds call_timeout{0};
  // Largest message sent or accepted, in bytes. -1 = unlimited.
  int max_message_bytes = 64 * 1024 * 1024;
  // The API key sent as "authorization: Bearer <key>" metadata on every
  // call (docs/security.md); "" = the SOMM_API_KEY environment variable.
  std::string api_key;
  // TLS: the server's CA, and a client certificate for mutual TLS; not
  // enabled = plaintext.
  crypto::TlsClientFiles tls;
};

class GrpcClient {
 public:
  // `target` is "host:port" (e.g. "localhost:8001") or any gRPC target URI.
  static StatusOr<std::unique_ptr<GrpcClient>> Connect(const std::string& target,
                                                       GrpcClientOptions options = {});

  ~GrpcClient();
  GrpcClient(const GrpcClient&) = delete;
  GrpcClient& operator=(const GrpcClient&) = delete;

  const std::string& target() const;

  StatusOr<bool> ServerLive() const;
  StatusOr<bool> ServerReady() const;
  // version "" = the server's default version.
  StatusOr<bool> ModelReady(const std::string& name, const std::string& version = "") const;

  StatusOr<ServerMetadata> GetServerMetadata() const;
  // ModelMetadata::parameters stays empty: the gRPC message has no such field.
  StatusOr<ModelMetadata> GetModelMetadata(const std::string& name,
                                           const std::string& version = "") const;

  StatusOr<InferenceResponse> Infer(const InferenceRequest& request) const;

  StatusOr<std::vector<RepositoryEntry>> RepositoryIndex(bool ready_only = false) const;
  Status LoadModel(const std::string& name) const;
  Status UnloadModel(const std::string& name) const;

  // somm's model-less extension (proto/somm.proto, same channel).
  // Task form: ModelInfer with no model name and the parameter "task"; the
  // response names the model somm picked.
  StatusOr<InferenceResponse> InferTask(const std::string& task,
                                        const InferenceRequest& request) const;
  // OK once the server has accepted the model; generation runs on.
  Status Register(const RegistrationRequest& request) const;
  StatusOr<RegistrationStatus> GetVariants(const std::string& name) const;
  // limit: 1..10000.
  StatusOr<std::vector<DecisionRecord>> RecentDecisions(size_t limit = 100) const;
  // ListTasks (task "") or DescribeTask.
  StatusOr<std::vector<TaskDescription>> Tasks(const std::string& task) const;
  // SommControl/Rollout (a change as JSON) or GetRollout (""): its JSON.
  StatusOr<std::string> Rollout(const std::string& model, const std::string& change_json) const;
  // SommControl/OperatorCall: what REST answers to `method` at `path` (an
  // operator view or a batch job under /v2/somm/, with its query string),
  // its JSON body.
  StatusOr<std::string> OperatorCall(const std::string& method, const std::string& path,
                                     const std::string& body = "") const;

 private:
  struct Impl;
  explicit GrpcClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace somm
