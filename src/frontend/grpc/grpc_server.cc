#include "frontend/grpc/grpc_server.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "common/serial_executor.h"
#include "frontend/grpc/grpc_codec.h"
#include "frontend/grpc/health.h"
#include "frontend/grpc/key_first.h"
#include "frontend/grpc/model_info_rpcs.h"
#include "frontend/grpc/operator_call.h"
#include "frontend/grpc/somm_codec.h"
#include "frontend/grpc/stream_infer.h"
#include "frontend/grpc/task_codec.h"
#include "proto/inference.grpc.pb.h"
#include "proto/somm.grpc.pb.h"
#include "transport/grpc/async_unary.h"
#include "transport/grpc/grpc_tls.h"

namespace somm {
namespace {

using grpc_async::Answer;

// Slow control calls (registration, model load and unload, a rollout's
// start) run one after another on a lane of their own: the threads that poll
// gRPC must not block for seconds, and one thread, unlike a thread per call,
// cannot be multiplied by a client that floods them. Serial loads also spare
// the InferenceServer racing loads and unloads of one model. Past
// kControlQueue calls waiting, the next is answered UNAVAILABLE at once.
constexpr size_t kControlQueue = 16;

// Runs `job` on `lane` with the call's answer, taken from `answer`; or,
// when the lane is full, leaves `answer` to the caller and returns why.
Status PostControl(SerialExecutor& lane, Answer& answer, std::function<void(const Answer&)> job) {
  auto shared = std::make_shared<Answer>(std::move(answer));
  if (lane.TryPost([shared, job = std::move(job)] { job(*shared); }) ==
      SerialExecutor::Posted::kQueued) {
    return Status::Ok();
  }
  answer = std::move(*shared);  // the job never ran: nobody else holds it
  return Unavailable("server busy: " + std::to_string(lane.max_queued()) +
                     " registrations and repository changes are waiting already; retry later");
}

using grpc_async::AuthorizationOf;

// What every call passes before its message is read and parsed
// (frontend/grpc/key_first.h): the key and its role, from the metadata
// alone, as REST's head check does; then room in the byte budget for the
// largest message the call may send, which gRPC would read whole once
// asked, before a byte of it is read (waited for a while: key_first.h's
// kRoomWait). Health probes pass freely.
class FrontendGate final : public grpc_async::CallGate {
 public:
  FrontendGate(CallGuard* guard, ByteBudget* budget, int64_t max_message_bytes)
      : guard_(guard), budget_(budget), max_message_bytes_(max_message_bytes) {}

  StatusOr<VerifiedKey> BeforeRead(const grpc::ServerContext& context, std::optional<Operation> op,
                                   const std::string& path) override {
    if (!op || guard_ == nullptr) return VerifiedKey{};
    return guard_->Authenticate(AuthorizationOf(&context), op, path);
  }
  Status RoomForMessage(std::optional<Operation> op, bool final,
                        ByteBudget::Reservation* room) override {
    if (!op || budget_ == nullptr) return Status::Ok();
    // Only the last refusal of a call that waited is counted.
    StatusOr<ByteBudget::Reservation> held = budget_->Reserve(max_message_bytes_, "grpc", final);
    if (!held.ok()) return held.status();
    *room = std::move(held).value();
    return Status::Ok();
  }

  CallGuard* guard() const { return guard_; }
  ByteBudget* budget() const { return budget_; }

