// The worker on a machine of the test's making (common/env.h): its default
// memory budget and what it measures for an unprofiled load come from its
// Env, not from the machine the test runs on.
#include "worker/worker.h"
#include "runtime/testing/no_backend.h"

#include <gtest/gtest.h>

#include <future>

#include "metrics/serving_metrics.h"

namespace somm {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

class FixedEnv : public Env {
 public:
  const Clock& clock() const override { return Clock::Real(); }
  int64_t AvailableMemoryBytes() const override { return 8 * kGiB; }
  int64_t ResidentBytes() const override { return resident; }
  CpuFeatures DetectCpuFeatures() const override { return {}; }
  StatusOr<ProcessResult> RunProcess(const std::vector<std::string>&) const override {
    return Unimplemented("no processes here");
  }
  int64_t resident = kGiB;
};

using ::somm::testing::NoBackend;

TEST(WorkerEnvTest, DefaultBudgetIsHalfOfWhatItsEnvSaysIsAvailable) {
  FixedEnv env;
  NoBackend backend;
  NullServingMetrics metrics;
  WorkerOptions o;
  o.id = "w";
  o.env = &env;
  Worker worker(o, backend, metrics);
  EXPECT_EQ(worker.memory_budget_bytes(), 4 * kGiB);
  const cluster::WorkerReport report = worker.Report();
  ASSERT_EQ(report.devices.size(), 1u);
  EXPECT_EQ(report.devices[0].budget_bytes, 4 * kGiB);
  EXPECT_EQ(report.devices[0].worker, "w");
}

TEST(WorkerEnvTest, AnExplicitBudgetWins) {
  FixedEnv env;
  NoBackend backend;
  NullServingMetrics metrics;
  WorkerOptions o;
  o.env = &env;
  o.memory_budget_bytes = kGiB;
  Worker worker(o, backend, metrics);
  EXPECT_EQ(worker.memory_budget_bytes(), kGiB);
}

}  // namespace
}  // namespace somm
