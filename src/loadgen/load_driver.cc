#include "loadgen/load_driver.h"

#include <chrono>
#include <utility>

namespace somm::loadgen {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void RecordSink::Add(QueryRecord record) {
  std::lock_guard<std::mutex> lock(mu_);
  records_.push_back(std::move(record));
}

std::vector<QueryRecord> RecordSink::Drain() {
  std::vector<QueryRecord> out;
  std::lock_guard<std::mutex> lock(mu_);
  out.swap(records_);
  return out;
}

QueryRecord SendQuery(BenchClient& client, const InferenceRequest& request,
                      std::optional<int64_t> scheduled_ns, std::optional<double> slo_ms) {
  QueryRecord record;
  record.slo_ms = slo_ms;
  record.model = request.model_name;
  record.sent_ns = NowNs();
  record.scheduled_ns = scheduled_ns.value_or(record.sent_ns);
  StatusOr<InferenceResponse> response = client.Infer(request);
  record.done_ns = NowNs();
  record.code = response.status().code();
  if (response.ok()) {
    RecordServerTiming(response->parameters, &record);
  } else {
    record.error_message = response.status().message();
  }
  return record;
}

ClosedLoop::ClosedLoop(ClientFactory* factory, std::vector<const InferenceRequest*> requests,
                       int concurrency, RecordSink* sink)
    : factory_(factory), requests_(std::move(requests)), concurrency_(concurrency), sink_(sink) {}

ClosedLoop::~ClosedLoop() { Stop(); }

Status ClosedLoop::Start() {
  if (requests_.empty()) return InvalidArgument("closed loop has no request to send");
  std::vector<std::unique_ptr<BenchClient>> clients;
  for (int i = 0; i < concurrency_; ++i) {
    SOMM_ASSIGN_OR_RETURN(std::unique_ptr<BenchClient> client, factory_->NewClient());
    clients.push_back(std::move(client));
  }
  stop_ = false;
  for (int i = 0; i < concurrency_; ++i) {
    threads_.emplace_back([this, i, client = std::move(clients[static_cast<size_t>(i)])] {
      size_t next = static_cast<size_t>(i) % requests_.size();
      while (!stop_.load(std::memory_order_relaxed)) {
        sink_->Add(SendQuery(*client, *requests_[next], std::nullopt, std::nullopt));
        next = (next + 1) % requests_.size();
      }
    });
  }
  return Status::Ok();
}

void ClosedLoop::Stop() {
  stop_ = true;
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

OpenLoop::OpenLoop(ClientFactory* factory, ArrivalSource source, int senders, RecordSink* sink)
    : factory_(factory), source_(std::move(source)), senders_(senders), sink_(sink) {}

OpenLoop::~OpenLoop() { Stop(); }

Status OpenLoop::Start() {
  for (int i = 0; i < senders_; ++i) {
    SOMM_ASSIGN_OR_RETURN(std::unique_ptr<BenchClient> client, factory_->NewClient());
    clients_.push_back(std::move(client));
  }
  for (auto& client : clients_) threads_.emplace_back([this, c = client.get()] { Serve(c); });
  origin_ns_ = NowNs();
  dispatcher_ = std::thread([this] { Dispatch(); });
  return Status::Ok();
}

void OpenLoop::Dispatch() {
  while (true) {
    std::optional<PlannedQuery> next = source_();
    if (!next) break;
    std::unique_lock<std::mutex> lock(mu_);
    const auto due = std::chrono::steady_clock::time_point(
        std::chrono::nanoseconds(origin_ns_ + next->offset_ns));
    // Sleeps until the query is due, waking early only to stop.
    if (dispatch_cv_.wait_until(lock, due, [this] { return stop_; })) return;
    ready_.push_back(*next);
    lock.unlock();
    ready_cv_.notify_one();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    exhausted_ = true;
  }
  ready_cv_.notify_all();
}

void OpenLoop::Serve(BenchClient* client) {
  while (true) {
    PlannedQuery query;
    {
      std::unique_lock<std::mutex> lock(mu_);
      ready_cv_.wait(lock, [this] { return stop_ || exhausted_ || !ready_.empty(); });
      if (stop_ || ready_.empty()) return;  // stopped, or exhausted and drained
      query = ready_.front();
      ready_.pop_front();
    }
    sink_->Add(SendQuery(*client, *query.request, origin_ns_ + query.offset_ns, query.slo_ms));
  }
}

void OpenLoop::Join() {
  if (dispatcher_.joinable()) dispatcher_.join();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

void OpenLoop::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    ready_.clear();
  }
  ready_cv_.notify_all();
  dispatch_cv_.notify_all();
  Join();
}

void OpenLoop::WaitUntilDone() { Join(); }

}  // namespace somm::loadgen
