#include "batching/batcher.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "common/clock.h"

namespace somm {
namespace {

using namespace std::chrono_literals;

// Every test runs its batcher on a ManualClock: time moves only when a test
// or the model's compute moves it, so no test sleeps and none depends on how
// fast the machine is. Waits for something that must happen are bounded by
// kPatience of real time, a failure bound only.
constexpr auto kPatience = 10s;

// Spins (yielding, not sleeping) until `done` holds; false after kPatience.
bool Eventually(const std::function<bool()>& done) {
  const auto give_up = std::chrono::steady_clock::now() + kPatience;
  while (!done()) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    std::this_thread::yield();
  }
  return true;
}

// True once the batcher's worker, waiting on `clock`, has looked at the
// clock's current time and gone back to waiting (see ManualClock).
bool WorkerSawTheTime(const ManualClock& clock) {
  const int64_t calls = clock.wait_calls();
  return Eventually([&] { return clock.wait_calls() >= calls + 2; });
}

// Doubles its FP32 input; records batch sizes; can be held at a gate so that
// tests control when batches run. Its compute advances the manual clock.
class DoublingModel : public ExecutableModel {
 public:
  explicit DoublingModel(ManualClock* clock) : clock_(clock) {}
  Status Execute(const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs) override {
    {
      std::unique_lock<std::mutex> lock(mu_);
      ++entered_;
      entered_cv_.notify_all();
      gate_cv_.wait(lock, [this] { return open_; });
      batch_sizes_.push_back(inputs[0].shape.empty() ? 1 : inputs[0].shape[0]);
    }
    clock_->Advance(std::chrono::microseconds(compute_us.load()));
    if (fail_) return Internal("model exploded");
    Tensor out = inputs[0];
    out.name = "y";
    auto* f = reinterpret_cast<float*>(out.data.data());
    for (size_t i = 0; i < out.data.size() / 4; ++i) f[i] *= 2;
    outputs->push_back(std::move(out));
    return Status::Ok();
  }
  void Close() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = false;
  }
  void Open() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      open_ = true;
    }
    gate_cv_.notify_all();
  }
  void WaitEntered(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    entered_cv_.wait(lock, [&] { return entered_ >= n; });
  }
  std::vector<int64_t> batch_sizes() {
    std::lock_guard<std::mutex> lock(mu_);
    return batch_sizes_;
  }
  bool fail_ = false;
  std::atomic<int64_t> compute_us{0};  // how long each Execute takes once past the gate

 private:
  ManualClock* const clock_;
  std::mutex mu_;
  std::condition_variable gate_cv_, entered_cv_;
  bool open_ = true;
  int entered_ = 0;
  std::vector<int64_t> batch_sizes_;
};

Tensor Row(std::vector<float> values, int64_t cols) {
  Tensor t{"x", DataType::kFp32, {static_cast<int64_t>(values.size()) / cols, cols}, {}};
  t.data.assign(reinterpret_cast<const char*>(values.data()), values.size() * 4);
  return t;
}

std::vector<float> Floats(const Tensor& t) {
  std::vector<float> v(t.data.size() / 4);
  std::memcpy(v.data(), t.data.data(), t.data.size());
  return v;
}

struct Result {
  Status status;
  std::vector<Tensor> outputs;
  BatchStats stats;
};

bool IsReady(const std::future<Result>& f) { return f.wait_for(0s) == std::future_status::ready; }

// A query's latency SLO; the default is none.
struct Slo {
  SteadyClock::time_point deadline = SteadyClock::time_point::max();
  bool best_effort = false;
};

// Enqueues and returns a future for the query's result.
std::future<Result> Submit(Batcher& b, Tensor input, Status* enqueue_status = nullptr,
                           Slo slo = {}) {
  auto promise = std::make_shared<std::promise<Result>>();
  auto future = promise->get_future();
  BatchTask task;
  task.inputs.push_back(std::move(input));
  task.deadline = slo.deadline;
  task.best_effort = slo.best_effort;
  task.done = [promise](Status s, std::vector<Tensor> out, const BatchStats& st) {
    promise->set_value(Result{s, std::move(out), st});
  };
  Status s = b.Enqueue(std::move(task));
  if (enqueue_status) *enqueue_status = s;
  if (!s.ok()) promise->set_value(Result{s, {}, {}});
  return future;
}

struct Fixture {
  explicit Fixture(BatcherOptions o) {
    o.clock = &clock;
    auto m = std::make_unique<DoublingModel>(&clock);
    model = m.get();
    batcher = std::make_unique<Batcher>(std::move(o), std::move(m));
  }
  Slo DueIn(SteadyClock::duration d, bool best_effort = false) const {
    return Slo{clock.Now() + d, best_effort};
  }
  ManualClock clock;  // declared first: outlives the batcher
  DoublingModel* model;
  std::unique_ptr<Batcher> batcher;
};

