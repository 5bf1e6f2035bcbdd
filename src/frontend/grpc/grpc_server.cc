#include "frontend/grpc/grpc_server.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

#include "frontend/grpc/async_unary.h"
#include "frontend/grpc/grpc_codec.h"
#include "frontend/grpc/grpc_tls.h"
#include "frontend/grpc/somm_codec.h"
#include "frontend/grpc/task_codec.h"
#include "proto/inference.grpc.pb.h"
#include "proto/somm.grpc.pb.h"

namespace somm {
namespace {

using grpc_async::Answer;

// Runs slow control calls (model load and unload) one after another on one
// thread of its own. The threads that poll gRPC must not block for seconds, and
// one thread, unlike a thread per call, cannot be multiplied by a client
// that floods load requests. Serial loads also spare the InferenceServer
// racing loads and unloads of one model.
class ControlThread {
 public:
  ControlThread() : thread_([this] { Loop(); }) {}
  ~ControlThread() { Stop(); }

  void Post(std::function<void()> job) {
    std::lock_guard lock(mu_);
    jobs_.push_back(std::move(job));
    cv_.notify_one();
  }

  // Runs every job already posted, then joins. Idempotent.
  void Stop() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
      cv_.notify_one();
    }
    if (thread_.joinable()) thread_.join();
  }

