#include "frontend/http/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "crypto/tls_stream.h"
#include "frontend/http/tls_io.h"

namespace somm::http {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kListenBacklog = 1024;
constexpr size_t kReadChunk = 64 << 10;
// A connection whose write side is shut is drained this long for the
// client's close before it is closed outright.
constexpr auto kDrainTime = std::chrono::seconds(2);
constexpr auto kSweepEvery = std::chrono::milliseconds(250);

const char* ReasonPhrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 413: return "Payload Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 499: return "Client Closed Request";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
  }
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

class Loop;
thread_local Loop* current_loop = nullptr;

}  // namespace

// One client connection. Fields under `mu` are shared between the loop and
// whichever thread answers; the rest belong to the loop thread alone.
struct Connection {
  Connection(Loop* l, int f) : loop(l), fd(f) {}

  Loop* const loop;

  std::mutex mu;
  int fd;                    // -1 once closed
  std::string out;           // response bytes the socket has not taken yet
  size_t out_offset = 0;
  bool awaiting = false;     // a request is with the handler
  bool head_request = false;  // ...and it was a HEAD
  bool keep_alive = true;    // ...and the connection may stay open after it
  bool unparsed_input = false;  // bytes of a next request are buffered
  bool close_after_write = false;
  bool write_shut = false;   // FIN sent; draining the client's last bytes
  bool epollout = false;
  // What the head check reserved for the request with the handler: given
  // back when its answer is sent (ServerOptions::head_check).
  std::shared_ptr<void> answer_hold;
  // Headers the handler added for the current request's answer, whichever
  // response it sends (Responder::AddHeader).
  std::vector<std::pair<std::string, std::string>> answer_headers;
  // TLS (ServerOptions::tls): the stream, and a read that waits for the
  // socket to be writable (a handshake's reply did not fit).
  std::unique_ptr<crypto::TlsStream> tls;
  bool tls_read_wants_write = false;
  Clock::time_point last_write = Clock::now();
  Clock::time_point shut_at;

  // Loop thread only.
  std::string in;
  size_t in_offset = 0;
  // kBodyDone: the request is complete and about to be dispatched.
  enum class Reading { kHead, kLengthBody, kChunkedBody, kBodyDone } reading = Reading::kHead;
  RequestHead head;
  uint64_t body_length = 0;
  std::string body;
  std::unique_ptr<ChunkedBodyDecoder> chunked;
  std::shared_ptr<void> body_hold;  // the head check's, while the body is read
  std::shared_ptr<const void> head_note;  // the head check's, for the handler
  bool continue_sent = false;
  bool reading_paused = false;
  int requests = 0;
  Clock::time_point last_read = Clock::now();
  // The current request's deadlines (ServerOptions::header_timeout_s, ...):
  // timing from its first byte; then the body's deadline.
  bool timing = false;
  Clock::time_point request_started;
  Clock::time_point body_deadline;
  std::string peer;  // the client's address, for the per-address cap
};

Responder MakeResponder(std::shared_ptr<Connection> connection) {
  return Responder(std::move(connection));
}

namespace {

// The most bytes a request's body may take while it is read and decoded
// (ServerOptions::head_check).
uint64_t BodyBytesAtMost(const RequestHead& head, const BodyFraming& framing,
                         size_t max_body_bytes) {
  uint64_t bytes = framing.kind == BodyFraming::kLength ? framing.length : max_body_bytes;
  const std::string* encoding = head.Find("content-encoding");
  if (encoding != nullptr && strcasecmp(encoding->c_str(), "identity") != 0) bytes += max_body_bytes;
  return bytes;
}

// With connection.mu held.
ssize_t ConnectionWrite(Connection& c, const std::string_view* parts, int count) {
  if (c.tls) return WriteTls(*c.tls, parts, count);
  return WriteSome(c.fd, parts, count);
}

// Shuts the write side (after TLS's close_notify); with connection.mu held.
void ShutWrite(Connection& c) {
  if (c.tls) c.tls->Shutdown();
  shutdown(c.fd, SHUT_WR);
}

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

class Loop {
 public:
  Loop(Server::Impl& server, int listen_fd);
  ~Loop();
  bool ok() const { return epoll_fd_ >= 0 && wake_fd_ >= 0; }

  void Run();
  void Stop();  // from another thread; the loop closes everything and returns
  void StopAccepting();

  // From any thread: run ProcessInput for `connection` on the loop.
  void PostResume(std::shared_ptr<Connection> connection);
  // From any thread, with connection->mu held.
  void WantWritable(Connection& connection, bool on);
  void SendLocked(Connection& connection, Response response);
  Response ErrorResponse(int status, std::string_view message);

