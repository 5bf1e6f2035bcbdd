#include "batching/batcher.h"

#include <pthread.h>

#include <algorithm>
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
    : options_(std::move(options)), model_(std::move(model)), observer_(std::move(observer)) {
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
    queue_.push_back(Queued{std::move(task), samples, SteadyClock::now()});
    queued_samples_ += samples;
  }
  cv_.notify_one();
  return Status::Ok();
}

void Batcher::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

int64_t Batcher::queue_length() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(queue_.size());
}

Batcher::Load Batcher::load() const {
  std::lock_guard<std::mutex> lock(mu_);
  return Load{static_cast<int64_t>(queue_.size()), queued_samples_, executing_, executing_since_,
              executing_samples_};
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
  // The longest prefix of compatible tasks that fits in max_batch_size.
  size_t count = 0;
  int64_t samples = 0;
  bool blocked = false;  // the prefix ends before the queue does
  for (const Queued& q : queue_) {
    if (samples + q.samples > options_.max_batch_size || !SameSampleShape(head.task, q.task)) {
      blocked = true;
      break;
    }
    samples += q.samples;
    ++count;
  }
  const auto& preferred = options_.preferred_batch_sizes;
  if (!preferred.empty() && samples >= preferred.back()) {
    // Cut at the largest preferred size the prefix can fill exactly or pass.
    int64_t cut = 0;
    size_t n = 0;
    for (const Queued& q : queue_) {
      if (cut + q.samples > preferred.back()) break;
      cut += q.samples;
      ++n;
    }
    *ready = true;
    return std::max<size_t>(n, 1);
  }
  const auto deadline = head.enqueued + std::chrono::microseconds(options_.max_queue_delay_us);
  *ready = blocked || samples >= options_.max_batch_size || stopping_ ||
           options_.max_queue_delay_us == 0 || SteadyClock::now() >= deadline;
  *wake_at = deadline;
  return count;
}

void Batcher::Run() {
  pthread_setname_np(pthread_self(), options_.name.substr(0, 15).c_str());
  model_->BindToThread();
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) break;  // stopping and drained
    bool ready = false;
    SteadyClock::time_point wake_at;
    const size_t n = TasksForNextBatch(&ready, &wake_at);
    if (!ready) {
      cv_.wait_until(lock, wake_at);
      continue;  // re-evaluate: more queries may have come, or the delay expired
    }
    std::vector<Queued> batch;
    batch.reserve(n);
    int64_t samples = 0;
    for (size_t i = 0; i < n; ++i) {
      samples += queue_.front().samples;
      batch.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    queued_samples_ -= samples;
    executing_ = true;
    executing_since_ = SteadyClock::now();
    executing_samples_ = samples;
    lock.unlock();
    Execute(std::move(batch));
    lock.lock();
    executing_ = false;
  }
}

void Batcher::Execute(std::vector<Queued> batch) {
  const auto start = SteadyClock::now();
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
  std::vector<Tensor> outputs;
  Status status = model_->Execute(inputs, &outputs);
  const auto end = SteadyClock::now();
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
  if (observer_) observer_(total, compute_ns, status.ok());
  for (size_t i = 0; i < batch.size(); ++i) {
    BatchStats stats{ElapsedNs(batch[i].enqueued, start), compute_ns, total};
    batch[i].task.done(status, status.ok() ? std::move(per_task[i]) : std::vector<Tensor>{},
                       stats);
  }
}

}  // namespace somm
