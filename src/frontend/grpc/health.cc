#include "frontend/grpc/health.h"

#include <grpcpp/alarm.h>

#include <algorithm>
#include <utility>

#include "proto/health.grpc.pb.h"

namespace somm::grpc_async {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

struct HealthService::Shared {
  std::vector<std::string> services;
  std::function<bool()> ready;
  const std::atomic<bool>* stopping;
  KeyFirstService* service = nullptr;
  int watch_method = -1;

  bool Known(const std::string& name) const {
    return name.empty() || std::find(services.begin(), services.end(), name) != services.end();
  }
  HealthCheckResponse::ServingStatus StatusOf(const std::string& name) const {
    if (!Known(name)) return HealthCheckResponse::SERVICE_UNKNOWN;
    if (stopping->load(std::memory_order_acquire)) return HealthCheckResponse::NOT_SERVING;
    return ready() ? HealthCheckResponse::SERVING : HealthCheckResponse::NOT_SERVING;
  }
};

namespace {

constexpr const char* kCheckPath = "/grpc.health.v1.Health/Check";
constexpr const char* kWatchPath = "/grpc.health.v1.Health/Watch";

// One Watch: read the request, write the status, then look again every
// kHealthWatchPeriod and write on a change; one write in flight at a time.
class WatchCall final : public Tag {
 public:
  WatchCall(CallQueue* queue, std::shared_ptr<const HealthService::Shared> shared)
      : queue_(queue), shared_(std::move(shared)) {
    // Told when the call is done (the client cancelled or went away), on a
    // tag of its own that outlives this call.
    context_.AsyncNotifyWhenDone(new OneShot([done = done_](bool) { done->store(true); }));
  }
  ~WatchCall() override {
    if (state_ != State::kOffered) queue_->CallEnded();
  }
  void Ask() {
    shared_->service->Ask(shared_->watch_method, &context_, &stream_, queue_->cq(), this);
  }

  void Proceed(bool ok) override {
    switch (state_) {
      case State::kOffered:
        if (!ok) break;  // the server is shutting down
        queue_->CallStarted();
        queue_->Ask<WatchCall>(queue_, shared_);
        state_ = State::kReading;
        if (queue_->OnOpenQueue([this] { stream_.Read(&message_, this); })) return;
        break;
      case State::kReading: {
        if (!ok) return End(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                         "the call carried no request message"));
        const grpc::Status parsed =
            grpc::SerializationTraits<HealthCheckRequest>::Deserialize(&message_, &request_);
        message_.Clear();
        if (!parsed.ok()) {
          return End(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                  "the request message does not parse as HealthCheckRequest"));
        }
        return Write(shared_->StatusOf(request_.service()));
      }
      case State::kWriting:
        if (!ok) break;  // the client went away
        if (shared_->stopping->load(std::memory_order_acquire)) return End(grpc::Status::OK);
        return Wait();
      case State::kWaiting: {
        if (!ok || done_->load()) break;  // the queue is closing, or the client left
        const auto now = shared_->StatusOf(request_.service());
        if (shared_->stopping->load(std::memory_order_acquire)) {
          if (now != last_) return Write(now);  // NOT_SERVING, then the end
          return End(grpc::Status::OK);
        }
        if (now != last_) return Write(now);
        return Wait();
      }
      case State::kEnding:
        break;
    }
    delete this;
  }

 private:
  enum class State { kOffered, kReading, kWriting, kWaiting, kEnding };

  void Write(HealthCheckResponse::ServingStatus status) {
    last_ = status;
    response_.set_status(status);
    state_ = State::kWriting;
    if (!queue_->OnOpenQueue([this] { stream_.Write(response_, this); })) delete this;
  }
  void Wait() {
    state_ = State::kWaiting;
    if (!queue_->OnOpenQueue([this] {
          alarm_.Set(queue_->cq(), std::chrono::system_clock::now() + kHealthWatchPeriod, this);
        })) {
      delete this;
    }
  }
  void End(const grpc::Status& status) {
    state_ = State::kEnding;
    if (!queue_->OnOpenQueue([&] { stream_.Finish(status, this); })) delete this;
  }

  CallQueue* const queue_;
  const std::shared_ptr<const HealthService::Shared> shared_;
  const std::shared_ptr<std::atomic<bool>> done_ = std::make_shared<std::atomic<bool>>(false);
  State state_ = State::kOffered;
  grpc::ServerContext context_;
  grpc::ServerAsyncReaderWriter<HealthCheckResponse, grpc::ByteBuffer> stream_{&context_};
  grpc::ByteBuffer message_;
  HealthCheckRequest request_;
  HealthCheckResponse response_;
  HealthCheckResponse::ServingStatus last_ = HealthCheckResponse::UNKNOWN;
  grpc::Alarm alarm_;
};

}  // namespace

HealthService::HealthService(std::vector<std::string> services, std::function<bool()> ready,
                             const std::atomic<bool>* stopping)
    : shared_(std::make_shared<Shared>()) {
  shared_->services = std::move(services);
  shared_->ready = std::move(ready);
  shared_->stopping = stopping;
}

void HealthService::Declare(CallQueue* queue, KeyFirstService* service, KeyFirstTable& table) {
  queue_ = queue;
  table.Serve<HealthCheckRequest, HealthCheckResponse>(
      queue, service, kCheckPath, /*open*/ std::nullopt,
      [shared = shared_](const GatedContext&, const HealthCheckRequest& request,
                         HealthCheckResponse* response, Answer answer) {
        if (!shared->Known(request.service())) {
          return answer(NotFound("unknown service '" + request.service() + "'"));
        }
        response->set_status(shared->StatusOf(request.service()));
        answer(Status::Ok());
      });
  shared_->service = service;
  shared_->watch_method = service->Add(kWatchPath);
}

void HealthService::StartWatch() {
  queue_->Ask<WatchCall>(queue_, std::shared_ptr<const Shared>(shared_));
}

}  // namespace somm::grpc_async