BatcherOptions Options(int64_t max_batch, int64_t delay_us) {
  BatcherOptions o;
  o.name = "test:1#0";
  o.max_batch_size = max_batch;
  o.max_queue_delay_us = delay_us;
  return o;
}

TEST(BatcherTest, SingleQueryGetsItsOwnOutput) {
  Fixture f(Options(8, 0));
  auto r = Submit(*f.batcher, Row({1, 2, 3}, 3)).get();
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  ASSERT_EQ(r.outputs.size(), 1u);
  EXPECT_EQ(r.outputs[0].shape, (Shape{1, 3}));
  EXPECT_EQ(Floats(r.outputs[0]), (std::vector<float>{2, 4, 6}));
  EXPECT_EQ(r.stats.batch_size, 1);
}

// A task whose `done` records the thread it ran on.
BatchTask InlineTask(Tensor input, std::promise<Result>* result, std::thread::id* ran_on) {
  BatchTask task;
  task.inputs.push_back(std::move(input));
  task.done = [result, ran_on](Status s, std::vector<Tensor> out, const BatchStats& st) {
    *ran_on = std::this_thread::get_id();
    result->set_value(Result{s, std::move(out), st});
  };
  return task;
}

BatcherOptions InlineOptions(int64_t delay_us, double inline_us) {
  BatcherOptions o = Options(8, delay_us);
  o.inline_max_compute_us = inline_us;
  o.inline_min_gap_us = 30;
  o.predict_compute_us = [](int64_t batch) { return 10.0 * static_cast<double>(batch); };
  return o;
}

TEST(BatcherTest, AnIdleInstanceRunsASmallQueryOnTheCallersThread) {
  Fixture f(InlineOptions(0, 50));
  std::promise<Result> result;
  std::thread::id ran_on;
  BatchTask task = InlineTask(Row({1, 2}, 2), &result, &ran_on);
  ASSERT_TRUE(f.batcher->RunInlineIfIdle(task));
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  Result r = result.get_future().get();
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(Floats(r.outputs[0]), (std::vector<float>{2, 4}));
  EXPECT_FALSE(f.batcher->busy());
  // The queue still works afterwards, on the batcher's thread.
  EXPECT_EQ(Floats(Submit(*f.batcher, Row({3}, 1)).get().outputs[0]), (std::vector<float>{6}));
}

TEST(BatcherTest, InlineRunsOnlyWhenIdleSmallAllowedAndNeverHeldBack) {
  std::promise<Result> unused;
  std::thread::id ran_on;
  {  // off by default
    Fixture f(InlineOptions(0, 0));
    BatchTask task = InlineTask(Row({1}, 1), &unused, &ran_on);
    EXPECT_FALSE(f.batcher->RunInlineIfIdle(task));
    EXPECT_TRUE(static_cast<bool>(task.done));  // untouched, for Enqueue
  }
  {  // a batch predicted above the bound (8 samples x 10 us > 50 us)
    Fixture f(InlineOptions(0, 50));
    BatchTask task = InlineTask(Row({1, 2, 3, 4, 5, 6, 7, 8}, 1), &unused, &ran_on);
    EXPECT_FALSE(f.batcher->RunInlineIfIdle(task));
  }
  {  // the operator holds queries back for company
    Fixture f(InlineOptions(100, 50));
    BatchTask task = InlineTask(Row({1}, 1), &unused, &ran_on);
    EXPECT_FALSE(f.batcher->RunInlineIfIdle(task));
  }
  {  // busy: the batcher thread is executing
    Fixture f(InlineOptions(0, 50));
    f.model->Close();
    auto first = Submit(*f.batcher, Row({1}, 1));
    f.model->WaitEntered(1);
    BatchTask task = InlineTask(Row({1}, 1), &unused, &ran_on);
    EXPECT_FALSE(f.batcher->RunInlineIfIdle(task));
    f.model->Open();
    EXPECT_TRUE(first.get().status.ok());
  }
}

