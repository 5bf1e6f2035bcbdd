// The standard gRPC health service (grpc.health.v1.Health, proto/health.proto)
// on the gRPC frontend's port: what Kubernetes' gRPC probes, load balancers
// and meshes call. Like ServerLive and ServerReady it needs no key.
//
// Contract:
//   * Services known: "" (the server as a whole) and each full service name
//     the port serves (inference.GRPCInferenceService, somm.SommControl).
//     Each is SERVING while `ready()` holds and NOT_SERVING otherwise (a
//     server starting, one whose models are not loaded, one shutting down).
//   * Check answers the status now; a service not known is NOT_FOUND.
//   * Watch sends the status at once, then each change (looked at every
//     kHealthWatchPeriod), one message at a time: a write waits for the one
//     before it to complete, so a client that does not read holds at most
//     one message of the server's memory. A service not known is answered
//     SERVICE_UNKNOWN and watched as the spec says. When `stopping` turns
//     true (the frontend's Shutdown), each Watch sends NOT_SERVING and ends
//     with OK, so that a stop does not wait on open streams; a Watch whose
//     client went away ends at the next look.
//   * Declared on the frontend's KeyFirstService before the server is
//     built; StartWatch() offers the first Watch call after. The served
//     state outlives the queue's Close (it is held by the returned object).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "frontend/grpc/key_first.h"
#include "transport/grpc/async_unary.h"

namespace somm::grpc_async {

inline constexpr std::chrono::milliseconds kHealthWatchPeriod{100};

class HealthService {
 public:
  // `services`: the full names known besides "". `ready`: whether the
  // server can serve now (InferenceServer::IsReady). `stopping` must
  // outlive the queue's Close.
  HealthService(std::vector<std::string> services, std::function<bool()> ready,
                const std::atomic<bool>* stopping);
  // Registers Check (through `table`, open) and Watch with `service`.
  void Declare(CallQueue* queue, KeyFirstService* service, KeyFirstTable& table);
  // Offers the first Watch call; after the server is built.
  void StartWatch();

  struct Shared;  // what every Watch call reads (health.cc)

 private:
  std::shared_ptr<Shared> shared_;
  CallQueue* queue_ = nullptr;
};

}  // namespace somm::grpc_async
