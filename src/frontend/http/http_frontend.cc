#include "frontend/http/http_frontend.h"

#include <httplib.h>
#include <strings.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <future>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <utility>

#include "frontend/http/http_status.h"
#include "frontend/http/oip_json.h"
#include "frontend/http/oip_metadata_json.h"
#include "frontend/http/rest_routes.h"
#include "frontend/http/somm_json.h"

namespace somm {
namespace {

using httplib::Request;
using httplib::Response;
using oip::RestEndpoint;

constexpr char kJson[] = "application/json";
constexpr char kOctetStream[] = "application/octet-stream";

// The extensions this frontend itself implements; added to whatever the
// InferenceServer reports, since only the REST frontend speaks them.
constexpr const char* kRestExtensions[] = {"binary_tensor_data", "model_repository"};

// httplib listens with a backlog of 5, which drops SYNs when a load generator
// opens dozens of connections at once; listen() again raises it.
constexpr int kListenBacklog = 1024;

void ReplyJson(Response& res, int status, std::string body) {
  res.status = status;
  res.body = std::move(body);
  res.set_header("Content-Type", kJson);
}

void ReplyError(Response& res, int http_status, std::string_view message) {
  ReplyJson(res, http_status, oip::EncodeError(message));
}

void ReplyStatus(Response& res, const Status& status) {
  ReplyError(res, oip::HttpStatusFromCode(status.code()), status.message());
}

// Health endpoints: 200 = true, 400 = false, empty body (KServe v2).
void ReplyHealth(Response& res, bool healthy) { res.status = healthy ? 200 : 400; }

std::string ReasonFor(int status) {
  switch (status) {
    case 400:
      return "bad request";
    case 404:
      return "not found";
    case 413:
      return "request body too large";
    case 414:
      return "request URI too long";
    case 415:
      return "unsupported media type";
    case 416:
      return "range not satisfiable";
    default:
      return "HTTP error " + std::to_string(status);
  }
}

}  // namespace

struct HttpFrontend::Impl {
  Impl(InferenceServer& s, HttpFrontendOptions o) : server(s), options(std::move(o)) {}

  InferenceServer& server;
  const HttpFrontendOptions options;
  httplib::Server http;
  std::thread listener;
  std::atomic<bool> listener_done{false};
  std::atomic<int> listen_fd{-1};
  int port = 0;
  std::mutex shutdown_mu;

