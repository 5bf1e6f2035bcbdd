// ServeNode: `somm serve` assembled from its parts: the guard (API keys,
// tenants, the audit log) and TLS, the backends and the device
// (node_parts.h's StartBackends), the embedded server (a router, a
// controller and one local worker wired with direct calls;
// embedded_server.h) with the options node/component_options.h builds,
// offline batch jobs, the REST and gRPC frontends with their bounds and
// mounts and the metrics port (serving_frontends.h, as a router's), and the
// repository poller of --model-control-mode poll. cli/ parses the flags and
// sets the process up; RunServeNode runs the node until the process says
// stop.
//
// Lifecycle: Start() once. Nothing listens before the guard, TLS, the
// device and every model of the repository are settled; a failure returns
// its Status, and what had started stops with the node. After Start the
// ports are known (0 in the flags = picked). Stop() (and the destructor)
// drains in order: registrations, the poller, batch jobs (they stay on disk
// and resume at the next start), the frontends with their calls in flight,
// the instances, the metrics port. One thread starts and stops the node.
#pragma once

#include <memory>

#include "common/status.h"
#include "crypto/tls_stream.h"
#include "node/node_options.h"
#include "node/node_parts.h"

namespace somm::node {

// The checks a start makes of its flags before anything listens or loads
// (--check-args runs them alone).
Status CheckServeArgs(const ServeOptions& options);

class ServeNode {
 public:
  explicit ServeNode(ServeOptions options);
  ~ServeNode();  // Stop()
  ServeNode(const ServeNode&) = delete;
  ServeNode& operator=(const ServeNode&) = delete;

  Status Start();
  void Stop();

  int http_port() const;
  int grpc_port() const;
  int metrics_port() const;
  // Model versions READY now.
  int ReadyVersions() const;
  // The ports' TLS; null = plaintext.
  const crypto::TlsServerContext* tls() const;

 private:
  struct Parts;
  const ServeOptions options_;
  std::unique_ptr<Parts> parts_;
};

// Starts the node, prints its banner (its first line is for scripts and
// tests), waits until the process says stop and stops the node: the
// process's exit code (2: it did not start).
int RunServeNode(const ServeOptions& options, const NodeProcess& process);

}  // namespace somm::node
