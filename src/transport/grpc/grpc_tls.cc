#include "transport/grpc/grpc_tls.h"

#include <grpc/grpc_security_constants.h>
#include <grpcpp/security/auth_metadata_processor.h>

#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

namespace somm::grpc_tls {
namespace {

StatusOr<std::string> ReadPem(const char* flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return InvalidArgument(std::string(flag) + " " + path + ": cannot read the file");
  std::string pem((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (pem.find("-----BEGIN ") == std::string::npos) {
    return InvalidArgument(std::string(flag) + " " + path + ": not a PEM file");
  }
  return pem;
}

// Admits a call whose client certificate names a cluster process.
class ClusterPeerCheck : public grpc::AuthMetadataProcessor {
 public:
  bool IsBlocking() const override { return false; }
  grpc::Status Process(const InputMetadata&, grpc::AuthContext* context, OutputMetadata*,
                       OutputMetadata*) override {
    for (const grpc::string_ref& name :
         context->FindPropertyValues(GRPC_X509_SAN_PROPERTY_NAME)) {
      for (const char* peer : {"somm-router", "somm-worker", "somm-controller"}) {
        if (name == peer) return grpc::Status::OK;
      }
    }
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "this port serves the cluster's own processes: the client certificate "
                        "names none of somm-router, somm-worker, somm-controller");
  }
};

}  // namespace

StatusOr<std::shared_ptr<grpc::ServerCredentials>> ClusterServerCredentials(
    const crypto::TlsServerFiles& files) {
  auto credentials = ServerCredentials(files);
  if (!credentials.ok() || !files.enabled() || files.client_ca_file.empty()) return credentials;
  (*credentials)->SetAuthMetadataProcessor(std::make_shared<ClusterPeerCheck>());
  return credentials;
}

StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(
    const crypto::TlsServerFiles& files) {
  if (Status valid = files.Validate(); !valid.ok()) return valid;
  if (!files.enabled()) return grpc::InsecureServerCredentials();
  auto cert = ReadPem("--tls-cert", files.cert_file);
  if (!cert.ok()) return cert.status();
  auto key = ReadPem("--tls-key", files.key_file);
  if (!key.ok()) return key.status();
  grpc::SslServerCredentialsOptions options;
  options.pem_key_cert_pairs.push_back({*key, *cert});
  if (!files.client_ca_file.empty()) {
    auto ca = ReadPem("--tls-client-ca", files.client_ca_file);
    if (!ca.ok()) return ca.status();
    options.pem_root_certs = *ca;
    options.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(options);
}

StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentials(
    const crypto::TlsClientFiles& files) {
  if (Status valid = files.Validate(); !valid.ok()) return valid;
  if (!files.enabled()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  auto ca = ReadPem("--tls-ca", files.ca_file);
  if (!ca.ok()) return ca.status();
  options.pem_root_certs = *ca;
  if (!files.cert_file.empty()) {
    auto cert = ReadPem("--tls-cert", files.cert_file);
    if (!cert.ok()) return cert.status();
    auto key = ReadPem("--tls-key", files.key_file);
    if (!key.ok()) return key.status();
    options.pem_cert_chain = *cert;
    options.pem_private_key = *key;
  }
  return grpc::SslCredentials(options);
}

}  // namespace somm::grpc_tls
