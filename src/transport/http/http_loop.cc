#include "transport/http/http_loop.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "transport/http/tls_io.h"

namespace somm::http {
namespace {

constexpr size_t kReadChunk = 64 << 10;
// A connection whose write side is shut is drained this long for the
// client's close before it is closed outright.
constexpr auto kDrainTime = std::chrono::seconds(2);
constexpr auto kSweepEvery = std::chrono::milliseconds(250);

thread_local Loop* current_loop = nullptr;

// A large body's buffer is not kept for the rest of a keep-alive
// connection's life.
void ResetConsumedInput(Connection& c) {
  if (c.in_offset > 0 && c.in_offset == c.in.size()) {
    if (c.in.capacity() > (1u << 20)) {
      std::string().swap(c.in);
    } else {
      c.in.clear();
    }
    c.in_offset = 0;
  }
}

// The client's address without its port ("127.0.0.1", "::1").
std::string PeerAddress(const sockaddr_storage& from) {
  char text[INET6_ADDRSTRLEN] = {0};
  if (from.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(from).sin_addr, text, sizeof text);
  } else if (from.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(from).sin6_addr, text, sizeof text);
  }
  return text;
}

// Writes as much of `parts` as the socket takes now; returns the bytes
// written (0 when it would block) or -1 when the connection is broken.
ssize_t WriteSome(int fd, const std::string_view* parts, int count) {
  iovec iov[2];
  int n = 0;
  for (int i = 0; i < count; ++i) {
    if (parts[i].empty()) continue;
    iov[n].iov_base = const_cast<char*>(parts[i].data());
    iov[n].iov_len = parts[i].size();
    ++n;
  }
  if (n == 0) return 0;
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = static_cast<size_t>(n);
  while (true) {
    const ssize_t written = sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (written >= 0) return written;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    return -1;
  }
}

}  // namespace

ssize_t ConnectionWrite(Connection& c, const std::string_view* parts, int count) {
  if (c.tls) return WriteTls(*c.tls, parts, count);
  return WriteSome(c.fd, parts, count);
}

void ShutWrite(Connection& c) {
  if (c.tls) c.tls->Shutdown();
  shutdown(c.fd, SHUT_WR);
}

bool Loop::RunsOnThisThread() const { return current_loop == this; }

Response Loop::ErrorResponse(int status, std::string_view message) {
  return server_.error_responder(status, message);
}

Loop::Loop(Server::Impl& server, int listen_fd) : server_(server), listen_fd_(listen_fd) {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (!ok()) return;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = &wake_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  // EPOLLEXCLUSIVE: a new connection wakes one loop, not all of them.
  ev.events = EPOLLIN | EPOLLEXCLUSIVE;
  ev.data.ptr = &listen_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
}

Loop::~Loop() {
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
}

void Loop::Stop() {
  stop_deadline_ = Clock::now() + std::chrono::seconds(server_.options.shutdown_grace_s);
  stop_ = true;
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
}

void Loop::StopAccepting() {
  stop_accepting_ = true;
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
}

void Loop::PostResume(std::shared_ptr<Connection> connection) {
  {
    std::lock_guard<std::mutex> lock(posted_mu_);
    posted_.push_back(std::move(connection));
  }
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
}

void Loop::WantWritable(Connection& connection, bool on) {
  if (connection.epollout == on || connection.fd < 0) return;
  connection.epollout = on;
  epoll_event ev{};
  ev.events = uint32_t{EPOLLIN} | (on ? uint32_t{EPOLLOUT} : 0u);
  ev.data.ptr = &connection;
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, connection.fd, &ev);
}

void Loop::SetReading(Connection& connection, bool on) {
  if (connection.reading_paused == !on) return;
  connection.reading_paused = !on;
  std::lock_guard<std::mutex> lock(connection.mu);
  if (connection.fd < 0) return;
  epoll_event ev{};
  ev.events = (on ? uint32_t{EPOLLIN} : 0u) | (connection.epollout ? uint32_t{EPOLLOUT} : 0u);
  ev.data.ptr = &connection;
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, connection.fd, &ev);
}

