// gRPC's own TLS credentials from somm's TLS files (crypto/tls_files.h): the
// one place that turns --tls-* flags into grpc::ServerCredentials and
// grpc::ChannelCredentials, for the inference frontend, the cluster's
// services and stubs, and the clients. gRPC brings its own TLS, so no
// OpenSSL here.
//
// Files are read when the credentials are made (a process's start, a
// channel's creation): a missing or unreadable file is kInvalidArgument
// naming the flag. Plaintext when the files are not enabled.
#pragma once

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include <memory>

#include "common/status.h"
#include "crypto/tls_files.h"

namespace somm::grpc_tls {

// SslServerCredentials; with a client CA, clients must present a
// certificate it signed (REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY).
StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(
    const crypto::TlsServerFiles& files);

// ServerCredentials for a cluster's internal service (a worker's, the
// controller's): with a client CA, a call is also refused (UNAUTHENTICATED)
// unless the client's certificate names one of the cluster's processes
// (somm-router, somm-worker, somm-controller) - a user's client certificate
// from the same CA (scripts/make-certs' client.pem) reaches the routers
// only.
StatusOr<std::shared_ptr<grpc::ServerCredentials>> ClusterServerCredentials(
    const crypto::TlsServerFiles& files);

// SslCredentials trusting files.ca_file, presenting the client certificate
// when given.
StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentials(
    const crypto::TlsClientFiles& files);

}  // namespace somm::grpc_tls
