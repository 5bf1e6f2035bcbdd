#include "frontend/grpc/stream_infer.h"

#include <grpcpp/alarm.h>

#include <map>
#include <set>
#include <string>
#include <utility>

#include "common/mutex.h"
#include "frontend/grpc/grpc_codec.h"
#include "proto/inference.grpc.pb.h"

namespace somm::grpc_async {

using inference::ModelInferRequest;
using inference::ModelStreamInferResponse;

namespace {

constexpr const char* kStreamPath = "/inference.GRPCInferenceService/ModelStreamInfer";

}  // namespace

class StreamCall;

struct StreamInferService::Shared {
  Options options;
  KeyFirstService* service = nullptr;
  int method = -1;
  Mutex mu;
  bool draining SOMM_GUARDED_BY(mu) = false;
  std::set<StreamCall*> open SOMM_GUARDED_BY(mu);  // admitted streams not yet freed
};

// One stream, from gRPC's offer to its status. The call is the offer's tag;
// each kind of operation in flight on it (a read, a write, the status, the
// drain's alarm) has a tag of its own, since a read and a write may be in
// flight at once. It frees itself once its status has gone and nothing of
// it is in flight.
class StreamCall final : public Tag {
 public:
  StreamCall(CallQueue* queue, std::shared_ptr<StreamInferService::Shared> shared)
      : queue_(queue), shared_(std::move(shared)) {}
  ~StreamCall() override {
    if (registered_) {
      MutexLock lock(&shared_->mu);
      shared_->open.erase(this);
    }
    if (started_) queue_->CallEnded();
  }
  void Ask() {
    shared_->service->Ask(shared_->method, &context_, &stream_, queue_->cq(), this);
  }

  // The offer: a stream has come (or, not ok, the server is shutting down).
  void Proceed(bool ok) override {
    if (!ok) {
      delete this;
      return;
    }
    started_ = true;
    queue_->CallStarted();
    queue_->Ask<StreamCall>(queue_, shared_);
    const StreamInferService::Options& o = shared_->options;
    Status admitted = Status::Ok();
    if (o.gate != nullptr) {
      StatusOr<VerifiedKey> verified = o.gate->BeforeRead(context_, Operation::kInfer, kStreamPath);
      if (verified.ok()) {
        verified_ = std::move(verified).value();
      } else {
        admitted = verified.status();
      }
    }
    if (admitted.ok()) {
      MutexLock lock(&shared_->mu);
      if (shared_->draining) {
        admitted = Unavailable("the server is shutting down");
      } else {
        shared_->open.insert(this);
        registered_ = true;
      }
    }
    bool done;
    {
      MutexLock lock(&mu_);
      if (!admitted.ok()) {
        final_status_ = admitted;  // answered unread
        read_closed_ = true;
      }
      done = PumpLocked();
    }
    if (done) delete this;
  }

  // From StreamInferService::Drain, under its mutex: the drain itself runs
  // as an event of the queue (an alarm due now), where the call may be freed.
  void ScheduleDrain() {
    MutexLock lock(&mu_);
    if (finish_started_ || drain_pending_) return;
    drain_pending_ = queue_->OnOpenQueue(
        [this] { drain_alarm_.Set(queue_->cq(), std::chrono::system_clock::now(), &drain_op_); });
  }

 private:
  // A request read and not yet answered; the answer's place in the stream.
  struct InHand {
    int64_t seq = 0;
    std::string model;
    std::string id;
    Operation op = Operation::kInfer;
    Caller caller;
    bool admitted = false;  // ended with the guard's Done
    InflightLimit::Slot slot;
    ByteBudget::Reservation message_hold;
    ByteBudget::Reservation tensor_hold;
  };

  // A tag that forwards an operation's completion to the call.
  class Op final : public Tag {
   public:
    Op(StreamCall* call, void (StreamCall::*on)(bool)) : call_(call), on_(on) {}
    void Proceed(bool ok) override { (call_->*on_)(ok); }

   private:
    StreamCall* const call_;
    void (StreamCall::*const on_)(bool);
  };

  void OnRead(bool ok) {
    std::shared_ptr<InHand> request;
    grpc::ByteBuffer message;
    bool done;
    {
      MutexLock lock(&mu_);
      reading_ = false;
      if (!ok) {
        read_closed_ = true;  // the client half-closed, or the call ended
      } else if (!finish_started_ && !broken_ && !draining_) {
        message.Swap(&message_);
        request = std::make_shared<InHand>();
        request->seq = next_seq_++;
        ++in_flight_;  // held from here, so that the call stays
      }
      message_.Clear();
      done = PumpLocked();
    }
    if (request) Dispatch(std::move(request), &message);
    if (done) delete this;  // only when nothing was read: in_flight_ holds it otherwise
  }

