// HttpWireConnection: the load generator's own HTTP/1.1 keep-alive
// connection, for the one call it makes in a loop (POST .../infer).
//
// Why not HttpClient (cpp-httplib): a load generator shares the machine with
// the server it measures, so every microsecond of client CPU is one the
// server does not get. HttpClient rebuilds and re-encodes each request, keeps
// headers in a case-insensitive multimap and polls before every read; here a
// request is encoded once (HttpPostBytes) and sent as bytes, and a response
// is one recv loop and a scan of its head. perf_analyzer and wrk make the
// same trade.
//
// Scope: Content-Length and chunked bodies, "Connection: close", and a
// server that closed an idle keep-alive connection (reconnect and send again,
// once, only when nothing of the answer had arrived). No TLS, no redirects,
// no 1xx answers other than none at all.
//
// Thread-safety: NOT thread-safe; one connection per sender thread.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace somm::loadgen {

struct HttpWireReply {
  int status = 0;
  std::string body;
  std::optional<size_t> json_size;  // Inference-Header-Content-Length
};

// What a response head says about the body that follows. Pure; tested alone.
struct HttpResponseHead {
  int status = 0;
  size_t head_bytes = 0;  // up to and including the blank line
  std::optional<size_t> content_length;
  bool chunked = false;
  bool close = false;  // "Connection: close"
  std::optional<size_t> json_size;
};
// nullopt while `bytes` holds no complete head yet; InvalidArgument for a head
// that is not HTTP/1.x or whose lengths do not parse.
StatusOr<std::optional<HttpResponseHead>> ParseResponseHead(std::string_view bytes);

// The bytes of a keep-alive POST; json_size set = binary tensor extension;
// a key ("" = none) goes as "Authorization: Bearer <key>".
std::string HttpPostBytes(std::string_view host_port, std::string_view path,
                          std::string_view body, std::optional<size_t> json_size,
                          std::string_view api_key = {});

class HttpWireConnection {
 public:
  HttpWireConnection(std::string host, int port, int io_timeout_ms = 60000);
  ~HttpWireConnection();
  HttpWireConnection(const HttpWireConnection&) = delete;
  HttpWireConnection& operator=(const HttpWireConnection&) = delete;

  // Sends `request` (line, headers and body) and reads one response.
  // UNAVAILABLE when the server cannot be reached or the connection breaks;
  // the connection is then reopened by the next call.
  StatusOr<HttpWireReply> Exchange(std::string_view request);

 private:
  Status Connect();
  void Close();
  Status SendAll(std::string_view bytes);
  // recv into buffer_; OK(false) at end of stream.
  StatusOr<bool> ReadMore();
  StatusOr<HttpWireReply> ReadReply(bool* nothing_read);
  Status ReadChunkedBody(size_t start, std::string* body, size_t* end);

  std::string host_;
  int port_;
  std::string url_;  // "http://host:port", for messages
  int io_timeout_ms_;
  int fd_ = -1;
  bool reused_ = false;  // the connection has carried an exchange already
  std::string buffer_;   // received, not yet consumed
};

}  // namespace somm::loadgen
