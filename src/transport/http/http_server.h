// An event-driven HTTP/1.1 server: the mechanism under the REST frontend
// (frontend/http/http_frontend.h), the dashboard and the /metrics endpoint.
// It knows HTTP and sockets only; what a request means is its handler's.
//
// A few I/O threads each run one epoll loop over non-blocking sockets; a
// connection stays on the loop that accepted it. A loop reads, frames the
// request (http_request_parser.h) and calls the handler on the loop thread
// with a Responder. The handler may answer at once or later from any thread
// (a batcher's, a worker pool's): Responder::Send writes the response
// straight to the socket from the calling thread, head and body in one
// sendmsg, and only falls back to the loop (EPOLLOUT) when the socket buffer
// is full. So a query costs one epoll wake-up, one read and one write, and no
// thread hand-off of its own: the work cpp-httplib's thread-per-connection
// model spent in poll, two writes and a condition variable per query.
//
// Handlers run on an I/O thread, so they must not block: anything slow
// belongs on another thread, with the Responder moved there.
//
// Per connection, requests are answered in order, one at a time: bytes of a
// pipelined next request wait in the buffer until the current response is
// out. Keep-alive follows RFC 9112 (HTTP/1.0 only on request), with an idle
// timeout and a request cap; `Expect: 100-continue` is answered; a request
// whose head or body is still arriving after read_timeout_s gets 408. Every
// request the server rejects itself gets error_body(status, message), and the
// connection closes when its framing can no longer be trusted. Closing is
// graceful: the server shuts its write side and drains what the client still
// sends, so the client reads the error instead of a reset.
//
// With ServerOptions::tls, every connection speaks TLS (crypto/tls_stream.h)
// and mutual TLS when its context requires client certificates. Reads and
// writes then go through the connection's TlsStream under the connection's
// lock; the plaintext path is the same code with one branch more. A client
// that speaks plaintext HTTP to a TLS port gets a plaintext 400 naming
// https, and each failed handshake is logged (at most one line a second).
//
// Thread-safety: Start() and Shutdown() from any thread but a loop's own;
// Responder::Send from any thread, once.
//
// The code is split where a connection ends and a request begins:
// http_loop.cc keeps the connections (accept, read, write, time out,
// close), http_server.cc the exchange of a request and its answer.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "transport/http/http_request_parser.h"

namespace somm::crypto {
class TlsServerContext;
}  // namespace somm::crypto

namespace somm::http {

struct Request {
  RequestHead head;
  std::string body;  // de-chunked and decompressed
  // What ServerOptions::head_check left for the handler (the frontend's
  // verified caller); null when there was no head check.
  std::shared_ptr<const void> head_note;
};

struct Response {
  int status = 200;
  // Content-Length, Connection and Keep-Alive are the server's to write.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  // Close after this response even if the client would keep the connection.
  bool close_connection = false;
};

struct Connection;
class Responder;
Responder MakeResponder(std::shared_ptr<Connection> connection);

// The one way to answer a request. Move-only; a Responder destroyed without
// Send() answers 500, so a request can never be left hanging.
class Responder {
 public:
  Responder(Responder&& other) noexcept = default;
  Responder& operator=(Responder&& other) noexcept;
  Responder(const Responder&) = delete;
  Responder& operator=(const Responder&) = delete;
  ~Responder();

  void Send(Response response);
  // A header for the answer, whichever Send() brings it (CORS headers, set
  // before the request is routed). Before Send(), from the handling thread.
  void AddHeader(std::string name, std::string value);
  // Whether Send() is still to be called.
  bool pending() const { return connection_ != nullptr; }

 private:
  void Finish(std::optional<Response> response) noexcept;
  friend Responder MakeResponder(std::shared_ptr<Connection> connection);
  explicit Responder(std::shared_ptr<Connection> connection) : connection_(std::move(connection)) {}
  std::shared_ptr<Connection> connection_;
};

using Handler = std::function<void(Request request, Responder responder)>;
// The body of an error the server raises itself (400, 408, 413, 431, ...).
using ErrorResponder = std::function<Response(int status, std::string_view message)>;

struct ServerOptions {
  std::string address = "0.0.0.0";
  int port = 0;  // 0 = any free port
  int io_threads = 2;
  size_t max_body_bytes = 64ull << 20;
  HeadLimits head_limits;
  int keep_alive_timeout_s = 5;
  int keep_alive_max_requests = 100000;
  int read_timeout_s = 30;
  int write_timeout_s = 30;
  // Absolute deadlines, whatever the client trickles: a request's head must
  // be in within header_timeout_s of its first byte, and its body within
  // body_timeout_s plus one second per min_body_bytes_per_s it declares
  // (a large body gets time by its size), from the end of its head. Past
  // either, 408 and the connection closes. (read_timeout_s alone restarts
  // at every byte: a head dripped a byte every 10 s stayed open for hours.)
  int header_timeout_s = 10;
  int body_timeout_s = 30;
  size_t min_body_bytes_per_s = 1 << 20;
  // Connections open at once; the next one is answered 503 and closed.
  size_t max_connections = 4096;
  // Connections open at once from one client address; the next one from it
  // is answered 503 and closed. 0 = no cap.
  size_t max_connections_per_address = 1024;
  // How long Shutdown() waits for requests already being handled.
  int shutdown_grace_s = 5;
  // Called on the loop thread as soon as the head of a request that has a
  // body is parsed, before a byte of the body is read or any room is made
  // for it, with the most bytes its body may take (its Content-Length, or
  // max_body_bytes when chunked; plus max_body_bytes more when it is
  // compressed, for its decoded copy): a Response refuses the request
  // (sent, then the connection closes, the body never read); nullopt lets
  // it in, and what it left in `*hold` is kept until the request's answer
  // is sent or the connection closes (a reservation of the frontend's byte
  // budget), and what it left in `*note` goes to the handler with the
  // request (Request::head_note: who the head check found is calling, so
  // the handler need not find out again). Must be cheap: it is how a
  // frontend checks who is calling, and whether there is room for the body,
  // before the body costs anything. Null = every request is read whole.
  std::function<std::optional<Response>(const RequestHead& head, uint64_t body_bytes,
                                        std::shared_ptr<void>* hold,
                                        std::shared_ptr<const void>* note)>
      head_check;
  // TLS on every connection; null = plaintext. A handshake still unfinished
  // after keep_alive_timeout_s is closed like an idle connection.
  std::shared_ptr<const crypto::TlsServerContext> tls;
};

class Server {
 public:
  // Binds and starts the loops. kUnavailable when the address cannot be bound.
  static StatusOr<std::unique_ptr<Server>> Start(ServerOptions options, Handler handler,
                                                 ErrorResponder error_responder);
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
  ~Server();  // Shutdown()

  int port() const;
  // Stops accepting, waits up to shutdown_grace_s for requests in flight,
  // closes every connection and joins the loops. Idempotent.
  void Shutdown();

  struct Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace somm::http
