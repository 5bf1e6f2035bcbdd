// Unary methods whose caller is known before their message is read: the
// gRPC frontend's methods (frontend/grpc/grpc_server.cc), on the same
// completion queue and threads as async_unary.h's calls.
//
// gRPC offers a unary call to the application only once its whole message
// has arrived and been parsed: a 150 MB ModelInfer without a key was read
// and parsed before the guard refused it. So these methods are registered
// with gRPC as bidirectional streams, as gRPC's own streamed unary methods
// are (the wire is the same: unary clients see no difference). gRPC then
// offers a call on its metadata alone; the gate (CallGate) checks the key
// from the metadata, and only an admitted call's message is read. A refused
// call is answered at once and its stream reset, so its client stops
// sending: the server holds at most the transport's flow-control window of
// it. gRPC reads a message whole once asked to, and tells its size only
// then, so the gate reserves room in the server's byte budget for the
// largest message the call may send before it asks, and the room shrinks
// to the message's size when it arrives. A call that finds no room waits
// for it, unread, up to kRoomWait (polled every kRoomPoll: a burst of small
// messages frees its room within microseconds), and is then refused
// RESOURCE_EXHAUSTED, still unread.
//
// Contract:
//   * KeyFirstService::Add registers a method by its path before the
//     service is registered with the ServerBuilder. One KeyFirstService may
//     hold the methods of several proto services.
//   * A KeyFirstCall subclass serves one method: Admit() (metadata only)
//     decides whether the message is read, RoomForMessage() when (the
//     byte budget), Arrived() whether it is parsed,
//     Handle() serves it and calls Finish, at once or later from any
//     thread. Each answered offer is renewed (AskNext) before Admit runs.
//     Requests come parsed into request_; one message is read, and a call
//     whose client sends none is answered INVALID_ARGUMENT.
//   * KeyFirstTable serves methods with handlers (GatedHandler), behind one
//     CallGate; a handler gets the key the gate verified (GatedContext). The table holds the
//     handlers and the gate must outlive it; the table must outlive the queue's Close.
//   * Thread-safety as async_unary.h's calls: a call's events come one at a
//     time; Finish may be called from any thread, once.
#pragma once

#include <grpcpp/alarm.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/rpc_service_method.h>

#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "frontend/grpc/grpc_codec.h"
#include "serving/byte_budget.h"
#include "serving/call_guard.h"
#include "transport/grpc/async_unary.h"

namespace somm::grpc_async {

// The call's "authorization" metadata ("Bearer <key>"), "" without one: what
// every method hands the guard.
inline std::string AuthorizationOf(const grpc::ServerContextBase* context) {
  const auto& metadata = context->client_metadata();
  auto it = metadata.find("authorization");
  return it == metadata.end() ? std::string() : std::string(it->second.data(), it->second.size());
}

// Unary methods, registered as bidirectional streams so that gRPC offers
// their calls before reading their messages.
class KeyFirstService final : public grpc::Service {
 public:
  // Registers the method at `path` ("/inference.GRPCInferenceService/
  // ModelInfer"); returns its index for Ask.
  int Add(std::string path) {
    paths_.push_back(std::move(path));  // a deque: the names stay put
    AddMethod(new grpc::internal::RpcServiceMethod(
        paths_.back().c_str(), grpc::internal::RpcMethod::BIDI_STREAMING, nullptr));
    const int index = static_cast<int>(paths_.size()) - 1;
    MarkMethodAsync(index);
    return index;
  }
  // The path of method `index`.
  const std::string& path(int index) const { return paths_[static_cast<size_t>(index)]; }
  // Offers the next call of method `index` on `cq`, with `tag`.
  template <typename Response>
  void Ask(int index, grpc::ServerContext* context,
           grpc::ServerAsyncReaderWriter<Response, grpc::ByteBuffer>* stream,
           grpc::ServerCompletionQueue* cq, void* tag) {
    RequestAsyncBidiStreaming(index, context, stream, cq, cq, tag);
  }

 private:
  std::deque<std::string> paths_;
};

// How long a call waits for room for its message, and how often it looks.
inline constexpr std::chrono::milliseconds kRoomWait{500};
inline constexpr std::chrono::microseconds kRoomPoll{500};

template <typename Request, typename Response>
class KeyFirstCall : public Tag {
 public:
  ~KeyFirstCall() override {
    if (state_ != State::kOffered) queue_->CallEnded();
  }
  void Ask() { service_->Ask(method_, &context_, &stream_, queue_->cq(), this); }

