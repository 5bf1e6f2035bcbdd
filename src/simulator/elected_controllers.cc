#include "simulator/elected_controllers.h"

#include <utility>

namespace somm::sim {

ElectedControllers::ElectedControllers(
    EventLoop& loop, int count, std::chrono::milliseconds lease,
    const std::function<std::unique_ptr<Controller>(int)>& make)
    : loop_(loop), lease_(loop.clock()) {
  members_.resize(static_cast<size_t>(count));
  for (size_t i = 0; i < members_.size(); ++i) {
    node::LeaderElectorOptions o;
    o.holder = "controller-" + std::to_string(i) + "|simulated";
    o.lease = lease;
    o.on_elected = [this, i] {
      if (on_elected_) on_elected_(static_cast<int>(i));
    };
    by_holder_[o.holder] = i;
    members_[i].controller = make(static_cast<int>(i));
    members_[i].elector = std::make_unique<node::LeaderElector>(lease_, std::move(o));
  }
}

void ElectedControllers::StartElecting() {
  for (size_t i = 0; i < members_.size(); ++i) ElectEvery(i);
}

void ElectedControllers::ElectEvery(size_t i) {
  Member& m = members_[i];
  if (m.dead) return;
  m.elector->Tick();
  if (loop_.Now() < until_) loop_.After(m.elector->tick_period(), [this, i] { ElectEvery(i); });
}

void ElectedControllers::Tick() {
  for (Member& m : members_) {
    if (!m.dead && m.elector->leading()) m.controller->Tick();
  }
}

bool ElectedControllers::KillLeader() {
  for (Member& m : members_) {
    if (!m.dead && m.elector->leading()) {
      m.dead = true;
      return true;
    }
  }
  return false;
}

Controller* ElectedControllers::Reachable(Status* why) {
  const std::string holder = lease_.LeaseHolder();
  auto it = by_holder_.find(holder);
  if (it == by_holder_.end()) {
    *why = Unavailable("no leader controller holds the lease");
    return nullptr;
  }
  if (members_[it->second].dead) {
    *why = Unavailable("leader controller " + holder + " is unreachable");
    return nullptr;
  }
  return members_[it->second].controller.get();
}

void ElectedControllers::EnsureLoaded(VersionPtr version, const std::string& variant,
                                      const HardwareConfig& hw, int replicas,
                                      const std::string& reason, bool urgent, LoadDone done,
                                      bool query_waits) {
  Status why;
  Controller* c = Reachable(&why);
  if (c == nullptr) {
    done(why, "");
    return;
  }
  c->EnsureLoaded(std::move(version), variant, hw, replicas, reason, urgent, std::move(done),
                  query_waits);
}

Status ElectedControllers::LoadModel(const std::string& name, bool startup) {
  Status why;
  Controller* c = Reachable(&why);
  return c == nullptr ? why : c->LoadModel(name, startup);
}

Status ElectedControllers::UnloadModel(const std::string& name) {
  Status why;
  Controller* c = Reachable(&why);
  return c == nullptr ? why : c->UnloadModel(name);
}

HardwareConfig ElectedControllers::BaseHardware(const VersionRecord& version) const {
  // Configuration only: every controller answers alike, dead or alive.
  return members_.front().controller->BaseHardware(version);
}

Status ElectedControllers::StartVariantJob(const std::string& name, int64_t version) {
  Status why;
  Controller* c = Reachable(&why);
  return c == nullptr ? why : c->StartVariantJob(name, version);
}

StatusOr<RegistrationStatus> ElectedControllers::GetRegistrationStatus(const std::string& name) {
  Status why;
  Controller* c = Reachable(&why);
  if (c == nullptr) return why;
  return c->GetRegistrationStatus(name);
}

}  // namespace somm::sim