void Loop::Run() {
  current_loop = this;
  epoll_event events[128];
  Clock::time_point last_sweep = Clock::now();
  while (true) {
    const int n = epoll_wait(epoll_fd_, events, 128, static_cast<int>(kSweepEvery.count()));
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < n; ++i) {
      void* tag = events[i].data.ptr;
      if (tag == &wake_fd_) {
        uint64_t count;
        (void)!read(wake_fd_, &count, sizeof(count));
        std::vector<std::shared_ptr<Connection>> posted;
        {
          std::lock_guard<std::mutex> lock(posted_mu_);
          posted.swap(posted_);
        }
        for (auto& connection : posted) {
          if (connections_.count(connection.get()) == 0) continue;
          SetReading(*connection, true);
          ProcessInput(connection);
        }
        continue;
      }
      if (tag == &listen_fd_) {
        if (!stop_accepting_) Accept();
        continue;
      }
      auto it = connections_.find(static_cast<Connection*>(tag));
      if (it == connections_.end()) continue;
      const std::shared_ptr<Connection> connection = it->second;  // Close() erases it
      bool readable = events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR);
      if (events[i].events & EPOLLOUT) readable |= OnWritable(connection);
      if (readable) OnReadable(connection);
    }
    const Clock::time_point now = Clock::now();
    if (stop_ || now - last_sweep >= kSweepEvery) {
      last_sweep = now;
      Sweep(now, stop_);
      if (stop_ && connections_.empty()) break;
    }
  }
  for (auto& [raw, connection] : connections_) {
    std::lock_guard<std::mutex> lock(connection->mu);
    if (connection->fd >= 0) close(connection->fd);
    connection->fd = -1;
  }
  server_.open_connections -= connections_.size();
  connections_.clear();
  current_loop = nullptr;
}

void Loop::Accept() {
  // One per wake-up, so that a burst of connections spreads over the loops.
  sockaddr_storage from{};
  socklen_t from_len = sizeof from;
  const int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&from), &from_len,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) return;
  auto refuse = [this, fd](const std::string& why) {
    const Response busy = server_.error_responder(503, why);
    const std::string head = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: " +
                             std::to_string(busy.body.size()) + "\r\nConnection: close\r\n\r\n";
    const std::string_view parts[2] = {head, busy.body};
    WriteSome(fd, parts, 2);
    close(fd);
  };
  if (server_.open_connections >= server_.options.max_connections) {
    return refuse("too many open connections (limit " +
                  std::to_string(server_.options.max_connections) + ")");
  }
  const std::string peer = PeerAddress(from);
  if (!server_.TakePeer(peer)) {
    return refuse("too many open connections from this address (limit " +
                  std::to_string(server_.options.max_connections_per_address) + ")");
  }
  int yes = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
  auto connection = std::make_shared<Connection>(this, fd);
  connection->peer = peer;
  if (server_.options.tls) {
    connection->tls = server_.options.tls->NewStream(fd);
    if (!connection->tls) {
      server_.ReleasePeer(peer);
      close(fd);
      return;
    }
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = connection.get();
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    server_.ReleasePeer(peer);
    close(fd);
    return;
  }
  ++server_.open_connections;
  connections_.emplace(connection.get(), std::move(connection));
}

void Loop::Close(Connection& connection) {
  connection.body_hold.reset();
  connection.head_note.reset();
  {
    std::lock_guard<std::mutex> lock(connection.mu);
    connection.answer_hold.reset();
    if (connection.fd >= 0) {
      epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, connection.fd, nullptr);
      close(connection.fd);
      connection.fd = -1;
    }
  }
  const std::string peer = connection.peer;
  if (connections_.erase(&connection) > 0) {
    --server_.open_connections;
    server_.ReleasePeer(peer);
  }
}

