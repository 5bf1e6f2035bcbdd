// RedisConnection: somm's one adapter over hiredis. Every other file talks to
// Redis through it and never includes hiredis.
//
// A connection sends commands as argument vectors (binary-safe, no format
// strings) and reads whole replies as RedisReply values. It connects lazily
// and again after any I/O error, so a Redis restart costs the callers one
// failed call each (UNAVAILABLE, naming the endpoint) and nothing else: Redis
// holds soft state only (docs/cluster-state.md), and whoever writes it writes again.
// A connection can instead be put in subscriber mode (Subscribe), after which
// only WaitMessage may be called; it re-subscribes by itself after a
// reconnect.
//
// Each connect, the first and every reconnect, begins with AUTH (when the
// endpoint has a password), SELECT (a db other than 0), CLIENT SETNAME (a
// client name) and PING, in one round trip: a refused password is
// UNAUTHENTICATED and a refused SELECT INVALID_ARGUMENT, both naming the
// endpoint and never the password, and a server that wants a password none
// was given for is told apart by the PING. The bytes travel over a
// RedisTransport (redis_transport.h), plaintext or TLS: hiredis formats the
// commands and parses the replies, and nothing here depends on which.
//
// Thread-safety: none; a connection belongs to one thread at a time (callers
// hold one per thread or guard it).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "redis/redis_endpoint.h"

struct redisReader;

namespace somm::crypto {
class TlsClientContext;
}  // namespace somm::crypto

namespace somm::redis {

class RedisTransport;

struct RedisReply {
  enum class Type { kNil, kString, kStatus, kInteger, kArray, kError };
  Type type = Type::kNil;
  std::string str;  // kString, kStatus, kError
  int64_t integer = 0;
  std::vector<RedisReply> elements;  // kArray
  bool is_error() const { return type == Type::kError; }
};

class RedisConnection {
 public:
  explicit RedisConnection(RedisEndpoint endpoint);
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  const RedisEndpoint& endpoint() const { return endpoint_; }

  // One command. A Redis error reply is a reply (kError), not a Status;
  // UNAVAILABLE means Redis could not be reached or the connection broke;
  // UNAUTHENTICATED and INVALID_ARGUMENT that the connect's AUTH or SELECT
  // was refused (see above).
  StatusOr<RedisReply> Command(const std::vector<std::string>& argv);
  // Several commands in one round trip; one reply each, in order.
  StatusOr<std::vector<RedisReply>> Pipeline(const std::vector<std::vector<std::string>>& commands);

  // Subscriber mode (see above).
  Status Subscribe(std::vector<std::string> channels);
  // The payload of the next message on a subscribed channel; nullopt when
  // none came within `timeout`; UNAVAILABLE when the connection broke (the
  // next call reconnects and re-subscribes).
  StatusOr<std::optional<std::string>> WaitMessage(std::chrono::milliseconds timeout);

 private:
  Status EnsureConnected();
  // Sends AUTH, SELECT, CLIENT SETNAME and PING on a new transport.
  Status Introduce();
  // Writes the commands, formatted, in one write.
  Status Send(const std::vector<std::vector<std::string>>& commands);
  // The next reply; nullopt when none came within `wait`.
  StatusOr<std::optional<RedisReply>> Receive(std::chrono::milliseconds wait);
  // Drops the transport (the next call connects again) and returns `status`.
  Status Drop(Status status);
  Status Broken(const std::string& what);

  const RedisEndpoint endpoint_;
  std::shared_ptr<const crypto::TlsClientContext> tls_;  // rediss://, made on first connect
  std::unique_ptr<RedisTransport> transport_;
  redisReader* reader_ = nullptr;      // the current transport's replies
  std::vector<std::string> channels_;  // subscribed, for re-subscribing
  bool subscribed_ = false;            // the current transport has subscribed
};

}  // namespace somm::redis
