// KubernetesProvisioner: scales the worker Deployment through its `scale`
// subresource (GET, then a merge PATCH of spec.replicas that carries the
// resourceVersion it read, so a concurrent change answers 409 Conflict
// instead of being overwritten; it then reads again and retries). The
// controller's pod reaches the API with its service account
// (InClusterKubernetesApi); the RBAC in deploy/ allows exactly this.
//
// Kubernetes, not the scaler, picks the pod a scale-down removes (the
// ReplicaSet's own ranking); the pod drains on SIGTERM like any worker.
// Every registered worker is Removable(): they all belong to the Deployment.
// Pending() is spec.replicas minus the workers registered.
//
// KubernetesApi is the seam to the API server: the unit test feeds recorded
// responses through it. Thread-safety: none (one caller, the control loop).
#pragma once

#include <memory>
#include <string>

#include "provisioner/provisioner.h"

namespace somm {

struct KubernetesReply {
  int status = 0;  // HTTP status
  std::string body;
};

class KubernetesApi {
 public:
  virtual ~KubernetesApi() = default;
  // One request; Unavailable when no HTTP answer came back at all.
  virtual StatusOr<KubernetesReply> Call(const std::string& method, const std::string& path,
                                         const std::string& content_type,
                                         const std::string& body) = 0;
};

// Where a pod finds the API server and its credentials.
struct InClusterOptions {
  // "" = $KUBERNETES_SERVICE_HOST and $KUBERNETES_SERVICE_PORT.
  std::string host;
  int port = 0;
  std::string token_path = "/var/run/secrets/kubernetes.io/serviceaccount/token";
  std::string ca_path = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";
  double timeout_s = 10;
};

// HTTPS with the service account's CA and bearer token (read again for every
// request: the kubelet rotates it). FailedPrecondition outside a pod.
StatusOr<std::unique_ptr<KubernetesApi>> InClusterKubernetesApi(InClusterOptions options = {});

// The pod's namespace from its service account.
StatusOr<std::string> InClusterNamespace(
    const std::string& path = "/var/run/secrets/kubernetes.io/serviceaccount/namespace");

struct KubernetesProvisionerOptions {
  std::string namespace_name;  // required
  std::string deployment = "somm-worker";
  // Reads and retries after a 409 Conflict, at most this many times.
  int conflict_retries = 3;
};

class KubernetesProvisioner : public Provisioner {
 public:
  KubernetesProvisioner(KubernetesProvisionerOptions options, std::unique_ptr<KubernetesApi> api);

  std::string name() const override { return "kubernetes"; }
  Status Start(int count) override;
  Status Stop(const std::string& id) override;
  StatusOr<int> Pending(const std::set<std::string>& registered) override;
  std::set<std::string> Removable(const std::set<std::string>& registered) override;

  // The Deployment's spec.replicas now.
  StatusOr<int> Replicas();

 private:
  struct Scale {
    int replicas = 0;
    std::string resource_version;
  };
  StatusOr<Scale> Get();
  // Sets spec.replicas to f(current), with the precondition above.
  Status Change(int delta, const std::string& why);
  Status ErrorFrom(const KubernetesReply& reply, const std::string& verb) const;
  std::string Path() const;

  const KubernetesProvisionerOptions options_;
  std::unique_ptr<KubernetesApi> api_;
};

}  // namespace somm
