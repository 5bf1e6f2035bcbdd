// ControlService: serves this process's controller to the cluster's routers
// over gRPC (somm.control.SommControl, proto/control.proto); routers reach it
// through GrpcControlClient (grpc_control_client.h) with the ControlClient
// contract (controller/control_client.h).
//
// Contract:
//   * EnsureLoaded never holds a gRPC thread while the load runs: it hands
//     the request to ControlClient::EnsureLoaded and finishes the call from
//     `done`, naming the worker that holds the group.
//   * LoadModel and UnloadModel block (the repository API); they run one at
//     a time on a thread of the service's own, never on gRPC's threads.
//   * StartVariantJob and GetVariantJob (a registration's variant job, on
//     the leader) return at once, on gRPC's thread.
//   * `resolve` turns (model, version) into the record to load; its error is
//     the call's error.
//   * A service that is not the leader (`is_leader` false) answers
//     UNAVAILABLE "not the leader", so a router asks again elsewhere.
// Shutdown() as WorkerService's. Thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "common/status.h"
#include "crypto/tls_files.h"
#include "controller/control_client.h"

namespace somm {

struct ControlServiceOptions {
  std::string address = "127.0.0.1";
  int port = 0;  // 0 = a free one (port())
  // TLS; with a client CA, only callers with a certificate it signed (the
  // cluster's routers) get in. Not enabled = plaintext.
  crypto::TlsServerFiles tls;
};

class ControlService {
 public:
  using Resolver =
      std::function<StatusOr<VersionPtr>(const std::string& model, int64_t version)>;
  // Everything passed by reference must outlive the service.
  static StatusOr<std::unique_ptr<ControlService>> Start(ControlClient& controller,
                                                         Resolver resolve,
                                                         std::function<bool()> is_leader,
                                                         ControlServiceOptions options = {});
  ~ControlService();
  ControlService(const ControlService&) = delete;
  ControlService& operator=(const ControlService&) = delete;

  int port() const;
  void Shutdown(std::chrono::system_clock::time_point deadline);

 private:
  struct Impl;
  explicit ControlService(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace somm
