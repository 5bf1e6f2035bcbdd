#include "node/leader_elector.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cluster/in_memory_lease_store.h"
#include "common/clock.h"

namespace somm::node {
namespace {

using std::chrono::milliseconds;

class LeaderElectorTest : public ::testing::Test {
 protected:
  LeaderElectorOptions Options(const std::string& id) {
    LeaderElectorOptions o;
    o.holder = id + "|127.0.0.1:1";
    o.lease = milliseconds(1500);
    o.on_elected = [this, id] { events_.push_back(id + " elected"); };
    o.on_lost = [this, id](const std::string& why) { events_.push_back(id + " lost: " + why); };
    return o;
  }
  ManualClock clock_;
  cluster::InMemoryLeaseStore lease_{clock_};
  std::vector<std::string> events_;
};

TEST_F(LeaderElectorTest, OneLeadsTheStandbyWaitsAndTakesOverOnceTheLeaseLapses) {
  LeaderElector c0(lease_, Options("c0"));
  LeaderElector c1(lease_, Options("c1"));
  c0.Tick();
  c1.Tick();
  EXPECT_TRUE(c0.leading());
  EXPECT_FALSE(c1.leading());
  EXPECT_EQ(lease_.LeaseHolder(), "c0|127.0.0.1:1");
  // The leader renews every third of the lease; the standby keeps asking.
  for (int i = 0; i < 10; ++i) {
    clock_.Advance(c0.tick_period());
    c0.Tick();
    c1.Tick();
  }
  EXPECT_TRUE(c0.leading());
  EXPECT_FALSE(c1.leading());
  EXPECT_EQ(events_, (std::vector<std::string>{"c0 elected"}));

  // c0 is killed: it renews no more. The standby takes over at its first
  // tick past the lease, not before.
  const auto killed = clock_.Now();
  while (!c1.leading()) {
    clock_.Advance(c1.tick_period());
    c1.Tick();
    ASSERT_LT(clock_.Now() - killed, milliseconds(3000));
  }
  EXPECT_GE(clock_.Now() - killed, milliseconds(1500));
  EXPECT_LE(clock_.Now() - killed, milliseconds(1500) + c1.tick_period());
  EXPECT_EQ(lease_.LeaseHolder(), "c1|127.0.0.1:1");

  // A leader that was only paused finds the lease another's: it stops for
  // good, and stays stopped though it ticks again.
  c0.Tick();
  EXPECT_FALSE(c0.leading());
  EXPECT_TRUE(c0.lost());
  c0.Tick();
  EXPECT_EQ(events_, (std::vector<std::string>{"c0 elected", "c1 elected", "c0 lost: another holds it"}));
}

TEST_F(LeaderElectorTest, AResignedLeaseIsTheStandbysAtItsNextTick) {
  LeaderElector c0(lease_, Options("c0"));
  LeaderElector c1(lease_, Options("c1"));
  c0.Tick();
  c1.Tick();
  c0.Resign();
  EXPECT_EQ(lease_.LeaseHolder(), "");
  c1.Tick();
  EXPECT_TRUE(c1.leading());
}

// A store that cannot be reached: the leader stops acting at once rather
// than risk two leaders once the lease lapses.
class UnreachableLease : public cluster::LeaseStore {
 public:
  StatusOr<bool> HoldLease(const std::string&, milliseconds) override {
    if (down) return Unavailable("redis at 127.0.0.1:6379: connection refused");
    return true;
  }
  void ReleaseLease(const std::string&) override {}
  std::string LeaseHolder() const override { return ""; }
  bool down = false;
};

TEST_F(LeaderElectorTest, ALeaderThatCannotReachTheStoreStopsAtOnce) {
  UnreachableLease store;
  LeaderElector c0(store, Options("c0"));
  c0.Tick();
  ASSERT_TRUE(c0.leading());
  store.down = true;
  c0.Tick();
  EXPECT_FALSE(c0.leading());
  EXPECT_EQ(events_.back(), "c0 lost: redis at 127.0.0.1:6379: connection refused");
}

}  // namespace
}  // namespace somm::node