 private:
  CallGuard* const guard_;   // null = no keys
  ByteBudget* const budget_;  // null = no budget
  const int64_t max_message_bytes_;
};

// A method's path, as gRPC names it: "/inference.GRPCInferenceService/ModelInfer".
std::string OipPath(const char* method) {
  return std::string("/") + inference::GRPCInferenceService::service_full_name() + "/" + method;
}
std::string SommPath(const char* method) {
  return std::string("/") + somm::SommControl::service_full_name() + "/" + method;
}

// Asks the guard (when there is one) whether this call may go on, with the
// key the gate verified from the call's metadata.
Admission AdmitCall(CallGuard* guard, const grpc_async::GatedContext& context, Operation op,
                    const std::string& model, bool private_model = false, size_t bytes = 0) {
  if (guard == nullptr) return Admission{};
  return guard->Admit(
      CallInfo{op, model, AuthorizationOf(&context.grpc), private_model, bytes, &context.verified});
}

void FinishCall(CallGuard* guard, const Caller& caller, Operation op, const std::string& model,
                const Status& outcome, bool private_model = false) {
  if (guard != nullptr) guard->Done(caller, CallInfo{op, model, {}, private_model, 0}, outcome);
}

// A control call the lane refused: ended with the guard, answered.
void RefuseControl(CallGuard* guard, const Caller& caller, Operation op, const std::string& model,
                   const Status& why, const Answer& answer, bool private_model = false) {
  FinishCall(guard, caller, op, model, why, private_model);
  answer(why);
}

// Load parameters Triton defines that somm does not implement. Failing is
// better than loading the on-disk model while the client believes its
// override took effect.
Status CheckLoadParameters(const inference::RepositoryModelLoadRequest& request) {
  for (const auto& [key, value] : request.parameters()) {
    if (key == "config" || key.rfind("file:", 0) == 0) {
      return Unimplemented("model '" + request.model_name() + "': load parameter '" + key +
                           "' (model override) is not supported; edit the repository instead");
    }
  }
  return Status::Ok();
}

// The OIP methods. Every one is served from the frontend's completion queue
// by its threads, its caller checked before its message is read
// (frontend/grpc/key_first.h): ModelInfer by InferCall below, the rest
// through a KeyFirstTable by the handlers here, which answer at once or,
// for loads and unloads, from the control lane.
class OipService final {
 public:
  OipService(InferenceServer& server, SerialExecutor& control, FrontendGate& gate,
             InflightLimit* inflight_limit)
      : server_(server),
        control_(control),
        gate_(gate),
        guard_(gate.guard()),
        inflight_limit_(inflight_limit) {}

  InferenceServer& server() const { return server_; }
  CallGuard* guard() const { return guard_; }
  ByteBudget* budget() const { return gate_.budget(); }
  FrontendGate& gate() const { return gate_; }
  InflightLimit* inflight_limit() const { return inflight_limit_; }
  grpc_async::KeyFirstService* methods() const { return methods_; }
  int infer_method() const { return infer_method_; }

  // Declares every method in `methods`, ModelInfer's for InferCall, the
  // rest in `table`: before the server is built.
  void Declare(grpc_async::CallQueue* queue, grpc_async::KeyFirstService* methods,
               grpc_async::KeyFirstTable& table) {
    using namespace inference;
    methods_ = methods;
    infer_method_ = methods->Add(OipPath("ModelInfer"));
    table.Serve<ServerLiveRequest, ServerLiveResponse>(
        queue, methods, OipPath("ServerLive"), /*open*/ std::nullopt,
        [this](const grpc_async::GatedContext&, const ServerLiveRequest&,
               ServerLiveResponse* response, Answer answer) {
          response->set_live(server_.IsLive());
          answer(Status::Ok());
        });
    table.Serve<ServerReadyRequest, ServerReadyResponse>(
        queue, methods, OipPath("ServerReady"), /*open*/ std::nullopt,
        [this](const grpc_async::GatedContext&, const ServerReadyRequest&,
               ServerReadyResponse* response, Answer answer) {
          response->set_ready(server_.IsReady());
          answer(Status::Ok());
        });
    table.Serve<ModelReadyRequest, ModelReadyResponse>(
        queue, methods, OipPath("ModelReady"), Operation::kModelMetadata,
        std::bind_front(&OipService::ModelReady, this));
    table.Serve<ServerMetadataRequest, ServerMetadataResponse>(
        queue, methods, OipPath("ServerMetadata"), Operation::kServerMetadata,
        [this](const grpc_async::GatedContext& context, const ServerMetadataRequest&,
               ServerMetadataResponse* response, Answer answer) {
          Admission a = AdmitCall(guard_, context, Operation::kServerMetadata, "");
          if (a.status.ok())
            grpc_codec::EncodeServerMetadata(server_.GetServerMetadata(), response);
          answer(a.status);
        });
    table.Serve<ModelMetadataRequest, ModelMetadataResponse>(
        queue, methods, OipPath("ModelMetadata"), Operation::kModelMetadata,
        std::bind_front(&OipService::ModelMetadata, this));
    table.Serve<RepositoryIndexRequest, RepositoryIndexResponse>(
        queue, methods, OipPath("RepositoryIndex"), Operation::kIndex,
        std::bind_front(&OipService::RepositoryIndex, this));
    table.Serve<RepositoryModelLoadRequest, RepositoryModelLoadResponse>(
        queue, methods, OipPath("RepositoryModelLoad"), Operation::kLoad,
        std::bind_front(&OipService::Load, this));
    table.Serve<RepositoryModelUnloadRequest, RepositoryModelUnloadResponse>(
        queue, methods, OipPath("RepositoryModelUnload"), Operation::kUnload,
        std::bind_front(&OipService::Unload, this));
  }

