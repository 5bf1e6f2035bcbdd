// HttpFrontend: the Open Inference Protocol v2 over REST (KServe v2 + Triton's
// binary tensor data and model repository extensions), served by cpp-httplib.
//
// Start() binds, starts the accept loop on its own thread and returns once the
// server is accepting; the frontend then serves until Shutdown() or
// destruction. It borrows the InferenceServer, which must outlive it, and
// turns every call into InferenceServer calls: it holds no model state.
// Each connection is served by one worker thread for as long as it stays
// open (httplib's model), so worker_threads bounds the number of concurrent
// keep-alive connections; further connections wait in the accept queue until a
// worker frees up.
//
// Errors are JSON {"error": "<message>"} with the HTTP status chosen by
// oip::HttpStatusFromCode (frontend/http/http_status.h); bodies over
// max_body_bytes get 413, unknown paths 404, a known path with the wrong
// method 405. Health endpoints answer 200 (true) or 400 (false) with an empty
// body, as the spec asks.
//
// somm's model-less extension (routes in rest_routes.h, bodies in
// somm_json.h): /v2/tasks/{task}/infer is an ordinary inference with
// InferenceRequest::task set and no model name; .../register answers 202 once
// InferenceServer::RegisterModel has accepted the model (generation goes on in
// the background); .../variants and /v2/somm/decisions read state. A
// registration body carries the model file in base64 (4/3 of its size) and
// counts against max_body_bytes like any other body.
//
// Thread-safety: port() may be called from any thread; Shutdown() from any
// thread but one of the frontend's own handlers, and it is idempotent.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "common/status.h"
#include "serving/inference_server.h"

namespace somm {

struct HttpFrontendOptions {
  // Address to bind. "0.0.0.0" = every IPv4 interface.
  std::string address = "0.0.0.0";
  // TCP port; 0 = let the kernel pick a free one (read it back with port()).
  int port = 8000;
  // Largest accepted request body, JSON header and binary section together,
  // after any Content-Encoding is undone. Larger bodies get 413.
  size_t max_body_bytes = 64ull << 20;
  // Threads serving connections. One thread is held per open connection, so
  // this is the number of concurrent keep-alive clients served at once; 64
  // costs little on a 2-core machine since the threads mostly wait.
  int worker_threads = 64;
  // Seconds an idle keep-alive connection is kept open. Shutdown() can wait
  // this long for an idle connection's worker to notice.
  int keep_alive_timeout_s = 5;
  // Requests served on one connection before the server closes it (httplib's
  // default of 5 would make load generators reconnect constantly).
  int keep_alive_max_requests = 100000;
  // Per-call socket read and write timeouts.
  int read_timeout_s = 30;
  int write_timeout_s = 30;
};

class HttpFrontend {
 public:
  // Fails with kUnavailable when the address cannot be bound, and
  // kInvalidArgument for nonsensical options.
  static StatusOr<std::unique_ptr<HttpFrontend>> Start(InferenceServer& server,
                                                       HttpFrontendOptions options = {});

  HttpFrontend(const HttpFrontend&) = delete;
  HttpFrontend& operator=(const HttpFrontend&) = delete;
  ~HttpFrontend();  // Shutdown()

  // The bound port (the chosen one when options.port was 0).
  int port() const;

  // Stops accepting, lets in-flight requests finish and joins every thread.
  void Shutdown();

 private:
  struct Impl;
  explicit HttpFrontend(std::unique_ptr<Impl> impl);

  std::unique_ptr<Impl> impl_;
};

}  // namespace somm