  // Admits, decodes and runs one request, off the lock; its answer (or
  // error) goes to Complete.
  void Dispatch(std::shared_ptr<InHand> request, grpc::ByteBuffer* message) {
    const StreamInferService::Options& o = shared_->options;
    const size_t bytes = message->Length();
    ModelInferRequest parsed;
    const grpc::Status status =
        grpc::SerializationTraits<ModelInferRequest>::Deserialize(message, &parsed);
    if (!status.ok()) {
      return Complete(request, InvalidArgument("the request message does not parse as " +
                                               parsed.GetTypeName() + ": " +
                                               status.error_message()));
    }
    request->model = parsed.model_name();
    request->id = parsed.id();
    request->op = parsed.model_name().empty() ? Operation::kTaskInfer : Operation::kInfer;
    // The message arrived whole (gRPC bounds it by the frontend's maximum);
    // it is counted now, while it and its tensors are held.
    if (o.budget != nullptr) {
      StatusOr<ByteBudget::Reservation> held = o.budget->Reserve(static_cast<int64_t>(bytes), "grpc");
      if (!held.ok()) return Complete(request, held.status());
      request->message_hold = std::move(held).value();
    }
    if (o.inflight_limit != nullptr) {
      request->slot = o.inflight_limit->TryAcquire("grpc");
      if (!request->slot.held()) return Complete(request, o.inflight_limit->Refusal());
    }
    if (o.guard != nullptr) {
      Admission a = o.guard->Admit(
          CallInfo{request->op, request->model, AuthorizationOf(&context_), false, 0, &verified_});
      if (!a.status.ok()) return Complete(request, a.status);
      request->caller = std::move(a.caller);
      request->admitted = true;
    }
    InferenceRequest query;
    Status decoded = grpc_codec::DecodeInferRequest(parsed, &query);
    if (decoded.ok() && o.budget != nullptr) {
      int64_t tensor_bytes = 0;
      for (const Tensor& input : query.inputs) tensor_bytes += static_cast<int64_t>(input.data.size());
      StatusOr<ByteBudget::Reservation> held = o.budget->Reserve(tensor_bytes, "grpc");
      if (held.ok()) {
        request->tensor_hold = std::move(held).value();
      } else {
        decoded = held.status();
      }
    }
    if (!decoded.ok()) return Complete(request, decoded);
    parsed.Clear();  // the tensors are in the query now
    request->message_hold.Release();
    query.caller = request->caller;
    // The callback runs on a batcher thread, or here before Infer returns;
    // the queue's Close waits for it.
    CallQueue* queue = queue_;
    queue->Begin();
    o.server->Infer(std::move(query), [this, queue, request](StatusOr<InferenceResponse> result) {
      Complete(request, std::move(result));
      queue->End();
    });
  }

  // Puts a request's answer in its place; writes what is next in order.
  void Complete(const std::shared_ptr<InHand>& request, StatusOr<InferenceResponse> result) {
    const StreamInferService::Options& o = shared_->options;
    if (request->admitted) {
      o.guard->Done(request->caller, CallInfo{request->op, request->model, {}, false, 0},
                    result.status());
    }
    ModelStreamInferResponse answer;
    Status status = result.status();
    if (status.ok()) {
      InferenceResponse response = std::move(result).value();
      if (response.model_name.empty()) response.model_name = request->model;
      if (response.id.empty()) response.id = request->id;
      status = grpc_codec::EncodeInferResponse(std::move(response), answer.mutable_infer_response());
    }
    if (!status.ok()) {
      answer.Clear();
      answer.set_error_message(status.ToString());
      answer.mutable_infer_response()->set_model_name(request->model);
      answer.mutable_infer_response()->set_id(request->id);
    }
    // What the request holds goes back before its answer is written.
    request->slot.Release();
    request->message_hold.Release();
    request->tensor_hold.Release();
    bool done;
    {
      MutexLock lock(&mu_);
      --in_flight_;
      if (!broken_) ready_.emplace(request->seq, std::move(answer));
      done = PumpLocked();
    }
    if (done) delete this;
  }

  void OnWrite(bool ok) {
    bool done;
    {
      MutexLock lock(&mu_);
      writing_ = false;
      out_.Clear();
      if (!ok) {
        broken_ = true;  // the client went away: nothing more reaches it
        ready_.clear();
      }
      done = PumpLocked();
    }
    if (done) delete this;
  }

  void OnFinish(bool) {
    bool done;
    {
      MutexLock lock(&mu_);
      finished_ = true;
      done = PumpLocked();
    }
    if (done) delete this;
  }

