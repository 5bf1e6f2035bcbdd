// GrpcFrontend: the Open Inference Protocol (KServe v2) over gRPC, plus
// Triton's model-repository extension, in front of one InferenceServer. The
// same port also serves somm's model-less control service (somm.SommControl,
// proto/somm.proto: RegisterModel, GetVariants, RecentDecisions); task-form
// queries are ModelInfer calls with the string parameter "task" and no model.
//
// Contract:
//   * The frontend is stateless: it decodes a call, asks the InferenceServer,
//     and encodes the answer. It never sees models or instances.
//   * It borrows the InferenceServer, which must outlive the frontend.
//   * Every method is served from one completion queue by `infer_threads`
//     threads of the frontend's own (transport/grpc/async_unary.h); gRPC's
//     callback API is not used, so gRPC starts no threads that poll beside
//     them. ModelInfer holds no thread while a query waits: the thread hands
//     the query to InferenceServer::Infer, and the call is answered from
//     Infer's callback, on whatever thread that runs (a batcher thread).
//     Repository load/unload, RegisterModel and Rollout, which may take
//     seconds, run on a thread of their own so they never stall the queue;
//     past 16 of them waiting, the next is answered UNAVAILABLE at once.
//   * Who calls is known before a message costs anything: every method but
//     ServerLive and ServerReady checks the "authorization" metadata with
//     CallGuard::Authenticate before its message is read
//     (frontend/grpc/key_first.h), and a call refused there is answered
//     UNAUTHENTICATED with its message unread. The guard's full admission
//     (roles, tenants, quotas) follows once the message is parsed.
//   * Shutdown() stops accepting calls, lets calls in flight finish until
//     the deadline and cancels the rest; it returns only when every
//     InferenceServer callback for those calls has run. Shut the frontend
//     down before the InferenceServer, which must still answer what is in
//     flight.
//   * Every method is thread-safe. Shutdown is idempotent; the destructor
//     calls it with a short deadline if nobody has.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"
#include "crypto/tls_files.h"
#include "frontend/http/rest_mount.h"
#include "serving/byte_budget.h"
#include "serving/call_guard.h"
#include "api/inference_server.h"
#include "serving/inflight_limit.h"

namespace somm {

namespace grpc_async {
class CallQueue;
}

struct GrpcFrontendOptions {
  // Interface to listen on: "0.0.0.0" is every IPv4 interface, "::" every
  // IPv6 one, "127.0.0.1" loopback only.
  std::string address = "0.0.0.0";
  // TCP port; 8001 is Triton's gRPC port. 0 lets the OS pick a free port,
  // which port() then reports.
  int port = 8001;
  // Largest message accepted or sent, in bytes. gRPC itself answers larger
  // ones with RESOURCE_EXHAUSTED. (The server name and version reported by
  // ServerMetadata come from the InferenceServer, not from here.)
  int max_message_bytes = 64 * 1024 * 1024;
  // Who may call what (auth/guard.h), from the "authorization" metadata
  // ("Bearer <key>"). Every RPC but ServerLive and ServerReady asks it
  // first, before its message is read; null = no checks. Must outlive the
  // frontend.
  CallGuard* guard = nullptr;
  // TLS (and mutual TLS with a client CA); not enabled = plaintext.
  crypto::TlsServerFiles tls;
  // The bound on inference requests in flight (serving/inflight_limit.h),
  // shared with the REST frontend: a ModelInfer that finds it reached is
  // answered RESOURCE_EXHAUSTED before its tensors are decoded or the guard
  // asked. Null = no bound. Must outlive the frontend.
  InflightLimit* inflight_limit = nullptr;
  // The bound on bytes in flight (serving/byte_budget.h), shared with the
  // REST frontend: a call that finds it spent is refused
  // RESOURCE_EXHAUSTED before its message is read, a message that would
  // pass it before it is parsed, and a ModelInfer whose decoded tensors
  // would, before it is queued. Null = no bound. Must outlive the frontend.
  ByteBudget* byte_budget = nullptr;
  // Threads that poll the completion queue: they decode, admit and hand
  // each query on, and answer the other methods; 0 = half the cores,
  // min_infer_threads to 4 (as the REST I/O loops).
  int infer_threads = 0;
  // The least that 0 picks: a router, whose queue also takes its workers'
  // answers, wants 2 (docs/cluster.md, the router hop).
  int min_infer_threads = 1;
  // The REST port's mounted endpoints (the operator's views, the batch
  // jobs), served over gRPC by somm.SommControl/OperatorCall
  // (operator_call.h); none = OperatorCall answers NOT_FOUND.
  std::vector<RestMount> mounts;
};

class GrpcFrontend {
 public:
  // Binds and starts serving. Fails with InvalidArgument for bad options and
  // Unavailable when the address cannot be bound (e.g. the port is taken;
  // SO_REUSEPORT is off, so a second server on one port is an error).
  static StatusOr<std::unique_ptr<GrpcFrontend>> Start(InferenceServer& server,
                                                       GrpcFrontendOptions options = {});

  ~GrpcFrontend();
  GrpcFrontend(const GrpcFrontend&) = delete;
  GrpcFrontend& operator=(const GrpcFrontend&) = delete;

  // The port actually bound (the chosen one when options.port was 0).
  int port() const;

  // The completion queue the frontend's threads poll, for a process that
  // also calls other gRPC servers (a router, its workers): client calls
  // started on it (grpc_async::StartClientCall) are answered by the same
  // threads, so no other threads poll gRPC. Shutdown closes it once the
  // frontend's own calls have ended: client calls still in flight are then
  // cancelled, and it waits for them to end.
  std::shared_ptr<grpc_async::CallQueue> queue() const;

  // See the contract above. After the deadline, calls still in flight are
  // cancelled; the wait for their InferenceServer callbacks continues.
  void Shutdown(std::chrono::system_clock::time_point deadline);
  void Shutdown(std::chrono::milliseconds grace) {
    Shutdown(std::chrono::system_clock::now() + grace);
  }

 private:
  struct Impl;
  explicit GrpcFrontend(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace somm
