#include "loadgen/bench_client.h"

#include <charconv>
#include <cstdlib>
#include <unordered_map>

#include "loadgen/http_wire.h"
#include "client/grpc_client.h"
#include "client/http_client.h"
#include "frontend/http/oip_json.h"
#include "frontend/http/rest_routes.h"

namespace somm::loadgen {
namespace {

HttpClientOptions HttpClientOptionsWithKey(const std::string& key) {
  HttpClientOptions o;
  o.api_key = key;
  return o;
}

// Health and metadata go through HttpClient; inferences, the calls made in a
// loop, go out as bytes encoded once per request (load loops send the same
// few requests over and over) on an HttpWireConnection.
class HttpBenchClient : public BenchClient {
 public:
  HttpBenchClient(const std::string& host, int port, bool binary, std::string api_key)
      : client_(host, port, HttpClientOptionsWithKey(api_key)),
        wire_(host, port),
        endpoint_(host + ":" + std::to_string(port)),
        binary_(binary),
        api_key_(std::move(api_key)) {}
  StatusOr<InferenceResponse> Infer(const InferenceRequest& request) override {
    // Keyed by address: the load loops borrow their requests, unchanged, for
    // longer than the client lives.
    auto it = encoded_.find(&request);
    if (it == encoded_.end()) {
      SOMM_ASSIGN_OR_RETURN(const oip::EncodedBody body,
                            oip::EncodeInferRequest(request, {binary_, binary_}));
      const std::string path = oip::ModelPath(request.model_name, request.model_version) + "/infer";
      it = encoded_.emplace(&request, HttpPostBytes(endpoint_, path, body.body, body.json_size, api_key_))
               .first;
    }
    SOMM_ASSIGN_OR_RETURN(const HttpWireReply reply, wire_.Exchange(it->second));
    return oip::DecodeInferReply(reply.status, reply.body, reply.json_size, endpoint_);
  }
  StatusOr<bool> ServerReady() override { return client_.ServerReady(); }
  StatusOr<ModelMetadata> Metadata(const std::string& model) override {
    return client_.ModelMetadata(model);
  }

 private:
  HttpClient client_;
  HttpWireConnection wire_;
  std::string endpoint_;
  bool binary_;
  std::string api_key_;
  std::unordered_map<const InferenceRequest*, std::string> encoded_;
};

// REST over TLS: every call through HttpClient's HTTPS connection (the wire
// client above speaks plain HTTP). It costs the client more CPU per query
// than the wire client, so against a TLS port the client may be what
// limits a point; the report's client CPU says so.
class HttpsBenchClient : public BenchClient {
 public:
  HttpsBenchClient(const std::string& host, int port, bool binary, HttpClientOptions options)
      : client_(host, port, std::move(options)), binary_(binary) {}
  StatusOr<InferenceResponse> Infer(const InferenceRequest& request) override {
    return client_.Infer(request, binary_);
  }
  StatusOr<bool> ServerReady() override { return client_.ServerReady(); }
  StatusOr<ModelMetadata> Metadata(const std::string& model) override {
    return client_.ModelMetadata(model);
  }

 private:
  HttpClient client_;
  bool binary_;
};

class GrpcBenchClient : public BenchClient {
 public:
  explicit GrpcBenchClient(std::unique_ptr<GrpcClient> client) : client_(std::move(client)) {}
  StatusOr<InferenceResponse> Infer(const InferenceRequest& request) override {
    return client_->Infer(request);
  }
  StatusOr<bool> ServerReady() override { return client_->ServerReady(); }
  StatusOr<ModelMetadata> Metadata(const std::string& model) override {
    return client_->GetModelMetadata(model);
  }

 private:
  std::unique_ptr<GrpcClient> client_;
};

class OipClientFactory : public ClientFactory {
 public:
  OipClientFactory(OipTarget target, std::string host, int port, bool https)
      : target_(std::move(target)), host_(std::move(host)), port_(port), https_(https) {}

  StatusOr<std::unique_ptr<BenchClient>> NewClient() override {
    if (target_.protocol == "http") {
      if (target_.tls.enabled() || https_) {
        HttpClientOptions options;
        options.api_key = Key();
        options.tls = target_.tls;
        options.https = true;
        auto client = std::make_unique<HttpsBenchClient>(host_, port_, target_.binary, options);
        SOMM_RETURN_IF_ERROR(client->ServerReady().status());
        return std::unique_ptr<BenchClient>(std::move(client));
      }
      auto client = std::make_unique<HttpBenchClient>(host_, port_, target_.binary, Key());
      // Both connections open on first use; a health check opens HttpClient's
      // now, and fails early for a server that is not there.
      SOMM_RETURN_IF_ERROR(client->ServerReady().status());
      return std::unique_ptr<BenchClient>(std::move(client));
    }
    GrpcClientOptions options;
    options.api_key = Key();
    options.tls = target_.tls;
    SOMM_ASSIGN_OR_RETURN(std::unique_ptr<GrpcClient> client,
                          GrpcClient::Connect(host_ + ":" + std::to_string(port_), options));
    return std::unique_ptr<BenchClient>(std::make_unique<GrpcBenchClient>(std::move(client)));
  }

 private:
  std::string Key() const {
    if (!target_.api_key.empty()) return target_.api_key;
    const char* env = std::getenv("SOMM_API_KEY");
    return env ? env : "";
  }
  OipTarget target_;
  std::string host_;
  int port_;
  bool https_;  // --url said https://
};

}  // namespace

StatusOr<std::unique_ptr<ClientFactory>> MakeOipClientFactory(const OipTarget& target) {
  if (target.protocol != "http" && target.protocol != "grpc") {
    return InvalidArgument("protocol must be http or grpc, got '" + target.protocol + "'");
  }
  std::string_view url = target.url;
  const bool https = url.starts_with("https://");
  if (https && target.protocol != "http") {
    return InvalidArgument("--url https://... is for -i http; gRPC over TLS takes --tls-ca");
  }
  for (const std::string_view prefix : {"http://", "https://", "grpc://"}) {
    if (url.starts_with(prefix)) url.remove_prefix(prefix.size());
  }
  while (url.ends_with('/')) url.remove_suffix(1);
  const size_t colon = url.rfind(':');
  int port = 0;
  if (colon == std::string_view::npos || colon == 0) {
    return InvalidArgument("--url must be host:port, got '" + target.url + "'");
  }
  const std::string_view port_text = url.substr(colon + 1);
  const auto [end, ec] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || end != port_text.data() + port_text.size() || port < 1 || port > 65535) {
    return InvalidArgument("--url must be host:port with a port in 1..65535, got '" + target.url +
                           "'");
  }
  return std::unique_ptr<ClientFactory>(
      std::make_unique<OipClientFactory>(target, std::string(url.substr(0, colon)), port, https));
}

}  // namespace somm::loadgen