 private:
  void ModelReady(const grpc_async::GatedContext& context,
                  const inference::ModelReadyRequest& request,
                  inference::ModelReadyResponse* response, const Answer& answer) {
    Admission a = AdmitCall(guard_, context, Operation::kModelMetadata, request.name());
    if (!a.status.ok()) return answer(a.status);
    // An empty version means "any ready version", as InferenceServer defines.
    StatusOr<bool> ready = server_.IsModelReady(request.name(), request.version());
    if (ready.ok()) response->set_ready(*ready);
    answer(ready.status());
  }

  void ModelMetadata(const grpc_async::GatedContext& context,
                     const inference::ModelMetadataRequest& request,
                     inference::ModelMetadataResponse* response, const Answer& answer) {
    Admission a = AdmitCall(guard_, context, Operation::kModelMetadata, request.name());
    if (!a.status.ok()) return answer(a.status);
    StatusOr<somm::ModelMetadata> metadata =
        server_.GetModelMetadata(request.name(), request.version());
    if (metadata.ok()) grpc_codec::EncodeModelMetadata(*metadata, response);
    answer(metadata.status());
  }

  void RepositoryIndex(const grpc_async::GatedContext& context,
                       const inference::RepositoryIndexRequest& request,
                       inference::RepositoryIndexResponse* response, const Answer& answer) {
    Admission a = AdmitCall(guard_, context, Operation::kIndex, "");
    if (!a.status.ok()) return answer(a.status);
    // somm serves one repository, so repository_name selects nothing.
    for (const RepositoryEntry& entry : server_.RepositoryIndex(request.ready())) {
      if (guard_ != nullptr && !guard_->MaySee(a.caller, entry.name)) continue;
      auto* model = response->add_models();
      model->set_name(entry.name);
      model->set_version(entry.version);
      model->set_state(entry.state);
      model->set_reason(entry.reason);
    }
    answer(Status::Ok());
  }

  void Load(const grpc_async::GatedContext& context,
            const inference::RepositoryModelLoadRequest& request,
            inference::RepositoryModelLoadResponse*, Answer answer) {
    if (request.model_name().empty()) {
      return answer(InvalidArgument("load request names no model (model_name)"));
    }
    Admission a = AdmitCall(guard_, context, Operation::kLoad, request.model_name());
    if (!a.status.ok()) return answer(a.status);
    Status params = CheckLoadParameters(request);
    if (!params.ok()) {
      FinishCall(guard_, a.caller, Operation::kLoad, request.model_name(), params);
      return answer(params);
    }
    const Status posted = PostControl(
        control_, answer, [this, name = request.model_name(), caller = a.caller](const Answer& answer) {
          const Status status = server_.LoadModel(name);
          FinishCall(guard_, caller, Operation::kLoad, name, status);
          answer(status);
        });
    if (!posted.ok()) RefuseControl(guard_, a.caller, Operation::kLoad, request.model_name(), posted, answer);
  }

