#include "redis/redis_connection.h"

#include <hiredis/hiredis.h>

#include <algorithm>

#include "crypto/tls_client_context.h"
#include "redis/redis_transport.h"

namespace somm::redis {
namespace {

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

// One command in the protocol's bytes, appended to *out.
void Format(const std::vector<std::string>& args, std::string* out) {
  std::vector<const char*> ptrs;  // hiredis takes const char** (not const)
  std::vector<size_t> lens;
  for (const std::string& a : args) {
    ptrs.push_back(a.data());
    lens.push_back(a.size());
  }
  char* command = nullptr;
  const int n =
      redisFormatCommandArgv(&command, static_cast<int>(ptrs.size()), ptrs.data(), lens.data());
  if (n > 0) out->append(command, static_cast<size_t>(n));
  redisFreeCommand(command);
}

bool StartsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

RedisConnection::RedisConnection(RedisEndpoint endpoint) : endpoint_(std::move(endpoint)) {}

RedisConnection::~RedisConnection() { (void)Drop(Status::Ok()); }

Status RedisConnection::Drop(Status status) {
  if (reader_ != nullptr) redisReaderFree(reader_);
  reader_ = nullptr;
  transport_.reset();
  subscribed_ = false;
  return status;
}

Status RedisConnection::Broken(const std::string& what) {
  return Drop(Unavailable("redis at " + endpoint_.ToString() + ": " + what));
}

Status RedisConnection::Send(const std::vector<std::vector<std::string>>& commands) {
  std::string bytes;
  for (const auto& command : commands) Format(command, &bytes);
  if (Status s = transport_->WriteAll(bytes, endpoint_.timeout); !s.ok()) {
    return Broken(s.message());
  }
  return Status::Ok();
}

StatusOr<std::optional<RedisReply>> RedisConnection::Receive(std::chrono::milliseconds wait) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (true) {
    void* reply = nullptr;
    if (redisReaderGetReply(reader_, &reply) != REDIS_OK) {
      return Broken(std::string("bad reply: ") + reader_->errstr);
    }
    if (reply != nullptr) {
      RedisReply r = Convert(static_cast<redisReply*>(reply));
      freeReplyObject(reply);
      return std::optional<RedisReply>(std::move(r));
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    char buffer[16384];
    StatusOr<size_t> n = transport_->Read(buffer, sizeof buffer, std::max(left, {}));
    if (!n.ok()) return Broken(n.status().message());
    if (*n == 0) return std::optional<RedisReply>();
    redisReaderFeed(reader_, buffer, *n);
  }
}

Status RedisConnection::Introduce() {
  std::vector<std::vector<std::string>> hello;
  if (!endpoint_.password.empty()) {
    hello.push_back(endpoint_.user.empty()
                        ? std::vector<std::string>{"AUTH", endpoint_.password}
                        : std::vector<std::string>{"AUTH", endpoint_.user, endpoint_.password});
  }
  if (endpoint_.db != 0) hello.push_back({"SELECT", std::to_string(endpoint_.db)});
  if (!endpoint_.client_name.empty()) {
    hello.push_back({"CLIENT", "SETNAME", endpoint_.client_name});
  }
  // Without a password, a server that wants one answers the PING NOAUTH.
  hello.push_back({"PING"});
  SOMM_RETURN_IF_ERROR(Send(hello));
  const std::string at = "redis at " + endpoint_.ToString();
  Status refused = Status::Ok();
  for (const auto& command : hello) {
    SOMM_ASSIGN_OR_RETURN(std::optional<RedisReply> reply, Receive(endpoint_.timeout));
    if (!reply) return Broken("no reply to " + command[0] + " (timed out)");
    if (!reply->is_error() || !refused.ok()) continue;
    // Redis's error texts never repeat the password sent.
    if (command[0] == "AUTH") {
      refused = Unauthenticated(
          at + ": AUTH" + (endpoint_.user.empty() ? "" : " as user '" + endpoint_.user + "'") +
          " refused: " + reply->str);
    } else if (StartsWith(reply->str, "NOAUTH")) {
      refused = Unauthenticated(at + " requires a password and none is set: set " +
                                kRedisPasswordFileEnv + " or " + kRedisPasswordEnv);
    } else if (command[0] == "SELECT") {
      refused = InvalidArgument(at + ": SELECT " + command[1] + " refused: " + reply->str);
    } else if (command[0] == "PING") {
      refused = Unavailable(at + ": PING answered " + reply->str);
    }
    // A refused client name (odd characters) costs attribution only, not
    // the connection: that error reply is dropped.
  }
  if (!refused.ok()) return Drop(refused);
  return Status::Ok();
}

Status RedisConnection::EnsureConnected() {
  if (transport_ != nullptr) return Status::Ok();
  if (endpoint_.tls && tls_ == nullptr) {
    StatusOr<std::shared_ptr<const crypto::TlsClientContext>> tls =
        crypto::TlsClientContext::Create(endpoint_.tls_files);
    if (!tls.ok()) {
      return Status(tls.status().code(),
                    "redis at " + endpoint_.ToString() + ": " + tls.status().message());
    }
    tls_ = std::move(tls).value();
  }
  StatusOr<std::unique_ptr<RedisTransport>> transport =
      RedisTransport::Connect(endpoint_, tls_.get());
  if (!transport.ok()) return Broken(transport.status().message());
  transport_ = std::move(transport).value();
  reader_ = redisReaderCreate();
  if (reader_ == nullptr) return Broken("cannot allocate a reply reader");
  SOMM_RETURN_IF_ERROR(Introduce());
  if (channels_.empty()) return Status::Ok();
  std::vector<std::string> command = {"SUBSCRIBE"};
  command.insert(command.end(), channels_.begin(), channels_.end());
  SOMM_RETURN_IF_ERROR(Send({command}));
  for (size_t i = 0; i < channels_.size(); ++i) {
    SOMM_ASSIGN_OR_RETURN(std::optional<RedisReply> reply, Receive(endpoint_.timeout));
    if (!reply || reply->is_error()) return Broken("subscribe failed");
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
  SOMM_RETURN_IF_ERROR(Send(commands));
  std::vector<RedisReply> replies;
  replies.reserve(commands.size());
  for (size_t i = 0; i < commands.size(); ++i) {
    SOMM_ASSIGN_OR_RETURN(std::optional<RedisReply> reply, Receive(endpoint_.timeout));
    if (!reply) return Broken("no reply (timed out)");
    replies.push_back(std::move(*reply));
  }
  return replies;
}

Status RedisConnection::Subscribe(std::vector<std::string> channels) {
  if (channels.empty()) return InvalidArgument("subscribe to no channel");
  channels_ = std::move(channels);
  // A command connection: start over in subscriber mode.
  if (transport_ != nullptr && !subscribed_) (void)Drop(Status::Ok());
  return EnsureConnected();
}

StatusOr<std::optional<std::string>> RedisConnection::WaitMessage(
    std::chrono::milliseconds timeout) {
  if (channels_.empty()) return FailedPrecondition("redis connection has not subscribed");
  SOMM_RETURN_IF_ERROR(EnsureConnected());
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    SOMM_ASSIGN_OR_RETURN(std::optional<RedisReply> r, Receive(std::max(left, {})));
    if (!r) return std::optional<std::string>();
    // ["message", channel, payload]; confirmations and the like are skipped.
    if (r->type == RedisReply::Type::kArray && r->elements.size() == 3 &&
        r->elements[0].str == "message") {
      return std::optional<std::string>(std::move(r->elements[2].str));
    }
  }
}

}  // namespace somm::redis