  void Proceed(bool ok) override {
    switch (state_) {
      case State::kOffered: {
        if (!ok) break;  // the server is shutting down
        state_ = State::kReading;
        queue_->CallStarted();
        AskNext();
        if (Status admitted = Admit(); !admitted.ok()) return Answer(admitted);
        room_deadline_ = std::chrono::steady_clock::now() + kRoomWait;
        if (ReadWhenRoom()) return;
        break;
      }
      case State::kWaitingForRoom:
        if (!ok) break;  // the alarm was cancelled: the server is going
        if (ReadWhenRoom()) return;
        break;
      case State::kReading: {
        // Not ok: the client half-closed without a message, or the call
        // ended (cancelled, or its message over the size limit, which gRPC
        // itself answers); an answer to a call that ended is dropped.
        if (!ok) return Answer(InvalidArgument("the call carried no request message"));
        message_bytes_ = message_.Length();
        if (Status arrived = Arrived(message_bytes_); !arrived.ok()) {
          message_.Clear();
          return Answer(arrived);
        }
        const grpc::Status parsed =
            grpc::SerializationTraits<Request>::Deserialize(&message_, &request_);
        message_.Clear();
        if (!parsed.ok()) {
          return Answer(InvalidArgument("the request message does not parse as " +
                                        request_.GetTypeName() + ": " + parsed.error_message()));
        }
        state_ = State::kAnswering;  // before Handle: the answer may come on another thread
        Handle();
        return;
      }
      case State::kAnswering:
        break;
    }
    delete this;
  }

 protected:
  KeyFirstCall(CallQueue* queue, KeyFirstService* service, int method)
      : queue_(queue), service_(service), method_(method) {}

  virtual void AskNext() = 0;
  // From the metadata alone (context_), before the message is read: OK
  // reads it; otherwise the call is answered with this status, unread.
  virtual Status Admit() = 0;
  // Room for the message before it is read: OK reads it; `final` false and
  // RESOURCE_EXHAUSTED: asked again later (the refusal is not to be
  // counted); anything else, or with `final`, answers the call unread.
  virtual Status RoomForMessage(bool final) { return Status::Ok(); }
  // When the message has arrived, `bytes` long, before it is parsed: OK
  // parses it; otherwise the call is answered with this status.
  virtual Status Arrived(size_t bytes) { return Status::Ok(); }
  // With request_ parsed: serves the call and calls Finish once.
  virtual void Handle() = 0;

  // Answers the call (response_ when `status` is OK); the answer's
  // completion frees it, or, once the queue is closed, this does.
  void Finish(const Status& status) {
    const bool written = queue_->OnOpenQueue([&] {
      if (status.ok()) {
        stream_.WriteAndFinish(response_, grpc::WriteOptions(), grpc::Status::OK, this);
      } else {
        stream_.Finish(grpc_transport::ToGrpcStatus(status), this);
      }
    });
    if (!written) delete this;
  }

  CallQueue* const queue_;
  grpc::ServerContext context_;
  Request request_;
  Response response_;
  size_t message_bytes_ = 0;  // the message's size as it arrived

 private:
  enum class State { kOffered, kWaitingForRoom, kReading, kAnswering };
  // Reads the message once there is room for it, or waits for room (an
  // alarm on the queue), or answers the call; false when the queue is
  // closed and the call is to be deleted.
  bool ReadWhenRoom() {
    const bool final = std::chrono::steady_clock::now() >= room_deadline_;
    const Status room = RoomForMessage(final);
    if (room.ok()) {
      state_ = State::kReading;
      return queue_->OnOpenQueue([this] { stream_.Read(&message_, this); });
    }
    if (final || room.code() != StatusCode::kResourceExhausted) {
      Answer(room);
      return true;
    }
    state_ = State::kWaitingForRoom;
    return queue_->OnOpenQueue(
        [this] { alarm_.Set(queue_->cq(), std::chrono::system_clock::now() + kRoomPoll, this); });
  }
  // Answers before Handle, on the thread that took the event.
  void Answer(const Status& status) {
    state_ = State::kAnswering;
    Finish(status);
  }