  void Unload(const grpc_async::GatedContext& context,
              const inference::RepositoryModelUnloadRequest& request,
              inference::RepositoryModelUnloadResponse*, Answer answer) {
    if (request.model_name().empty()) {
      return answer(InvalidArgument("unload request names no model (model_name)"));
    }
    // Triton's one unload parameter, unload_dependents, concerns ensembles,
    // which somm does not have; it is accepted and has nothing to do.
    Admission a = AdmitCall(guard_, context, Operation::kUnload, request.model_name());
    if (!a.status.ok()) return answer(a.status);
    const Status posted = PostControl(
        control_, answer, [this, name = request.model_name(), caller = a.caller](const Answer& answer) {
          const Status status = server_.UnloadModel(name);
          FinishCall(guard_, caller, Operation::kUnload, name, status);
          answer(status);
        });
    if (!posted.ok()) {
      RefuseControl(guard_, a.caller, Operation::kUnload, request.model_name(), posted, answer);
    }
  }

  InferenceServer& server_;
  SerialExecutor& control_;
  FrontendGate& gate_;
  CallGuard* const guard_;               // null = no checks
  InflightLimit* const inflight_limit_;  // null = no bound
  grpc_async::KeyFirstService* methods_ = nullptr;
  int infer_method_ = -1;
};

// One ModelInfer call (frontend/grpc/key_first.h): the key is checked from
// the metadata, the message sized against the byte budget before it is
// parsed, and the decoded tensors reserve their bytes too.
class InferCall final
    : public grpc_async::KeyFirstCall<inference::ModelInferRequest, inference::ModelInferResponse> {
 public:
  InferCall(OipService* service, grpc_async::CallQueue* queue)
      : KeyFirstCall(queue, service->methods(), service->infer_method()), service_(service) {}

 private:
  void AskNext() override { queue_->Ask<InferCall>(service_, queue_); }
  Status Admit() override {
    // The task form (Operation::kTaskInfer) is told apart only once the
    // message is read; both operations need the same role.
    StatusOr<VerifiedKey> verified = service_->gate().BeforeRead(
        context_, Operation::kInfer, service_->methods()->path(service_->infer_method()));
    if (!verified.ok()) return verified.status();
    verified_ = std::move(verified).value();
    return Status::Ok();
  }
  Status RoomForMessage(bool final) override {
    return service_->gate().RoomForMessage(Operation::kInfer, final, &message_hold_);
  }
  Status Arrived(size_t bytes) override {
    message_hold_.ShrinkTo(static_cast<int64_t>(bytes));
    return Status::Ok();
  }
  // Gives back what the call holds, before its answer is sent.
  void ReleaseHolds() {
    slot_.Release();
    message_hold_.Release();
    tensor_hold_.Release();
  }
  void Refuse(const Status& status) {
    ReleaseHolds();
    Finish(status);
  }
  void Handle() override {
    // The task form names no model (its task is a parameter).
    const Operation op =
        request_.model_name().empty() ? Operation::kTaskInfer : Operation::kInfer;
    // Shed before the full admission and the tensors' decoding.
    InflightLimit* limit = service_->inflight_limit();
    if (limit != nullptr) {
      slot_ = limit->TryAcquire("grpc");
      if (!slot_.held()) return Refuse(limit->Refusal());
    }
    CallGuard* guard = service_->guard();
    Admission a =
        AdmitCall(guard, grpc_async::GatedContext{context_, verified_}, op, request_.model_name());
    if (!a.status.ok()) return Refuse(a.status);
    InferenceRequest query;
    Status decoded = grpc_codec::DecodeInferRequest(request_, &query);
    if (decoded.ok() && service_->budget() != nullptr) {
      int64_t tensor_bytes = 0;
      for (const Tensor& input : query.inputs) tensor_bytes += static_cast<int64_t>(input.data.size());
      StatusOr<ByteBudget::Reservation> held = service_->budget()->Reserve(tensor_bytes, "grpc");
      if (held.ok()) {
        tensor_hold_ = std::move(held).value();
      } else {
        decoded = held.status();
      }
    }
    // The message's tensors are copied into the query: only its names stay.
    request_.clear_inputs();
    request_.clear_raw_input_contents();
    if (!decoded.ok()) {
      FinishCall(guard, a.caller, op, request_.model_name(), decoded);
      return Refuse(decoded);
    }
    query.caller = a.caller;
    // The callback runs on a batcher thread, or here before Infer returns.
    // The call may be gone once answered, so the end is told to `queue`.
    // What the call holds goes back before the answer is written, so that a
    // client that has its answer finds the room free.
    grpc_async::CallQueue* queue = queue_;
    queue->Begin();
    service_->server().Infer(
        std::move(query), [this, queue, guard, op,
                           caller = std::move(a.caller)](StatusOr<InferenceResponse> result) {
          FinishCall(guard, caller, op, request_.model_name(), result.status());
          Status status = result.status();
          if (result.ok()) {
            InferenceResponse answer = std::move(result).value();
            if (answer.model_name.empty()) answer.model_name = request_.model_name();
            if (answer.id.empty()) answer.id = request_.id();
            status = grpc_codec::EncodeInferResponse(std::move(answer), &response_);
          }
          ReleaseHolds();
          Finish(status);
          queue->End();
        });
  }

  OipService* const service_;
  VerifiedKey verified_;
  InflightLimit::Slot slot_;
  ByteBudget::Reservation message_hold_;  // the message's room, then its size
  ByteBudget::Reservation tensor_hold_;
};

// somm's model-less control service (proto/somm.proto), beside the OIP one,
// on the same queue.
class SommControlService final {
 public:
  SommControlService(InferenceServer& server, SerialExecutor& control, CallGuard* guard)
      : server_(server), control_(control), guard_(guard) {}

