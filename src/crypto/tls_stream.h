// TLS on a non-blocking socket, server side: OpenSSL behind the two types
// the HTTP server (transport/http/http_server.h) and the metrics endpoint
// need, so that no other folder includes OpenSSL.
//
// TlsServerContext holds the certificate, key and (for mutual TLS) the
// client CA, loaded once at start; it is immutable and shared by every
// connection and thread. TlsStream is one connection: the handshake runs
// inside the first Read/Write calls (SSL_accept state), and every call
// returns at once, with kWantRead/kWantWrite when the socket must become
// readable/writable first (OpenSSL's WANT_READ/WANT_WRITE). A TlsStream is
// not thread-safe: its owner serializes Read, Write and Shutdown (the HTTP
// server does it under the connection's lock).
//
// A client that speaks plaintext to a TLS port is told apart from a broken
// handshake (kNotTls), so the server can answer it in plaintext with a
// clear error instead of an unreadable reset.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"
#include "crypto/tls_files.h"

struct ssl_ctx_st;
struct ssl_st;

namespace somm::crypto {

class TlsStream;

class TlsServerContext {
 public:
  // Loads and checks the files: a missing file, a key that does not match the
  // certificate or an unreadable CA is kInvalidArgument naming the file.
  // TLS 1.2 and 1.3 only.
  static StatusOr<std::shared_ptr<const TlsServerContext>> Create(const TlsServerFiles& files);
  // As Create when files.enabled(); null (plaintext) when not, after
  // checking that no lone --tls-key or --tls-client-ca was given.
  static StatusOr<std::shared_ptr<const TlsServerContext>> CreateIfEnabled(
      const TlsServerFiles& files);
  ~TlsServerContext();
  TlsServerContext(const TlsServerContext&) = delete;
  TlsServerContext& operator=(const TlsServerContext&) = delete;

  // A stream over the accepted socket `fd` (which the caller keeps owning).
  std::unique_ptr<TlsStream> NewStream(int fd) const;
  bool requires_client_certificate() const { return require_client_cert_; }

 private:
  TlsServerContext(ssl_ctx_st* ctx, bool require_client_cert)
      : ctx_(ctx), require_client_cert_(require_client_cert) {}
  ssl_ctx_st* ctx_;
  bool require_client_cert_;
};

class TlsStream {
 public:
  // Negative results of Read and Write; >= 0 is a byte count (Read: 0 = the
  // peer closed).
  static constexpr ssize_t kWantRead = -2;   // call again when readable
  static constexpr ssize_t kWantWrite = -3;  // call again when writable
  static constexpr ssize_t kError = -1;      // broken: error() says why
  static constexpr ssize_t kNotTls = -4;     // the client's first bytes are not TLS

  ~TlsStream();
  TlsStream(const TlsStream&) = delete;
  TlsStream& operator=(const TlsStream&) = delete;

  ssize_t Read(char* buffer, size_t size);
  // Writes what it can of `data` (whole TLS records). After kWantRead or
  // kWantWrite the next call must pass the same bytes again (they may have
  // moved: SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER).
  ssize_t Write(std::string_view data);
  // Sends close_notify, once; does not wait for the peer's.
  void Shutdown();

  bool handshake_done() const;
  // The reason of the last kError, e.g. "certificate verify failed" or
  // "peer did not return a certificate"; the peer's certificate subject
  // when it presented one.
  const std::string& error() const { return error_; }

 private:
  friend class TlsServerContext;
  // The client side (crypto/tls_client_context.h) makes streams too, and
  // drives their handshake.
  friend class TlsClientContext;
  TlsStream(ssl_st* ssl, int fd) : ssl_(ssl), fd_(fd) {}
  ssize_t Result(int ret, const char* what);

  ssl_st* ssl_;
  int fd_;
  bool checked_first_byte_ = false;
  bool shut_ = false;
  std::string error_;
};

}  // namespace somm::crypto
