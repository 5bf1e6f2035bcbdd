#include "batching/batcher.h"

#include <pthread.h>

#include <algorithm>
#include <cstdio>
#include <future>
#include <utility>

namespace somm {
namespace {

int64_t SamplesOf(const BatchTask& task, int64_t max_batch_size) {
  if (max_batch_size == 0 || task.inputs.empty() || task.inputs[0].shape.empty()) return 1;
  return task.inputs[0].shape[0];
}

// Two queries can share a batch when every input agrees on datatype and on
// all dims but the first.
bool SameSampleShape(const BatchTask& a, const BatchTask& b) {
  if (a.inputs.size() != b.inputs.size()) return false;
  for (size_t i = 0; i < a.inputs.size(); ++i) {
    const Tensor& x = a.inputs[i];
    const Tensor& y = b.inputs[i];
    if (x.datatype != y.datatype || x.shape.size() != y.shape.size()) return false;
    if (!std::equal(x.shape.begin() + 1, x.shape.end(), y.shape.begin() + 1)) return false;
  }
  return true;
}

int64_t ElapsedNs(SteadyClock::time_point from, SteadyClock::time_point to) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(to - from).count();
}

bool HasSlo(const BatchTask& task) {
  return !task.best_effort && task.deadline != SteadyClock::time_point::max();
}

SteadyClock::duration Micros(double us) {
  return std::chrono::duration_cast<SteadyClock::duration>(
      std::chrono::duration<double, std::micro>(us));
}

// "4.2 ms": milliseconds for people, from microseconds or a duration.
std::string Ms(double us) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f ms", us / 1000.0);
  return text;
}
std::string Ms(SteadyClock::duration d) {
  return Ms(std::chrono::duration<double, std::micro>(d).count());
}

// The largest batch the cutting rules can form: a preferred size below
// max_batch_size is where batches are cut anyway.
int64_t CapCeiling(const BatcherOptions& o) {
  if (o.max_batch_size <= 0) return 1;
  if (o.preferred_batch_sizes.empty()) return o.max_batch_size;
  return std::clamp<int64_t>(o.preferred_batch_sizes.back(), 1, o.max_batch_size);
}

}  // namespace

Tensor ConcatenateBatch(const std::vector<const Tensor*>& parts) {
  Tensor out;
  out.name = parts[0]->name;
  out.datatype = parts[0]->datatype;
  out.shape = parts[0]->shape;
  size_t bytes = 0;
  int64_t rows = 0;
  for (const Tensor* p : parts) {
    bytes += p->data.size();
    rows += p->shape[0];
  }
  out.shape[0] = rows;
  out.data.reserve(bytes);
  for (const Tensor* p : parts) out.data.append(p->data);
  return out;
}

Status SplitBatch(Tensor batched, const std::vector<int64_t>& sizes, std::vector<Tensor>* pieces) {
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  if (batched.shape.empty() || batched.shape[0] != total) {
    return Internal("output '" + batched.name + "' has shape " + ShapeToString(batched.shape) +
                    " but the batch held " + std::to_string(total) + " samples");
  }
  if (sizes.size() == 1) {
    pieces->push_back(std::move(batched));
    return Status::Ok();
  }
  if (batched.datatype == DataType::kBytes) {
    return Unimplemented("output '" + batched.name + "': BYTES outputs cannot be batched");
  }
  const size_t row_bytes = total == 0 ? 0 : batched.data.size() / static_cast<size_t>(total);
  size_t offset = 0;
  for (int64_t s : sizes) {
    Tensor piece;
    piece.name = batched.name;
    piece.datatype = batched.datatype;
    piece.shape = batched.shape;
    piece.shape[0] = s;
    piece.data.assign(batched.data, offset, row_bytes * static_cast<size_t>(s));
    offset += row_bytes * static_cast<size_t>(s);
    pieces->push_back(std::move(piece));
  }
  return Status::Ok();
}

