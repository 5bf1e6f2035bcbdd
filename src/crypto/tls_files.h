// Where a process's TLS material lives: PEM file paths, as given on the
// command line (--tls-cert, --tls-key, --tls-client-ca on the servers;
// --tls-ca, --tls-cert, --tls-key on the clients). Plain data with no
// OpenSSL in it, so the options structs of cli/ and the gRPC adapters can
// carry it; crypto/tls_stream.h turns it into a context, and
// transport/grpc/grpc_tls.h into gRPC credentials.
#pragma once

#include <string>

#include "common/status.h"

namespace somm::crypto {

// A server's side. Empty cert_file = plaintext.
struct TlsServerFiles {
  std::string cert_file;  // the certificate chain, leaf first
  std::string key_file;   // its private key
  // Mutual TLS: every client must present a certificate this CA signed;
  // "" = clients are not asked for one.
  std::string client_ca_file;

  bool enabled() const { return !cert_file.empty(); }
  // The flags' combinations that make sense: a certificate needs its key,
  // and a client CA needs a certificate of our own.
  Status Validate() const {
    if (cert_file.empty() != key_file.empty()) {
      return InvalidArgument("--tls-cert and --tls-key go together");
    }
    if (!client_ca_file.empty() && cert_file.empty()) {
      return InvalidArgument("--tls-client-ca needs --tls-cert and --tls-key");
    }
    return Status::Ok();
  }
};

// A client's side. Empty ca_file = plaintext.
struct TlsClientFiles {
  std::string ca_file;    // the CA that signed the server's certificate
  std::string cert_file;  // a client certificate for mutual TLS; optional
  std::string key_file;
  // The name the server's certificate must carry; "" = the host dialed. A
  // cluster's processes dial each other by pod IP, which no certificate
  // names, and check the role's name instead (somm-worker, somm-controller).
  std::string server_name;

  bool enabled() const { return !ca_file.empty(); }
  Status Validate() const {
    if (cert_file.empty() != key_file.empty()) {
      return InvalidArgument("a client certificate and its key go together");
    }
    if (!cert_file.empty() && ca_file.empty()) {
      return InvalidArgument("a client certificate needs the server's CA (--tls-ca)");
    }
    return Status::Ok();
  }
};

// A server process's files as a client of the cluster's other processes:
// the same certificate and key, and the client CA as the CA servers are
// checked against (scripts/make-certs makes one CA for the whole cluster).
inline TlsClientFiles PeerClientFiles(const TlsServerFiles& server) {
  if (!server.enabled() || server.client_ca_file.empty()) return {};
  return TlsClientFiles{server.client_ca_file, server.cert_file, server.key_file, ""};
}

// `files` checking the peer's certificate for `peer_name` (scripts/make-certs
// puts somm-router, somm-worker and somm-controller in every certificate it
// makes) whatever address is dialed.
inline TlsClientFiles ForPeer(TlsClientFiles files, const std::string& peer_name) {
  if (files.enabled()) files.server_name = peer_name;
  return files;
}

}  // namespace somm::crypto
