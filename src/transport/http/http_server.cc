#include "transport/http/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>

#include "transport/http/http_loop.h"

namespace somm::http {
namespace {

constexpr int kListenBacklog = 1024;

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

// The most bytes a request's body may take while it is read and decoded
// (ServerOptions::head_check).
uint64_t BodyBytesAtMost(const RequestHead& head, const BodyFraming& framing,
                         size_t max_body_bytes) {
  uint64_t bytes = framing.kind == BodyFraming::kLength ? framing.length : max_body_bytes;
  const std::string* encoding = head.Find("content-encoding");
  if (encoding != nullptr && strcasecmp(encoding->c_str(), "identity") != 0) bytes += max_body_bytes;
  return bytes;
}

}  // namespace

Responder MakeResponder(std::shared_ptr<Connection> connection) {
  return Responder(std::move(connection));
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
                        !loop->RunsOnThisThread();
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
