#include "redis/redis_transport.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "crypto/tls_client_context.h"
#include "crypto/tls_stream.h"

namespace somm::redis {
namespace {

using Clock = std::chrono::steady_clock;

std::string Errno(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

// One non-blocking connect to `a`, bounded by `deadline`: the socket, or -1
// with *error saying why.
int ConnectOne(const addrinfo& a, Clock::time_point deadline, std::string* error) {
  const int fd = socket(a.ai_family, a.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a.ai_protocol);
  if (fd < 0) {
    *error = Errno("socket");
    return -1;
  }
  if (connect(fd, a.ai_addr, a.ai_addrlen) != 0 && errno != EINPROGRESS) {
    *error = Errno("connect");
    close(fd);
    return -1;
  }
  while (true) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    pollfd p{fd, POLLOUT, 0};
    const int n = left.count() > 0 ? poll(&p, 1, static_cast<int>(left.count())) : 0;
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *error = n == 0 ? "connect: timed out" : Errno("connect: poll");
      close(fd);
      return -1;
    }
    break;
  }
  int so_error = 0;
  socklen_t len = sizeof so_error;
  getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len);
  if (so_error != 0) {
    *error = std::string("connect: ") + std::strerror(so_error);
    close(fd);
    return -1;
  }
  // Commands are small and each waits for its reply: no Nagle delay.
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

}  // namespace

StatusOr<std::unique_ptr<RedisTransport>> RedisTransport::Connect(
    const RedisEndpoint& endpoint, const crypto::TlsClientContext* tls) {
  const Clock::time_point deadline = Clock::now() + endpoint.timeout;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* addresses = nullptr;
  const std::string port = std::to_string(endpoint.port);
  if (const int rc = getaddrinfo(endpoint.host.c_str(), port.c_str(), &hints, &addresses);
      rc != 0) {
    return Unavailable("cannot resolve " + endpoint.host + ": " + gai_strerror(rc));
  }
  std::string error = "connect: no address";
  int fd = -1;
  for (const addrinfo* a = addresses; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ConnectOne(*a, deadline, &error);
  }
  freeaddrinfo(addresses);
  if (fd < 0) return Unavailable(error);
  std::unique_ptr<RedisTransport> transport(new RedisTransport(fd));
  if (!endpoint.tls) return transport;

  if (tls == nullptr) return Internal("rediss:// without a TLS context");
  transport->tls_ = tls->NewStream(fd, endpoint.host);
  if (transport->tls_ == nullptr) return Internal("TLS: cannot make a stream");
  while (true) {
    const ssize_t r = crypto::TlsClientContext::Handshake(*transport->tls_);
    if (r == 1) return transport;
    if (r != crypto::TlsStream::kWantRead && r != crypto::TlsStream::kWantWrite) {
      return Unavailable(transport->tls_->error());
    }
    if (!transport->WaitFor(r == crypto::TlsStream::kWantRead ? POLLIN : POLLOUT, deadline)) {
      return Unavailable("TLS handshake: timed out (is the port TLS?)");
    }
  }
}

RedisTransport::~RedisTransport() {
  if (tls_ != nullptr) {
    tls_->Shutdown();
    tls_.reset();  // before the socket under it closes
  }
  close(fd_);
}

bool RedisTransport::WaitFor(short events, Clock::time_point deadline) {
  while (true) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    pollfd p{fd_, events, 0};
    const int n = poll(&p, 1, static_cast<int>(std::max<int64_t>(left.count(), 0)));
    if (n < 0 && errno == EINTR) continue;
    // A poll error or a hang-up: the next read or write says what it is.
    return n != 0;
  }
}

Status RedisTransport::WriteAll(std::string_view data, std::chrono::milliseconds timeout) {
  while (!data.empty()) {
    ssize_t n;
    short wait = POLLOUT;
    if (tls_ != nullptr) {
      n = tls_->Write(data);
      if (n == crypto::TlsStream::kWantRead) wait = POLLIN;
      if (n == crypto::TlsStream::kError) return Unavailable(tls_->error());
      if (n == 0) return Unavailable("connection closed");
      if (n < 0 && n != crypto::TlsStream::kWantRead && n != crypto::TlsStream::kWantWrite) {
        return Unavailable("TLS write failed");
      }
    } else {
      n = send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return Unavailable(Errno("write"));
    }
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (!WaitFor(wait, Clock::now() + timeout)) return Unavailable("write: timed out");
  }
  return Status::Ok();
}

StatusOr<size_t> RedisTransport::Read(char* buffer, size_t size, std::chrono::milliseconds wait) {
  const Clock::time_point deadline = Clock::now() + wait;
  while (true) {
    // Read first, poll only when told to wait: TLS may hold decrypted bytes
    // that no poll on the socket would announce.
    ssize_t n;
    short events = POLLIN;
    if (tls_ != nullptr) {
      n = tls_->Read(buffer, size);
      if (n == crypto::TlsStream::kWantWrite) events = POLLOUT;
      if (n == crypto::TlsStream::kError) return Unavailable(tls_->error());
      if (n < 0 && n != crypto::TlsStream::kWantRead && n != crypto::TlsStream::kWantWrite) {
        return Unavailable("TLS read failed");
      }
    } else {
      n = recv(fd_, buffer, size, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return Unavailable(Errno("read"));
    }
    if (n > 0) return static_cast<size_t>(n);
    if (n == 0) return Unavailable("connection closed");
    if (Clock::now() >= deadline || !WaitFor(events, deadline)) return size_t{0};
  }
}

}  // namespace somm::redis