TEST(BatcherTest, InlineStopsWhileQueriesComeCloseTogetherAndResumesWhenTheyDoNot) {
  Fixture f(InlineOptions(0, 50));  // inline_min_gap_us 30
  std::thread::id ran_on;
  // An instance with no history counts as idle.
  std::promise<Result> first;
  BatchTask a = InlineTask(Row({1}, 1), &first, &ran_on);
  ASSERT_TRUE(f.batcher->RunInlineIfIdle(a));
  EXPECT_EQ(Floats(first.get_future().get().outputs[0]), (std::vector<float>{2}));
  // Queries 10 us apart are load: the mean gap falls below 30 us within a
  // few of them, and from then on each is left for the batcher's thread.
  int inline_runs = 0;
  bool refused = false;
  std::vector<std::promise<Result>> results(40);
  for (int i = 0; i < 40 && !refused; ++i) {
    f.clock.Advance(std::chrono::microseconds(10));
    BatchTask t = InlineTask(Row({1}, 1), &results[i], &ran_on);
    if (f.batcher->RunInlineIfIdle(t)) {
      ++inline_runs;
    } else {
      refused = true;
      EXPECT_TRUE(static_cast<bool>(t.done));  // untouched, for Enqueue
    }
  }
  EXPECT_TRUE(refused);
  EXPECT_LE(inline_runs, 12);
  // The next as close is refused too...
  f.clock.Advance(std::chrono::microseconds(10));
  std::promise<Result> late;
  BatchTask b = InlineTask(Row({2}, 1), &late, &ran_on);
  EXPECT_FALSE(f.batcher->RunInlineIfIdle(b));
  // ... and after queries 100 us apart for a while, they run inline again.
  bool resumed = false;
  for (int i = 0; i < 20 && !resumed; ++i) {
    f.clock.Advance(std::chrono::microseconds(100));
    resumed = f.batcher->RunInlineIfIdle(b);
  }
  ASSERT_TRUE(resumed);
  EXPECT_EQ(Floats(late.get_future().get().outputs[0]), (std::vector<float>{4}));
}

TEST(BatcherTest, QueriesThatComeDuringAnInlineRunWaitForIt) {
  Fixture f(InlineOptions(0, 50));
  f.model->Close();
  std::promise<Result> result;
  std::thread::id ran_on;
  std::thread caller([&] {
    BatchTask task = InlineTask(Row({1}, 1), &result, &ran_on);
    EXPECT_TRUE(f.batcher->RunInlineIfIdle(task));
  });
  f.model->WaitEntered(1);  // the inline batch is executing
  auto queued = Submit(*f.batcher, Row({5}, 1));
  // The batcher thread must not start a second Execute on the same model.
  EXPECT_FALSE(IsReady(queued));
  EXPECT_EQ(f.batcher->load().queued_queries, 1);
  f.model->Open();
  caller.join();
  EXPECT_EQ(Floats(queued.get().outputs[0]), (std::vector<float>{10}));
  EXPECT_EQ(f.model->batch_sizes(), (std::vector<int64_t>{1, 1}));
}

TEST(BatcherTest, QueuedQueriesFormOneBatchAndSplitBack) {
  Fixture f(Options(8, 0));
  f.model->Close();
  auto first = Submit(*f.batcher, Row({100}, 1));
  f.model->WaitEntered(1);  // the first query is executing; the rest queue up
  std::vector<std::future<Result>> rest;
  for (int i = 0; i < 5; ++i) rest.push_back(Submit(*f.batcher, Row({float(i), float(i)}, 1)));
  f.model->Open();
  EXPECT_EQ(Floats(first.get().outputs[0]), (std::vector<float>{200}));
  for (int i = 0; i < 5; ++i) {
    auto r = rest[i].get();
    ASSERT_TRUE(r.status.ok());
    EXPECT_EQ(r.outputs[0].shape, (Shape{2, 1}));
    EXPECT_EQ(Floats(r.outputs[0]), (std::vector<float>{2.f * i, 2.f * i}));
    EXPECT_EQ(r.stats.batch_size, i < 4 ? 8 : 2);  // 4 queries x 2 samples fit; the 5th waits
  }
  EXPECT_EQ(f.model->batch_sizes(), (std::vector<int64_t>{1, 8, 2}));
}

TEST(BatcherTest, ExactlyOneQueryOfEachBatchIsFirstInBatch) {
  Fixture f(Options(8, 0));
  f.model->Close();
  auto first = Submit(*f.batcher, Row({1}, 1));
  f.model->WaitEntered(1);
  std::vector<std::future<Result>> rest;
  for (int i = 0; i < 3; ++i) rest.push_back(Submit(*f.batcher, Row({float(i)}, 1)));
  f.model->Open();
  EXPECT_TRUE(first.get().stats.first_in_batch);  // a batch of its own
  int firsts = 0;
  for (auto& r : rest) {
    const Result got = r.get();
    EXPECT_EQ(got.stats.batch_size, 3);
    firsts += got.stats.first_in_batch;
  }
  EXPECT_EQ(firsts, 1);  // the three queued queries ran as one batch
}

