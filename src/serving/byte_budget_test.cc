// ByteBudget (byte_budget.h): reservations up to the budget, refusals past
// it with the message and the counters, bytes given back once.
#include "serving/byte_budget.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace somm {
namespace {

class CountingMetrics : public NullServingMetrics {
 public:
  std::atomic<int64_t> bytes{0};
  std::atomic<int> shed{0};
  std::string last_reason;
  void AddInflightBytes(int64_t delta) override { bytes += delta; }
  void RecordShed(const std::string& protocol, const std::string& reason) override {
    ++shed;
    last_reason = protocol + "/" + reason;
  }
};

constexpr int64_t kMiB = 1 << 20;

TEST(ByteBudgetTest, ReservesUpToTheBudgetAndRefusesPastIt) {
  CountingMetrics metrics;
  ByteBudget budget({100 * kMiB, 2, &metrics});
  auto a = budget.Reserve(60 * kMiB, "rest");
  ASSERT_TRUE(a.ok());
  auto b = budget.Reserve(40 * kMiB, "grpc");
  ASSERT_TRUE(b.ok()) << "exactly the budget fits";
  EXPECT_EQ(budget.held(), 100 * kMiB);
  EXPECT_EQ(metrics.bytes.load(), 100 * kMiB);

  auto c = budget.Reserve(kMiB, "rest");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(c.status().message(),
            "server busy: request bodies and tensors in flight hold 100.0 MiB of the 100.0 MiB "
            "it allows (max_inflight_bytes); this request needs 1.0 MiB; retry after 2 s");
  EXPECT_EQ(budget.Refusal(-1).message(),
            "server busy: request bodies and tensors in flight hold 100.0 MiB of the 100.0 MiB "
            "it allows (max_inflight_bytes); retry after 2 s");
  EXPECT_EQ(budget.refused(), 1);
  EXPECT_EQ(metrics.shed.load(), 1);
  EXPECT_EQ(metrics.last_reason, "rest/bytes");

  a->Release();
  a->Release();  // once only
  EXPECT_EQ(budget.held(), 40 * kMiB);
  EXPECT_FALSE(budget.Reserve(61 * kMiB, "rest").ok()) << "a large one still does not fit";
  {
    auto d = budget.Reserve(60 * kMiB, "rest");
    EXPECT_TRUE(d.ok());
  }  // given back when destroyed
  EXPECT_EQ(budget.held(), 40 * kMiB);
  ByteBudget::Reservation moved = std::move(b).value();
  EXPECT_EQ(moved.bytes(), 40 * kMiB);
  moved = ByteBudget::Reservation();
  EXPECT_EQ(budget.held(), 0);
  EXPECT_EQ(metrics.bytes.load(), 0);
}

TEST(ByteBudgetTest, AReservationShrinksToTheSizeThatCameAndThePeakStays) {
  CountingMetrics metrics;
  ByteBudget budget({100 * kMiB, 1, &metrics});
  auto room = budget.Reserve(64 * kMiB, "grpc");  // the largest a message may be
  ASSERT_TRUE(room.ok());
  room->ShrinkTo(kMiB);  // the message that came
  EXPECT_EQ(room->bytes(), kMiB);
  EXPECT_EQ(budget.held(), kMiB);
  EXPECT_EQ(metrics.bytes.load(), kMiB);
  room->ShrinkTo(2 * kMiB);  // never grows
  EXPECT_EQ(budget.held(), kMiB);
  EXPECT_EQ(budget.peak(), 64 * kMiB);
  room->Release();
  EXPECT_EQ(budget.held(), 0);
  EXPECT_EQ(metrics.bytes.load(), 0);
  EXPECT_EQ(budget.peak(), 64 * kMiB);
}

TEST(ByteBudgetTest, ZeroOnlyCounts) {
  ByteBudget budget({0, 1, nullptr});
  auto a = budget.Reserve(int64_t{1} << 40, "rest");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(budget.held(), int64_t{1} << 40);
  EXPECT_TRUE(budget.Reserve(-5, "rest").ok()) << "a negative size counts as 0";
}

TEST(ByteBudgetTest, TheFlagsDefaultIsAQuarterOfTheMemoryBudget) {
  EXPECT_EQ(ByteBudget::FromFlag(-1, 8192 * kMiB, 64 * kMiB).value(), 2048 * kMiB);
  EXPECT_EQ(ByteBudget::FromFlag(-1, 256 * kMiB, 64 * kMiB).value(), 512 * kMiB)
      << "eight maximum-size bodies at least: gRPC calls hold room for one while it arrives";
  EXPECT_EQ(ByteBudget::FromFlag(0, 8192 * kMiB, 64 * kMiB).value(), 0);
  EXPECT_EQ(ByteBudget::FromFlag(100 * kMiB, 8192 * kMiB, 64 * kMiB).value(), 100 * kMiB);
  const auto low = ByteBudget::FromFlag(32 * kMiB, 8192 * kMiB, 64 * kMiB);
  ASSERT_FALSE(low.ok());
  EXPECT_EQ(low.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(low.status().message().find("--max-body-bytes"), std::string::npos);
}

TEST(ByteBudgetTest, ConcurrentReservationsNeverPassTheBudget) {
  ByteBudget budget({10 * kMiB, 1, nullptr});
  std::atomic<int64_t> peak{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) {
        auto r = budget.Reserve(3 * kMiB, "rest");
        const int64_t now = budget.held();
        int64_t seen = peak.load();
        while (now > seen && !peak.compare_exchange_weak(seen, now)) {
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LE(peak.load(), 10 * kMiB);
  EXPECT_EQ(budget.held(), 0);
}

}  // namespace
}  // namespace somm