  // Declares every method in `table` (key_first.h), before the server is built.
  void Declare(grpc_async::CallQueue* queue, grpc_async::KeyFirstService* methods,
               grpc_async::KeyFirstTable& table) {
    table.Serve<RegisterModelRequest, RegisterModelResponse>(
        queue, methods, SommPath("RegisterModel"), Operation::kRegister,
        std::bind_front(&SommControlService::RegisterModel, this));
    table.Serve<GetVariantsRequest, GetVariantsResponse>(
        queue, methods, SommPath("GetVariants"), Operation::kModelMetadata,
        std::bind_front(&SommControlService::GetVariants, this));
    table.Serve<RecentDecisionsRequest, RecentDecisionsResponse>(
        queue, methods, SommPath("RecentDecisions"), Operation::kDecisions,
        std::bind_front(&SommControlService::RecentDecisions, this));
    table.Serve<ListTasksRequest, TasksResponse>(
        queue, methods, SommPath("ListTasks"), Operation::kIndex,
        [this](const grpc_async::GatedContext& c, const somm::ListTasksRequest&,
               somm::TasksResponse* response, Answer answer) {
          Admission a = AdmitCall(guard_, c, Operation::kIndex, "");
          if (a.status.ok()) grpc_codec::EncodeTasks(server_.ListTasks(a.caller), response);
          answer(a.status);
        });
    table.Serve<DescribeTaskRequest, TasksResponse>(
        queue, methods, SommPath("DescribeTask"), Operation::kIndex,
        [this](const grpc_async::GatedContext& c, const somm::DescribeTaskRequest& r,
               somm::TasksResponse* response, Answer answer) {
          Admission a = AdmitCall(guard_, c, Operation::kIndex, "");
          if (!a.status.ok()) return answer(a.status);
          StatusOr<TaskDescription> task = server_.DescribeTask(r.task(), a.caller);
          if (task.ok()) grpc_codec::EncodeTasks({*task}, response);
          answer(task.status());
        });
    table.Serve<RolloutRequest, RolloutResponse>(
        queue, methods, SommPath("Rollout"), Operation::kRollout,
        std::bind_front(&SommControlService::Rollout, this));
    table.Serve<GetRolloutRequest, RolloutResponse>(
        queue, methods, SommPath("GetRollout"), Operation::kModelMetadata,
        [this](const grpc_async::GatedContext& c, const somm::GetRolloutRequest& r,
               somm::RolloutResponse* response, Answer answer) {
          Admission a = AdmitCall(guard_, c, Operation::kModelMetadata, r.model_name());
          if (!a.status.ok()) return answer(a.status);
          StatusOr<RolloutView> view = server_.GetRollout(r.model_name(), a.caller);
          if (view.ok()) response->set_rollout_json(RolloutViewToJson(*view));
          answer(view.status());
        });
  }

