#include "cluster/in_memory_store.h"

#include <gtest/gtest.h>

#include <thread>

namespace somm::cluster {
namespace {

WorkerReport Report(const std::string& worker, const std::string& incarnation, int64_t sequence,
                    int groups) {
  WorkerReport r;
  r.worker = worker;
  r.incarnation = incarnation;
  r.sequence = sequence;
  r.devices.push_back({"cpu", 1000, 10, 2, worker});
  for (int i = 0; i < groups; ++i) {
    GroupState g;
    g.worker = worker;
    g.model = "m" + std::to_string(i);
    r.groups.push_back(g);
  }
  return r;
}

TEST(InMemoryClusterStateStore, HoldsEveryWorkersShareAndForgetsARemovedOne) {
  InMemoryClusterStateStore store;
  store.PutWorker(Report("a", "1", 1, 2));
  store.PutWorker(Report("b", "1", 1, 1));
  auto s = store.Read();
  EXPECT_EQ(s->groups.size(), 3u);
  EXPECT_EQ(s->devices.size(), 2u);
  store.RemoveWorker("a");
  EXPECT_EQ(store.Read()->groups.size(), 1u);
  EXPECT_EQ(s->groups.size(), 3u) << "a snapshot already read does not change";
}

TEST(InMemoryClusterStateStore, AnOlderReportOfTheSameIncarnationIsIgnoredANewIncarnationIsNot) {
  InMemoryClusterStateStore store;
  store.PutWorker(Report("a", "1", 5, 2));
  store.PutWorker(Report("a", "1", 4, 1));
  EXPECT_EQ(store.Read()->groups.size(), 2u);
  store.PutWorker(Report("a", "2", 1, 1));  // the process restarted
  EXPECT_EQ(store.Read()->groups.size(), 1u);
}

TEST(InMemoryClusterStateStore, DemandAddsUpOverRoutersAndKeepsTheStrictestRequirements) {
  InMemoryClusterStateStore store;
  ModelDemand a{"m", 1, 5.0, 20.0, 0.9, 10};
  ModelDemand b{"m", 1, 2.0, 10.0, 0.95, 7};
  store.PutDemand("r1", {a});
  store.PutDemand("r2", {b});
  auto s = store.Read();
  ASSERT_EQ(s->demand.size(), 1u);
  EXPECT_EQ(s->demand[0].arrivals_total, 17);
  EXPECT_DOUBLE_EQ(s->demand[0].rate_qps, 7.0);
  EXPECT_DOUBLE_EQ(s->demand[0].latency_slo_ms, 10.0);
  EXPECT_DOUBLE_EQ(*s->demand[0].min_accuracy, 0.95);
}

TEST(InMemoryClusterStateStore, ConcurrentWritersAndReadersSeeWholeReports) {
  InMemoryClusterStateStore store;
  std::atomic<bool> stop{false};
  std::thread reader([&] {
    while (!stop) {
      auto s = store.Read();
      ASSERT_TRUE(s->groups.size() % 3 == 0) << "a report is never seen half-applied";
    }
  });
  for (int i = 0; i < 200; ++i) store.PutWorker(Report("w", "1", i, 3 * (i % 4)));
  stop = true;
  reader.join();
  EXPECT_GE(store.generation(), 200u);
}

}  // namespace
}  // namespace somm::cluster
