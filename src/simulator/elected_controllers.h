// ElectedControllers: the simulator's controllers as a cluster runs them. A
// leader and a standby elect through the cluster's own elector
// (node/leader_elector.h) over an in-memory lease on the loop's virtual
// clock; only the leader runs control ticks. As the router's ControlClient
// it forwards to whoever the lease names, and answers UNAVAILABLE while that
// one is dead or no one holds it, as a router's call to a dead leader
// fails. KillLeader() stops the leader for good: it renews and acts no
// more, so the standby takes the lease once it lapses.
//
// Thread-safety: none; everything runs on the event loop's thread.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cluster/in_memory_lease_store.h"
#include "controller/controller.h"
#include "node/leader_elector.h"
#include "simulator/event_loop.h"

namespace somm::sim {

class ElectedControllers : public ControlClient {
 public:
  // `make(i)` builds controller i (controller-0 leads at first).
  ElectedControllers(EventLoop& loop, int count, std::chrono::milliseconds lease,
                     const std::function<std::unique_ptr<Controller>(int)>& make);

  // Elects now (controller-0 first, so it leads), then every third of the
  // lease until StopElectingAt's time.
  void StartElecting();
  void StopElectingAt(EventLoop::TimePoint until) { until_ = until; }
  // The leader's control tick.
  void Tick();
  // The leader dies; false when no live controller leads.
  bool KillLeader();
  // Runs after each election with the new leader's index (the first one too).
  void OnElected(std::function<void(int)> on_elected) { on_elected_ = std::move(on_elected); }

  // ControlClient, forwarded to the lease holder.
  void EnsureLoaded(VersionPtr version, const std::string& variant, const HardwareConfig& hw,
                    int replicas, const std::string& reason, bool urgent, LoadDone done,
                    bool query_waits) override;
  Status LoadModel(const std::string& name, bool startup) override;
  Status UnloadModel(const std::string& name) override;
  HardwareConfig BaseHardware(const VersionRecord& version) const override;
  Status StartVariantJob(const std::string& name, int64_t version) override;
  StatusOr<RegistrationStatus> GetRegistrationStatus(const std::string& name) override;

 private:
  struct Member {
    std::unique_ptr<Controller> controller;
    std::unique_ptr<node::LeaderElector> elector;
    bool dead = false;
  };
  // The live controller the lease names; nullptr (and why) when none.
  Controller* Reachable(Status* why);
  void ElectEvery(size_t i);

  EventLoop& loop_;
  cluster::InMemoryLeaseStore lease_;
  std::vector<Member> members_;
  std::map<std::string, size_t> by_holder_;
  std::function<void(int)> on_elected_;
  EventLoop::TimePoint until_ = EventLoop::TimePoint::max();
};

}  // namespace somm::sim