 private:
  void RegisterModel(const grpc_async::GatedContext& context,
                     const somm::RegisterModelRequest& request,
                     somm::RegisterModelResponse* response, Answer answer) {
    RegistrationRequest registration;
    Status decoded = grpc_codec::DecodeRegistration(request, &registration);
    if (!decoded.ok()) return answer(decoded);
    Admission a = AdmitCall(guard_, context, Operation::kRegister, registration.name,
                            registration.private_model, registration.model_bytes.size());
    if (!a.status.ok()) return answer(a.status);
    if (registration.private_model) {
      registration.owner_tenant = a.caller.tenant;
      // The quota is checked again once the probe has measured the model.
      if (guard_ != nullptr) {
        registration.admit_private_memory = [guard = guard_, caller = a.caller,
                                             name = registration.name](int64_t bytes) {
          return guard->AdmitPrivateMemory(caller, name, bytes);
        };
      }
    }
    registration.caller = a.caller;
    // Registration writes the model to the repository and validates it, which
    // may take a while: it runs on the control thread, like a model load.
    const std::string name = registration.name;
    const bool private_model = registration.private_model;
    auto shared = std::make_shared<RegistrationRequest>(std::move(registration));
    const Status posted = PostControl(
        control_, answer, [this, response, shared, caller = a.caller](const Answer& answer) {
          const std::string name = shared->name;
          const bool private_model = shared->private_model;
          const Status status = server_.RegisterModel(std::move(*shared));
          FinishCall(guard_, caller, Operation::kRegister, name, status, private_model);
          if (status.ok()) {
            response->set_name(name);
            response->set_state("GENERATING");
          }
          answer(status);
        });
    if (!posted.ok()) {
      RefuseControl(guard_, a.caller, Operation::kRegister, name, posted, answer, private_model);
    }
  }

  void GetVariants(const grpc_async::GatedContext& context, const somm::GetVariantsRequest& request,
                   somm::GetVariantsResponse* response, const Answer& answer) {
    if (request.name().empty()) {
      return answer(InvalidArgument("variants request names no model (name)"));
    }
    Admission a = AdmitCall(guard_, context, Operation::kModelMetadata, request.name());
    if (!a.status.ok()) return answer(a.status);
    StatusOr<RegistrationStatus> status = server_.GetRegistrationStatus(request.name());
    if (status.ok()) grpc_codec::EncodeRegistrationStatus(*status, response);
    answer(status.status());
  }

  void RecentDecisions(const grpc_async::GatedContext& context,
                       const somm::RecentDecisionsRequest& request,
                       somm::RecentDecisionsResponse* response, const Answer& answer) {
    Admission a = AdmitCall(guard_, context, Operation::kDecisions, "");
    if (!a.status.ok()) return answer(a.status);
    const uint32_t limit =
        request.limit() == 0 ? grpc_codec::kDefaultDecisionLimit : request.limit();
    if (limit > grpc_codec::kMaxDecisionLimit) {
      return answer(InvalidArgument("limit must be at most " +
                                    std::to_string(grpc_codec::kMaxDecisionLimit) + ", got " +
                                    std::to_string(limit)));
    }
    std::vector<DecisionRecord> records = server_.RecentDecisions(limit);
    // A caller sees only its own tenant's decisions (an admin sees all).
    std::erase_if(records, [&](const DecisionRecord& r) { return !a.caller.MaySeeDecision(r.tenant); });
    grpc_codec::EncodeDecisions(records, response);
    answer(Status::Ok());
  }