bool Loop::OnWritable(const std::shared_ptr<Connection>& connection) {
  std::lock_guard<std::mutex> lock(connection->mu);
  if (connection->fd < 0) return false;
  const bool read_now = connection->tls_read_wants_write;
  connection->tls_read_wants_write = false;
  const std::string_view rest = std::string_view(connection->out).substr(connection->out_offset);
  const ssize_t written = ConnectionWrite(*connection, &rest, 1);
  if (written < 0) {
    // Broken: let the read side notice (EPOLLERR/HUP) and close.
    connection->out.clear();
    connection->out_offset = 0;
    WantWritable(*connection, false);
    return read_now;
  }
  if (written > 0) connection->last_write = Clock::now();
  connection->out_offset += static_cast<size_t>(written);
  if (connection->out_offset < connection->out.size()) return read_now;
  connection->out.clear();
  connection->out_offset = 0;
  WantWritable(*connection, false);
  if (connection->close_after_write && !connection->write_shut) {
    ShutWrite(*connection);
    connection->write_shut = true;
    connection->shut_at = Clock::now();
  }
  return read_now;
}

Loop::TlsRead Loop::ReadTls(Connection& c) {
  // Until the stream wants the socket again: OpenSSL may hold decrypted
  // bytes that epoll will not announce a second time.
  while (true) {
    ResetConsumedInput(c);
    thread_local char buffer[kReadChunk];
    ssize_t n;
    {
      std::lock_guard<std::mutex> lock(c.mu);
      if (c.fd < 0 || !c.tls) return TlsRead::kEnd;
      n = c.tls->Read(buffer, kReadChunk);
      if (n == crypto::TlsStream::kWantWrite) {
        c.tls_read_wants_write = true;
        WantWritable(c, true);
        return TlsRead::kData;
      }
      if (n == crypto::TlsStream::kError) {
        LogTlsRefusal(c.fd, c.tls->error());
        // OpenSSL has sent its alert; what the client still sends is drained
        // in plaintext (and discarded), so that it reads the alert instead
        // of a reset.
        c.tls.reset();
        return TlsRead::kFailed;
      }
      if (n == crypto::TlsStream::kNotTls) {
        LogTlsRefusal(c.fd, "the client spoke plaintext to a TLS port");
        // Answered in plaintext from here on, so that it reads why.
        c.tls.reset();
        return TlsRead::kNotTls;
      }
    }
    if (n > 0) {
      bool closing;
      {
        std::lock_guard<std::mutex> lock(c.mu);
        closing = c.write_shut || c.close_after_write;
      }
      if (!closing) c.in.append(buffer, static_cast<size_t>(n));  // as ReadPlain
      c.last_read = Clock::now();
      continue;
    }
    return n == crypto::TlsStream::kWantRead ? TlsRead::kData : TlsRead::kEnd;
  }
}

void Loop::OnReadable(const std::shared_ptr<Connection>& connection) {
  Connection& c = *connection;
  bool eof = false;
  if (!c.tls) {
    eof = ReadPlain(c);
  } else {
    switch (ReadTls(c)) {
      case TlsRead::kData: break;
      case TlsRead::kEnd: eof = true; break;
      case TlsRead::kFailed: {
        std::lock_guard<std::mutex> lock(c.mu);
        if (c.fd >= 0 && !c.write_shut) {
          shutdown(c.fd, SHUT_WR);
          c.write_shut = true;
          c.shut_at = Clock::now();
        }
        return;
      }
      case TlsRead::kNotTls:
        return Reject(connection, HttpError{400, "this port speaks TLS (HTTPS): use an https:// "
                                                 "URL and the server's CA"});
    }
  }
  bool awaiting;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    if (c.write_shut) {
      // Closing: what the client still sends is discarded.
      c.in.clear();
      c.in_offset = 0;
      if (eof) {
        // fallthrough to Close below, outside the lock
      } else {
        return;
      }
    }
    awaiting = c.awaiting;
    if (awaiting && c.in.size() > c.in_offset) c.unparsed_input = true;
  }
  if (eof) {
    // The client is gone (or half-closed, which HTTP does not use); a
    // response still being computed has nobody to go to.
    Close(c);
    return;
  }
  if (awaiting) {
    // A pipelining client: hold its next requests, but not without bound.
    const size_t limit = server_.options.head_limits.max_head_bytes + server_.options.max_body_bytes;
    if (c.in.size() - c.in_offset > limit) SetReading(c, false);
    return;
  }
  ProcessInput(connection);
}

