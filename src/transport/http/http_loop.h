// The event loop under http::Server (http_server.h) and the connection it
// serves. Internal to transport/http, where the server is split along the
// line between a connection and the requests on it:
//   * http_loop.cc: a connection's life on its loop: accepting it (within
//     the connection caps), reading plaintext or TLS, writing what the
//     socket did not take at once, the timeouts (Sweep) and closing;
//   * http_server.cc: a request's exchange: framing it out of the bytes
//     read, handing it to the handler, writing the answer (Responder), and
//     the Server that binds the port and runs the loops.
//
// Threads: each Loop runs on a thread of its own, and a Connection's
// loop-only fields belong to that thread; the fields under Connection::mu
// are shared with whichever thread answers (Responder::Send).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "crypto/tls_stream.h"
#include "transport/http/http_request_parser.h"
#include "transport/http/http_server.h"

namespace somm::http {

using Clock = std::chrono::steady_clock;

class Loop;

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
  // Whether the calling thread is this loop's own (a handler answering
  // inline, whose loop picks up a pipelined next request by itself).
  bool RunsOnThisThread() const;

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

// With connection.mu held: writes as much of `parts` as the connection
// takes now, through its TLS stream when it has one (WriteSome's result).
ssize_t ConnectionWrite(Connection& c, const std::string_view* parts, int count);
// Shuts the write side (after TLS's close_notify); with connection.mu held.
void ShutWrite(Connection& c);

}  // namespace somm::http
