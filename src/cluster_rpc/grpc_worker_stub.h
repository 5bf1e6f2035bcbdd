// GrpcWorkerStub: a WorkerStub that reaches one worker of the cluster over
// gRPC (the worker serves it with WorkerService, worker_service.h). Routers
// and the controller hold one per worker (GrpcWorkerPool, worker_pool.h) and
// use it as they use LocalWorkerStub in the embedded server.
//
// Contract:
//   * One channel per stub, made at construction and reused by every call.
//     gRPC connects lazily and reconnects by itself after the worker
//     restarts; nothing opens a connection per query.
//   * Execute copies the inputs onto the wire and leaves `request` as it was
//     (so that the router may retry the query elsewhere) and returns Ok:
//     every outcome, NotFound for a group that is not loaded there included,
//     arrives through `done` with the worker's code and message. A worker
//     that is down or goes away is Unavailable; a query whose deadline
//     (ExecuteRequest::deadline, the call's gRPC deadline) passes first is
//     DeadlineExceeded.
//   * Apply is asynchronous and has no deadline (a load may take minutes);
//     a vanished worker is noticed by keepalive pings and fails the call.
//   * Report is a synchronous call bounded by report_timeout; when it fails
//     the report holds only the worker's id, and a warning is logged.
//   * Every `done` runs exactly once, on a thread of the options' queue or a
//     gRPC thread. Thread-safe.
//   * Closing the options' queue cancels the calls in flight on it (their
//     `done` gets an error); calls after that use gRPC's callback API.
//   * Destroying the stub neither waits for nor cancels its calls in flight:
//     they keep the channel, finish as they would, and the last of them
//     hands the channel to a thread of somm's to close (gRPC must not close
//     it on its own callback thread).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "crypto/tls_files.h"
#include "worker/worker_api.h"

namespace somm {

namespace grpc_async {
class CallQueue;
}

struct GrpcWorkerStubOptions {
  // Largest message sent or accepted, in bytes; as the worker's
  // WorkerServiceOptions::max_message_bytes.
  int max_message_bytes = 64 * 1024 * 1024;
  // Bounds Report(), which the control loop calls every tick.
  std::chrono::milliseconds report_timeout{1000};
  // While calls are in flight, the connection is pinged after this long
  // without traffic, and given up (the calls fail UNAVAILABLE) when no
  // answer comes within keepalive_timeout. 0: no pings.
  std::chrono::milliseconds keepalive_time{10000};
  std::chrono::milliseconds keepalive_timeout{5000};
  // Longest wait between reconnection attempts to a worker that is down
  // (gRPC's default, 120 s, is long for a restarting worker).
  std::chrono::milliseconds max_reconnect_backoff{5000};
  // TLS toward the worker (crypto::PeerClientFiles of the process's own
  // files); not enabled = plaintext.
  crypto::TlsClientFiles tls;
  // The completion queue the process's gRPC server polls (a router's
  // GrpcFrontend::queue()): Execute and Apply are started on it, so that the
  // server's threads take the answers and no other thread polls gRPC. With
  // none, or once it is closed, calls use gRPC's callback API.
  std::shared_ptr<grpc_async::CallQueue> queue;
};

class GrpcWorkerStub : public WorkerStub {
 public:
  // `worker` is the worker's id (WorkerReport::worker), `address` where its
  // WorkerService listens ("host:port").
  GrpcWorkerStub(std::string worker, std::string address, GrpcWorkerStubOptions options = {});
  ~GrpcWorkerStub() override;
  GrpcWorkerStub(const GrpcWorkerStub&) = delete;
  GrpcWorkerStub& operator=(const GrpcWorkerStub&) = delete;

  const std::string& id() const override;
  const std::string& address() const;

  Status Execute(ExecuteRequest& request, ExecuteCallback done) override;
  void Apply(WorkerAction action, std::function<void(Status)> done) override;
  cluster::WorkerReport Report() override;

 private:
  struct Impl;
  struct ImplRelease {
    void operator()(Impl* impl) const;
  };
  // The stub's reference; each call in flight holds one more.
  std::unique_ptr<Impl, ImplRelease> impl_;
};

}  // namespace somm
