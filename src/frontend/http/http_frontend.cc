#include "frontend/http/http_frontend.h"

#include <strings.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/serial_executor.h"
#include "frontend/http/http_status.h"
#include "frontend/http/oip_json.h"
#include "frontend/http/oip_metadata_json.h"
#include "frontend/http/rest_routes.h"
#include "frontend/http/somm_json.h"
#include "frontend/http/task_json.h"
#include "frontend/http/triton_json.h"
#include "transport/http/handler_pool.h"
#include "transport/http/http_server.h"

namespace somm {
namespace {

using http::Request;
using http::Responder;
using http::Response;
using oip::RestEndpoint;
using rest::AuthorizationOf;
using rest::ErrorResponse;
using rest::JsonResponse;
using rest::RefusalResponse;
using rest::StatusResponse;
using rest::VerifiedKeyOf;

constexpr char kJson[] = "application/json";
constexpr char kOctetStream[] = "application/octet-stream";
constexpr char kInferenceHeaderLengthField[] = "inference-header-content-length";

// The extensions this frontend itself implements; added to whatever the
// InferenceServer reports, since only the REST frontend speaks them.
constexpr const char* kRestExtensions[] = {"binary_tensor_data", "model_repository"};

// Health endpoints: 200 = true, 400 = false, empty body (KServe v2).
Response HealthResponse(bool healthy) {
  Response res;
  res.status = healthy ? 200 : 400;
  return res;
}

// The route of a request's head: the endpoint its path and method name.
oip::RestRoute RouteOf(const http::RequestHead& head) {
  return oip::MatchRestRoute(head.path, head.method);
}

// What a guarded call is, for the CallGuard; nullopt = not guarded (health
// probes) or guarded later (registration, whose body says if it is private).
std::optional<Operation> GuardedOperation(RestEndpoint endpoint) {
  switch (endpoint) {
    case RestEndpoint::kServerMetadata:
      return Operation::kServerMetadata;
    case RestEndpoint::kModelMetadata:
    case RestEndpoint::kModelReady:
    case RestEndpoint::kModelVariants:
    case RestEndpoint::kModelStatistics:
    case RestEndpoint::kModelConfig:
      return Operation::kModelMetadata;
    case RestEndpoint::kStatisticsAll:
      return Operation::kIndex;  // a list: filtered by tenant
    case RestEndpoint::kModelInfer:
      return Operation::kInfer;
    case RestEndpoint::kTaskInfer:
      return Operation::kTaskInfer;
    case RestEndpoint::kRepositoryIndex:
      return Operation::kIndex;
    case RestEndpoint::kRepositoryLoad:
      return Operation::kLoad;
    case RestEndpoint::kRepositoryUnload:
      return Operation::kUnload;
    case RestEndpoint::kModelRollout:
      return Operation::kModelMetadata;
    case RestEndpoint::kBatchList:
    case RestEndpoint::kBatchSubmit:
    case RestEndpoint::kBatchJob:
    case RestEndpoint::kBatchCancel:
      // A user's key sees its tenant's jobs; a submission is admitted again
      // as a query of the model or task it names.
      return Operation::kOperator;
    case RestEndpoint::kModelRolloutChange:
      return Operation::kRollout;  // who may load a model may roll it out
    case RestEndpoint::kDecisions:
      return Operation::kDecisions;
    case RestEndpoint::kTaskList:
    case RestEndpoint::kTaskMetadata:
      return Operation::kIndex;  // what a caller may list; filtered by tenant
    case RestEndpoint::kServerLive:
    case RestEndpoint::kServerReady:
    case RestEndpoint::kRepositoryRegister:
    case RestEndpoint::kNone:
      return std::nullopt;
    default:
      return Operation::kOperator;  // the operator's views
  }
}

bool IsInfer(RestEndpoint endpoint) {
  return endpoint == RestEndpoint::kModelInfer || endpoint == RestEndpoint::kTaskInfer;
}

// An inference request shed under overload: 429, the reason, when to retry.
// The connection stays open: a client's next request may well be admitted.
Response OverloadResponse(const InflightLimit& limit) {
  Response res = StatusResponse(limit.Refusal());
  res.headers.emplace_back("Retry-After", std::to_string(limit.retry_after_s()));
  return res;
}

// A refusal that a retry may get past (the byte budget, the control lane):
// its status, and when to come back.
Response RetryLaterResponse(const Status& status, int retry_after_s) {
  Response res = StatusResponse(status);
  res.headers.emplace_back("Retry-After", std::to_string(retry_after_s));
  return res;
}

// Registration, repository loads and unloads and rollout changes: calls that
// may take seconds, run on the control lane rather than the handler pool.
bool IsControl(RestEndpoint endpoint) {
  return endpoint == RestEndpoint::kRepositoryRegister ||
         endpoint == RestEndpoint::kRepositoryLoad || endpoint == RestEndpoint::kRepositoryUnload ||
         endpoint == RestEndpoint::kModelRolloutChange;
}

// Runs `handler` and turns an exception into a 500 that names it.
void Guarded(Responder& responder, const std::function<void()>& handler) {
  try {
    handler();
  } catch (const std::exception& e) {
    if (responder.pending()) {
      responder.Send(ErrorResponse(500, std::string("internal error: ") + e.what()));
    }
  } catch (...) {
    if (responder.pending()) responder.Send(ErrorResponse(500, "internal error: unknown exception"));
  }
}

}  // namespace

struct HttpFrontend::Impl {
  Impl(InferenceServer& s, HttpFrontendOptions o)
      : server(s),
        options(std::move(o)),
        pool(options.handler_threads),
        control("somm-http-ctl", options.max_control_queue) {
    for (const RestMount& mount : options.mounts) {
      for (RestEndpoint endpoint : mount.endpoints) mounted.emplace(endpoint, &mount.handler);
    }
  }

