// Where a client command connects and how: the options every client command
// takes (cli/client_flags.h adds their flags), and their reading into a
// target. One struct for every command, so that `--url`, `-i`, `--api-key`
// and `--tls-ca` mean the same thing wherever they are given.
//
// --url is host:port, http://host:port or https://host:port ("" = the
// default port of the protocol on 127.0.0.1: 8000 for REST, 8001 for gRPC,
// as Triton's). TLS is on when --url says https:// or --tls-ca is given:
// HTTPS over REST (the system's trust store checks the server when no CA
// is given), TLS over gRPC (which needs --tls-ca). ResolveClientTarget
// refuses what contradicts itself (http:// with --tls-ca) with a message
// naming the flag.
#pragma once

#include <memory>
#include <string>

#include "client/http_client.h"
#include "common/status.h"
#include "crypto/tls_files.h"

namespace somm {

struct ClientOptions {
  std::string url;                // see above; "" = 127.0.0.1 and the protocol's port
  std::string protocol = "http";  // http | grpc
  // TLS toward the server (--tls-ca; --tls-cert and --tls-key for mutual
  // TLS); not enabled = plaintext unless --url says https://.
  crypto::TlsClientFiles tls;
  std::string api_key;  // --api-key; "" = $SOMM_API_KEY, if set
};

inline constexpr int kDefaultRestPort = 8000;
inline constexpr int kDefaultGrpcPort = 8001;

// ClientOptions read: the host and port dialled, whether TLS is on, and the
// files for it.
struct ClientTarget {
  std::string host;  // without brackets for an IPv6 address
  int port = 0;
  bool tls = false;
  std::string host_port;  // "host:port" ("[v6]:port"), as gRPC dials it
};
StatusOr<ClientTarget> ResolveClientTarget(const ClientOptions& options);

// A REST client for `options` (which must say -i http): HTTPS when the
// target is TLS, the API key from --api-key or $SOMM_API_KEY.
StatusOr<std::unique_ptr<HttpClient>> MakeHttpClient(const ClientOptions& options);

}  // namespace somm
