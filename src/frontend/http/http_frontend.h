// HttpFrontend: the Open Inference Protocol v2 over REST (KServe v2 + Triton's
// binary tensor data and model repository extensions), on somm's own
// event-driven HTTP/1.1 server (transport/http/http_server.h).
//
// Start() binds, starts the I/O threads and returns once the server is
// accepting; the frontend then serves until Shutdown() or destruction. It
// borrows the InferenceServer, which must outlive it, and turns every call
// into InferenceServer calls: it holds no model state.
// Inference requests are decoded on the I/O thread that read them and handed
// to InferenceServer::Infer; the response is encoded and written by whichever
// thread completes the query (the batcher's), with no hand-off in between.
// InferenceServer::Infer never blocks (a query that needs a model loaded
// waits in a callback while the load runs elsewhere), so an I/O thread keeps
// serving its other connections while a model loads. Metadata, decisions
// and inferences with large bodies (decoding 1.6 MB of JSON takes
// milliseconds) run on a small pool of handler threads instead; calls that
// may take seconds (registration, repository load and unload, rollout
// changes) run one at a time on a control lane of their own, so that they
// never hold the threads metadata needs. Past max_control_queue of them
// waiting, the next is answered 503 with Retry-After at once.
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
// Overload: with an InflightLimit, an inference request that finds the
// limit reached is answered 429 with Retry-After and the JSON error before
// its body is decoded or the guard asked; every other endpoint is never shed,
// so probes, metadata and the operator's views keep answering under load.
// With a ByteBudget, a request's body reserves its size as soon as its head
// is parsed (after the key check, before a byte of it is read), and an
// inference's decoded tensors theirs; past the budget, 429 with Retry-After,
// the body unread (the connection then closes). Probes reserve nothing.
//
// Endpoints served by parts of the process above the frontend (the
// operator's views, the batch jobs) and public pages (the dashboard's files)
// are mounted by whoever assembles the process (rest_mount.h): routed and
// admitted here, answered by their handlers.
//
// Thread-safety: port() may be called from any thread; Shutdown() from any
// thread but one of the frontend's own handlers, and it is idempotent.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "frontend/http/rest_mount.h"
#include "serving/byte_budget.h"
#include "serving/call_guard.h"
#include "api/inference_server.h"
#include "serving/inflight_limit.h"
#include "transport/http/origin_policy.h"

namespace somm {

namespace crypto {
class TlsServerContext;
}  // namespace crypto

struct HttpFrontendOptions {
  // Address to bind. "0.0.0.0" = every IPv4 interface.
  std::string address = "0.0.0.0";
  // TCP port; 0 = let the kernel pick a free one (read it back with port()).
  int port = 8000;
  // Largest accepted request body, JSON header and binary section together,
  // after any Content-Encoding is undone. Larger bodies get 413.
  size_t max_body_bytes = 64ull << 20;
  // I/O threads, each an epoll loop over its share of the connections.
  // 0 = half the cores, at least 1 and at most 4: the loops only frame and
  // decode, and the threads that complete queries (batchers) need cores too
  // (on 2 cores, 1 loop gave 5-8% more REST throughput than 2).
  int io_threads = 0;
  // Threads for the endpoints that may block (see above).
  int handler_threads = 4;
  // Inference bodies larger than this are decoded on a handler thread.
  size_t inline_body_bytes = 64 << 10;
  // Connections open at once; more are answered 503.
  size_t max_connections = 4096;
  // Seconds an idle keep-alive connection is kept open.
  int keep_alive_timeout_s = 5;
  // Requests served on one connection before the server closes it.
  int keep_alive_max_requests = 100000;
  // A request still arriving after read_timeout_s gets 408; a response the
  // client has not taken after write_timeout_s closes the connection.
  int read_timeout_s = 30;
  int write_timeout_s = 30;
  // Absolute deadlines for a request's head and body, and the cap of open
  // connections per client address (http::ServerOptions has the rules).
  int header_timeout_s = 10;
  int body_timeout_s = 30;
  size_t max_connections_per_address = 1024;
  // How long Shutdown() waits for requests already being handled
  // (--exit-timeout-secs, rounded up).
  int shutdown_grace_s = 5;
  // Who may call what (auth/guard.h: API keys, tenants, quotas, audit).
  // Every endpoint but the health probes asks it first; null = no checks.
  // Must outlive the frontend.
  CallGuard* guard = nullptr;
  // TLS on every connection (crypto/tls_stream.h; made from --tls-cert,
  // --tls-key and --tls-client-ca); null = plaintext.
  std::shared_ptr<const crypto::TlsServerContext> tls;
  // Endpoints whose handlers live above the frontend, and public pages
  // (rest_mount.h): the operator's views and the dashboard's files
  // (dashboard/operator_routes.h), the batch jobs behind /v2/somm/batch
  // (batch/batch_routes.h). An endpoint no mount names answers 501.
  std::vector<RestMount> mounts;
  std::vector<PageMount> pages;
  // Which browsers' requests are served (transport/http/origin_policy.h):
  // loopback Host names only without authentication, cross-origin changes
  // refused, CORS for the origins named (--cors-origin).
  http::OriginPolicy origin_policy;
  // The bound on inference requests in flight (serving/inflight_limit.h),
  // shared with the gRPC frontend; null = no bound. Must outlive the frontend.
  InflightLimit* inflight_limit = nullptr;
  // The bound on bytes of bodies and decoded tensors in flight
  // (serving/byte_budget.h), shared with the gRPC frontend; null = no bound.
  // Must outlive the frontend.
  ByteBudget* byte_budget = nullptr;
  // Control calls (registration, load, unload, rollout changes) that may
  // wait for the control lane beside the one running.
  size_t max_control_queue = 16;
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