  void Rollout(const grpc_async::GatedContext& context, const somm::RolloutRequest& request,
               somm::RolloutResponse* response, Answer answer) {
    if (request.model_name().empty()) {
      return answer(InvalidArgument("rollout request names no model (model_name)"));
    }
    Admission a = AdmitCall(guard_, context, Operation::kRollout, request.model_name());
    if (!a.status.ok()) return answer(a.status);
    StatusOr<RolloutChange> change =
        RolloutChangeFromJson(request.model_name(), request.change_json());
    if (!change.ok()) {
      FinishCall(guard_, a.caller, Operation::kRollout, request.model_name(), change.status());
      return answer(change.status());
    }
    // A started canary loads: on the control thread, as a load is.
    const Status posted = PostControl(
        control_, answer,
        [this, response, change = std::move(change).value(), caller = a.caller](const Answer& answer) {
          StatusOr<RolloutView> view = server_.ChangeRollout(change, caller);
          if (view.ok()) response->set_rollout_json(RolloutViewToJson(*view));
          FinishCall(guard_, caller, Operation::kRollout, change.model, view.status());
          answer(view.status());
        });
    if (!posted.ok()) {
      RefuseControl(guard_, a.caller, Operation::kRollout, request.model_name(), posted, answer);
    }
  }

  InferenceServer& server_;
  SerialExecutor& control_;
  CallGuard* const guard_;  // null = no checks
};

std::string HostPort(const std::string& address, int port) {
  const bool ipv6 = address.find(':') != std::string::npos && address.front() != '[';
  return (ipv6 ? "[" + address + "]" : address) + ":" + std::to_string(port);
}

}  // namespace

struct GrpcFrontend::Impl {
  Impl(InferenceServer& server, CallGuard* guard, InflightLimit* inflight_limit, ByteBudget* budget,
       int64_t max_message_bytes, std::vector<RestMount> mounts)
      : gate(guard, budget, max_message_bytes),
        service(server, control, gate, inflight_limit),
        stream({&server, guard, &gate, budget, inflight_limit}),
        somm_service(server, control, guard),
        operator_calls(std::move(mounts), guard),
        model_info(server, guard),
        health({"inference.GRPCInferenceService", "somm.SommControl"},
               [&server] { return server.IsReady(); }, &stopping),
        methods(&gate) {}

  void Shutdown(std::chrono::system_clock::time_point deadline) {
    std::call_once(shutdown_once, [&] {
      // Health watches end at once (NOT_SERVING, then OK) rather than hold
      // the stop until the deadline.
      stopping.store(true, std::memory_order_release);
      // Open ModelStreamInfer streams answer what they hold and end.
      stream.Drain();
      // Order matters: gRPC's Shutdown waits for the calls in flight until
      // the deadline, and queued loads answer theirs on the control thread,
      // so that thread stops only afterwards; the queue then drops later
      // answers and waits for the InferenceServer callbacks of the calls.
      if (server) server->Shutdown(deadline);
      control.Shutdown();
      infer_queue->Close();
    });
  }