Batcher::Batcher(BatcherOptions options, std::unique_ptr<ExecutableModel> model,
                 BatchObserver observer)
    : options_(std::move(options)),
      clock_(options_.clock ? *options_.clock : Clock::Real()),
      model_(std::move(model)),
      observer_(std::move(observer)),
      predictor_(options_.max_batch_size, options_.predict_compute_us),
      cap_(CapCeiling(options_)) {
  worker_ = std::thread([this] { Run(); });
}

Batcher::~Batcher() { Stop(); }

Status Batcher::Enqueue(BatchTask task) {
  const int64_t samples = SamplesOf(task, options_.max_batch_size);
  if (options_.max_batch_size > 0 && (samples < 1 || samples > options_.max_batch_size)) {
    return InvalidArgument(options_.name + ": batch of " + std::to_string(samples) +
                           " samples is outside 1..max_batch_size (" +
                           std::to_string(options_.max_batch_size) + ")");
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return Unavailable(options_.name + ": instance is shutting down");
    if (static_cast<int64_t>(queue_.size()) >= options_.max_queue_size) {
      return ResourceExhausted(options_.name + ": queue is full (" +
                               std::to_string(options_.max_queue_size) +
                               " queries waiting); retry later");
    }
    const auto now = clock_.Now();
    if (HasSlo(task)) {
      SOMM_RETURN_IF_ERROR(AdmitForDeadline(task, samples, now));
      ++slo_queued_;
    }
    queue_.push_back(Queued{std::move(task), samples, now});
    queued_samples_ += samples;
  }
  cv_.notify_one();
  return Status::Ok();
}

bool Batcher::RunInlineIfIdle(BatchTask& task) {
  if (options_.inline_max_compute_us <= 0 || options_.max_queue_delay_us != 0) return false;
  const int64_t samples = SamplesOf(task, options_.max_batch_size);
  if (options_.max_batch_size > 0 && (samples < 1 || samples > options_.max_batch_size)) {
    return false;  // Enqueue says why
  }
  std::vector<Queued> batch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto now = clock_.Now();
    // Only at low load: under load the caller's thread is needed to take in
    // the next queries, and running each one inline as it comes would keep
    // the queue empty and every batch at one query. Load is the mean gap
    // between arrivals; one gap alone would let a query in now and then
    // under load, and keep one out after a single close pair.
    const double cap_us = 4 * options_.inline_min_gap_us;
    if (mean_arrival_gap_us_ < 0) {
      mean_arrival_gap_us_ = cap_us;  // the first arrival: as if long idle
    } else {
      const double gap_us =
          std::min(cap_us, std::chrono::duration<double, std::micro>(now - last_arrival_).count());
      mean_arrival_gap_us_ += (gap_us - mean_arrival_gap_us_) / 8;
    }
    last_arrival_ = now;
    if (stopping_ || executing_ || !queue_.empty()) return false;
    if (mean_arrival_gap_us_ < options_.inline_min_gap_us) return false;
    const std::optional<double> predicted = predictor_.PredictUs(samples);
    if (!predicted || *predicted > options_.inline_max_compute_us) return false;
    // A deadline it cannot meet: Enqueue rejects it, with the reason.
    if (HasSlo(task) && now + Micros(*predicted) > task.deadline) return false;
    executing_ = true;
    inline_running_ = true;
    executing_since_ = now;
    executing_samples_ = samples;
    batch.push_back(Queued{std::move(task), samples, now});
  }
  model_->BindToThread();
  Execute(std::move(batch));
  bool came_meanwhile = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    executing_ = false;
    inline_running_ = false;
    came_meanwhile = !queue_.empty() || stopping_;
  }
  // Queries that came meanwhile are the batcher thread's; with none, waking
  // it would cost a context switch per query for nothing.
  if (came_meanwhile) cv_.notify_one();
  return true;
}

void Batcher::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

