// GrpcControlClient: a router's ControlClient in a cluster: every call goes
// to the leader controller's ControlService over gRPC. Where the leader is
// comes from `leader` (the Redis store's leader record), asked again after
// any UNAVAILABLE answer, so a router follows a failover by itself. One
// channel per leader address, reused.
//
// EnsureLoaded is asynchronous (its `done` runs on a thread of the queue
// given to UseQueue, or else on a gRPC thread) and bounded by `load_timeout`;
// LoadModel and UnloadModel block, bounded likewise;
// StartVariantJob and GetRegistrationStatus block for one round trip
// (bounded by kQuickCallTimeout in the .cc).
// BaseHardware is computed here, as the controller does, from `device`.
//
// Thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "common/mutex.h"
#include "crypto/tls_files.h"
#include "controller/control_client.h"
#include "profiles/device.h"

namespace somm {

namespace grpc_async {
class CallQueue;
}

class GrpcControlClient : public ControlClient {
 public:
  // `leader` returns "host:port" of the leader's ControlService, or "".
  // `tls`: toward the leader (crypto::PeerClientFiles of the process's own
  // files); not enabled = plaintext.
  GrpcControlClient(std::function<std::string()> leader, Device device,
                    std::chrono::milliseconds load_timeout = std::chrono::minutes(5),
                    crypto::TlsClientFiles tls = {});
  ~GrpcControlClient() override;

  // EnsureLoaded calls are started on `queue` from now on (as
  // GrpcWorkerStubOptions::queue): a router's GrpcFrontend::queue().
  void UseQueue(std::shared_ptr<grpc_async::CallQueue> queue);

  void EnsureLoaded(VersionPtr version, const std::string& variant, const HardwareConfig& hw,
                    int replicas, const std::string& reason, bool urgent, LoadDone done,
                    bool query_waits = true) override;
  Status LoadModel(const std::string& name, bool startup = false) override;
  Status UnloadModel(const std::string& name) override;
  HardwareConfig BaseHardware(const VersionRecord& version) const override;
  Status StartVariantJob(const std::string& name, int64_t version) override;
  StatusOr<RegistrationStatus> GetRegistrationStatus(const std::string& name) override;
  std::vector<DecisionRecord> RecentActions(size_t limit) override;
  std::map<std::string, int64_t> ActionTotals() override;
  StatusOr<RolloutView> ChangeRollout(const RolloutChange& change) override;
  StatusOr<RolloutView> GetRollout(const std::string& model) override;

 private:
  struct Channel;
  // The channel to the leader now; Unavailable when none is known.
  StatusOr<std::shared_ptr<Channel>> Leader();

  const std::function<std::string()> leader_;
  const Device device_;
  const std::chrono::milliseconds load_timeout_;
  const crypto::TlsClientFiles tls_;
  Mutex mu_;
  std::shared_ptr<Channel> channel_ SOMM_GUARDED_BY(mu_);
  std::shared_ptr<grpc_async::CallQueue> queue_ SOMM_GUARDED_BY(mu_);
};

}  // namespace somm
