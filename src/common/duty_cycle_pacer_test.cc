#include "common/duty_cycle_pacer.h"

#include <gtest/gtest.h>

namespace somm {
namespace {

using Clock = DutyCyclePacer::Clock;
using std::chrono::milliseconds;

TEST(DutyCyclePacerTest, RestIsTheWorkTimesOneMinusDutyOverDuty) {
  DutyCyclePacer pacer(0.25);  // 100 ms of work, then 300 ms of rest
  const auto t0 = Clock::time_point{} + std::chrono::hours(1);
  EXPECT_EQ(pacer.EarliestStart(t0), t0) << "nothing recorded: no wait";
  pacer.Record(t0 + milliseconds(100), milliseconds(100));
  EXPECT_EQ(pacer.EarliestStart(t0 + milliseconds(100)), t0 + milliseconds(400));
  EXPECT_EQ(pacer.EarliestStart(t0 + milliseconds(500)), t0 + milliseconds(500))
      << "the rest is over: start at once";
}

TEST(DutyCyclePacerTest, BackToBackWorkAddsUpItsRests) {
  DutyCyclePacer pacer(0.5);
  const auto t0 = Clock::time_point{} + std::chrono::hours(1);
  // An urgent piece (not waited for) right after a paced one: the rests
  // owed add up instead of the second replacing the first.
  pacer.Record(t0 + milliseconds(200), milliseconds(200));
  pacer.Record(t0 + milliseconds(250), milliseconds(50));
  EXPECT_EQ(pacer.EarliestStart(t0 + milliseconds(250)), t0 + milliseconds(450));
}

TEST(DutyCyclePacerTest, AnIdleSpellForgivesNothingItDidNotOwe) {
  DutyCyclePacer pacer(0.5);
  const auto t0 = Clock::time_point{} + std::chrono::hours(1);
  pacer.Record(t0 + milliseconds(100), milliseconds(100));  // rest until 200
  // Work that ends long after the rest: its own rest starts at its end.
  pacer.Record(t0 + milliseconds(5000), milliseconds(100));
  EXPECT_EQ(pacer.EarliestStart(t0 + milliseconds(5000)), t0 + milliseconds(5100));
}

TEST(DutyCyclePacerTest, DutyOneNeverWaitsAndOutOfRangeValuesAreClamped) {
  DutyCyclePacer unpaced(1.0);
  const auto t0 = Clock::time_point{} + std::chrono::hours(1);
  unpaced.Record(t0, std::chrono::seconds(10));
  EXPECT_EQ(unpaced.EarliestStart(t0), t0);
  EXPECT_EQ(DutyCyclePacer(7).duty(), 1.0);
  EXPECT_GT(DutyCyclePacer(0).duty(), 0.0);
  EXPECT_GT(DutyCyclePacer(-1).duty(), 0.0);
}

TEST(DutyCyclePacerTest, WaitTurnSleepsUntilTheRestIsOver) {
  DutyCyclePacer pacer(0.5);
  const auto start = Clock::now();
  pacer.Record(start, milliseconds(30));
  const auto slept = pacer.WaitTurn();
  EXPECT_GE(Clock::now() - start, milliseconds(30));
  EXPECT_GT(slept, Clock::duration::zero());
  EXPECT_EQ(pacer.WaitTurn(), Clock::duration::zero()) << "the rest was taken";
}

}  // namespace
}  // namespace somm