Status Batcher::AdmitForDeadline(const BatchTask& task, int64_t samples,
                                 SteadyClock::time_point now) {
  if (task.deadline <= now) {
    ++rejected_slo_;
    return DeadlineExceeded(options_.name + ": deadline passed " + Ms(now - task.deadline) +
                            " before the query was queued");
  }
  const std::optional<double> predicted = PredictBacklogUs(queued_samples_ + samples, now);
  if (!predicted || now + Micros(*predicted) <= task.deadline) return Status::Ok();
  ++rejected_slo_;
  return ResourceExhausted("cannot meet latency SLO on " + options_.name + ": predicted " +
                           Ms(*predicted) + ", deadline in " + Ms(task.deadline - now) +
                           " (queue " + std::to_string(queue_.size()) + " queries)");
}

std::optional<double> Batcher::PredictBacklogUs(int64_t samples,
                                                SteadyClock::time_point now) const {
  const std::optional<double> queued = PredictQueueUs(predictor_, samples, cap_.cap());
  if (!queued || !executing_) return queued;
  // Known here because the predictor knows something. A batch running past
  // its prediction is taken to end now.
  const double batch_us = predictor_.PredictUs(executing_samples_).value_or(0.0);
  const auto left = executing_since_ + Micros(batch_us) - now;
  return *queued + std::max(0.0, std::chrono::duration<double, std::micro>(left).count());
}

std::vector<Batcher::Expired> Batcher::TakeExpired(SteadyClock::time_point now) {
  std::vector<Expired> expired;
  if (slo_queued_ == 0) return expired;
  auto keep = queue_.begin();
  for (auto it = queue_.begin(); it != queue_.end(); ++it) {
    std::string why;
    if (HasSlo(it->task)) {
      const std::optional<double> alone = predictor_.PredictUs(it->samples);
      if (now >= it->task.deadline) {
        why = "deadline passed " + Ms(now - it->task.deadline) + " ago while queued on " +
              options_.name;
      } else if (alone && now + Micros(*alone) > it->task.deadline) {
        why = "deadline in " + Ms(it->task.deadline - now) + " but a batch of " +
              std::to_string(it->samples) + " is predicted to take " + Ms(*alone) + " on " +
              options_.name;
      }
    }
    if (!why.empty()) {
      expired.push_back(
          Expired{std::move(*it), DeadlineExceeded("dropped before compute: " + why)});
    } else {
      if (keep != it) *keep = std::move(*it);
      ++keep;
    }
  }
  queue_.erase(keep, queue_.end());
  for (const Expired& e : expired) queued_samples_ -= e.queued.samples;
  slo_queued_ -= static_cast<int64_t>(expired.size());
  dropped_expired_ += static_cast<int64_t>(expired.size());
  return expired;
}

void Batcher::FailExpired(std::vector<Expired> expired) {
  const auto now = clock_.Now();
  for (Expired& e : expired) {
    BatchStats stats{ElapsedNs(e.queued.enqueued, now), 0, 0};
    e.queued.task.done(std::move(e.why), {}, stats);
  }
}

int64_t Batcher::queue_length() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(queue_.size());
}

Batcher::Load Batcher::load() const {
  std::lock_guard<std::mutex> lock(mu_);
  const std::optional<double> backlog = PredictBacklogUs(queued_samples_, clock_.Now());
  return Load{static_cast<int64_t>(queue_.size()),
              queued_samples_,
              executing_,
              executing_since_,
              executing_samples_,
              cap_.cap(),
              backlog ? *backlog : -1.0};
}

int64_t Batcher::batch_cap() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cap_.cap();
}

int64_t Batcher::rejected_slo() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rejected_slo_;
}

std::optional<double> Batcher::PredictComputeUs(int64_t batch) const {
  std::lock_guard<std::mutex> lock(mu_);
  return predictor_.PredictUs(batch);
}

