// RedisConnection: somm's one adapter over hiredis. Every other file talks to
// Redis through it and never includes hiredis.
//
// A connection sends commands as argument vectors (binary-safe, no format
// strings) and reads whole replies as RedisReply values. It connects lazily
// and again after any I/O error, so a Redis restart costs the callers one
// failed call each (UNAVAILABLE, naming the endpoint) and nothing else: Redis
// holds soft state only (docs/cluster.md), and whoever writes it writes again.
// A connection can instead be put in subscriber mode (Subscribe), after which
// only WaitMessage may be called; it re-subscribes by itself after a
// reconnect.
//
// Thread-safety: none; a connection belongs to one thread at a time (callers
// hold one per thread or guard it).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

struct redisContext;

namespace somm::redis {

struct RedisEndpoint {
  std::string host = "127.0.0.1";
  int port = 6379;
  // Connecting, and each command's round trip, fail after this long.
  std::chrono::milliseconds timeout{1000};
  // Given to Redis (CLIENT SETNAME) after each connect, so that CLIENT LIST
  // and MONITOR tell which process sent what (bench/cluster_state_cost.sh
  // attributes commands by it). Empty: none. No spaces.
  std::string client_name;
  std::string ToString() const { return host + ":" + std::to_string(port); }
};

// "host:port" or "redis://host:port"; InvalidArgument names what is wrong.
StatusOr<RedisEndpoint> ParseRedisEndpoint(const std::string& text);

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
  // UNAVAILABLE means Redis could not be reached or the connection broke.
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
  Status Broken(const std::string& what);

  const RedisEndpoint endpoint_;
  redisContext* context_ = nullptr;
  std::vector<std::string> channels_;  // subscribed, for re-subscribing
  bool subscribed_ = false;            // the current context has subscribed
};

}  // namespace somm::redis