TEST(BatcherTest, WaitsForMaxQueueDelayThenRunsWhatItHas) {
  Fixture f(Options(8, 20'000));
  auto r = Submit(*f.batcher, Row({1}, 1));
  f.clock.Advance(20ms - 1us);
  ASSERT_TRUE(WorkerSawTheTime(f.clock));
  EXPECT_FALSE(IsReady(r));  // held back for company
  EXPECT_TRUE(f.model->batch_sizes().empty());
  f.clock.Advance(1us);
  ASSERT_EQ(r.wait_for(kPatience), std::future_status::ready);
  auto result = r.get();
  EXPECT_TRUE(result.status.ok());
  EXPECT_EQ(result.stats.queue_ns, 20'000'000);
  EXPECT_EQ(f.model->batch_sizes(), (std::vector<int64_t>{1}));
}

TEST(BatcherTest, FullBatchIsCutWithoutWaitingForTheDelay) {
  Fixture f(Options(4, 60'000'000));  // the manual clock never gets there
  std::vector<std::future<Result>> r;
  for (int i = 0; i < 4; ++i) r.push_back(Submit(*f.batcher, Row({float(i)}, 1)));
  for (auto& x : r) ASSERT_EQ(x.wait_for(kPatience), std::future_status::ready);
  EXPECT_EQ(f.model->batch_sizes(), (std::vector<int64_t>{4}));
}

TEST(BatcherTest, PreferredBatchSizeIsCutAtOnce) {
  BatcherOptions o = Options(16, 60'000'000);
  o.preferred_batch_sizes = {2, 4};
  Fixture f(o);
  f.model->Close();
  std::vector<std::future<Result>> r;
  for (int i = 0; i < 5; ++i) r.push_back(Submit(*f.batcher, Row({float(i)}, 1)));
  f.model->Open();
  for (int i = 0; i < 4; ++i) ASSERT_EQ(r[i].wait_for(kPatience), std::future_status::ready);
  EXPECT_EQ(f.model->batch_sizes()[0], 4);
  ASSERT_TRUE(WorkerSawTheTime(f.clock));
  EXPECT_FALSE(IsReady(r[4]));  // the 5th waits for the delay; Stop flushes it
  f.batcher->Stop();
  EXPECT_TRUE(r[4].get().status.ok());
}

TEST(BatcherTest, FullQueueRejectsAtOnce) {
  BatcherOptions o = Options(1, 0);
  o.max_queue_size = 2;
  Fixture f(o);
  f.model->Close();
  auto executing = Submit(*f.batcher, Row({1}, 1));
  f.model->WaitEntered(1);
  auto q1 = Submit(*f.batcher, Row({2}, 1));
  auto q2 = Submit(*f.batcher, Row({3}, 1));
  Status s;
  auto rejected = Submit(*f.batcher, Row({4}, 1), &s);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("queue is full"), std::string::npos) << s.message();
  const Batcher::Load load = f.batcher->load();
  EXPECT_EQ(load.queued_queries, 2);
  EXPECT_EQ(load.queued_samples, 2);
  EXPECT_TRUE(load.executing);
  EXPECT_EQ(load.executing_samples, 1);
  f.model->Open();
  EXPECT_TRUE(executing.get().status.ok());
  EXPECT_TRUE(q1.get().status.ok());
  EXPECT_TRUE(q2.get().status.ok());
}

TEST(BatcherTest, OversizedQueryIsRejected) {
  Fixture f(Options(2, 0));
  Status s;
  Submit(*f.batcher, Row({1, 2, 3}, 1), &s);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
}

TEST(BatcherTest, DifferentSampleShapesAreNotMixed) {
  Fixture f(Options(8, 0));
  f.model->Close();
  auto first = Submit(*f.batcher, Row({0}, 1));
  f.model->WaitEntered(1);
  auto a = Submit(*f.batcher, Row({1, 2}, 2));
  auto b = Submit(*f.batcher, Row({3, 4, 5}, 3));
  auto c = Submit(*f.batcher, Row({6, 7}, 2));
  f.model->Open();
  EXPECT_EQ(Floats(a.get().outputs[0]), (std::vector<float>{2, 4}));
  EXPECT_EQ(Floats(b.get().outputs[0]), (std::vector<float>{6, 8, 10}));
  EXPECT_EQ(Floats(c.get().outputs[0]), (std::vector<float>{12, 14}));
  EXPECT_EQ(f.model->batch_sizes(), (std::vector<int64_t>{1, 1, 1, 1}));
}

TEST(BatcherTest, ModelErrorReachesEveryQueryInTheBatch) {
  Fixture f(Options(8, 0));
  f.model->fail_ = true;
  auto r = Submit(*f.batcher, Row({1}, 1)).get();
  EXPECT_EQ(r.status.code(), StatusCode::kInternal);
  EXPECT_EQ(r.status.message(), "model exploded");
}

TEST(BatcherTest, StopFinishesQueuedWorkThenRefuses) {
  BatcherOptions o = Options(1, 0);
  o.max_queue_size = 3;  // full below: a probe is refused without being queued
  Fixture f(o);
  f.model->Close();
  std::vector<std::future<Result>> r;
  r.push_back(Submit(*f.batcher, Row({0}, 1)));
  f.model->WaitEntered(1);
  for (int i = 1; i < 4; ++i) r.push_back(Submit(*f.batcher, Row({float(i)}, 1)));
  std::thread stopper([&] { f.batcher->Stop(); });
  // Stop has begun once a probe is refused as UNAVAILABLE rather than for the
  // full queue; the three queued queries are still waiting for the model.
  ASSERT_TRUE(Eventually([&] {
    Status s;
    Submit(*f.batcher, Row({8}, 1), &s);
    return s.code() == StatusCode::kUnavailable;
  }));
  EXPECT_EQ(f.batcher->queue_length(), 3);
  f.model->Open();
  stopper.join();
  for (auto& x : r) EXPECT_TRUE(x.get().status.ok());
  Status s;
  Submit(*f.batcher, Row({9}, 1), &s);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
}

TEST(BatcherTest, ConcurrentClientsAllGetTheirOwnAnswers) {
  // The manual clock stands still, so the delay never expires and every
  // batch waits until all clients, each with one query in flight, are in it.
  constexpr int kClients = 8, kQueries = 300;
  Fixture f(Options(kClients, 100));
  std::atomic<int> wrong{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      for (int q = 0; q < kQueries; ++q) {
        const float v = static_cast<float>(c * 10000 + q);
        auto r = Submit(*f.batcher, Row({v, -v}, 2)).get();
        if (!r.status.ok() || Floats(r.outputs[0]) != std::vector<float>{2 * v, -2 * v}) ++wrong;
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(wrong.load(), 0);
  int64_t total = 0, biggest = 0;
  for (int64_t b : f.model->batch_sizes()) {
    total += b;
    biggest = std::max(biggest, b);
  }
  EXPECT_EQ(total, kClients * kQueries);
  EXPECT_EQ(biggest, kClients);
}

TEST(BatcherTest, NonBatchingModelRunsQueriesAlone) {
  Fixture f(Options(0, 0));
  Tensor t{"x", DataType::kFp32, {3}, std::string(12, '\0')};
  auto r = Submit(*f.batcher, t).get();
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.outputs[0].shape, (Shape{3}));
}

// Deadlines. Deadlines are points on the fixture's manual clock; where a
// deadline passes or slack runs out, the test moves the clock.

BatcherOptions WithSeed(BatcherOptions o, double us_per_sample) {
  o.predict_compute_us = [us_per_sample](int64_t n) { return us_per_sample * double(n); };
  return o;
}

TEST(BatcherDeadlineTest, DeadlineTheQueueCannotMeetIsRejectedAtOnce) {
  Fixture f(WithSeed(Options(1, 0), 100'000));  // 100 ms a sample
  f.model->Close();
  auto executing = Submit(*f.batcher, Row({1}, 1));
  f.model->WaitEntered(1);
  std::vector<std::future<Result>> queued;
  for (int i = 0; i < 3; ++i) queued.push_back(Submit(*f.batcher, Row({2}, 1)));
  // Three queued batches and its own take at least 400 ms.
  Status s;
  auto rejected = Submit(*f.batcher, Row({3}, 1), &s, f.DueIn(250ms));
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("cannot meet latency SLO on test:1#0: predicted "), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("(queue 3 queries)"), std::string::npos) << s.message();
  auto roomy = Submit(*f.batcher, Row({4}, 1), &s, f.DueIn(60s));
  EXPECT_TRUE(s.ok()) << s.ToString();
  auto past = Submit(*f.batcher, Row({5}, 1), &s, f.DueIn(-1ms));
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(f.batcher->rejected_slo(), 2);
  f.model->Open();
  EXPECT_TRUE(roomy.get().status.ok());
  EXPECT_EQ(f.model->batch_sizes().size(), 5u);  // the rejected two never ran
}

TEST(BatcherDeadlineTest, BestEffortQueryIsAdmittedAndRunsWhateverItsDeadline) {
  Fixture f(WithSeed(Options(1, 0), 100'000));
  f.model->Close();
  auto executing = Submit(*f.batcher, Row({1}, 1));
  f.model->WaitEntered(1);
  std::vector<std::future<Result>> queued;
  for (int i = 0; i < 3; ++i) queued.push_back(Submit(*f.batcher, Row({2}, 1)));
  Status s;
  auto best = Submit(*f.batcher, Row({3}, 1), &s, f.DueIn(1ms, /*best_effort=*/true));
  EXPECT_TRUE(s.ok()) << s.ToString();
  f.clock.Advance(20ms);  // its deadline passes while it waits
  f.model->Open();
  auto r = best.get();
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(Floats(r.outputs[0]), (std::vector<float>{6}));
  EXPECT_EQ(f.batcher->rejected_slo(), 0);
  EXPECT_EQ(f.batcher->dropped_expired(), 0);
}

TEST(BatcherDeadlineTest, ExpiredQueryIsDroppedAndNeverExecuted) {
  Fixture f(WithSeed(Options(8, 0), 1'000));
  f.model->Close();
  auto executing = Submit(*f.batcher, Row({1}, 1));
  f.model->WaitEntered(1);
  Status s;
  auto late = Submit(*f.batcher, Row({7}, 1), &s, f.DueIn(300ms));
  ASSERT_TRUE(s.ok()) << s.ToString();
  auto other = Submit(*f.batcher, Row({8}, 1));
  f.clock.Advance(600ms);
  f.model->Open();
  auto r = late.get();
  EXPECT_EQ(r.status.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(r.status.message().find("dropped before compute: deadline passed "), std::string::npos)
      << r.status.message();
  EXPECT_NE(r.status.message().find("ago while queued on test:1#0"), std::string::npos);
  EXPECT_EQ(r.stats.compute_ns, 0);
  auto o = other.get();
  ASSERT_TRUE(o.status.ok());
  EXPECT_EQ(Floats(o.outputs[0]), (std::vector<float>{16}));
  EXPECT_EQ(o.stats.batch_size, 1);
  EXPECT_EQ(f.model->batch_sizes(), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(f.batcher->dropped_expired(), 1);
}

TEST(BatcherDeadlineTest, QueryThatCannotFinishEvenAloneIsDropped) {
  Fixture f(WithSeed(Options(8, 0), 1'000'000));  // 1 s a sample
  f.model->Close();
  auto executing = Submit(*f.batcher, Row({1}, 1));
  f.model->WaitEntered(1);
  f.clock.Advance(1100ms);  // the executing batch overruns its prediction
  Status s;
  auto tight = Submit(*f.batcher, Row({7}, 1), &s, f.DueIn(3s));  // predicted 1 s: admitted
  ASSERT_TRUE(s.ok()) << s.ToString();
  f.clock.Advance(2500ms);  // now 1 s of compute would end after the deadline
  f.model->Open();
  auto r = tight.get();
  EXPECT_EQ(r.status.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(r.status.message().find("dropped before compute: "), std::string::npos)
      << r.status.message();
  EXPECT_EQ(f.model->batch_sizes(), (std::vector<int64_t>{1}));
  EXPECT_EQ(f.batcher->dropped_expired(), 1);
}

TEST(BatcherDeadlineTest, LateBatchCutsTheCapByATenthOnTimeOnesRaiseItByOne) {
  Fixture f(WithSeed(Options(20, 0), 1'000));
  EXPECT_EQ(f.batcher->batch_cap(), 20);
  f.model->compute_us = 1'200'000;
  auto late = Submit(*f.batcher, Row({1}, 1), nullptr, f.DueIn(400ms)).get();
  EXPECT_TRUE(late.status.ok()) << late.status.ToString();  // computed, if late
  EXPECT_EQ(f.batcher->batch_cap(), 18);
  f.model->compute_us = 0;
  EXPECT_TRUE(Submit(*f.batcher, Row({2}, 1), nullptr, f.DueIn(60s)).get().status.ok());
  EXPECT_EQ(f.batcher->batch_cap(), 19);
  EXPECT_TRUE(Submit(*f.batcher, Row({3}, 1)).get().status.ok());  // no deadline: no change
  EXPECT_EQ(f.batcher->batch_cap(), 19);
  EXPECT_TRUE(Submit(*f.batcher, Row({4}, 1), nullptr, f.DueIn(60s)).get().status.ok());
  EXPECT_TRUE(Submit(*f.batcher, Row({5}, 1), nullptr, f.DueIn(60s)).get().status.ok());
  EXPECT_EQ(f.batcher->batch_cap(), 20);  // never above max_batch_size
  EXPECT_EQ(f.batcher->load().batch_cap, 20);
}

TEST(BatcherDeadlineTest, BatchesAreCutAtTheCap) {
  Fixture f(WithSeed(Options(20, 0), 1'000));
  f.model->compute_us = 1'200'000;
  EXPECT_TRUE(Submit(*f.batcher, Row({1}, 1), nullptr, f.DueIn(400ms)).get().status.ok());
  f.model->compute_us = 0;
  ASSERT_EQ(f.batcher->batch_cap(), 18);
  f.model->Close();
  auto executing = Submit(*f.batcher, Row({1}, 1));
  f.model->WaitEntered(2);
  std::vector<std::future<Result>> queued;
  for (int i = 0; i < 20; ++i) queued.push_back(Submit(*f.batcher, Row({float(i)}, 1)));
  f.model->Open();
  for (auto& q : queued) EXPECT_TRUE(q.get().status.ok());
  EXPECT_EQ(f.model->batch_sizes(), (std::vector<int64_t>{1, 1, 18, 2}));
}

TEST(BatcherDeadlineTest, SlackInTheDeadlineIsSpentGatheringABatch) {
  // A full batch of 8 is predicted at 800 ms (margin 40 ms), so queries due
  // in 2 s wait for company until 1.16 s (not the minute of the delay).
  Fixture f(WithSeed(Options(8, 60'000'000), 100'000));
  const auto deadline = f.clock.Now() + 2s;
  std::vector<std::future<Result>> r;
  for (int i = 0; i < 3; ++i)
    r.push_back(Submit(*f.batcher, Row({float(i)}, 1), nullptr, {deadline}));
  f.clock.Advance(1100ms);
  ASSERT_TRUE(WorkerSawTheTime(f.clock));
  for (auto& x : r) EXPECT_FALSE(IsReady(x));  // held back for company
  f.clock.Advance(100ms);
  for (auto& x : r) ASSERT_EQ(x.wait_for(kPatience), std::future_status::ready);
  for (auto& x : r) {
    auto result = x.get();
    EXPECT_TRUE(result.status.ok()) << result.status.ToString();
    EXPECT_EQ(result.stats.batch_size, 3);
    EXPECT_GE(result.stats.queue_ns, 1'100'000'000);
  }
  EXPECT_EQ(f.model->batch_sizes(), (std::vector<int64_t>{3}));
}

TEST(BatcherDeadlineTest, TightDeadlineCutsTheBatchLongBeforeTheQueueDelay) {
  // A full batch of 8 is predicted at 800 ms (margin 40 ms), so a query due
  // in 1 s may wait for company only 160 ms, then runs alone.
  Fixture f(WithSeed(Options(8, 60'000'000), 100'000));
  auto r = Submit(*f.batcher, Row({1}, 1), nullptr, f.DueIn(1s));
  f.clock.Advance(150ms);
  ASSERT_TRUE(WorkerSawTheTime(f.clock));
  EXPECT_FALSE(IsReady(r));
  f.clock.Advance(20ms);
  ASSERT_EQ(r.wait_for(kPatience), std::future_status::ready);
  EXPECT_TRUE(r.get().status.ok());
  EXPECT_EQ(f.model->batch_sizes(), (std::vector<int64_t>{1}));
}

TEST(BatcherDeadlineTest, ATightDeadlineCutsTheBatchItRidesInShort) {
  // 100 ms a sample. Behind a running query wait three without a deadline,
  // one due in 550 ms (admitted: the queue ends at 500 ms), and three more
  // without. When the running one ends, at 100 ms, a batch of all seven
  // would end at 800 ms: the batch ends where the tight one still makes it
  // (4 samples, ending at 500 ms) and the rest run after it.
  Fixture f(WithSeed(Options(8, 0), 100'000));
  f.model->compute_us = 100'000;
  f.model->Close();
  auto running = Submit(*f.batcher, Row({0}, 1));
  f.model->WaitEntered(1);
  std::vector<std::future<Result>> r;
  for (int i = 1; i <= 3; ++i) r.push_back(Submit(*f.batcher, Row({float(i)}, 1)));
  Status admitted;
  r.push_back(Submit(*f.batcher, Row({4}, 1), &admitted, f.DueIn(550ms)));
  for (int i = 5; i <= 7; ++i) r.push_back(Submit(*f.batcher, Row({float(i)}, 1)));
  f.model->Open();
  EXPECT_TRUE(admitted.ok()) << admitted.ToString();
  EXPECT_TRUE(running.get().status.ok());
  for (auto& x : r) EXPECT_TRUE(x.get().status.ok());
  EXPECT_EQ(f.model->batch_sizes(), (std::vector<int64_t>{1, 4, 3}));
}

TEST(BatcherDeadlineTest, QueriesWithoutDeadlineIgnoreThePrediction) {
  Fixture f(WithSeed(Options(4, 0), 3.6e9));  // an hour a sample
  f.model->Close();
  auto executing = Submit(*f.batcher, Row({0}, 1));
  f.model->WaitEntered(1);
  std::vector<std::future<Result>> queued;
  Status s;
  for (int i = 0; i < 6; ++i) {
    queued.push_back(Submit(*f.batcher, Row({float(i)}, 1), &s));
    EXPECT_TRUE(s.ok());
  }
  const Batcher::Load load = f.batcher->load();
  EXPECT_EQ(load.batch_cap, 4);
  EXPECT_GT(load.predicted_backlog_us, 3 * 3.6e9);  // batches of 4 and 2, and most of the first
  f.model->Open();
  for (auto& q : queued) EXPECT_TRUE(q.get().status.ok());
  EXPECT_EQ(f.model->batch_sizes(), (std::vector<int64_t>{1, 4, 2}));
  EXPECT_EQ(f.batcher->batch_cap(), 4);
  EXPECT_EQ(f.batcher->rejected_slo(), 0);
  EXPECT_EQ(f.batcher->dropped_expired(), 0);
}

TEST(BatcherDeadlineTest, UnknownPredictionAdmitsEveryDeadlineStillDropsExpired) {
  Fixture f(Options(1, 0));
  EXPECT_EQ(f.batcher->load().predicted_backlog_us, -1);
  f.model->Close();
  auto executing = Submit(*f.batcher, Row({0}, 1));
  f.model->WaitEntered(1);
  std::vector<std::future<Result>> queued;
  for (int i = 0; i < 5; ++i) queued.push_back(Submit(*f.batcher, Row({1}, 1)));
  Status s;
  auto due = Submit(*f.batcher, Row({2}, 1), &s, f.DueIn(100ms));
  EXPECT_TRUE(s.ok()) << s.ToString();
  f.clock.Advance(300ms);
  f.model->Open();
  EXPECT_EQ(due.get().status.code(), StatusCode::kDeadlineExceeded);
  for (auto& q : queued) EXPECT_TRUE(q.get().status.ok());
  EXPECT_EQ(f.model->batch_sizes().size(), 6u);
}

TEST(BatcherDeadlineTest, PreferredSizeBoundsTheCap) {
  BatcherOptions o = Options(16, 0);
  o.preferred_batch_sizes = {2, 4};
  Fixture f(o);
  EXPECT_EQ(f.batcher->batch_cap(), 4);
}

TEST(SplitBatchTest, RejectsOutputWithWrongBatchDim) {
  Tensor t{"y", DataType::kFp32, {3, 1}, std::string(12, '\0')};
  std::vector<Tensor> pieces;
  Status s = SplitBatch(t, {1, 1}, &pieces);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_NE(s.message().find("held 2 samples"), std::string::npos);
}

// Issue #43: a new instance runs its first batches before it takes
// queries, on the thread that serves them; they are no queries' batches, so
// the observer (the batch metrics) does not count them, but the predictor
// learns them.
TEST(BatcherTest, WarmUpRunsBatchesTheObserverDoesNotSeeAndThePredictorLearns) {
  ManualClock clock;
  BatcherOptions o;
  o.clock = &clock;
  o.max_batch_size = 4;
  auto m = std::make_unique<DoublingModel>(&clock);
  DoublingModel* model = m.get();
  model->compute_us = 50;
  std::atomic<int> observed{0};
  Batcher b(o, std::move(m), [&observed](int64_t, int64_t, bool) { ++observed; });
  const std::optional<double> settled = b.WarmUp({Row({1, 2}, 2)}, 6);
  ASSERT_TRUE(settled.has_value());
  EXPECT_DOUBLE_EQ(*settled, 50.0);
  EXPECT_EQ(model->batch_sizes(), std::vector<int64_t>(6, 1));
  EXPECT_EQ(observed.load(), 0);
  ASSERT_TRUE(b.PredictComputeUs(1).has_value());
  EXPECT_DOUBLE_EQ(*b.PredictComputeUs(1), 50.0);
  // A query's batch is observed as before.
  Result r = Submit(b, Row({1, 2}, 2)).get();
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(observed.load(), 1);
}

// Notes when each of its runs started, on the real clock.
class StampingModel : public ExecutableModel {
 public:
  Status Execute(const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs) override {
    std::lock_guard<std::mutex> lock(mu_);
    starts_.push_back(std::chrono::steady_clock::now());
    *outputs = inputs;
    return Status::Ok();
  }
  std::vector<std::chrono::steady_clock::time_point> starts() const {
    std::lock_guard<std::mutex> lock(mu_);
    return starts_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::chrono::steady_clock::time_point> starts_;
};

// Issue #43: the warm-up's runs came back to back, each on caches the one
// before had just warmed, and measured a fraction of what a served batch
// costs (3 us beyond the profile for the digits logistic regression,
// against about 35 us served), so the first queries after a load were
// predicted far too low. They now come a pause apart, as a lone client's
// queries do.
TEST(BatcherTest, WarmUpRunsComeAPauseApartAsALoneClientsQueriesDo) {
  BatcherOptions o;
  o.max_batch_size = 4;
  auto m = std::make_unique<StampingModel>();
  StampingModel* model = m.get();
  Batcher b(o, std::move(m));
  ASSERT_TRUE(b.WarmUp({Row({1, 2}, 2)}, 4).has_value());
  const auto starts = model->starts();
  ASSERT_EQ(starts.size(), 4u);
  for (size_t i = 1; i < starts.size(); ++i) {
    EXPECT_GE(starts[i] - starts[i - 1], Batcher::kWarmUpPause) << "runs " << i - 1 << " and " << i;
  }
}

}  // namespace
}  // namespace somm