  InferenceServer& server;
  const HttpFrontendOptions options;
  http::HandlerPool pool;
  // Registration, loads, unloads and rollout changes, one at a time: a slow
  // one never holds a handler thread that metadata calls need.
  SerialExecutor control;
  std::unique_ptr<http::Server> http;
  std::mutex shutdown_mu;
  // Each mounted endpoint's handler (rest_mount.h), in options.mounts.
  std::unordered_map<RestEndpoint, const decltype(RestMount::handler)*> mounted;

  void Handle(Request request, Responder responder);
  Response Dispatch(const oip::RestRoute& route, const Request& req, const Caller& caller);
  // Tells the guard (if any) how an admitted call ended.
  void Finish(const Caller& caller, Operation op, const std::string& model, const Status& outcome) {
    if (options.guard != nullptr) options.guard->Done(caller, CallInfo{op, model, {}, false, 0}, outcome);
  }
  Response ServerMetadataHandler();
  Response ModelMetadataHandler(const oip::RestRoute& route);
  Response ModelReadyHandler(const oip::RestRoute& route);
  void InferHandler(const oip::RestRoute& route, Request req, Responder responder, Caller caller,
                    InflightLimit::Slot slot);
  // The head check (http::ServerOptions::head_check): the key, then room in
  // the byte budget for the body.
  std::optional<Response> CheckHead(const http::RequestHead& head, uint64_t body_bytes,
                                    std::shared_ptr<void>* hold, std::shared_ptr<const void>* note);
  Response IndexHandler(std::string_view body, const Caller& caller);
  Response LoadUnloadHandler(const oip::RestRoute& route, std::string_view body,
                             const Caller& caller);
  Status LoadUnload(const oip::RestRoute& route, std::string_view body);
  Response RegisterHandler(const oip::RestRoute& route, const Request& req);
  Response VariantsHandler(const oip::RestRoute& route);
  Response DecisionsHandler(const Request& req, const Caller& caller);
  Response StatisticsHandler(const oip::RestRoute& route, const Caller& caller);
  Response MountedHandler(const oip::RestRoute& route, const Request& req, const Caller& caller);
};

// Runs on an I/O thread: decides, then answers at once, hands the request
// to InferenceServer::Infer, or moves it to the handler pool.
void HttpFrontend::Impl::Handle(Request request, Responder responder) {
  Guarded(responder, [&] {
    const Request& req = request;
    // Before anything else: a browser page's request that may not be
    // served (origin_policy.h) costs no more than this.
    http::OriginVerdict origin = http::CheckOrigin(options.origin_policy, req.head);
    for (auto& [name, value] : origin.headers) responder.AddHeader(std::move(name), std::move(value));
    if (origin.refuse_status == 204) return responder.Send(Response{204, {}, "", false});
    if (origin.refuse_status != 0) {
      return responder.Send(ErrorResponse(origin.refuse_status, origin.message));
    }
    const std::string* content_type = req.head.Find("content-type");
    if (content_type != nullptr &&
        strncasecmp(content_type->c_str(), "multipart/form-data", 19) == 0) {
      return responder.Send(ErrorResponse(
          415, "multipart/form-data bodies are not part of the inference protocol"));
    }
    for (const PageMount& pages : options.pages) {
      if (std::optional<Response> page = pages(req.head)) return responder.Send(std::move(*page));
    }
    const oip::RestRoute route = RouteOf(req.head);
    if (route.endpoint == RestEndpoint::kNone) {
      return responder.Send(ErrorResponse(
          404, "no inference protocol endpoint at " + req.head.method + " " + req.head.path));
    }
    const std::string method = req.head.method == "HEAD" ? "GET" : req.head.method;
    if (method != route.method) {
      Response res = ErrorResponse(405, req.head.path + " accepts " + route.method + ", not " +
                                            req.head.method);
      res.headers.emplace_back(
          "Allow", route.endpoint == RestEndpoint::kModelRollout ||
                           route.endpoint == RestEndpoint::kBatchList
                       ? "GET, POST"
                       : route.method);
      return responder.Send(std::move(res));
    }
    // Shed before anything costly (the guard, decoding, routing): under
    // overload a refusal must cost little more than reading the request.
    InflightLimit::Slot slot;
    if (options.inflight_limit != nullptr && IsInfer(route.endpoint)) {
      slot = options.inflight_limit->TryAcquire("rest");
      if (!slot.held()) return responder.Send(OverloadResponse(*options.inflight_limit));
    }
    // Health probes need no key (Kubernetes probes carry none); every other
    // call is admitted by the guard first.
    Caller caller;
    if (options.guard != nullptr) {
      if (std::optional<Operation> op = GuardedOperation(route.endpoint)) {
        Admission a = options.guard->Admit(
            CallInfo{*op, route.model, AuthorizationOf(req.head), false, 0, VerifiedKeyOf(req)});
        if (!a.status.ok()) {
          slot.Release();
          return responder.Send(RefusalResponse(a));
        }
        caller = std::move(a.caller);
      }
    }
    switch (route.endpoint) {
      case RestEndpoint::kServerLive:
        return responder.Send(HealthResponse(server.IsLive()));
      case RestEndpoint::kServerReady:
        return responder.Send(HealthResponse(server.IsReady()));
      case RestEndpoint::kModelInfer:
      case RestEndpoint::kTaskInfer:
        // Infer never blocks (a load runs on the worker's lanes), so only
        // the decoding of a large body is worth moving off the I/O loop.
        if (req.body.size() <= options.inline_body_bytes) {
          return InferHandler(route, std::move(request), std::move(responder), std::move(caller),
                              std::move(slot));
        }
        break;
      default:
        break;
    }
    // The shared_ptr makes the work copyable for std::function.
    struct Work {
      Request request;
      Responder responder;
      InflightLimit::Slot slot;
    };
    auto work = std::make_shared<Work>(
        Work{std::move(request), std::move(responder), std::move(slot)});
    if (IsControl(route.endpoint)) {
      const SerialExecutor::Posted posted = control.TryPost([this, route, work, caller] {
        Responder& r = work->responder;
        Guarded(r, [&] { r.Send(Dispatch(route, work->request, caller)); });
      });
      if (posted == SerialExecutor::Posted::kQueued) return;
      // Full (or shutting down): answered now; an admitted call ends here.
      const Status busy = Unavailable(
          "server busy: " + std::to_string(control.max_queued()) +
          " registrations and repository changes are waiting already; retry later");
      if (std::optional<Operation> op = GuardedOperation(route.endpoint)) {
        Finish(caller, *op, route.model, busy);
      }
      return work->responder.Send(RetryLaterResponse(busy, 5));
    }
    pool.Submit([this, route = std::move(route), work, caller = std::move(caller)] {
      Responder& r = work->responder;
      Guarded(r, [&] {
        if (IsInfer(route.endpoint)) {
          return InferHandler(route, std::move(work->request), std::move(r), caller,
                              std::move(work->slot));
        }
        r.Send(Dispatch(route, work->request, caller));
      });
    });
  });
}

Response HttpFrontend::Impl::Dispatch(const oip::RestRoute& route, const Request& req,
                                      const Caller& caller) {
  std::string_view body = req.body;
  switch (route.endpoint) {
    case RestEndpoint::kServerMetadata:
      return ServerMetadataHandler();
    case RestEndpoint::kModelMetadata:
      return ModelMetadataHandler(route);
    case RestEndpoint::kModelReady:
      return ModelReadyHandler(route);
    case RestEndpoint::kRepositoryIndex:
      return IndexHandler(body, caller);
    case RestEndpoint::kRepositoryLoad:
    case RestEndpoint::kRepositoryUnload:
      return LoadUnloadHandler(route, body, caller);
    case RestEndpoint::kRepositoryRegister:
      return RegisterHandler(route, req);
    case RestEndpoint::kModelVariants:
      return VariantsHandler(route);
    case RestEndpoint::kDecisions:
      return DecisionsHandler(req, caller);
    case RestEndpoint::kStatisticsAll:
    case RestEndpoint::kModelStatistics:
      return StatisticsHandler(route, caller);
    case RestEndpoint::kModelConfig: {
      StatusOr<ModelConfiguration> config = server.GetModelConfiguration(route.model, route.version);
      if (!config.ok()) return StatusResponse(config.status());
      return JsonResponse(200, oip::EncodeModelConfiguration(*config));
    }
    case RestEndpoint::kTaskList:
      return JsonResponse(200, oip::EncodeTaskList(server.ListTasks(caller)));
    case RestEndpoint::kTaskMetadata: {
      StatusOr<TaskDescription> task = server.DescribeTask(route.task, caller);
      if (!task.ok()) return StatusResponse(task.status());
      return JsonResponse(200, oip::EncodeTask(*task));
    }
    case RestEndpoint::kOverview:
    case RestEndpoint::kWorkers:
    case RestEndpoint::kActions:
    case RestEndpoint::kBatchList:
    case RestEndpoint::kBatchSubmit:
    case RestEndpoint::kBatchJob:
    case RestEndpoint::kBatchCancel:
      return MountedHandler(route, req, caller);
    case RestEndpoint::kModelRollout: {
      StatusOr<RolloutView> view = server.GetRollout(route.model, caller);
      if (!view.ok()) return StatusResponse(view.status());
      return JsonResponse(200, RolloutViewToJson(*view));
    }
    case RestEndpoint::kModelRolloutChange: {
      StatusOr<RolloutChange> change = RolloutChangeFromJson(route.model, std::string(body));
      StatusOr<RolloutView> view =
          change.ok() ? server.ChangeRollout(*change, caller) : StatusOr<RolloutView>(change.status());
      // Audited as load and unload are: who changed which rollout, and how.
      if (options.guard != nullptr) {
        options.guard->Done(caller, CallInfo{Operation::kRollout, route.model, {}, false, 0},
                            view.status());
      }
      if (!view.ok()) return StatusResponse(view.status());
      return JsonResponse(200, RolloutViewToJson(*view));
    }
    default:
      return ErrorResponse(500, "internal error: endpoint not dispatched");
  }
}

Response HttpFrontend::Impl::MountedHandler(const oip::RestRoute& route, const Request& req,
                                            const Caller& caller) {
  auto it = mounted.find(route.endpoint);
  if (it != mounted.end()) return (*it->second)(route, req, caller);
  switch (route.endpoint) {
    case RestEndpoint::kBatchList:
    case RestEndpoint::kBatchSubmit:
    case RestEndpoint::kBatchJob:
    case RestEndpoint::kBatchCancel:
      return ErrorResponse(501, "offline batch jobs are not enabled on this server");
    default:
      return ErrorResponse(501, "the operator's views are not enabled on this server");
  }
}

Response HttpFrontend::Impl::ServerMetadataHandler() {
  ServerMetadata metadata = server.GetServerMetadata();
  for (const char* extension : kRestExtensions) {
    auto& list = metadata.extensions;
    if (std::find(list.begin(), list.end(), extension) == list.end()) list.push_back(extension);
  }
  return JsonResponse(200, oip::EncodeServerMetadata(metadata));
}

Response HttpFrontend::Impl::ModelMetadataHandler(const oip::RestRoute& route) {
  const StatusOr<ModelMetadata> metadata = server.GetModelMetadata(route.model, route.version);
  if (!metadata.ok()) return StatusResponse(metadata.status());
  return JsonResponse(200, oip::EncodeModelMetadata(metadata.value()));
}

Response HttpFrontend::Impl::ModelReadyHandler(const oip::RestRoute& route) {
  const StatusOr<bool> ready = server.IsModelReady(route.model, route.version);
  // An unknown model is an error with a message (404), not just "false".
  if (!ready.ok()) return StatusResponse(ready.status());
  return HealthResponse(ready.value());
}

void HttpFrontend::Impl::InferHandler(const oip::RestRoute& route, Request req,
                                      Responder responder, Caller caller,
                                      InflightLimit::Slot slot) {
  // Every way out of here ends the admitted call once: its quota slot.
  const Operation op = route.endpoint == RestEndpoint::kTaskInfer ? Operation::kTaskInfer
                                                                  : Operation::kInfer;
  // The slot goes back before each answer is sent, so that a client that
  // has its answer finds the slot free for its next request.
  auto refuse = [&](const Status& status) {
    Finish(caller, op, route.model, status);
    slot.Release();
    responder.Send(StatusResponse(status));
  };
  std::optional<size_t> header_length;
  if (const std::string* field = req.head.Find(kInferenceHeaderLengthField)) {
    const StatusOr<size_t> n = oip::ParseHeaderLength(*field);
    if (!n.ok()) return refuse(n.status());
    header_length = n.value();
  }
  StatusOr<InferenceRequest> request = oip::DecodeInferRequest(req.body, header_length);
  std::string().swap(req.body);  // the tensors are copies: the body goes now
  if (!request.ok()) return refuse(request.status());
  // The decoded tensors take their room in the byte budget too.
  ByteBudget::Reservation tensors;
  if (options.byte_budget != nullptr) {
    int64_t bytes = 0;
    for (const Tensor& input : request->inputs) bytes += static_cast<int64_t>(input.data.size());
    StatusOr<ByteBudget::Reservation> held = options.byte_budget->Reserve(bytes, "rest");
    if (!held.ok()) {
      request = held.status();  // the tensors go before the answer
      Finish(caller, op, route.model, held.status());
      slot.Release();
      return responder.Send(RetryLaterResponse(held.status(), options.byte_budget->retry_after_s()));
    }
    tensors = std::move(held).value();
  }
  // Task form (/v2/tasks/{task}/infer): route.model is empty and the server
  // picks the model; the response names the one it chose.
  request->task = route.task;
  request->model_name = route.model;
  request->model_version = route.version;
  // Validated by DecodeInferRequest; read before the request is moved away.
  StatusOr<oip::BinaryOutputs> binary = oip::BinaryOutputs::FromRequest(*request);
  if (!binary.ok()) return refuse(binary.status());
  request->caller = caller;

  // The callback runs once, on whichever thread completes the query (often
  // a batcher's), and writes the answer from there. InferCallback must be
  // copyable, hence the shared state around the move-only Responder.
  struct Pending {
    Responder responder;
    oip::BinaryOutputs binary;
    std::string id;
    std::string model;
    Caller caller;
    Operation op;
    InflightLimit::Slot slot;         // held until the answer is ready
    ByteBudget::Reservation tensors;  // likewise
  };
  auto pending = std::make_shared<Pending>(Pending{std::move(responder), std::move(binary).value(),
                                                   request->id, route.model, std::move(caller), op,
                                                   std::move(slot), std::move(tensors)});
  server.Infer(std::move(request).value(), [pending, guard = options.guard](
                                               StatusOr<InferenceResponse> result) {
    if (guard != nullptr) {
      guard->Done(pending->caller, CallInfo{pending->op, pending->model, {}, false, 0},
                  result.status());
    }
    pending->slot.Release();
    pending->tensors.Release();
    Responder& out = pending->responder;
    Guarded(out, [&] {
      if (!result.ok()) return out.Send(StatusResponse(result.status()));
      InferenceResponse& response = result.value();
      if (response.model_name.empty()) response.model_name = pending->model;
      if (response.id.empty()) response.id = pending->id;
      StatusOr<oip::EncodedBody> encoded = oip::EncodeInferResponse(response, pending->binary);
      if (!encoded.ok()) return out.Send(StatusResponse(encoded.status()));
      Response res;
      if (encoded->json_size.has_value()) {
        res.headers.emplace_back(oip::kInferenceHeaderContentLength,
                                 std::to_string(*encoded->json_size));
        res.headers.emplace_back("Content-Type", kOctetStream);
      } else {
        res.headers.emplace_back("Content-Type", kJson);
      }
      res.body = std::move(encoded->body);
      out.Send(std::move(res));
    });
  });
}

Response HttpFrontend::Impl::IndexHandler(std::string_view body, const Caller& caller) {
  const StatusOr<bool> ready_only = oip::DecodeRepositoryIndexRequest(body);
  if (!ready_only.ok()) return StatusResponse(ready_only.status());
  std::vector<RepositoryEntry> rows = server.RepositoryIndex(ready_only.value());
  if (options.guard != nullptr) {
    std::erase_if(rows, [&](const RepositoryEntry& e) { return !options.guard->MaySee(caller, e.name); });
  }
  return JsonResponse(200, oip::EncodeRepositoryIndex(rows));
}

Response HttpFrontend::Impl::LoadUnloadHandler(const oip::RestRoute& route, std::string_view body,
                                               const Caller& caller) {
  const Operation op = route.endpoint == RestEndpoint::kRepositoryLoad ? Operation::kLoad
                                                                       : Operation::kUnload;
  const Status status = LoadUnload(route, body);
  Finish(caller, op, route.model, status);
  if (!status.ok()) return StatusResponse(status);
  return Response{};
}

Status HttpFrontend::Impl::LoadUnload(const oip::RestRoute& route, std::string_view body) {
  const StatusOr<Parameters> parameters = oip::DecodeRepositoryModelRequest(body);
  if (!parameters.ok()) return parameters.status();
  const bool load = route.endpoint == RestEndpoint::kRepositoryLoad;
  if (load && parameters.value().count("config") > 0) {
    // Triton's override of the model configuration; somm's lives in model.yaml.
    return Unimplemented("load parameter 'config' is not supported: edit " + route.model +
                         "/model.yaml instead");
  }
  return load ? server.LoadModel(route.model) : server.UnloadModel(route.model);
}

Response HttpFrontend::Impl::RegisterHandler(const oip::RestRoute& route, const Request& req) {
  StatusOr<RegistrationRequest> request = oip::DecodeRegistrationRequest(req.body, route.model);
  if (!request.ok()) return StatusResponse(request.status());
  // Admitted only now: whether the model is to be private is in the body.
  Caller caller;
  if (options.guard != nullptr) {
    Admission a = options.guard->Admit(CallInfo{Operation::kRegister, route.model,
                                                AuthorizationOf(req.head), request->private_model,
                                                request->model_bytes.size(), VerifiedKeyOf(req)});
    if (!a.status.ok()) return RefusalResponse(a);
    caller = std::move(a.caller);
  }
  if (request->private_model) {
    request->owner_tenant = caller.tenant;
    // The quota is checked again once the probe has measured the model.
    if (options.guard != nullptr) {
      request->admit_private_memory = [guard = options.guard, caller,
                                       name = route.model](int64_t bytes) {
        return guard->AdmitPrivateMemory(caller, name, bytes);
      };
    }
  }
  request->caller = caller;
  const bool private_model = request->private_model;
  const Status status = server.RegisterModel(std::move(request).value());
  if (options.guard != nullptr) {
    options.guard->Done(caller, CallInfo{Operation::kRegister, route.model, {}, private_model, 0},
                        status);
  }
  if (!status.ok()) return StatusResponse(status);
  // 202: the model is registered; its variants are generated in the
  // background and status_url shows the progress.
  Response res = JsonResponse(202, oip::EncodeRegistrationAccepted(route.model));
  res.headers.emplace_back("Location", oip::VariantsPath(route.model));
  return res;
}

Response HttpFrontend::Impl::VariantsHandler(const oip::RestRoute& route) {
  const StatusOr<RegistrationStatus> status = server.GetRegistrationStatus(route.model);
  if (!status.ok()) return StatusResponse(status.status());
  return JsonResponse(200, oip::EncodeRegistrationStatus(status.value()));
}

Response HttpFrontend::Impl::DecisionsHandler(const Request& req, const Caller& caller) {
  std::optional<std::string> limit_text = http::QueryParam(req.head.query, "limit");
  const StatusOr<size_t> limit = oip::ParseDecisionLimit(limit_text);
  if (!limit.ok()) return StatusResponse(limit.status());
  std::vector<DecisionRecord> records = server.RecentDecisions(limit.value());
  // A caller sees only its own tenant's decisions (an admin sees all).
  std::erase_if(records, [&](const DecisionRecord& r) { return !caller.MaySeeDecision(r.tenant); });
  return JsonResponse(200, oip::EncodeDecisions(records));
}

Response HttpFrontend::Impl::StatisticsHandler(const oip::RestRoute& route, const Caller& caller) {
  StatusOr<std::vector<ModelStatistics>> stats =
      server.GetModelStatistics(route.model, route.version);
  if (!stats.ok()) return StatusResponse(stats.status());
  // Every model's: only those the caller may see (one model's was admitted
  // by name, a hidden one answered as unknown).
  if (options.guard != nullptr && route.model.empty()) {
    std::erase_if(*stats, [&](const ModelStatistics& s) { return !options.guard->MaySee(caller, s.name); });
  }
  return JsonResponse(200, oip::EncodeModelStatistics(*stats));
}

HttpFrontend::HttpFrontend(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpFrontend::~HttpFrontend() { Shutdown(); }

int HttpFrontend::port() const { return impl_->http->port(); }

StatusOr<std::unique_ptr<HttpFrontend>> HttpFrontend::Start(InferenceServer& server,
                                                            HttpFrontendOptions options) {
  if (options.port < 0 || options.port > 65535) {
    return InvalidArgument("HTTP port " + std::to_string(options.port) + " is out of range");
  }
  if (options.io_threads == 0) {
    const int cores = static_cast<int>(std::thread::hardware_concurrency());
    options.io_threads = std::clamp(cores / 2, 1, 4);
  }
  if (options.io_threads < 1 || options.handler_threads < 1 ||
      options.keep_alive_max_requests < 1 || options.max_body_bytes == 0 ||
      options.max_connections == 0) {
    return InvalidArgument(
        "HTTP frontend needs io_threads, handler_threads, keep_alive_max_requests, "
        "max_connections and max_body_bytes > 0");
  }
  auto impl = std::make_unique<Impl>(server, std::move(options));
  const HttpFrontendOptions& o = impl->options;
  http::ServerOptions so;
  so.address = o.address;
  so.port = o.port;
  so.io_threads = o.io_threads;
  so.max_body_bytes = o.max_body_bytes;
  so.keep_alive_timeout_s = o.keep_alive_timeout_s;
  so.keep_alive_max_requests = o.keep_alive_max_requests;
  so.read_timeout_s = o.read_timeout_s;
  so.write_timeout_s = o.write_timeout_s;
  so.max_connections = o.max_connections;
  so.header_timeout_s = o.header_timeout_s;
  so.body_timeout_s = o.body_timeout_s;
  so.max_connections_per_address = o.max_connections_per_address;
  so.shutdown_grace_s = o.shutdown_grace_s;
  so.tls = o.tls;
  Impl* raw = impl.get();
  // Who calls is known before a body is read, and whether there is room
  // for it: an unknown caller's body, or one past the byte budget, costs
  // neither its bytes nor its decoding (the review's 60 MiB registration
  // body took 5.6 s and 480 MB of RSS to be refused).
  if (o.guard != nullptr || o.byte_budget != nullptr) {
    so.head_check = [raw](const http::RequestHead& head, uint64_t body_bytes,
                          std::shared_ptr<void>* hold, std::shared_ptr<const void>* note) {
      return raw->CheckHead(head, body_bytes, hold, note);
    };
  }
  StatusOr<std::unique_ptr<http::Server>> started = http::Server::Start(
      so, [raw](Request request, Responder responder) {
        raw->Handle(std::move(request), std::move(responder));
      },
      ErrorResponse);
  if (!started.ok()) return started.status();
  impl->http = std::move(started).value();
  return std::unique_ptr<HttpFrontend>(new HttpFrontend(std::move(impl)));
}

std::optional<Response> HttpFrontend::Impl::CheckHead(const http::RequestHead& head,
                                                      uint64_t body_bytes,
                                                      std::shared_ptr<void>* hold,
                                                      std::shared_ptr<const void>* note) {
  const oip::RestRoute route = RouteOf(head);
  if (route.endpoint == RestEndpoint::kServerLive || route.endpoint == RestEndpoint::kServerReady) {
    return std::nullopt;  // probes: no key, never refused
  }
  if (options.guard != nullptr) {
    const http::OriginVerdict origin = http::CheckOrigin(options.origin_policy, head);
    if (origin.refuse_status != 0 && origin.refuse_status != 204) {
      return ErrorResponse(origin.refuse_status, origin.message);
    }
    // The role is checked for the route's operation too: a key that may
    // not call it is refused before its body is read. A path that is no
    // endpoint only needs a key (it is answered 404 once read).
    std::optional<Operation> op = route.endpoint == RestEndpoint::kRepositoryRegister
                                      ? std::optional<Operation>(Operation::kRegister)
                                      : GuardedOperation(route.endpoint);
    StatusOr<VerifiedKey> known = options.guard->Authenticate(
        AuthorizationOf(head), op, route.model.empty() ? head.path : route.model);
    if (!known.ok()) {
      Admission refused;
      refused.status = known.status();
      return RefusalResponse(refused);
    }
    // Admit takes the caller from here instead of verifying the key again.
    *note = std::make_shared<const VerifiedKey>(std::move(known).value());
  }
  if (options.byte_budget != nullptr) {
    StatusOr<ByteBudget::Reservation> held =
        options.byte_budget->Reserve(static_cast<int64_t>(body_bytes), "rest");
    if (!held.ok()) return RetryLaterResponse(held.status(), options.byte_budget->retry_after_s());
    *hold = std::make_shared<ByteBudget::Reservation>(std::move(held).value());
  }
  return std::nullopt;
}

void HttpFrontend::Shutdown() {
  std::lock_guard<std::mutex> lock(impl_->shutdown_mu);
  if (!impl_->http) return;
  // The server first: it stops taking requests and waits for those in
  // flight, some of which are on the pool.
  impl_->http->Shutdown();
  impl_->pool.Stop();
  impl_->control.Shutdown();
}

}  // namespace somm
