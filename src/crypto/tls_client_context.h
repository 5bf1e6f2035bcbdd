// TLS, client side, on a non-blocking socket: the same TlsStream the servers
// use (crypto/tls_stream.h), in connect state. For clients that have no TLS
// of their own; the first is somm's Redis connection (redis/), since
// hiredis 0.14 has none.
//
// A TlsClientContext holds what the client checks the server with (a CA
// file, or the system's trust store when none is given) and, for servers
// that require client certificates, its certificate and key; it is loaded
// once, immutable and shared. Every stream it makes checks that the server's
// certificate names the host the caller dialled (a DNS name or an IP
// address), and sends that name as SNI when it is a name.
//
// The handshake runs in Handshake (or inside the first Read/Write); like
// every TlsStream call it returns at once, with kWantRead/kWantWrite when
// the socket must become readable/writable first.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "common/status.h"
#include "crypto/tls_files.h"
#include "crypto/tls_stream.h"

struct ssl_ctx_st;

namespace somm::crypto {

class TlsClientContext {
 public:
  // files.ca_file "" = the system's trust store; cert_file and key_file
  // both or neither. A missing or unreadable file, or a key that does not
  // match its certificate, is kInvalidArgument naming the file. TLS 1.2
  // and 1.3 only.
  static StatusOr<std::shared_ptr<const TlsClientContext>> Create(const TlsClientFiles& files);
  ~TlsClientContext();
  TlsClientContext(const TlsClientContext&) = delete;
  TlsClientContext& operator=(const TlsClientContext&) = delete;

  // A stream over the connected socket `fd` (which the caller keeps
  // owning), to the server `host`; null when OpenSSL cannot make one.
  std::unique_ptr<TlsStream> NewStream(int fd, const std::string& host) const;

  // One step of the handshake: 1 when it is done, else kWantRead,
  // kWantWrite or kError (stream.error() says why, e.g. "certificate verify
  // failed (unable to get local issuer certificate)").
  static ssize_t Handshake(TlsStream& stream);

 private:
  explicit TlsClientContext(ssl_ctx_st* ctx) : ctx_(ctx) {}
  ssl_ctx_st* ctx_;
};

}  // namespace somm::crypto
