// HttpClient: a small synchronous Open Inference Protocol v2 REST client
// (KServe v2 + Triton's binary tensor data and model repository extensions,
// plus somm's model-less extension), used by the somm CLI and the load
// generator.
//
// One HttpClient holds one keep-alive connection (cpp-httplib), opened on the
// first call and reopened transparently when the server closes it. Calls block
// until the answer arrives or a timeout expires. With HttpClientOptions::tls
// (or ::https) the connection is HTTPS: the server's certificate must chain
// to the CA given (the system's trust store without one) and name the host
// dialled; a client certificate is presented for mutual TLS.
//
// Errors come back as Status: HTTP error statuses map back through
// oip::StatusCodeFromHttp (404 -> NOT_FOUND, 429 -> RESOURCE_EXHAUSTED, ...)
// carrying the server's {"error": ...} message; a server that cannot be
// reached, or a connection that breaks mid-call, is UNAVAILABLE. A call that
// fails in transport is not retried, since an inference may already have run.
//
// Thread-safety: NOT thread-safe. Use one HttpClient per thread; they are
// cheap (one socket each).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "crypto/tls_files.h"
#include "api/inference.h"
#include "api/inference_server.h"

namespace httplib {
class Client;
}  // namespace httplib

namespace somm {

struct HttpClientOptions {
  // Time allowed to open the TCP connection.
  int connect_timeout_ms = 5000;
  // Time allowed for each socket read or write once connected; an inference
  // waiting in a long queue needs this much head room.
  int io_timeout_ms = 60000;
  // The API key sent as "Authorization: Bearer <key>" on every request
  // (docs/security.md); "" = the SOMM_API_KEY environment variable, if set.
  std::string api_key;
  // HTTPS: tls.ca_file checks the server (and tls.cert_file / key_file are
  // presented to a server that asks); tls.server_name is not supported
  // here. https = TLS even without a CA file, checked against the system's
  // trust store. Neither = plain HTTP.
  crypto::TlsClientFiles tls;
  bool https = false;
};

class HttpClient {
 public:
  HttpClient(std::string host, int port, HttpClientOptions options = {});
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Health: true for 200, false for a 4xx answer; errors only when the
  // server cannot be reached (or, for ModelReady, the model is unknown).
  StatusOr<bool> ServerLive();
  StatusOr<bool> ServerReady();
  StatusOr<bool> ModelReady(const std::string& name, const std::string& version = "");

  StatusOr<somm::ServerMetadata> ServerMetadata();
  // version "" lets the server choose.
  StatusOr<somm::ModelMetadata> ModelMetadata(const std::string& name,
                                              const std::string& version = "");

  // POST /v2/models/{request.model_name}[/versions/{request.model_version}]/infer.
  // binary = send inputs in the binary section and ask for binary outputs
  // (the request's own binary_data_output / binary_data parameters still
  // win); false = JSON both ways.
  StatusOr<InferenceResponse> Infer(const InferenceRequest& request, bool binary = true);

  // Model repository extension.
  StatusOr<std::vector<RepositoryEntry>> RepositoryIndex(bool ready_only = false);
  Status Load(const std::string& name);
  Status Unload(const std::string& name);

  // somm's model-less extension (frontend/http/somm_json.h).
  // POST /v2/tasks/{task}/infer: somm picks the model (request.model_name and
  // model_version are ignored); the response names the model that served.
  StatusOr<InferenceResponse> InferTask(const std::string& task, const InferenceRequest& request,
                                        bool binary = true);
  // POST /v2/repository/models/{request.name}/register; OK once the server
  // has accepted the model (202). Generation then runs in the background.
  Status Register(const RegistrationRequest& request);
  // GET /v2/repository/models/{name}/variants.
  StatusOr<RegistrationStatus> GetVariants(const std::string& name);
  // GET /v2/somm/decisions?limit=N (at most 10000).
  StatusOr<std::vector<DecisionRecord>> RecentDecisions(size_t limit = 100);
  // GET /v2/tasks (task "") or /v2/tasks/{task}.
  StatusOr<std::vector<TaskDescription>> Tasks(const std::string& task);
  // GET `path` (the operator's views: "/v2/somm/overview", ...): the body of
  // a 200 answer, else the server's error.
  StatusOr<std::string> GetBody(const std::string& path);
  // POST a JSON `body` to `path` (batch jobs: "/v2/somm/batch", ...): the
  // body of a 200 answer, else the server's error.
  StatusOr<std::string> PostBody(const std::string& path, const std::string& body);
  // A model's rollout (docs/rollouts.md): POST (a change as JSON; "" =
  // read it) or GET /v2/repository/models/{m}/rollout; the answer's JSON.
  StatusOr<std::string> Rollout(const std::string& model, const std::string& change_json);

 private:
  struct Reply;
  StatusOr<Reply> Get(const std::string& path);
  StatusOr<Reply> Post(const std::string& path, const std::string& body,
                       std::optional<size_t> json_size);
  StatusOr<bool> Health(const std::string& path);
  StatusOr<InferenceResponse> InferAt(const std::string& path, const InferenceRequest& request,
                                      bool binary);

  // Why a call that did not reach the server failed, with a hint for TLS.
  Status TransportError(const char* method, const std::string& path, int error) const;

  std::string endpoint_;  // "host:port", for error messages
  std::string scheme_;    // "http://" or "https://"
  bool usable_ = true;    // false: the client certificate or key did not load
  std::unique_ptr<httplib::Client> http_;
};

}  // namespace somm
