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

using grpc::CallbackServerContext;
using grpc::ServerUnaryReactor;
using grpc_codec::ToGrpcStatus;

// Runs slow control calls (model load and unload) one after another on one
// thread of its own. gRPC's callback threads must not block for seconds, and
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

ServerUnaryReactor* FinishNow(CallbackServerContext* context, const Status& status) {
  ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

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

// Every method on gRPC's callback API but ModelInfer, which is served from a
// completion queue by threads of our own (InferCall below): the one call
// whose CPU matters. ModelInfer is made async first: gRPC marks a method
// async by dropping its handler only while it is still a sync one, so
// WithAsyncMethod_ModelInfer<CallbackService> would keep the callback
// handler and crash on the first RequestModelInfer.
using oip_grpc = inference::GRPCInferenceService;
using OipServiceBase = oip_grpc::WithCallbackMethod_ServerLive<
    oip_grpc::WithCallbackMethod_ServerReady<oip_grpc::WithCallbackMethod_ModelReady<
        oip_grpc::WithCallbackMethod_ServerMetadata<oip_grpc::WithCallbackMethod_ModelMetadata<
            oip_grpc::WithCallbackMethod_RepositoryIndex<
                oip_grpc::WithCallbackMethod_RepositoryModelLoad<
                    oip_grpc::WithCallbackMethod_RepositoryModelUnload<
                        oip_grpc::WithAsyncMethod_ModelInfer<oip_grpc::Service>>>>>>>>>;

class OipService final : public OipServiceBase {
 public:
  OipService(InferenceServer& server, ControlThread& control, CallGuard* guard,
             InflightLimit* inflight_limit)
      : server_(server), control_(control), guard_(guard), inflight_limit_(inflight_limit) {}

  InferenceServer& server() const { return server_; }
  CallGuard* guard() const { return guard_; }
  InflightLimit* inflight_limit() const { return inflight_limit_; }

  ServerUnaryReactor* ServerLive(CallbackServerContext* context,
                                 const inference::ServerLiveRequest*,
                                 inference::ServerLiveResponse* response) override {
    response->set_live(server_.IsLive());
    return FinishNow(context, Status::Ok());
  }

  ServerUnaryReactor* ServerReady(CallbackServerContext* context,
                                  const inference::ServerReadyRequest*,
                                  inference::ServerReadyResponse* response) override {
    response->set_ready(server_.IsReady());
    return FinishNow(context, Status::Ok());
  }

  ServerUnaryReactor* ModelReady(CallbackServerContext* context,
                                 const inference::ModelReadyRequest* request,
                                 inference::ModelReadyResponse* response) override {
    Admission a = AdmitCall(guard_, context, Operation::kModelMetadata, request->name());
    if (!a.status.ok()) return FinishNow(context, a.status);
    // An empty version means "any ready version", as InferenceServer defines.
    StatusOr<bool> ready = server_.IsModelReady(request->name(), request->version());
    if (ready.ok()) response->set_ready(*ready);
    return FinishNow(context, ready.status());
  }

  ServerUnaryReactor* ServerMetadata(CallbackServerContext* context,
                                     const inference::ServerMetadataRequest*,
                                     inference::ServerMetadataResponse* response) override {
    Admission a = AdmitCall(guard_, context, Operation::kServerMetadata, "");
    if (!a.status.ok()) return FinishNow(context, a.status);
    grpc_codec::EncodeServerMetadata(server_.GetServerMetadata(), response);
    return FinishNow(context, Status::Ok());
  }

  ServerUnaryReactor* ModelMetadata(CallbackServerContext* context,
                                    const inference::ModelMetadataRequest* request,
                                    inference::ModelMetadataResponse* response) override {
    Admission a = AdmitCall(guard_, context, Operation::kModelMetadata, request->name());
    if (!a.status.ok()) return FinishNow(context, a.status);
    StatusOr<somm::ModelMetadata> metadata =
        server_.GetModelMetadata(request->name(), request->version());
    if (metadata.ok()) grpc_codec::EncodeModelMetadata(*metadata, response);
    return FinishNow(context, metadata.status());
  }

  ServerUnaryReactor* RepositoryIndex(CallbackServerContext* context,
                                      const inference::RepositoryIndexRequest* request,
                                      inference::RepositoryIndexResponse* response) override {
    Admission a = AdmitCall(guard_, context, Operation::kIndex, "");
    if (!a.status.ok()) return FinishNow(context, a.status);
    // somm serves one repository, so repository_name selects nothing.
    for (const RepositoryEntry& entry : server_.RepositoryIndex(request->ready())) {
      if (guard_ != nullptr && !guard_->MaySee(a.caller, entry.name)) continue;
      auto* model = response->add_models();
      model->set_name(entry.name);
      model->set_version(entry.version);
      model->set_state(entry.state);
      model->set_reason(entry.reason);
    }
    return FinishNow(context, Status::Ok());
  }

  ServerUnaryReactor* RepositoryModelLoad(CallbackServerContext* context,
                                          const inference::RepositoryModelLoadRequest* request,
                                          inference::RepositoryModelLoadResponse*) override {
    if (request->model_name().empty()) {
      return FinishNow(context, InvalidArgument("load request names no model (model_name)"));
    }
    Admission a = AdmitCall(guard_, context, Operation::kLoad, request->model_name());
    if (!a.status.ok()) return FinishNow(context, a.status);
    Status params = CheckLoadParameters(*request);
    if (!params.ok()) {
      FinishCall(guard_, a.caller, Operation::kLoad, request->model_name(), params);
      return FinishNow(context, params);
    }
    ServerUnaryReactor* reactor = context->DefaultReactor();
    control_.Post([this, reactor, name = request->model_name(), caller = std::move(a.caller)] {
      const Status status = server_.LoadModel(name);
      FinishCall(guard_, caller, Operation::kLoad, name, status);
      reactor->Finish(ToGrpcStatus(status));
    });
    return reactor;
  }

  ServerUnaryReactor* RepositoryModelUnload(CallbackServerContext* context,
                                            const inference::RepositoryModelUnloadRequest* request,
                                            inference::RepositoryModelUnloadResponse*) override {
    if (request->model_name().empty()) {
      return FinishNow(context, InvalidArgument("unload request names no model (model_name)"));
    }
    // Triton's one unload parameter, unload_dependents, concerns ensembles,
    // which somm does not have; it is accepted and has nothing to do.
    Admission a = AdmitCall(guard_, context, Operation::kUnload, request->model_name());
    if (!a.status.ok()) return FinishNow(context, a.status);
    ServerUnaryReactor* reactor = context->DefaultReactor();
    control_.Post([this, reactor, name = request->model_name(), caller = std::move(a.caller)] {
      const Status status = server_.UnloadModel(name);
      FinishCall(guard_, caller, Operation::kUnload, name, status);
      reactor->Finish(ToGrpcStatus(status));
    });
    return reactor;
  }

 private:
  InferenceServer& server_;
  ControlThread& control_;
  CallGuard* const guard_;               // null = no checks
  InflightLimit* const inflight_limit_;  // null = no bound
};

// One ModelInfer call (frontend/grpc/async_unary.h).
class InferCall final
    : public grpc_async::UnaryCall<inference::ModelInferRequest, inference::ModelInferResponse> {
 public:
  InferCall(OipService* service, grpc_async::CallQueue* queue)
      : UnaryCall(queue), service_(service) {}
  void Ask() {
    service_->RequestModelInfer(&context_, &request_, &responder_, queue_->cq(), queue_->cq(),
                                this);
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

// somm's model-less control service (proto/somm.proto), beside the OIP one.
class SommControlService final : public somm::SommControl::CallbackService {
 public:
  SommControlService(InferenceServer& server, ControlThread& control, CallGuard* guard)
      : server_(server), control_(control), guard_(guard) {}

  ServerUnaryReactor* RegisterModel(CallbackServerContext* context,
                                    const somm::RegisterModelRequest* request,
                                    somm::RegisterModelResponse* response) override {
    RegistrationRequest registration;
    Status decoded = grpc_codec::DecodeRegistration(*request, &registration);
    if (!decoded.ok()) return FinishNow(context, decoded);
    Admission a = AdmitCall(guard_, context, Operation::kRegister, registration.name,
                            registration.private_model, registration.model_bytes.size());
    if (!a.status.ok()) return FinishNow(context, a.status);
    if (registration.private_model) registration.owner_tenant = a.caller.tenant;
    // Registration writes the model to the repository and validates it, which
    // may take a while: it runs on the control thread, like a model load.
    ServerUnaryReactor* reactor = context->DefaultReactor();
    control_.Post([this, reactor, response, r = std::move(registration),
                   caller = std::move(a.caller)]() mutable {
      const std::string name = r.name;
      const bool private_model = r.private_model;
      const Status status = server_.RegisterModel(std::move(r));
      FinishCall(guard_, caller, Operation::kRegister, name, status, private_model);
      if (status.ok()) {
        response->set_name(name);
        response->set_state("GENERATING");
      }
      reactor->Finish(ToGrpcStatus(status));
    });
    return reactor;
  }

  ServerUnaryReactor* GetVariants(CallbackServerContext* context,
                                  const somm::GetVariantsRequest* request,
                                  somm::GetVariantsResponse* response) override {
    if (request->name().empty()) {
      return FinishNow(context, InvalidArgument("variants request names no model (name)"));
    }
    Admission a = AdmitCall(guard_, context, Operation::kModelMetadata, request->name());
    if (!a.status.ok()) return FinishNow(context, a.status);
    StatusOr<RegistrationStatus> status = server_.GetRegistrationStatus(request->name());
    if (status.ok()) grpc_codec::EncodeRegistrationStatus(*status, response);
    return FinishNow(context, status.status());
  }

  ServerUnaryReactor* RecentDecisions(CallbackServerContext* context,
                                      const somm::RecentDecisionsRequest* request,
                                      somm::RecentDecisionsResponse* response) override {
    Admission a = AdmitCall(guard_, context, Operation::kDecisions, "");
    if (!a.status.ok()) return FinishNow(context, a.status);
    const uint32_t limit =
        request->limit() == 0 ? grpc_codec::kDefaultDecisionLimit : request->limit();
    if (limit > grpc_codec::kMaxDecisionLimit) {
      return FinishNow(context, InvalidArgument("limit must be at most " +
                                                std::to_string(grpc_codec::kMaxDecisionLimit) +
                                                ", got " + std::to_string(limit)));
    }
    std::vector<DecisionRecord> records = server_.RecentDecisions(limit);
    // A caller sees only its own tenant's decisions (an admin sees all).
    std::erase_if(records, [&](const DecisionRecord& r) { return !a.caller.MaySeeDecision(r.tenant); });
    grpc_codec::EncodeDecisions(records, response);
    return FinishNow(context, Status::Ok());
  }

  ServerUnaryReactor* ListTasks(CallbackServerContext* context, const somm::ListTasksRequest*,
                                somm::TasksResponse* response) override {
    Admission a = AdmitCall(guard_, context, Operation::kIndex, "");
    if (!a.status.ok()) return FinishNow(context, a.status);
    grpc_codec::EncodeTasks(server_.ListTasks(a.caller), response);
    return FinishNow(context, Status::Ok());
  }

  ServerUnaryReactor* DescribeTask(CallbackServerContext* context,
                                   const somm::DescribeTaskRequest* request,
                                   somm::TasksResponse* response) override {
    Admission a = AdmitCall(guard_, context, Operation::kIndex, "");
    if (!a.status.ok()) return FinishNow(context, a.status);
    StatusOr<TaskDescription> task = server_.DescribeTask(request->task(), a.caller);
    if (task.ok()) grpc_codec::EncodeTasks({*task}, response);
    return FinishNow(context, task.status());
  }

  ServerUnaryReactor* Rollout(CallbackServerContext* context, const somm::RolloutRequest* request,
                              somm::RolloutResponse* response) override {
    if (request->model_name().empty()) {
      return FinishNow(context, InvalidArgument("rollout request names no model (model_name)"));
    }
    Admission a = AdmitCall(guard_, context, Operation::kLoad, request->model_name());
    if (!a.status.ok()) return FinishNow(context, a.status);
    StatusOr<RolloutChange> change =
        RolloutChangeFromJson(request->model_name(), request->change_json());
    if (!change.ok()) return FinishNow(context, change.status());
    // A started canary loads: off the callback thread, as a load is.
    ServerUnaryReactor* reactor = context->DefaultReactor();
    control_.Post([this, reactor, response, change = std::move(change).value(),
                   caller = std::move(a.caller)] {
      StatusOr<RolloutView> view = server_.ChangeRollout(change, caller);
      if (view.ok()) response->set_rollout_json(RolloutViewToJson(*view));
      reactor->Finish(ToGrpcStatus(view.status()));
    });
    return reactor;
  }

  ServerUnaryReactor* GetRollout(CallbackServerContext* context,
                                 const somm::GetRolloutRequest* request,
                                 somm::RolloutResponse* response) override {
    Admission a = AdmitCall(guard_, context, Operation::kModelMetadata, request->model_name());
    if (!a.status.ok()) return FinishNow(context, a.status);
    StatusOr<RolloutView> view = server_.GetRollout(request->model_name(), a.caller);
    if (view.ok()) response->set_rollout_json(RolloutViewToJson(*view));
    return FinishNow(context, view.status());
  }

 private:
  InferenceServer& server_;
  ControlThread& control_;
  CallGuard* const guard_;  // null = no checks
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
      // Order matters: gRPC's Shutdown waits for in-flight reactors, and
      // queued loads finish theirs on the control thread, so that thread
      // stops only afterwards; the queue then drops later answers and waits
      // for the InferenceServer callbacks of the ModelInfer calls.
      if (server) server->Shutdown(deadline);
      control.Stop();
      infer_queue.Close();
    });
  }

  ControlThread control;
  OipService service;
  SommControlService somm_service;
  grpc_async::CallQueue infer_queue;  // after the services, before the server
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
  builder.RegisterService(&impl->service);
  builder.RegisterService(&impl->somm_service);
  impl->infer_queue.Open(builder.AddCompletionQueue());
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
                                       1, 4);
  for (int i = 0; i < threads; ++i) {
    impl->infer_queue.Ask<InferCall>(&impl->service, &impl->infer_queue);
  }
  impl->infer_queue.StartThreads(threads, "somm-grpc-infer");
  return std::unique_ptr<GrpcFrontend>(new GrpcFrontend(std::move(impl)));
}

GrpcFrontend::GrpcFrontend(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

GrpcFrontend::~GrpcFrontend() { Shutdown(std::chrono::seconds(1)); }

int GrpcFrontend::port() const { return impl_->port; }

void GrpcFrontend::Shutdown(std::chrono::system_clock::time_point deadline) {
  impl_->Shutdown(deadline);
}

}  // namespace somm