bool Loop::ReadPlain(Connection& c) {
  bool eof = false;
  // A closing connection's bytes (a refused body's) are read and dropped,
  // never gathered: a fast client would otherwise fill `in` with megabytes
  // of a body nobody reads until the drain ends.
  bool closing;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    closing = c.write_shut || c.close_after_write;
  }
  while (true) {
    ResetConsumedInput(c);
    size_t want = kReadChunk;
    ssize_t n;
    if (closing) {
      thread_local char sink[kReadChunk];
      n = read(c.fd, sink, want);
    } else if (c.reading == Connection::Reading::kLengthBody &&
        c.body_length > c.in.size() - c.in_offset + kReadChunk) {
      // A large body with a known length: read it in place, in as few calls
      // as the socket allows (capped so a lying Content-Length costs little).
      want = std::min<size_t>(c.body_length - (c.in.size() - c.in_offset), 4u << 20);
      const size_t old = c.in.size();
      c.in.resize(old + want);
      n = read(c.fd, c.in.data() + old, want);
      c.in.resize(old + static_cast<size_t>(std::max<ssize_t>(n, 0)));
    } else {
      thread_local char buffer[kReadChunk];
      n = read(c.fd, buffer, want);
      if (n > 0) c.in.append(buffer, static_cast<size_t>(n));
    }
    if (n > 0) {
      c.last_read = Clock::now();
      if (static_cast<size_t>(n) == want) continue;  // maybe more waiting
      break;
    }
    if (n == 0) {
      eof = true;
      break;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) eof = true;
    break;
  }
  return eof;
}

void Loop::Sweep(Clock::time_point now, bool stopping) {
  const ServerOptions& options = server_.options;
  std::vector<Connection*> to_close;
  std::vector<std::pair<std::shared_ptr<Connection>, std::string>> timed_out;
  for (auto& [raw, connection] : connections_) {
    Connection& c = *connection;
    std::lock_guard<std::mutex> lock(c.mu);
    if (c.write_shut) {
      if (now - c.shut_at > kDrainTime || stopping) to_close.push_back(raw);
      continue;
    }
    if (!c.out.empty()) {
      if (now - c.last_write > std::chrono::seconds(options.write_timeout_s) ||
          (stopping && now > stop_deadline_)) {
        to_close.push_back(raw);
      }
      continue;
    }
    if (c.awaiting) {
      if (stopping && now > stop_deadline_) to_close.push_back(raw);
      continue;
    }
    const bool partial = c.in.size() > c.in_offset || c.reading != Connection::Reading::kHead;
    const auto idle = now - std::max(c.last_read, c.last_write);
    const bool in_head = c.reading == Connection::Reading::kHead;
    if (stopping && !partial) {
      to_close.push_back(raw);
    } else if (partial && in_head && c.timing &&
               now - c.request_started > std::chrono::seconds(options.header_timeout_s)) {
      timed_out.emplace_back(connection, "the request's head did not arrive within " +
                                             std::to_string(options.header_timeout_s) + " s");
    } else if (partial && !in_head && now > c.body_deadline) {
      timed_out.emplace_back(connection, "the request's body did not arrive in time (" +
                                             std::to_string(options.body_timeout_s) +
                                             " s, plus 1 s per " +
                                             std::to_string(options.min_body_bytes_per_s) +
                                             " bytes it declares)");
    } else if (partial && (idle > std::chrono::seconds(options.read_timeout_s) ||
                           (stopping && now > stop_deadline_))) {
      timed_out.emplace_back(connection, "the request did not arrive in full within " +
                                             std::to_string(options.read_timeout_s) + " s");
    } else if (!partial && idle > std::chrono::seconds(options.keep_alive_timeout_s)) {
      to_close.push_back(raw);
    }
  }
  for (Connection* raw : to_close) Close(*raw);
  for (auto& [connection, why] : timed_out) Reject(connection, HttpError{408, why});
}

}  // namespace somm::http
