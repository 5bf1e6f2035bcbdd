// ForwardingControl: a ControlClient (controller/control_client.h) that
// passes every call to another; a subclass overrides only the calls it
// follows up on (catalog_follower.h, catalog_publisher.h).
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "controller/control_client.h"

namespace somm::node {

class ForwardingControl : public ControlClient {
 public:
  explicit ForwardingControl(ControlClient& inner) : inner_(inner) {}
  void EnsureLoaded(VersionPtr version, const std::string& variant, const HardwareConfig& hw,
                    int replicas, const std::string& reason, bool urgent, LoadDone done,
                    bool query_waits) override {
    inner_.EnsureLoaded(std::move(version), variant, hw, replicas, reason, urgent,
                        std::move(done), query_waits);
  }
  Status LoadModel(const std::string& name, bool startup) override {
    return inner_.LoadModel(name, startup);
  }
  Status UnloadModel(const std::string& name) override { return inner_.UnloadModel(name); }
  HardwareConfig BaseHardware(const VersionRecord& version) const override {
    return inner_.BaseHardware(version);
  }
  Status StartVariantJob(const std::string& name, int64_t version) override {
    return inner_.StartVariantJob(name, version);
  }
  StatusOr<RegistrationStatus> GetRegistrationStatus(const std::string& name) override {
    return inner_.GetRegistrationStatus(name);
  }
  std::vector<DecisionRecord> RecentActions(size_t limit) override {
    return inner_.RecentActions(limit);
  }
  std::map<std::string, int64_t> ActionTotals() override { return inner_.ActionTotals(); }
  StatusOr<RolloutView> ChangeRollout(const RolloutChange& change) override {
    return inner_.ChangeRollout(change);
  }
  StatusOr<RolloutView> GetRollout(const std::string& model) override {
    return inner_.GetRollout(model);
  }

 protected:
  ControlClient& inner_;
};

}  // namespace somm::node
