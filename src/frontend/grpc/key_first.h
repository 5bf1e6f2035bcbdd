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
// it. A message that arrives is sized before it is parsed, so the gate can
// also refuse one that would pass the server's byte budget.
//
// Contract:
//   * KeyFirstService::Add registers a method by its path before the
//     service is registered with the ServerBuilder. One KeyFirstService may
//     hold the methods of several proto services.
//   * A KeyFirstCall subclass serves one method: Admit() (metadata only)
//     decides whether the message is read, Arrived() whether it is parsed,
//     Handle() serves it and calls Finish, at once or later from any
//     thread. Each answered offer is renewed (AskNext) before Admit runs.
//     Requests come parsed into request_; one message is read, and a call
//     whose client sends none is answered INVALID_ARGUMENT.
//   * KeyFirstTable serves methods with handlers (async_unary.h's Handler),
//     behind one CallGate. The table holds the handlers and the gate must
//     outlive it; the table must outlive the queue's Close.
//   * Thread-safety as async_unary.h's calls: a call's events come one at a
//     time; Finish may be called from any thread, once.
#pragma once

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/rpc_service_method.h>

#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "frontend/grpc/async_unary.h"
#include "frontend/grpc/grpc_codec.h"

namespace somm::grpc_async {

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
        if (queue_->OnOpenQueue([this] { stream_.Read(&message_, this); })) return;
        break;
      }
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
        stream_.Finish(grpc_codec::ToGrpcStatus(status), this);
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
  enum class State { kOffered, kReading, kAnswering };
  // Answers before Handle, on the thread that took the event.
  void Answer(const Status& status) {
    state_ = State::kAnswering;
    Finish(status);
  }

  KeyFirstService* const service_;
  const int method_;
  State state_ = State::kOffered;
  grpc::ByteBuffer message_;
  grpc::ServerAsyncReaderWriter<Response, grpc::ByteBuffer> stream_{&context_};
};

// What a KeyFirstTable asks of every call.
class CallGate {
 public:
  virtual ~CallGate() = default;
  // From the metadata alone, before the message is read; `open` methods
  // (health probes) need no key. Non-OK answers the call unread.
  virtual Status BeforeRead(const grpc::ServerContext& context, bool open) = 0;
  // When a message of `bytes` has arrived, before it is parsed: what the
  // call holds until it is answered (a reservation of the byte budget), or
  // the refusal.
  virtual StatusOr<std::shared_ptr<void>> OnArrival(size_t bytes, bool open) = 0;
};

template <typename Request, typename Response>
class GatedCall final : public KeyFirstCall<Request, Response> {
 public:
  struct Method {
    KeyFirstService* service;
    int index;
    bool open;
    CallGate* gate;
    Handler<Request, Response> handler;
  };
  GatedCall(CallQueue* queue, const Method* method)
      : KeyFirstCall<Request, Response>(queue, method->service, method->index), method_(method) {}

 private:
  void AskNext() override { this->queue_->template Ask<GatedCall>(this->queue_, method_); }
  Status Admit() override { return method_->gate->BeforeRead(this->context_, method_->open); }
  Status Arrived(size_t bytes) override {
    StatusOr<std::shared_ptr<void>> hold = method_->gate->OnArrival(bytes, method_->open);
    if (!hold.ok()) return hold.status();
    hold_ = std::move(hold).value();
    return Status::Ok();
  }
  void Handle() override {
    CallQueue* queue = this->queue_;  // the call may be gone once answered
    queue->Begin();
    method_->handler(this->context_, this->request_, &this->response_,
                     [this, queue](const Status& status) {
                       hold_.reset();  // given back before the answer is sent
                       this->Finish(status);
                       queue->End();
                     });
  }

  const Method* const method_;
  std::shared_ptr<void> hold_;
};

class KeyFirstTable {
 public:
  explicit KeyFirstTable(CallGate* gate) : gate_(gate) {}
  // Serves the method at `path` of `service` with `handler`; `open`: it
  // needs no key (the health probes).
  template <typename Request, typename Response>
  void Serve(CallQueue* queue, KeyFirstService* service, const std::string& path, bool open,
             std::type_identity_t<Handler<Request, Response>> handler) {
    using Call = GatedCall<Request, Response>;
    auto method = std::make_shared<typename Call::Method>(
        typename Call::Method{service, service->Add(path), open, gate_, std::move(handler)});
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