std::optional<double> Batcher::WarmUp(const std::vector<Tensor>& inputs, int runs,
                                      std::optional<std::chrono::milliseconds> budget) {
  if (inputs.empty()) return std::nullopt;
  warming_.store(true);
  std::vector<double> settled_us;
  // The runs settle costs of a few milliseconds (a thread's first batches);
  // a model whose batches take longer than the budget has nothing to settle
  // that matters beside them, and eight of its batches would hold the load
  // (a test model sleeping 1.5 s a batch took 12 s to load).
  const auto start = SteadyClock::now();
  for (int i = 0; i < runs; ++i) {
    // A pause before each run but the first, so that the batcher's thread
    // goes back to sleep and the core to other work, as between a lone
    // client's queries: back to back, each run finds the caches as the one
    // before left them and measures a fraction of what a served batch
    // costs (3 us beyond the profile for the digits logistic regression,
    // against 35-60 us served; docs/selection.md).
    if (i > 0) std::this_thread::sleep_for(kWarmUpPause);
    // On the batcher's own thread, through Execute, as a query's batch runs:
    // libtorch keeps per-thread state (the OpenMP team, the executor's
    // first runs) that a warm-up on the loading thread leaves cold here.
    auto ran = std::make_shared<std::promise<std::optional<double>>>();
    BatchTask task;
    task.inputs = inputs;  // a fresh copy each run, as a query brings its own
    task.done = [ran](Status s, std::vector<Tensor>, const BatchStats& stats) {
      ran->set_value(s.ok() ? std::optional<double>(static_cast<double>(stats.compute_ns) / 1000.0)
                            : std::nullopt);
    };
    std::future<std::optional<double>> us = ran->get_future();
    if (!Enqueue(std::move(task)).ok()) break;
    const std::optional<double> got = us.get();
    const bool over_budget = budget && SteadyClock::now() - start >= *budget;
    if (got && (2 * i >= runs || over_budget)) settled_us.push_back(*got);
    if (over_budget && !settled_us.empty()) break;
  }
  warming_.store(false);
  if (settled_us.empty()) return std::nullopt;
  std::sort(settled_us.begin(), settled_us.end());
  return settled_us[settled_us.size() / 2];
}

int64_t Batcher::dropped_expired() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_expired_;
}

bool Batcher::busy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return executing_ || !queue_.empty();
}

size_t Batcher::TasksForNextBatch(bool* ready, SteadyClock::time_point* wake_at) const {
  const Queued& head = queue_.front();
  if (options_.max_batch_size == 0) {
    *ready = true;
    return 1;
  }
  const int64_t cap = cap_.cap();
  const auto now = clock_.Now();
  const NextBatch batch =
      NextBatchOf(predictor_, cap, queue_.begin(), queue_.end(),
                  [&](const Queued& q) -> std::optional<QueuedTaskView> {
                    if (!SameSampleShape(head.task, q.task)) return std::nullopt;
                    QueuedTaskView v{q.samples};
                    if (HasSlo(q.task)) {
                      v.slack_us =
                          std::chrono::duration<double, std::micro>(q.task.deadline - now).count();
                    }
                    return v;
                  });
  const size_t count = batch.tasks;
  const int64_t samples = batch.samples;
  auto tightest = SteadyClock::time_point::max();
  for (size_t i = 0; i < count; ++i) tightest = std::min(tightest, queue_[i].task.deadline);
  *wake_at = head.enqueued + std::chrono::microseconds(options_.max_queue_delay_us);
  if (tightest != SteadyClock::time_point::max()) {
    // Start late enough to gather company, early enough that a full batch
    // still ends by the tightest deadline.
    const double full_us = predictor_.PredictUs(cap).value_or(0.0);
    const double margin_us = std::max(50.0, 0.05 * full_us);
    *wake_at = std::min(*wake_at, tightest - Micros(full_us + margin_us));
  }
  *ready =
      batch.cut || samples >= cap || stopping_ || options_.max_queue_delay_us == 0 || now >= *wake_at;
  return count;
}