  void Install();
  std::string TooLargeMessage() const {
    return "request body exceeds the limit of " + std::to_string(options.max_body_bytes) +
           " bytes (max_body_bytes)";
  }
  bool ReadBody(const Request& req, Response& res, const httplib::ContentReader& reader,
                std::string* body);
  void Dispatch(const Request& req, Response& res, std::string_view body);
  void ServerMetadataHandler(Response& res);
  void ModelMetadataHandler(const oip::RestRoute& route, Response& res);
  void ModelReadyHandler(const oip::RestRoute& route, Response& res);
  void InferHandler(const oip::RestRoute& route, const Request& req, std::string_view body,
                    Response& res);
  void IndexHandler(std::string_view body, Response& res);
  void LoadUnloadHandler(const oip::RestRoute& route, std::string_view body, Response& res);
  void RegisterHandler(const oip::RestRoute& route, std::string_view body, Response& res);
  void VariantsHandler(const oip::RestRoute& route, Response& res);
  void DecisionsHandler(const Request& req, Response& res);
};

void HttpFrontend::Impl::Install() {
  // Every method goes through one catch-all per verb so that routing, 404 and
  // 405 are decided in one place (MatchRestRoute), not by httplib's regexes.
  auto plain = [this](const Request& req, Response& res) { Dispatch(req, res, {}); };
  auto with_body = [this](const Request& req, Response& res, const httplib::ContentReader& reader) {
    std::string body;
    if (ReadBody(req, res, reader, &body)) Dispatch(req, res, body);
  };
  http.Get(".*", plain);
  http.Options(".*", plain);
  http.Post(".*", with_body);
  http.Put(".*", with_body);
  http.Patch(".*", with_body);
  http.Delete(".*", with_body);

  // Errors httplib raises itself, before any handler: 413 for a
  // Content-Length over the limit, 400 for an unparsable request, ...
  http.set_error_handler(
      httplib::Server::HandlerWithResponse([this](const Request& req, Response& res) {
        // A handler ran (it matched the catch-all) and wrote this response; the
        // empty-bodied 400 of a health endpoint must stay empty.
        if (!req.matches.empty()) return httplib::Server::HandlerResponse::Unhandled;
        ReplyError(res, res.status, res.status == 413 ? TooLargeMessage() : ReasonFor(res.status));
        return httplib::Server::HandlerResponse::Handled;
      }));
  http.set_exception_handler([](const Request&, Response& res, std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    ReplyError(res, 500, "internal error: " + what);
  });

  http.set_payload_max_length(options.max_body_bytes);
  http.set_keep_alive_timeout(options.keep_alive_timeout_s);
  http.set_keep_alive_max_count(static_cast<size_t>(options.keep_alive_max_requests));
  http.set_read_timeout(options.read_timeout_s);
  http.set_write_timeout(options.write_timeout_s);
  // Headers and body go out in two writes; without TCP_NODELAY the second
  // waits for the client's delayed ACK (~40 ms). Accepted sockets inherit it.
  http.set_tcp_nodelay(true);
  // httplib's default adds SO_REUSEPORT, which lets a second server bind the
  // same port and silently take half the traffic. SO_REUSEADDR alone still
  // allows a quick restart over TIME_WAIT connections.
  http.set_socket_options([this](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    listen_fd = sock;
  });
  const int threads = options.worker_threads;
  // httplib takes ownership of the queue it is handed (its API is a raw new).
  http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
}

bool HttpFrontend::Impl::ReadBody(const Request& req, Response& res,
                                  const httplib::ContentReader& reader, std::string* body) {
  if (req.is_multipart_form_data()) {
    // httplib would need multipart callbacks we do not give it; OIP bodies
    // are never multipart. The body stays unread, so the connection closes.
    res.set_header("Connection", "close");
    ReplyError(res, 415, "multipart/form-data bodies are not part of the inference protocol");
    return false;
  }
  // A request with neither Content-Length nor chunked Transfer-Encoding has
  // no body (RFC 9112 section 6.3); httplib would instead read until the
  // client closes, i.e. hang for read_timeout_s on `curl -X POST`.
  const bool chunked =
      strcasecmp(req.get_header_value("Transfer-Encoding").c_str(), "chunked") == 0;
  if (!chunked && !req.has_header("Content-Length")) return true;
  const size_t limit = options.max_body_bytes;
  if (req.has_header("Content-Length")) {
    body->reserve(std::min<size_t>(req.get_header_value<uint64_t>("Content-Length"), limit));
  }
  bool too_large = false;
  const bool ok = reader([&](const char* data, size_t n) {
    // Chunked and compressed bodies have no trustworthy Content-Length, so
    // the limit is enforced on the bytes as they arrive.
    if (body->size() + n > limit) {
      too_large = true;
      return false;
    }
    body->append(data, n);
    return true;
  });
  if (ok) return true;
  if (too_large) {
    // The rest of the body is still in the socket: close rather than parse it.
    res.set_header("Connection", "close");
    ReplyError(res, 413, TooLargeMessage());
  } else if (res.status == 413) {
    ReplyError(res, 413, TooLargeMessage());  // Content-Length over the limit; drained
  } else if (res.status == 415) {
    ReplyError(res, 415,
               "unsupported Content-Encoding '" + req.get_header_value("Content-Encoding") + "'");
  } else {
    res.set_header("Connection", "close");
    ReplyError(res, 400, "could not read the request body");
  }
  return false;
}

void HttpFrontend::Impl::Dispatch(const Request& req, Response& res, std::string_view body) {
  const oip::RestRoute route = oip::MatchRestRoute(req.path);
  if (route.endpoint == RestEndpoint::kNone) {
    ReplyError(res, 404, "no inference protocol endpoint at " + req.method + " " + req.path);
    return;
  }
  const std::string method = req.method == "HEAD" ? "GET" : req.method;
  if (method != route.method) {
    res.set_header("Allow", route.method);
    ReplyError(res, 405, req.path + " accepts " + route.method + ", not " + req.method);
    return;
  }
  switch (route.endpoint) {
    case RestEndpoint::kServerLive:
      return ReplyHealth(res, server.IsLive());
    case RestEndpoint::kServerReady:
      return ReplyHealth(res, server.IsReady());
    case RestEndpoint::kServerMetadata:
      return ServerMetadataHandler(res);
    case RestEndpoint::kModelMetadata:
      return ModelMetadataHandler(route, res);
    case RestEndpoint::kModelReady:
      return ModelReadyHandler(route, res);
    case RestEndpoint::kModelInfer:
    case RestEndpoint::kTaskInfer:
      return InferHandler(route, req, body, res);
    case RestEndpoint::kRepositoryIndex:
      return IndexHandler(body, res);
    case RestEndpoint::kRepositoryLoad:
    case RestEndpoint::kRepositoryUnload:
      return LoadUnloadHandler(route, body, res);
    case RestEndpoint::kRepositoryRegister:
      return RegisterHandler(route, body, res);
    case RestEndpoint::kModelVariants:
      return VariantsHandler(route, res);
    case RestEndpoint::kDecisions:
      return DecisionsHandler(req, res);
    case RestEndpoint::kNone:
      break;
  }
}

void HttpFrontend::Impl::ServerMetadataHandler(Response& res) {
  ServerMetadata metadata = server.GetServerMetadata();
  for (const char* extension : kRestExtensions) {
    auto& list = metadata.extensions;
    if (std::find(list.begin(), list.end(), extension) == list.end()) list.push_back(extension);
  }
  ReplyJson(res, 200, oip::EncodeServerMetadata(metadata));
}

void HttpFrontend::Impl::ModelMetadataHandler(const oip::RestRoute& route, Response& res) {
  const StatusOr<ModelMetadata> metadata = server.GetModelMetadata(route.model, route.version);
  if (!metadata.ok()) return ReplyStatus(res, metadata.status());
  ReplyJson(res, 200, oip::EncodeModelMetadata(metadata.value()));
}

void HttpFrontend::Impl::ModelReadyHandler(const oip::RestRoute& route, Response& res) {
  const StatusOr<bool> ready = server.IsModelReady(route.model, route.version);
  // An unknown model is an error with a message (404), not just "false".
  if (!ready.ok()) return ReplyStatus(res, ready.status());
  ReplyHealth(res, ready.value());
}

void HttpFrontend::Impl::InferHandler(const oip::RestRoute& route, const Request& req,
                                      std::string_view body, Response& res) {
  std::optional<size_t> header_length;
  if (req.has_header(oip::kInferenceHeaderContentLength)) {
    const StatusOr<size_t> n =
        oip::ParseHeaderLength(req.get_header_value(oip::kInferenceHeaderContentLength));
    if (!n.ok()) return ReplyStatus(res, n.status());
    header_length = n.value();
  }
  StatusOr<InferenceRequest> request = oip::DecodeInferRequest(body, header_length);
  if (!request.ok()) return ReplyStatus(res, request.status());
  // Task form (/v2/tasks/{task}/infer): route.model is empty and the server
  // picks the model; the response names the one it chose.
  request->task = route.task;
  request->model_name = route.model;
  request->model_version = route.version;
  // Validated by DecodeInferRequest; read before the request is moved away.
  const StatusOr<oip::BinaryOutputs> binary = oip::BinaryOutputs::FromRequest(*request);
  if (!binary.ok()) return ReplyStatus(res, binary.status());
  const std::string id = request->id;

  // The callback may run on a batcher thread after this handler would have
  // returned had it not waited; the shared promise outlives either side.
  auto promise = std::make_shared<std::promise<StatusOr<InferenceResponse>>>();
  std::future<StatusOr<InferenceResponse>> future = promise->get_future();
  server.Infer(std::move(request).value(), [promise](StatusOr<InferenceResponse> result) {
    promise->set_value(std::move(result));
  });
  StatusOr<InferenceResponse> result = future.get();
  if (!result.ok()) return ReplyStatus(res, result.status());
  InferenceResponse& response = result.value();
  if (response.model_name.empty()) response.model_name = route.model;
  if (response.id.empty()) response.id = id;

  StatusOr<oip::EncodedBody> encoded = oip::EncodeInferResponse(response, binary.value());
  if (!encoded.ok()) return ReplyStatus(res, encoded.status());
  res.status = 200;
  if (encoded->json_size.has_value()) {
    res.set_header(oip::kInferenceHeaderContentLength, std::to_string(*encoded->json_size));
    res.set_header("Content-Type", kOctetStream);
  } else {
    res.set_header("Content-Type", kJson);
  }
  res.body = std::move(encoded->body);
}

void HttpFrontend::Impl::IndexHandler(std::string_view body, Response& res) {
  const StatusOr<bool> ready_only = oip::DecodeRepositoryIndexRequest(body);
  if (!ready_only.ok()) return ReplyStatus(res, ready_only.status());
  ReplyJson(res, 200, oip::EncodeRepositoryIndex(server.RepositoryIndex(ready_only.value())));
}

void HttpFrontend::Impl::LoadUnloadHandler(const oip::RestRoute& route, std::string_view body,
                                           Response& res) {
  const StatusOr<Parameters> parameters = oip::DecodeRepositoryModelRequest(body);
  if (!parameters.ok()) return ReplyStatus(res, parameters.status());
  const bool load = route.endpoint == RestEndpoint::kRepositoryLoad;
  if (load && parameters.value().count("config") > 0) {
    // Triton's override of the model configuration; somm's lives in model.yaml.
    return ReplyStatus(res, Unimplemented("load parameter 'config' is not supported: edit " +
                                          route.model + "/model.yaml instead"));
  }
  const Status status = load ? server.LoadModel(route.model) : server.UnloadModel(route.model);
  if (!status.ok()) return ReplyStatus(res, status);
  res.status = 200;
}

void HttpFrontend::Impl::RegisterHandler(const oip::RestRoute& route, std::string_view body,
                                         Response& res) {
  StatusOr<RegistrationRequest> request = oip::DecodeRegistrationRequest(body, route.model);
  if (!request.ok()) return ReplyStatus(res, request.status());
  const Status status = server.RegisterModel(std::move(request).value());
  if (!status.ok()) return ReplyStatus(res, status);
  // 202: the model is registered; its variants are generated in the
  // background and status_url shows the progress.
  res.set_header("Location", oip::VariantsPath(route.model));
  ReplyJson(res, 202, oip::EncodeRegistrationAccepted(route.model));
}

void HttpFrontend::Impl::VariantsHandler(const oip::RestRoute& route, Response& res) {
  const StatusOr<RegistrationStatus> status = server.GetRegistrationStatus(route.model);
  if (!status.ok()) return ReplyStatus(res, status.status());
  ReplyJson(res, 200, oip::EncodeRegistrationStatus(status.value()));
}

void HttpFrontend::Impl::DecisionsHandler(const Request& req, Response& res) {
  std::optional<std::string> limit_text;
  if (req.has_param("limit")) limit_text = req.get_param_value("limit");
  const StatusOr<size_t> limit = oip::ParseDecisionLimit(limit_text);
  if (!limit.ok()) return ReplyStatus(res, limit.status());
  ReplyJson(res, 200, oip::EncodeDecisions(server.RecentDecisions(limit.value())));
}

HttpFrontend::HttpFrontend(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpFrontend::~HttpFrontend() { Shutdown(); }

int HttpFrontend::port() const { return impl_->port; }

StatusOr<std::unique_ptr<HttpFrontend>> HttpFrontend::Start(InferenceServer& server,
                                                            HttpFrontendOptions options) {
  if (options.port < 0 || options.port > 65535) {
    return InvalidArgument("HTTP port " + std::to_string(options.port) + " is out of range");
  }
  if (options.worker_threads < 1 || options.keep_alive_max_requests < 1 ||
      options.max_body_bytes == 0) {
    return InvalidArgument(
        "HTTP frontend needs worker_threads, keep_alive_max_requests and max_body_bytes > 0");
  }
  auto impl = std::make_unique<Impl>(server, std::move(options));
  impl->Install();
  const std::string& address = impl->options.address;
  if (impl->options.port == 0) {
    impl->port = impl->http.bind_to_any_port(address);
  } else if (impl->http.bind_to_port(address, impl->options.port)) {
    impl->port = impl->options.port;
  }
  if (impl->port <= 0) {
    return Unavailable("cannot listen on " + address + ":" + std::to_string(impl->options.port) +
                       " (address in use or not local)");
  }
  ::listen(impl->listen_fd.load(), kListenBacklog);

  Impl* raw = impl.get();
  impl->listener = std::thread([raw] {
    raw->http.listen_after_bind();
    raw->listener_done = true;
  });
  // stop() is a no-op until listen_after_bind() has marked the server as
  // running, so a Shutdown() straight after Start() must not race past it.
  while (!raw->http.is_running() && !raw->listener_done) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return std::unique_ptr<HttpFrontend>(new HttpFrontend(std::move(impl)));
}

void HttpFrontend::Shutdown() {
  std::lock_guard<std::mutex> lock(impl_->shutdown_mu);
  if (!impl_->listener.joinable()) return;
  impl_->http.stop();
  impl_->listener.join();
}

}  // namespace somm