 private:
  void Accept();
  void OnReadable(const std::shared_ptr<Connection>& connection);
  // Whether a TLS read waited for this and must run now.
  bool OnWritable(const std::shared_ptr<Connection>& connection);
  // Reads what the socket has into connection.in; true at the end of the
  // connection (closed or broken).
  bool ReadPlain(Connection& connection);
  enum class TlsRead { kData, kEnd, kFailed, kNotTls };
  TlsRead ReadTls(Connection& connection);
  void ProcessInput(const std::shared_ptr<Connection>& connection);
  void Reject(const std::shared_ptr<Connection>& connection, const HttpError& error);
  // Answers `response` and closes the connection, reading nothing more.
  void Refuse(const std::shared_ptr<Connection>& connection, Response response);
  void Dispatch(const std::shared_ptr<Connection>& connection, Request request, bool keep_alive);
  void Close(Connection& connection);
  void Sweep(Clock::time_point now, bool stopping);
  void SetReading(Connection& connection, bool on);

  Server::Impl& server_;
  int listen_fd_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<bool> stop_accepting_{false};
  Clock::time_point stop_deadline_;
  std::unordered_map<Connection*, std::shared_ptr<Connection>> connections_;

  std::mutex posted_mu_;
  std::vector<std::shared_ptr<Connection>> posted_;
};

}  // namespace

struct Server::Impl {
  ServerOptions options;
  Handler handler;
  ErrorResponder error_responder;
  int listen_fd = -1;
  int port = 0;
  std::atomic<size_t> open_connections{0};
  // Open connections per client address (max_connections_per_address).
  std::mutex peers_mu;
  std::unordered_map<std::string, size_t> peers;  // guarded by peers_mu
  bool TakePeer(const std::string& peer) {
    if (options.max_connections_per_address == 0) return true;
    std::lock_guard<std::mutex> lock(peers_mu);
    size_t& n = peers[peer];
    if (n >= options.max_connections_per_address) return false;
    ++n;
    return true;
  }
  void ReleasePeer(const std::string& peer) {
    if (options.max_connections_per_address == 0) return;
    std::lock_guard<std::mutex> lock(peers_mu);
    auto it = peers.find(peer);
    if (it != peers.end() && --it->second == 0) peers.erase(it);
  }
  std::vector<std::unique_ptr<Loop>> loops;
  std::vector<std::thread> threads;
  std::mutex shutdown_mu;
  bool shut_down = false;

  // "timeout=5, max=100000": the same on every response, so built once.
  std::string keep_alive_value;
};