  void OnDrain(bool) {
    bool done;
    {
      MutexLock lock(&mu_);
      drain_pending_ = false;
      if (!finish_started_) {
        draining_ = true;
        final_status_ = Unavailable(
            "the server is shutting down: every request read on this stream was answered; "
            "send the rest to another server");
      }
      done = PumpLocked();
    }
    if (done) delete this;
  }

  // Requests read and not yet written.
  size_t InHandLocked() const SOMM_REQUIRES(mu_) {
    return static_cast<size_t>(in_flight_) + ready_.size() + (writing_ ? 1 : 0);
  }

  // Starts what the state allows: the next answer's write, the next read,
  // the status. True when the call is over and is to be freed.
  bool PumpLocked() SOMM_REQUIRES(mu_) {
    if (!writing_ && !broken_ && !finish_started_) {
      auto next = ready_.find(next_write_);
      if (next != ready_.end()) {
        out_ = std::move(next->second);
        ready_.erase(next);
        ++next_write_;
        writing_ = queue_->OnOpenQueue([this] { stream_.Write(out_, &write_op_); });
        if (!writing_) broken_ = true;  // the queue is closed
      }
    }
    if (!reading_ && !read_closed_ && !draining_ && !broken_ && !finish_started_ &&
        InHandLocked() < shared_->options.window) {
      reading_ = queue_->OnOpenQueue([this] { stream_.Read(&message_, &read_op_); });
      if (!reading_) read_closed_ = true;
    }
    const bool reads_over = read_closed_ || draining_ || broken_;
    if (!finish_started_ && reads_over && in_flight_ == 0 && !writing_ &&
        (ready_.empty() || broken_)) {
      finish_started_ = true;
      const grpc::Status status = grpc_transport::ToGrpcStatus(final_status_);
      if (!queue_->OnOpenQueue([&] { stream_.Finish(status, &finish_op_); })) finished_ = true;
    }
    return finished_ && !reading_ && !writing_ && in_flight_ == 0 && !drain_pending_;
  }

  CallQueue* const queue_;
  const std::shared_ptr<StreamInferService::Shared> shared_;
  bool started_ = false;     // set by the offer's event, before any other
  bool registered_ = false;  // in shared_->open
  VerifiedKey verified_;     // from the metadata; read by Dispatch only
  grpc::ServerContext context_;
  grpc::ServerAsyncReaderWriter<ModelStreamInferResponse, grpc::ByteBuffer> stream_{&context_};
  Op read_op_{this, &StreamCall::OnRead};
  Op write_op_{this, &StreamCall::OnWrite};
  Op finish_op_{this, &StreamCall::OnFinish};
  Op drain_op_{this, &StreamCall::OnDrain};
  grpc::Alarm drain_alarm_;

  Mutex mu_;
  // The read in flight's message and the write in flight's answer: touched
  // under mu_, or by gRPC while the operation is in flight.
  grpc::ByteBuffer message_;
  ModelStreamInferResponse out_;
  std::map<int64_t, ModelStreamInferResponse> ready_ SOMM_GUARDED_BY(mu_);  // by seq
  int64_t next_seq_ SOMM_GUARDED_BY(mu_) = 0;    // the next request read
  int64_t next_write_ SOMM_GUARDED_BY(mu_) = 0;  // the next answer to write
  int in_flight_ SOMM_GUARDED_BY(mu_) = 0;       // read, answer not yet in ready_
  bool reading_ SOMM_GUARDED_BY(mu_) = false;
  bool writing_ SOMM_GUARDED_BY(mu_) = false;
  bool read_closed_ SOMM_GUARDED_BY(mu_) = false;  // no more reads: half-closed or refused
  bool draining_ SOMM_GUARDED_BY(mu_) = false;
  bool drain_pending_ SOMM_GUARDED_BY(mu_) = false;
  bool broken_ SOMM_GUARDED_BY(mu_) = false;  // a write failed: the client is gone
  bool finish_started_ SOMM_GUARDED_BY(mu_) = false;
  bool finished_ SOMM_GUARDED_BY(mu_) = false;
  Status final_status_ SOMM_GUARDED_BY(mu_);
};

StreamInferService::StreamInferService(Options options) : shared_(std::make_shared<Shared>()) {
  shared_->options = options;
}

StreamInferService::~StreamInferService() = default;

void StreamInferService::Declare(CallQueue* queue, KeyFirstService* service) {
  queue_ = queue;
  shared_->service = service;
  shared_->method = service->Add(kStreamPath);
}

void StreamInferService::Start() { queue_->Ask<StreamCall>(queue_, shared_); }

void StreamInferService::Drain() {
  MutexLock lock(&shared_->mu);
  shared_->draining = true;
  for (StreamCall* call : shared_->open) call->ScheduleDrain();
}

}  // namespace somm::grpc_async