 private:
  void Loop() {
    std::unique_lock lock(mu_);
    while (true) {
      cv_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stopping, and nothing left
      std::function<void()> job = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      job();
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;  // guarded by mu_
  bool stopping_ = false;                   // guarded by mu_
  std::thread thread_;                      // last: starts once the rest exists
};

std::string AuthorizationOf(const grpc::ServerContextBase* context) {
  const auto& metadata = context->client_metadata();
  auto it = metadata.find("authorization");
  return it == metadata.end() ? std::string() : std::string(it->second.data(), it->second.size());
}

// Asks the guard (when there is one) whether this call may go on.
Admission AdmitCall(CallGuard* guard, const grpc::ServerContextBase* context, Operation op,
                    const std::string& model, bool private_model = false, size_t bytes = 0) {
  if (guard == nullptr) return Admission{};
  return guard->Admit(CallInfo{op, model, AuthorizationOf(context), private_model, bytes});
}

void FinishCall(CallGuard* guard, const Caller& caller, Operation op, const std::string& model,
                const Status& outcome, bool private_model = false) {
  if (guard != nullptr) guard->Done(caller, CallInfo{op, model, {}, private_model, 0}, outcome);
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
// by its threads (frontend/grpc/async_unary.h): ModelInfer by InferCall
// below, the rest through a MethodTable by the handlers here, which answer
// at once or, for loads and unloads, from the control thread.
using oip_grpc = inference::GRPCInferenceService;

class OipService final {
 public:
  OipService(InferenceServer& server, ControlThread& control, CallGuard* guard,
             InflightLimit* inflight_limit)
      : server_(server), control_(control), guard_(guard), inflight_limit_(inflight_limit) {}

  oip_grpc::AsyncService& async() { return async_; }
  InferenceServer& server() const { return server_; }
  CallGuard* guard() const { return guard_; }
  InflightLimit* inflight_limit() const { return inflight_limit_; }

  // Offers every method but ModelInfer on `queue`.
  void Serve(grpc_async::CallQueue* queue, grpc_async::MethodTable& table) {
    table.Serve(queue, &async_, &oip_grpc::AsyncService::RequestServerLive,
                [this](const grpc::ServerContext&, const inference::ServerLiveRequest&,
                       inference::ServerLiveResponse* response, Answer answer) {
                  response->set_live(server_.IsLive());
                  answer(Status::Ok());
                });
    table.Serve(queue, &async_, &oip_grpc::AsyncService::RequestServerReady,
                [this](const grpc::ServerContext&, const inference::ServerReadyRequest&,
                       inference::ServerReadyResponse* response, Answer answer) {
                  response->set_ready(server_.IsReady());
                  answer(Status::Ok());
                });
    table.Serve(queue, &async_, &oip_grpc::AsyncService::RequestModelReady,
                std::bind_front(&OipService::ModelReady, this));
    table.Serve(queue, &async_, &oip_grpc::AsyncService::RequestServerMetadata,
                [this](const grpc::ServerContext& context, const inference::ServerMetadataRequest&,
                       inference::ServerMetadataResponse* response, Answer answer) {
                  Admission a = AdmitCall(guard_, &context, Operation::kServerMetadata, "");
                  if (a.status.ok()) {
                    grpc_codec::EncodeServerMetadata(server_.GetServerMetadata(), response);
                  }
                  answer(a.status);
                });
    table.Serve(queue, &async_, &oip_grpc::AsyncService::RequestModelMetadata,
                std::bind_front(&OipService::ModelMetadata, this));
    table.Serve(queue, &async_, &oip_grpc::AsyncService::RequestRepositoryIndex,
                std::bind_front(&OipService::RepositoryIndex, this));
    table.Serve(queue, &async_, &oip_grpc::AsyncService::RequestRepositoryModelLoad,
                std::bind_front(&OipService::Load, this));
    table.Serve(queue, &async_, &oip_grpc::AsyncService::RequestRepositoryModelUnload,
                std::bind_front(&OipService::Unload, this));
  }

 private:
  void ModelReady(const grpc::ServerContext& context, const inference::ModelReadyRequest& request,
                  inference::ModelReadyResponse* response, const Answer& answer) {
    Admission a = AdmitCall(guard_, &context, Operation::kModelMetadata, request.name());
    if (!a.status.ok()) return answer(a.status);
    // An empty version means "any ready version", as InferenceServer defines.
    StatusOr<bool> ready = server_.IsModelReady(request.name(), request.version());
    if (ready.ok()) response->set_ready(*ready);
    answer(ready.status());
  }

  void ModelMetadata(const grpc::ServerContext& context,
                     const inference::ModelMetadataRequest& request,
                     inference::ModelMetadataResponse* response, const Answer& answer) {
    Admission a = AdmitCall(guard_, &context, Operation::kModelMetadata, request.name());
    if (!a.status.ok()) return answer(a.status);
    StatusOr<somm::ModelMetadata> metadata =
        server_.GetModelMetadata(request.name(), request.version());
    if (metadata.ok()) grpc_codec::EncodeModelMetadata(*metadata, response);
    answer(metadata.status());
  }

  void RepositoryIndex(const grpc::ServerContext& context,
                       const inference::RepositoryIndexRequest& request,
                       inference::RepositoryIndexResponse* response, const Answer& answer) {
    Admission a = AdmitCall(guard_, &context, Operation::kIndex, "");
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

  void Load(const grpc::ServerContext& context,
            const inference::RepositoryModelLoadRequest& request,
            inference::RepositoryModelLoadResponse*, Answer answer) {
    if (request.model_name().empty()) {
      return answer(InvalidArgument("load request names no model (model_name)"));
    }
    Admission a = AdmitCall(guard_, &context, Operation::kLoad, request.model_name());
    if (!a.status.ok()) return answer(a.status);
    Status params = CheckLoadParameters(request);
    if (!params.ok()) {
      FinishCall(guard_, a.caller, Operation::kLoad, request.model_name(), params);
      return answer(params);
    }
    control_.Post([this, answer = std::move(answer), name = request.model_name(),
                   caller = std::move(a.caller)] {
      const Status status = server_.LoadModel(name);
      FinishCall(guard_, caller, Operation::kLoad, name, status);
      answer(status);
    });
  }

  void Unload(const grpc::ServerContext& context,
              const inference::RepositoryModelUnloadRequest& request,
              inference::RepositoryModelUnloadResponse*, Answer answer) {
    if (request.model_name().empty()) {
      return answer(InvalidArgument("unload request names no model (model_name)"));
    }
    // Triton's one unload parameter, unload_dependents, concerns ensembles,
    // which somm does not have; it is accepted and has nothing to do.
    Admission a = AdmitCall(guard_, &context, Operation::kUnload, request.model_name());
    if (!a.status.ok()) return answer(a.status);
    control_.Post([this, answer = std::move(answer), name = request.model_name(),
                   caller = std::move(a.caller)] {
      const Status status = server_.UnloadModel(name);
      FinishCall(guard_, caller, Operation::kUnload, name, status);
      answer(status);
    });
  }

  InferenceServer& server_;
  ControlThread& control_;
  CallGuard* const guard_;               // null = no checks
  InflightLimit* const inflight_limit_;  // null = no bound
  oip_grpc::AsyncService async_;
};

// One ModelInfer call (frontend/grpc/async_unary.h).
class InferCall final
    : public grpc_async::UnaryCall<inference::ModelInferRequest, inference::ModelInferResponse> {
 public:
  InferCall(OipService* service, grpc_async::CallQueue* queue)
      : UnaryCall(queue), service_(service) {}
  void Ask() {
    service_->async().RequestModelInfer(&context_, &request_, &responder_, queue_->cq(),
                                        queue_->cq(), this);
  }

 private:
  void AskNext() override { queue_->Ask<InferCall>(service_, queue_); }
  void Handle() override {
    // The task form names no model (its task is a parameter).
    const Operation op =
        request_.model_name().empty() ? Operation::kTaskInfer : Operation::kInfer;
    // Shed before the guard and the tensors' decoding (gRPC has parsed the
    // message already; that much is not ours to save).
    InflightLimit* limit = service_->inflight_limit();
    auto slot = std::make_shared<InflightLimit::Slot>();
    if (limit != nullptr) {
      *slot = limit->TryAcquire("grpc");
      if (!slot->held()) return Finish(limit->Refusal());
    }
    CallGuard* guard = service_->guard();
    Admission a = AdmitCall(guard, &context_, op, request_.model_name());
    if (!a.status.ok()) return Finish(a.status);
    InferenceRequest query;
    Status decoded = grpc_codec::DecodeInferRequest(request_, &query);
    if (!decoded.ok()) {
      FinishCall(guard, a.caller, op, request_.model_name(), decoded);
      return Finish(decoded);
    }
    query.caller = a.caller;
    // The callback runs on a batcher thread, or here before Infer returns.
    // The call may be gone once answered, so the end is told to `queue`.
    // The slot is a shared_ptr because InferCallback must be copyable; it
    // goes back before the answer is written, so that a client that has its
    // answer finds it free.
    grpc_async::CallQueue* queue = queue_;
    queue->Begin();
    service_->server().Infer(
        std::move(query), [this, queue, guard, op, slot,
                           caller = std::move(a.caller)](StatusOr<InferenceResponse> result) {
          FinishCall(guard, caller, op, request_.model_name(), result.status());
          Status status = result.status();
          if (result.ok()) {
            InferenceResponse answer = std::move(result).value();
            if (answer.model_name.empty()) answer.model_name = request_.model_name();
            if (answer.id.empty()) answer.id = request_.id();
            status = grpc_codec::EncodeInferResponse(std::move(answer), &response_);
          }
          slot->Release();
          Finish(status);
          queue->End();
        });
  }

  OipService* const service_;
};

// somm's model-less control service (proto/somm.proto), beside the OIP one,
// on the same queue.
class SommControlService final {
 public:
  SommControlService(InferenceServer& server, ControlThread& control, CallGuard* guard)
      : server_(server), control_(control), guard_(guard) {}

  somm::SommControl::AsyncService& async() { return async_; }

  void Serve(grpc_async::CallQueue* queue, grpc_async::MethodTable& table) {
    using Async = somm::SommControl::AsyncService;
    table.Serve(queue, &async_, &Async::RequestRegisterModel,
                std::bind_front(&SommControlService::RegisterModel, this));
    table.Serve(queue, &async_, &Async::RequestGetVariants,
                std::bind_front(&SommControlService::GetVariants, this));
    table.Serve(queue, &async_, &Async::RequestRecentDecisions,
                std::bind_front(&SommControlService::RecentDecisions, this));
    table.Serve(queue, &async_, &Async::RequestListTasks,
                [this](const grpc::ServerContext& c, const somm::ListTasksRequest&,
                       somm::TasksResponse* response, Answer answer) {
                  Admission a = AdmitCall(guard_, &c, Operation::kIndex, "");
                  if (a.status.ok()) grpc_codec::EncodeTasks(server_.ListTasks(a.caller), response);
                  answer(a.status);
                });
    table.Serve(queue, &async_, &Async::RequestDescribeTask,
                [this](const grpc::ServerContext& c, const somm::DescribeTaskRequest& r,
                       somm::TasksResponse* response, Answer answer) {
                  Admission a = AdmitCall(guard_, &c, Operation::kIndex, "");
                  if (!a.status.ok()) return answer(a.status);
                  StatusOr<TaskDescription> task = server_.DescribeTask(r.task(), a.caller);
                  if (task.ok()) grpc_codec::EncodeTasks({*task}, response);
                  answer(task.status());
                });
    table.Serve(queue, &async_, &Async::RequestRollout,
                std::bind_front(&SommControlService::Rollout, this));
    table.Serve(queue, &async_, &Async::RequestGetRollout,
                [this](const grpc::ServerContext& c, const somm::GetRolloutRequest& r,
                       somm::RolloutResponse* response, Answer answer) {
                  Admission a = AdmitCall(guard_, &c, Operation::kModelMetadata, r.model_name());
                  if (!a.status.ok()) return answer(a.status);
                  StatusOr<RolloutView> view = server_.GetRollout(r.model_name(), a.caller);
                  if (view.ok()) response->set_rollout_json(RolloutViewToJson(*view));
                  answer(view.status());
                });
  }

 private:
  void RegisterModel(const grpc::ServerContext& context, const somm::RegisterModelRequest& request,
                     somm::RegisterModelResponse* response, Answer answer) {
    RegistrationRequest registration;
    Status decoded = grpc_codec::DecodeRegistration(request, &registration);
    if (!decoded.ok()) return answer(decoded);
    Admission a = AdmitCall(guard_, &context, Operation::kRegister, registration.name,
                            registration.private_model, registration.model_bytes.size());
    if (!a.status.ok()) return answer(a.status);
    if (registration.private_model) registration.owner_tenant = a.caller.tenant;
    registration.caller = a.caller;
    // Registration writes the model to the repository and validates it, which
    // may take a while: it runs on the control thread, like a model load.
    control_.Post([this, answer = std::move(answer), response, r = std::move(registration),
                   caller = std::move(a.caller)]() mutable {
      const std::string name = r.name;
      const bool private_model = r.private_model;
      const Status status = server_.RegisterModel(std::move(r));
      FinishCall(guard_, caller, Operation::kRegister, name, status, private_model);
      if (status.ok()) {
        response->set_name(name);
        response->set_state("GENERATING");
      }
      answer(status);
    });
  }

  void GetVariants(const grpc::ServerContext& context, const somm::GetVariantsRequest& request,
                   somm::GetVariantsResponse* response, const Answer& answer) {
    if (request.name().empty()) {
      return answer(InvalidArgument("variants request names no model (name)"));
    }
    Admission a = AdmitCall(guard_, &context, Operation::kModelMetadata, request.name());
    if (!a.status.ok()) return answer(a.status);
    StatusOr<RegistrationStatus> status = server_.GetRegistrationStatus(request.name());
    if (status.ok()) grpc_codec::EncodeRegistrationStatus(*status, response);
    answer(status.status());
  }

  void RecentDecisions(const grpc::ServerContext& context,
                       const somm::RecentDecisionsRequest& request,
                       somm::RecentDecisionsResponse* response, const Answer& answer) {
    Admission a = AdmitCall(guard_, &context, Operation::kDecisions, "");
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

  void Rollout(const grpc::ServerContext& context, const somm::RolloutRequest& request,
               somm::RolloutResponse* response, Answer answer) {
    if (request.model_name().empty()) {
      return answer(InvalidArgument("rollout request names no model (model_name)"));
    }
    Admission a = AdmitCall(guard_, &context, Operation::kRollout, request.model_name());
    if (!a.status.ok()) return answer(a.status);
    StatusOr<RolloutChange> change =
        RolloutChangeFromJson(request.model_name(), request.change_json());
    if (!change.ok()) {
      FinishCall(guard_, a.caller, Operation::kRollout, request.model_name(), change.status());
      return answer(change.status());
    }
    // A started canary loads: on the control thread, as a load is.
    control_.Post([this, answer = std::move(answer), response,
                   change = std::move(change).value(), caller = std::move(a.caller)] {
      StatusOr<RolloutView> view = server_.ChangeRollout(change, caller);
      if (view.ok()) response->set_rollout_json(RolloutViewToJson(*view));
      FinishCall(guard_, caller, Operation::kRollout, change.model, view.status());
      answer(view.status());
    });
  }

  InferenceServer& server_;
  ControlThread& control_;
  CallGuard* const guard_;  // null = no checks
  somm::SommControl::AsyncService async_;
};

std::string HostPort(const std::string& address, int port) {
  const bool ipv6 = address.find(':') != std::string::npos && address.front() != '[';
  return (ipv6 ? "[" + address + "]" : address) + ":" + std::to_string(port);
}

}  // namespace

struct GrpcFrontend::Impl {
  Impl(InferenceServer& server, CallGuard* guard, InflightLimit* inflight_limit)
      : service(server, control, guard, inflight_limit), somm_service(server, control, guard) {}

  void Shutdown(std::chrono::system_clock::time_point deadline) {
    std::call_once(shutdown_once, [&] {
      // Order matters: gRPC's Shutdown waits for the calls in flight until
      // the deadline, and queued loads answer theirs on the control thread,
      // so that thread stops only afterwards; the queue then drops later
      // answers and waits for the InferenceServer callbacks of the calls.
      if (server) server->Shutdown(deadline);
      control.Stop();
      infer_queue->Close();
    });
  }

  ControlThread control;
  OipService service;
  SommControlService somm_service;
  grpc_async::MethodTable methods;    // the handlers: outlive the queue
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

  grpc_codec::TurnOffAbslDeadlockDetection();
  auto impl = std::make_unique<Impl>(server, options.guard, options.inflight_limit);
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
  builder.RegisterService(&impl->service.async());
  builder.RegisterService(&impl->somm_service.async());
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
  for (int i = 0; i < threads; ++i) {
    impl->infer_queue->Ask<InferCall>(&impl->service, impl->infer_queue.get());
  }
  impl->service.Serve(impl->infer_queue.get(), impl->methods);
  impl->somm_service.Serve(impl->infer_queue.get(), impl->methods);
  impl->infer_queue->StartThreads(threads, "somm-grpc-infer");
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