namespace {

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

void Loop::ProcessInput(const std::shared_ptr<Connection>& connection) {
  Connection& c = *connection;
  const ServerOptions& options = server_.options;
  while (true) {
    {
      std::lock_guard<std::mutex> lock(c.mu);
      if (c.awaiting || c.write_shut || c.close_after_write || c.fd < 0) return;
    }
    std::string_view input = std::string_view(c.in).substr(c.in_offset);
    if (c.reading == Connection::Reading::kHead) {
      if (input.empty()) return;
      if (!c.timing) {
        c.timing = true;
        c.request_started = Clock::now();
      }
      HeadResult result = ParseRequestHead(input, options.head_limits);
      if (result.error) return Reject(connection, *result.error);
      if (!result.parsed) return;  // wait for the rest of the head
      c.in_offset += result.parsed->head_bytes;
      input.remove_prefix(result.parsed->head_bytes);
      c.head = std::move(result.parsed->head);
      c.head_note.reset();  // a note is only ever this request's
      BodyFraming framing;
      if (auto error = DecideBodyFraming(c.head, options.max_body_bytes, &framing)) {
        return Reject(connection, *error);
      }
      if (framing.kind != BodyFraming::kNone && options.head_check) {
        if (std::optional<Response> refused =
                options.head_check(c.head, BodyBytesAtMost(c.head, framing, options.max_body_bytes),
                                   &c.body_hold, &c.head_note)) {
          c.body_hold.reset();
          c.head_note.reset();
          return Refuse(connection, std::move(*refused));
        }
      }
      c.body.clear();
      c.continue_sent = false;
      {
        const uint64_t declared =
            framing.kind == BodyFraming::kLength ? framing.length : options.max_body_bytes;
        const uint64_t rate = std::max<uint64_t>(options.min_body_bytes_per_s, 1);
        c.body_deadline = Clock::now() + std::chrono::seconds(options.body_timeout_s) +
                          std::chrono::seconds(declared / rate);
      }
      c.reading = Connection::Reading::kBodyDone;
      if (framing.kind == BodyFraming::kLength) {
        c.reading = Connection::Reading::kLengthBody;
        c.body_length = framing.length;
      } else if (framing.kind == BodyFraming::kChunked) {
        c.reading = Connection::Reading::kChunkedBody;
        c.chunked = std::make_unique<ChunkedBodyDecoder>(options.max_body_bytes);
      }
    }
    if (c.reading != Connection::Reading::kBodyDone) {
      // A client that sent `Expect: 100-continue` waits for this before the body.
      if (!c.continue_sent && c.head.minor_version >= 1 &&
          c.head.HasToken("expect", "100-continue")) {
        c.continue_sent = true;
        const bool body_in = c.reading == Connection::Reading::kLengthBody &&
                             input.size() >= c.body_length;
        std::lock_guard<std::mutex> lock(c.mu);
        if (!body_in && c.fd >= 0 && c.out.empty()) {
          const std::string_view line = "HTTP/1.1 100 Continue\r\n\r\n";
          ConnectionWrite(c, &line, 1);  // 25 bytes into an empty socket buffer
        }
      }
      if (c.reading == Connection::Reading::kLengthBody) {
        if (input.size() < c.body_length) {
          c.body.reserve(c.body_length);
          return;
        }
        c.body.assign(input.substr(0, c.body_length));
        c.in_offset += c.body_length;
      } else {
        c.in_offset += c.chunked->Feed(input, &c.body);
        if (c.chunked->error()) return Reject(connection, *c.chunked->error());
        if (!c.chunked->done()) return;
        c.chunked.reset();
      }
    }
    c.reading = Connection::Reading::kHead;
    c.timing = false;
    Request request;
    request.head = std::move(c.head);
    request.body = std::move(c.body);
    request.head_note = std::move(c.head_note);
    if (auto error = DecodeContent(request.head, options.max_body_bytes, &request.body)) {
      // The body was read in full, so the connection stays usable.
      Dispatch(connection, {}, WantsKeepAlive(request.head));
      std::lock_guard<std::mutex> lock(c.mu);
      SendLocked(c, server_.error_responder(error->status, error->message));
      continue;
    }
    ++c.requests;
    const bool keep_alive =
        WantsKeepAlive(request.head) && c.requests < options.keep_alive_max_requests;
    Dispatch(connection, std::move(request), keep_alive);
  }
}

void Loop::Dispatch(const std::shared_ptr<Connection>& connection, Request request,
                    bool keep_alive) {
  Connection& c = *connection;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    c.awaiting = true;
    c.answer_hold = std::move(c.body_hold);
    c.head_request = request.head.method == "HEAD";
    c.keep_alive = keep_alive;
    c.unparsed_input = c.in.size() > c.in_offset;
  }
  if (request.head.method.empty()) return;  // an error answered by the caller
  Responder responder = MakeResponder(connection);
  try {
    server_.handler(std::move(request), std::move(responder));
  } catch (...) {
    // The handler threw before answering: its Responder, destroyed in the
    // unwinding, has already answered 500, and the loop must go on.
  }
}

void Loop::Reject(const std::shared_ptr<Connection>& connection, const HttpError& error) {
  Refuse(connection, server_.error_responder(error.status, error.message));
}

void Loop::Refuse(const std::shared_ptr<Connection>& connection, Response response) {
  Connection& c = *connection;
  // The framing is not trustworthy any more (or the body is not to be
  // read): answer, then close; what was buffered goes now.
  c.reading = Connection::Reading::kHead;
  c.chunked.reset();
  std::string().swap(c.in);
  std::string().swap(c.body);
  c.in_offset = 0;
  Dispatch(connection, {}, false);
  response.close_connection = true;
  std::lock_guard<std::mutex> lock(c.mu);
  SendLocked(c, std::move(response));
}

void Loop::SendLocked(Connection& c, Response response) {
  if (c.fd < 0 || !c.awaiting) return;
  c.awaiting = false;
  c.answer_hold.reset();  // given back as the answer goes
  const bool close_after = response.close_connection || !c.keep_alive || stop_;
  std::string head;
  head.reserve(192);
  head += "HTTP/1.1 ";
  head += std::to_string(response.status);
  head += ' ';
  head += ReasonPhrase(response.status);
  head += "\r\nContent-Length: ";
  head += std::to_string(response.body.size());
  head += "\r\n";
  for (const auto& [name, value] : response.headers) {
    head += name;
    head += ": ";
    head += value;
    head += "\r\n";
  }
  for (const auto& [name, value] : c.answer_headers) {
    head += name;
    head += ": ";
    head += value;
    head += "\r\n";
  }
  c.answer_headers.clear();
  if (close_after) {
    head += "Connection: close\r\n";
  } else {
    head += "Keep-Alive: ";
    head += server_.keep_alive_value;
    head += "\r\n";
  }
  head += "\r\n";
  const std::string_view body = c.head_request ? std::string_view() : response.body;
  c.close_after_write = close_after;
  if (!c.out.empty()) {
    // Still writing an earlier response (or a 100 Continue): queue behind it.
    c.out += head;
    c.out += body;
    return;
  }
  const std::string_view parts[2] = {head, body};
  ssize_t written = ConnectionWrite(c, parts, 2);
  if (written < 0) {
    // Broken connection; the loop will see the error and close it.
    shutdown(c.fd, SHUT_RDWR);
    return;
  }
  c.last_write = Clock::now();
  const size_t total = head.size() + body.size();
  if (static_cast<size_t>(written) < total) {
    const size_t done = static_cast<size_t>(written);
    if (done < head.size()) {
      c.out.assign(head, done);
      c.out += body;
    } else {
      c.out.assign(body.substr(done - head.size()));
    }
    c.out_offset = 0;
    WantWritable(c, true);
    return;
  }
  if (close_after) {
    ShutWrite(c);
    c.write_shut = true;
    c.shut_at = Clock::now();
  }
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

}  // namespace

