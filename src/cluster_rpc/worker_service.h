// WorkerService: serves one Worker of this process to the cluster over gRPC
// (somm.cluster.SommWorker, proto/cluster.proto), so that routers and the
// controller of other processes reach it through GrpcWorkerStub
// (grpc_worker_stub.h) exactly as the embedded server reaches its worker
// through LocalWorkerStub.
//
// Contract:
//   * It borrows the Worker, which must outlive the service: shut the service
//     down first, since it waits for the worker's answers to calls in flight.
//   * The service's own threads (WorkerServiceOptions::completion_threads)
//     take calls off gRPC and run the handlers; no call holds one while it
//     waits. Execute hands the query to Worker::Execute and answers from its
//     callback (a batcher thread, which writes the answer itself); Apply
//     hands the action to Worker::Apply, which loads on its own lanes, and
//     answers from `done`. A group that is not loaded is NOT_FOUND with the
//     worker's message.
//   * The call's gRPC deadline becomes the query's deadline on the worker's
//     steady clock (no deadline: SteadyClock::time_point::max()).
//   * A kLoad needs the model version's record: the service asks `resolve`
//     (model, version), on the gRPC thread, so it must be quick (a registry
//     lookup or a read of the shared repository's model.yaml). Its error is
//     the call's error and nothing is applied. Other actions name a group
//     the worker already holds and need no record.
//   * Shutdown() stops accepting calls, lets those in flight finish until the
//     deadline and cancels the rest; it returns once every worker callback
//     for them has run. Idempotent; the destructor calls it with a short
//     deadline if nobody has. Every method is thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/status.h"
#include "crypto/tls_files.h"
#include "registry/version_record.h"
#include "worker/worker.h"

namespace somm {

struct WorkerServiceOptions {
  // Interface to listen on: "0.0.0.0" every IPv4 interface, "127.0.0.1"
  // loopback only.
  std::string address = "127.0.0.1";
  // TCP port; 0 lets the OS pick a free one, which port() then reports.
  int port = 0;
  // Largest message accepted or sent, in bytes (a query's inputs or
  // outputs); gRPC answers larger ones with RESOURCE_EXHAUSTED.
  int max_message_bytes = 64 * 1024 * 1024;
  // TLS; with a client CA, only callers with a certificate it signed (the
  // cluster's routers and controllers) get in. Not enabled = plaintext.
  crypto::TlsServerFiles tls;
  // Threads that take calls off gRPC's completion queue, decode them and
  // hand them on (and run Report and a load's `resolve`). One keeps up with
  // tens of thousands of queries a second; more cost context switches per
  // query on a small machine (bench/grpc_rtt.cc, servers cq1 and cq2).
  int completion_threads = 1;
};

class WorkerService {
 public:
  // The record of `model` version `version`, as the worker should load it.
  using Resolver = std::function<StatusOr<VersionPtr>(const std::string& model, int64_t version)>;

  // Binds and starts serving. InvalidArgument for bad options, Unavailable
  // when the address cannot be bound (SO_REUSEPORT is off: a taken port is an
  // error, not a shared one).
  static StatusOr<std::unique_ptr<WorkerService>> Start(Worker& worker, Resolver resolve,
                                                        WorkerServiceOptions options = {});

  ~WorkerService();
  WorkerService(const WorkerService&) = delete;
  WorkerService& operator=(const WorkerService&) = delete;

  // The port actually bound.
  int port() const;

  // See the contract above.
  void Shutdown(std::chrono::system_clock::time_point deadline);
  void Shutdown(std::chrono::milliseconds grace) {
    Shutdown(std::chrono::system_clock::now() + grace);
  }

 private:
  struct Impl;
  explicit WorkerService(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace somm