  SerialExecutor control{"somm-grpc-ctl", kControlQueue};
  FrontendGate gate;
  OipService service;
  grpc_async::StreamInferService stream;  // ModelStreamInfer
  SommControlService somm_service;
  grpc_async::OperatorCallService operator_calls;  // the REST mounts, over gRPC
  grpc_async::ModelInfoRpcs model_info;  // ModelConfig, ModelStatistics
  std::atomic<bool> stopping{false};
  grpc_async::HealthService health;
  grpc_async::KeyFirstService key_first;  // every method, registered with gRPC
  grpc_async::KeyFirstTable methods;      // the handlers: outlive the queue
  // After the services, before the server; shared with the client calls
  // started on it (queue()).
  std::shared_ptr<grpc_async::CallQueue> infer_queue = std::make_shared<grpc_async::CallQueue>();
  int port = 0;
  std::once_flag shutdown_once;
  std::unique_ptr<grpc::Server> server;  // last: destroyed first
};

StatusOr<std::unique_ptr<GrpcFrontend>> GrpcFrontend::Start(InferenceServer& server,
                                                            GrpcFrontendOptions options) {
  if (options.port < 0 || options.port > 65535) {
    return InvalidArgument("gRPC port " + std::to_string(options.port) + " is not in 0..65535");
  }
  if (options.max_message_bytes <= 0) {
    return InvalidArgument("gRPC max_message_bytes must be positive, got " +
                           std::to_string(options.max_message_bytes));
  }
  if (options.address.empty()) return InvalidArgument("gRPC listen address is empty");

  grpc_transport::TurnOffAbslDeadlockDetection();
  auto impl = std::make_unique<Impl>(server, options.guard, options.inflight_limit,
                                     options.byte_budget, options.max_message_bytes,
                                     std::move(options.mounts));
  const std::string where = HostPort(options.address, options.port);
  grpc::ServerBuilder builder;
  auto credentials = grpc_tls::ServerCredentials(options.tls);
  if (!credentials.ok()) return credentials.status();
  builder.AddListeningPort(where, *credentials, &impl->port);
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.SetMaxSendMessageSize(options.max_message_bytes);
  // gRPC turns SO_REUSEPORT on by default, which would let a second server
  // silently share a port already in use; a taken port should be an error.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  grpc_async::CallQueue* queue = impl->infer_queue.get();
  impl->service.Declare(queue, &impl->key_first, impl->methods);
  impl->somm_service.Declare(queue, &impl->key_first, impl->methods);
  impl->operator_calls.Declare(queue, &impl->key_first, impl->methods);
  impl->model_info.Declare(queue, &impl->key_first, impl->methods);
  impl->health.Declare(queue, &impl->key_first, impl->methods);
  impl->stream.Declare(queue, &impl->key_first);
  builder.RegisterService(&impl->key_first);
  impl->infer_queue->Open(builder.AddCompletionQueue());
  impl->server = builder.BuildAndStart();
  if (!impl->server || impl->port == 0) {
    impl->Shutdown(std::chrono::system_clock::now());
    impl->server.reset();
    return Unavailable("gRPC frontend cannot listen on " + where +
                       " (address invalid or port in use)");
  }
  // One open offer per thread, so that a burst of calls finds one ready
  // while the threads are busy; each answered offer is renewed.
  const int threads = options.infer_threads > 0
                          ? options.infer_threads
                          : std::clamp(static_cast<int>(std::thread::hardware_concurrency()) / 2,
                                       options.min_infer_threads, 4);
  for (int i = 0; i < threads; ++i) queue->Ask<InferCall>(&impl->service, queue);
  impl->methods.Start();
  impl->health.StartWatch();
  impl->stream.Start();
  queue->StartThreads(threads, "somm-grpc-infer");
  return std::unique_ptr<GrpcFrontend>(new GrpcFrontend(std::move(impl)));
}

GrpcFrontend::GrpcFrontend(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

GrpcFrontend::~GrpcFrontend() { Shutdown(std::chrono::seconds(1)); }

int GrpcFrontend::port() const { return impl_->port; }

std::shared_ptr<grpc_async::CallQueue> GrpcFrontend::queue() const { return impl_->infer_queue; }

void GrpcFrontend::Shutdown(std::chrono::system_clock::time_point deadline) {
  impl_->Shutdown(deadline);
}

}  // namespace somm
