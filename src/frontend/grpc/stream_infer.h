// Triton's ModelStreamInfer on the gRPC frontend: one bidirectional stream
// carries many ModelInferRequests, each answered on it by a
// ModelStreamInferResponse, on the frontend's completion queue and threads.
//
// Contract:
//   * The caller is checked from the stream's metadata before its first
//     message is read (as every method of key_first.h); a refused stream is
//     answered with the refusal as its status, unread. Each request is then
//     admitted on its own for its model (a model the key may not see answers
//     exactly as a missing one), counted against --max-inflight and the byte
//     budget as a ModelInfer would be.
//   * Answers come in the order their requests were sent, whatever order
//     the models finish them in. A request that fails (unknown model, bad
//     tensor, shed) is answered with its error in `error_message`, its id and
//     model name in `infer_response`, and the stream goes on.
//   * Flow control: at most `window` requests of one stream are in hand at
//     a time, from the moment they are read until their answer is written;
//     past it the stream reads nothing more, so a client that sends faster
//     than the models answer, or that does not read its answers, waits in
//     gRPC's own flow control and holds at most `window` requests and
//     answers of the server's memory. One write is in flight at a time.
//   * Before each read the stream takes room in the byte budget for the
//     largest message it may send (as a unary call does); without room
//     within key_first.h's kRoomWait it ends RESOURCE_EXHAUSTED after
//     answering what it holds.
//   * The stream ends with OK once the client has half-closed and every
//     request it sent is answered. Drain() (the frontend's stop) makes every
//     open stream stop reading, answer what it holds, and end UNAVAILABLE,
//     so that a stop does not wait on idle streams.
//   * Thread-safety: a stream's events come from the queue's threads and
//     the answers from whichever thread finished the query; its state is
//     under one mutex. Declare before the server is built, Start after.
#pragma once

#include <cstddef>
#include <memory>

#include "api/inference_server.h"
#include "frontend/grpc/key_first.h"
#include "serving/byte_budget.h"
#include "serving/call_guard.h"
#include "serving/inflight_limit.h"
#include "transport/grpc/async_unary.h"

namespace somm::grpc_async {

// Requests of one stream in hand at a time (read, not yet answered).
inline constexpr size_t kStreamWindow = 16;

class StreamInferService {
 public:
  struct Options {
    InferenceServer* server = nullptr;
    CallGuard* guard = nullptr;              // null = no checks
    CallGate* gate = nullptr;                // the frontend's: key and byte budget
    ByteBudget* budget = nullptr;            // null = no budget (decoded tensors)
    InflightLimit* inflight_limit = nullptr;  // null = no bound
    size_t window = kStreamWindow;
  };
  explicit StreamInferService(Options options);
  ~StreamInferService();

  // Registers the method with `service`; before the server is built.
  void Declare(CallQueue* queue, KeyFirstService* service);
  // Offers the first call; after the server is built.
  void Start();
  // The frontend is stopping: open streams stop reading and end once what
  // they hold is answered; new ones are refused UNAVAILABLE.
  void Drain();

  struct Shared;  // what every stream reads (stream_infer.cc)

 private:
  std::shared_ptr<Shared> shared_;
  CallQueue* queue_ = nullptr;
};

}  // namespace somm::grpc_async