  KeyFirstService* const service_;
  const int method_;
  State state_ = State::kOffered;
  std::chrono::steady_clock::time_point room_deadline_;
  grpc::Alarm alarm_;
  grpc::ByteBuffer message_;
  grpc::ServerAsyncReaderWriter<Response, grpc::ByteBuffer> stream_{&context_};
};

// What a KeyFirstTable asks of every call.
class CallGate {
 public:
  virtual ~CallGate() = default;
  // From the metadata alone, before the message is read: the caller's key,
  // verified for `op` (nullopt: an open method, the health probes, which
  // need none). `path` names the method in the audit record of a refusal.
  // Non-OK answers the call unread.
  virtual StatusOr<VerifiedKey> BeforeRead(const grpc::ServerContext& context,
                                           std::optional<Operation> op,
                                           const std::string& path) = 0;
  // In `*room`, the byte budget's room for the largest message the call
  // may send (nothing for open methods); as KeyFirstCall::RoomForMessage.
  virtual Status RoomForMessage(std::optional<Operation> op, bool final,
                                ByteBudget::Reservation* room) = 0;
};

// What a gated method's handler is given besides its messages: the call's
// gRPC context, and the key the gate verified from its metadata, for
// CallInfo::verified (the key is verified once per call).
struct GatedContext {
  const grpc::ServerContext& grpc;
  const VerifiedKey& verified;
};
template <typename Request, typename Response>
using GatedHandler = std::function<void(const GatedContext&, const Request&, Response*, Answer)>;

template <typename Request, typename Response>
class GatedCall final : public KeyFirstCall<Request, Response> {
 public:
  struct Method {
    KeyFirstService* service;
    int index;
    std::optional<Operation> op;  // nullopt: open, no key needed
    CallGate* gate;
    GatedHandler<Request, Response> handler;
  };
  GatedCall(CallQueue* queue, const Method* method)
      : KeyFirstCall<Request, Response>(queue, method->service, method->index), method_(method) {}

 private:
  void AskNext() override { this->queue_->template Ask<GatedCall>(this->queue_, method_); }
  Status Admit() override {
    StatusOr<VerifiedKey> verified = method_->gate->BeforeRead(
        this->context_, method_->op, method_->service->path(method_->index));
    if (!verified.ok()) return verified.status();
    verified_ = std::move(verified).value();
    return Status::Ok();
  }
  Status RoomForMessage(bool final) override {
    return method_->gate->RoomForMessage(method_->op, final, &room_);
  }
  Status Arrived(size_t bytes) override {
    room_.ShrinkTo(static_cast<int64_t>(bytes));
    return Status::Ok();
  }
  void Handle() override {
    CallQueue* queue = this->queue_;  // the call may be gone once answered
    queue->Begin();
    method_->handler(GatedContext{this->context_, verified_}, this->request_, &this->response_,
                     [this, queue](const Status& status) {
                       room_.Release();  // given back before the answer is sent
                       this->Finish(status);
                       queue->End();
                     });
  }

  const Method* const method_;
  VerifiedKey verified_;
  ByteBudget::Reservation room_;
};

class KeyFirstTable {
 public:
  explicit KeyFirstTable(CallGate* gate) : gate_(gate) {}
  // Serves the method at `path` of `service`, the operation `op`, with
  // `handler`; `op` nullopt: it needs no key (the health probes).
  template <typename Request, typename Response>
  void Serve(CallQueue* queue, KeyFirstService* service, const std::string& path,
             std::optional<Operation> op,
             std::type_identity_t<GatedHandler<Request, Response>> handler) {
    using Call = GatedCall<Request, Response>;
    auto method = std::make_shared<typename Call::Method>(
        typename Call::Method{service, service->Add(path), op, gate_, std::move(handler)});
    pending_.push_back([queue, m = method.get()] { queue->Ask<Call>(queue, m); });
    methods_.push_back(std::move(method));
  }
  // Offers the first call of every method served; after the server is built.
  void Start() {
    for (auto& offer : pending_) offer();
    pending_.clear();
  }

 private:
  CallGate* const gate_;
  std::vector<std::function<void()>> pending_;
  std::vector<std::shared_ptr<const void>> methods_;
};

}  // namespace somm::grpc_async