Responder& Responder::operator=(Responder&& other) noexcept {
  if (this != &other) {
    Finish(std::nullopt);
    connection_ = std::move(other.connection_);
  }
  return *this;
}

Responder::~Responder() { Finish(std::nullopt); }

void Responder::Send(Response response) { Finish(std::move(response)); }

void Responder::AddHeader(std::string name, std::string value) {
  if (!connection_) return;
  std::lock_guard<std::mutex> lock(connection_->mu);
  connection_->answer_headers.emplace_back(std::move(name), std::move(value));
}

void Responder::Finish(std::optional<Response> response) noexcept {
  if (!connection_) return;
  std::shared_ptr<Connection> connection = std::move(connection_);
  Loop* loop = connection->loop;
  try {
    // Everything under the connection's lock: fd >= 0 means the loop (and the
    // server) still exist, and only while the lock is held, since the loop
    // closes every connection under its lock before it ends.
    std::lock_guard<std::mutex> lock(connection->mu);
    if (connection->fd < 0 || !connection->awaiting) return;
    if (!response) {
      response = loop->ErrorResponse(500, "internal error: the request was not answered");
    }
    loop->SendLocked(*connection, std::move(*response));
    // Bytes of a next request wait in the buffer. The loop thread picks them
    // up itself when the handler answered inline; otherwise it is told.
    const bool resume = connection->unparsed_input && !connection->close_after_write &&
                        current_loop != loop;
    connection->unparsed_input = false;
    if (resume) loop->PostResume(connection);
  } catch (...) {
    // Out of memory while answering: the connection times out.
  }
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() { Shutdown(); }

int Server::port() const { return impl_->port; }

StatusOr<std::unique_ptr<Server>> Server::Start(ServerOptions options, Handler handler,
                                                ErrorResponder error_responder) {
  if (options.io_threads < 1 || options.port < 0 || options.port > 65535) {
    return InvalidArgument("HTTP server needs io_threads >= 1 and a port in 0..65535");
  }
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  impl->keep_alive_value = "timeout=" + std::to_string(impl->options.keep_alive_timeout_s) +
                           ", max=" + std::to_string(impl->options.keep_alive_max_requests);
  impl->handler = std::move(handler);
  impl->error_responder = std::move(error_responder);
  const ServerOptions& o = impl->options;
  const std::string where = o.address + ":" + std::to_string(o.port);

  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(o.port));
  const std::string host = o.address == "localhost" ? "127.0.0.1" : o.address;
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    return InvalidArgument("HTTP address '" + o.address + "' is not an IPv4 address");
  }
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return Unavailable("cannot create a socket for " + where);
  // SO_REUSEADDR allows a quick restart over TIME_WAIT connections; no
  // SO_REUSEPORT, which would let a second server silently share the port.
  int yes = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(fd, kListenBacklog) != 0) {
    const std::string reason = std::strerror(errno);
    close(fd);
    return Unavailable("cannot listen on " + where + " (" + reason + ")");
  }
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  impl->listen_fd = fd;
  impl->port = ntohs(addr.sin_port);

  for (int i = 0; i < o.io_threads; ++i) {
    auto loop = std::make_unique<Loop>(*impl, fd);
    if (!loop->ok()) {
      close(fd);
      return Unavailable("cannot create the event loops (epoll/eventfd)");
    }
    impl->loops.push_back(std::move(loop));
  }
  for (auto& loop : impl->loops) impl->threads.emplace_back([raw = loop.get()] { raw->Run(); });
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

void Server::Shutdown() {
  std::lock_guard<std::mutex> lock(impl_->shutdown_mu);
  if (impl_->shut_down) return;
  impl_->shut_down = true;
  for (auto& loop : impl_->loops) loop->StopAccepting();
  for (auto& loop : impl_->loops) loop->Stop();
  for (std::thread& t : impl_->threads) t.join();
  if (impl_->listen_fd >= 0) close(impl_->listen_fd);
  impl_->listen_fd = -1;
}

}  // namespace somm::http
