// RedisTransport: the bytes under a RedisConnection: a TCP socket, or TLS
// over one (rediss://). The connection formats commands and parses replies
// with hiredis's formatter and reader, which work on bytes, so that both
// transports carry everything it sends (commands, pipelines, EVAL,
// SUBSCRIBE) the same way; hiredis 0.14's own sockets have no TLS.
//
// Every call is bounded in time: the socket is non-blocking and each wait on
// it polls with the caller's timeout. Any error leaves the transport broken;
// its owner drops it and connects again. Messages name what failed ("connect:
// Connection refused", "TLS handshake: certificate verify failed (...)"),
// not the endpoint, which the owner adds.
//
// Writing to a peer that has gone may raise SIGPIPE (OpenSSL writes with
// write(2)): processes that use it ignore SIGPIPE, as somm's cluster
// commands do.
//
// Thread-safety: none; it belongs to its connection.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string_view>

#include "common/status.h"
#include "redis/redis_endpoint.h"

namespace somm::crypto {
class TlsClientContext;
class TlsStream;
}  // namespace somm::crypto

namespace somm::redis {

class RedisTransport {
 public:
  // Connects to endpoint.host:port within endpoint.timeout, and runs the
  // TLS handshake with `tls` when endpoint.tls (`tls` must then be set).
  static StatusOr<std::unique_ptr<RedisTransport>> Connect(const RedisEndpoint& endpoint,
                                                           const crypto::TlsClientContext* tls);
  ~RedisTransport();
  RedisTransport(const RedisTransport&) = delete;
  RedisTransport& operator=(const RedisTransport&) = delete;

  // Writes all of `data`; each wait for the socket fails after `timeout`.
  Status WriteAll(std::string_view data, std::chrono::milliseconds timeout);
  // Reads what has come, up to `size` bytes, waiting at most `wait` for it:
  // the count, or 0 when nothing came in time; UNAVAILABLE when the peer
  // closed the connection or it broke.
  StatusOr<size_t> Read(char* buffer, size_t size, std::chrono::milliseconds wait);

 private:
  explicit RedisTransport(int fd) : fd_(fd) {}
  // Polls the socket for `events` until `deadline`: false when it passed.
  bool WaitFor(short events, std::chrono::steady_clock::time_point deadline);

  int fd_;
  std::unique_ptr<crypto::TlsStream> tls_;  // rediss://; null for plaintext
};

}  // namespace somm::redis
