// BenchClient: the load generator's seam over the Open Inference Protocol
// clients, so the load loops are written once for REST and gRPC and can be
// tested with an in-memory twin.
//
// A ClientFactory makes one BenchClient per sender thread: HttpClient is not
// thread-safe (one keep-alive connection each), and one connection per
// sender is also what makes N concurrent senders N concurrent requests on
// the wire. A BenchClient is used by one thread at a time; the factory
// itself is thread-safe.
//
// REST needs only POST /v2/models/{m}/infer and GET /v2/health/ready from the
// server, so a plain JSON-only OIP peer works; metadata is asked for only to
// build synthetic inputs.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "crypto/tls_files.h"
#include "api/inference.h"
#include "api/inference_server.h"

namespace somm::loadgen {

class BenchClient {
 public:
  virtual ~BenchClient() = default;
  virtual StatusOr<InferenceResponse> Infer(const InferenceRequest& request) = 0;
  virtual StatusOr<bool> ServerReady() = 0;
  virtual StatusOr<ModelMetadata> Metadata(const std::string& model) = 0;
};

class ClientFactory {
 public:
  virtual ~ClientFactory() = default;
  virtual StatusOr<std::unique_ptr<BenchClient>> NewClient() = 0;
};

struct OipTarget {
  std::string url = "127.0.0.1:8000";  // host:port; http:// or https:// (REST over TLS) prefixed
  std::string protocol = "http";       // http | grpc
  bool binary = false;                 // REST: binary tensor extension both ways
  // The API key sent with every call (docs/security.md); "" = the
  // SOMM_API_KEY environment variable, if set.
  std::string api_key;
  // TLS: the server's CA, and a client certificate for mutual TLS; not
  // enabled = plaintext (REST: unless --url says https://). REST over TLS
  // goes through HttpClient's HTTPS connection rather than the plain-HTTP
  // wire client, at more client CPU per query.
  crypto::TlsClientFiles tls;
};

// InvalidArgument for a malformed URL or an unknown protocol. Connects
// nothing: each NewClient connects (gRPC) or connects on first use (REST).
StatusOr<std::unique_ptr<ClientFactory>> MakeOipClientFactory(const OipTarget& target);

}  // namespace somm::loadgen