void Batcher::Run() {
  pthread_setname_np(pthread_self(), options_.name.substr(0, 15).c_str());
  model_->BindToThread();
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return (stopping_ || !queue_.empty()) && !inline_running_; });
    if (queue_.empty()) break;  // stopping and drained
    std::vector<Expired> expired = TakeExpired(clock_.Now());
    if (!expired.empty()) {
      lock.unlock();  // done callbacks may call back into this batcher
      FailExpired(std::move(expired));
      lock.lock();
      continue;
    }
    bool ready = false;
    SteadyClock::time_point wake_at;
    const size_t n = TasksForNextBatch(&ready, &wake_at);
    if (!ready) {
      clock_.WaitUntil(cv_, lock, wake_at);
      continue;  // re-evaluate: more queries may have come, or the delay expired
    }
    std::vector<Queued> batch;
    batch.reserve(n);
    int64_t samples = 0;
    for (size_t i = 0; i < n; ++i) {
      samples += queue_.front().samples;
      if (HasSlo(queue_.front().task)) --slo_queued_;
      batch.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    queued_samples_ -= samples;
    executing_ = true;
    executing_since_ = clock_.Now();
    executing_samples_ = samples;
    lock.unlock();
    Execute(std::move(batch));
    lock.lock();
    executing_ = false;
  }
}

void Batcher::Execute(std::vector<Queued> batch) {
  const auto start = clock_.Now();
  std::vector<int64_t> sizes;
  int64_t total = 0;
  for (const Queued& q : batch) {
    sizes.push_back(q.samples);
    total += q.samples;
  }
  std::vector<Tensor> inputs;
  if (batch.size() == 1) {
    inputs = std::move(batch[0].task.inputs);
  } else {
    const size_t input_count = batch[0].task.inputs.size();
    for (size_t i = 0; i < input_count; ++i) {
      std::vector<const Tensor*> parts;
      for (const Queued& q : batch) parts.push_back(&q.task.inputs[i]);
      inputs.push_back(ConcatenateBatch(parts));
    }
  }
  const auto assembled = clock_.Now();
  std::vector<Tensor> outputs;
  Status status = model_->Execute(inputs, &outputs);
  const auto end = clock_.Now();
  const int64_t compute_ns = ElapsedNs(start, end);

  // per_task[i] holds the outputs of batch[i].
  std::vector<std::vector<Tensor>> per_task(batch.size());
  if (status.ok() && options_.max_batch_size > 0) {
    for (Tensor& out : outputs) {
      std::vector<Tensor> pieces;
      status = SplitBatch(std::move(out), sizes, &pieces);
      if (!status.ok()) break;
      for (size_t i = 0; i < pieces.size(); ++i) per_task[i].push_back(std::move(pieces[i]));
    }
  } else if (status.ok()) {
    per_task[0] = std::move(outputs);
  }
  const int64_t input_ns = ElapsedNs(start, assembled);
  const int64_t output_ns = ElapsedNs(end, clock_.Now());
  if (status.ok()) LearnFromBatch(batch, total, compute_ns, end);
  if (observer_ && !warming_.load()) observer_(total, compute_ns, status.ok());
  for (size_t i = 0; i < batch.size(); ++i) {
    BatchStats stats{ElapsedNs(batch[i].enqueued, start), compute_ns, total, i == 0, input_ns,
                     output_ns};
    batch[i].task.done(status, status.ok() ? std::move(per_task[i]) : std::vector<Tensor>{}, stats);
  }
}

void Batcher::LearnFromBatch(const std::vector<Queued>& batch, int64_t samples, int64_t compute_ns,
                             SteadyClock::time_point end) {
  bool has_slo = false, on_time = true;
  for (const Queued& q : batch) {
    if (!HasSlo(q.task)) continue;
    has_slo = true;
    on_time = on_time && end <= q.task.deadline;
  }
  std::lock_guard<std::mutex> lock(mu_);
  predictor_.Observe(samples, static_cast<double>(compute_ns) / 1000.0);
  if (has_slo) cap_.OnBatch(on_time);
}

}  // namespace somm
