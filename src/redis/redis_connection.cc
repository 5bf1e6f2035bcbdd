#include "redis/redis_connection.h"

#include <hiredis/hiredis.h>
#include <poll.h>

#include <cerrno>

namespace somm::redis {
namespace {

timeval ToTimeval(std::chrono::milliseconds ms) {
  timeval tv;
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

RedisReply Convert(const redisReply* r) {
  RedisReply out;
  switch (r->type) {
    case REDIS_REPLY_STRING:
      out.type = RedisReply::Type::kString;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_STATUS:
      out.type = RedisReply::Type::kStatus;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_ERROR:
      out.type = RedisReply::Type::kError;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_INTEGER:
      out.type = RedisReply::Type::kInteger;
      out.integer = r->integer;
      break;
    case REDIS_REPLY_ARRAY:
      out.type = RedisReply::Type::kArray;
      for (size_t i = 0; i < r->elements; ++i) out.elements.push_back(Convert(r->element[i]));
      break;
    default:
      out.type = RedisReply::Type::kNil;
  }
  return out;
}

// Keeps the argument arrays hiredis wants alive for one call.
struct Argv {
  explicit Argv(const std::vector<std::string>& args) {
    for (const std::string& a : args) {
      ptrs.push_back(a.data());
      lens.push_back(a.size());
    }
  }
  int argc() const { return static_cast<int>(ptrs.size()); }
  std::vector<const char*> ptrs;  // hiredis takes const char** (not const)
  std::vector<size_t> lens;
};

}  // namespace

StatusOr<RedisEndpoint> ParseRedisEndpoint(const std::string& text) {
  std::string rest = text;
  if (rest.rfind("redis://", 0) == 0) rest = rest.substr(8);
  const auto colon = rest.rfind(':');
  RedisEndpoint e;
  if (colon == std::string::npos) {
    e.host = rest;
  } else {
    e.host = rest.substr(0, colon);
    const std::string port = rest.substr(colon + 1);
    char* end = nullptr;
    const long p = std::strtol(port.c_str(), &end, 10);
    if (port.empty() || *end != '\0' || p < 1 || p > 65535) {
      return InvalidArgument("redis address '" + text + "': port '" + port +
                             "' is not a number in 1..65535");
    }
    e.port = static_cast<int>(p);
  }
  if (e.host.empty()) return InvalidArgument("redis address '" + text + "' names no host");
  return e;
}

RedisConnection::RedisConnection(RedisEndpoint endpoint) : endpoint_(std::move(endpoint)) {}

RedisConnection::~RedisConnection() {
  if (context_ != nullptr) redisFree(context_);
}

Status RedisConnection::Broken(const std::string& what) {
  std::string message = what;
  if (context_ != nullptr) {
    if (context_->err != 0) message = context_->errstr;
    redisFree(context_);
    context_ = nullptr;
  }
  subscribed_ = false;
  return Unavailable("redis at " + endpoint_.ToString() + ": " + message);
}

Status RedisConnection::EnsureConnected() {
  if (context_ != nullptr) return Status::Ok();
  const timeval tv = ToTimeval(endpoint_.timeout);
  context_ = redisConnectWithTimeout(endpoint_.host.c_str(), endpoint_.port, tv);
  if (context_ == nullptr) return Broken("cannot allocate a connection");
  if (context_->err != 0) return Broken("connect failed");
  redisSetTimeout(context_, tv);
  if (!endpoint_.client_name.empty()) {
    const std::vector<std::string> setname = {"CLIENT", "SETNAME", endpoint_.client_name};
    const Argv argv(setname);
    void* reply = redisCommandArgv(context_, argv.argc(), const_cast<const char**>(argv.ptrs.data()),
                                   argv.lens.data());
    if (reply == nullptr) return Broken("CLIENT SETNAME failed");
    // A refused name (odd characters) costs attribution only, not the
    // connection: the error reply is dropped.
    freeReplyObject(reply);
  }
  if (channels_.empty()) return Status::Ok();
  std::vector<std::string> command = {"SUBSCRIBE"};
  command.insert(command.end(), channels_.begin(), channels_.end());
  const Argv argv(command);
  if (redisAppendCommandArgv(context_, argv.argc(), const_cast<const char**>(argv.ptrs.data()), argv.lens.data()) !=
      REDIS_OK) {
    return Broken("subscribe failed");
  }
  for (size_t i = 0; i < channels_.size(); ++i) {
    void* reply = nullptr;
    if (redisGetReply(context_, &reply) != REDIS_OK || reply == nullptr) {
      return Broken("subscribe failed");
    }
    freeReplyObject(reply);
  }
  subscribed_ = true;
  return Status::Ok();
}

StatusOr<RedisReply> RedisConnection::Command(const std::vector<std::string>& args) {
  SOMM_ASSIGN_OR_RETURN(std::vector<RedisReply> replies, Pipeline({args}));
  return std::move(replies[0]);
}

StatusOr<std::vector<RedisReply>> RedisConnection::Pipeline(
    const std::vector<std::vector<std::string>>& commands) {
  if (!channels_.empty()) {
    return FailedPrecondition("redis connection is in subscriber mode");
  }
  SOMM_RETURN_IF_ERROR(EnsureConnected());
  for (const auto& command : commands) {
    const Argv argv(command);
    if (redisAppendCommandArgv(context_, argv.argc(), const_cast<const char**>(argv.ptrs.data()), argv.lens.data()) !=
        REDIS_OK) {
      return Broken("cannot send a command");
    }
  }
  std::vector<RedisReply> replies;
  replies.reserve(commands.size());
  for (size_t i = 0; i < commands.size(); ++i) {
    void* reply = nullptr;
    if (redisGetReply(context_, &reply) != REDIS_OK || reply == nullptr) {
      return Broken("no reply");
    }
    replies.push_back(Convert(static_cast<redisReply*>(reply)));
    freeReplyObject(reply);
  }
  return replies;
}

Status RedisConnection::Subscribe(std::vector<std::string> channels) {
  if (channels.empty()) return InvalidArgument("subscribe to no channel");
  channels_ = std::move(channels);
  if (context_ != nullptr && !subscribed_) {
    redisFree(context_);  // a command connection: start over in subscriber mode
    context_ = nullptr;
  }
  return EnsureConnected();
}

StatusOr<std::optional<std::string>> RedisConnection::WaitMessage(
    std::chrono::milliseconds timeout) {
  if (channels_.empty()) return FailedPrecondition("redis connection has not subscribed");
  SOMM_RETURN_IF_ERROR(EnsureConnected());
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    void* reply = nullptr;
    if (redisGetReplyFromReader(context_, &reply) != REDIS_OK) return Broken("bad reply");
    if (reply != nullptr) {
      RedisReply r = Convert(static_cast<redisReply*>(reply));
      freeReplyObject(reply);
      // ["message", channel, payload]; confirmations and the like are skipped.
      if (r.type == RedisReply::Type::kArray && r.elements.size() == 3 &&
          r.elements[0].str == "message") {
        return std::optional<std::string>(std::move(r.elements[2].str));
      }
      continue;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::optional<std::string>();
    pollfd p{context_->fd, POLLIN, 0};
    const int n = poll(&p, 1, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Broken("poll failed");
    if (n == 0) return std::optional<std::string>();
    if (redisBufferRead(context_) != REDIS_OK) return Broken("connection closed");
  }
}

}  // namespace somm::redis
