#include "client/http_client.h"

#include <httplib.h>

#include <chrono>
#include <cstdlib>
#include <utility>

#include "frontend/http/oip_json.h"
#include "frontend/http/oip_metadata_json.h"
#include "frontend/http/rest_routes.h"
#include "frontend/http/somm_json.h"
#include "frontend/http/task_json.h"

namespace somm {
namespace {

using oip::EncodePathSegment;
using oip::ModelPath;

// "/v2/tasks/classification/digits/infer": each segment of the task is
// encoded, the slash between them kept.
std::string TaskPath(const std::string& task) {
  std::string path = "/v2/tasks";
  size_t start = 0;
  while (true) {
    const size_t slash = task.find('/', start);
    path += "/" + EncodePathSegment(task.substr(start, slash - start));
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return path + "/infer";
}

}  // namespace

struct HttpClient::Reply {
  int status = 0;
  std::string body;
  std::optional<size_t> json_size;  // Inference-Header-Content-Length
};

HttpClient::HttpClient(std::string host, int port, HttpClientOptions options)
    : endpoint_(host + ":" + std::to_string(port)),
      scheme_(options.https || options.tls.enabled() ? "https://" : "http://") {
  if (scheme_ == "https://") {
    // cpp-httplib's SSLClient (it is built with OpenSSL here): it checks the
    // chain against the CA file (the system's store without one) and that
    // the certificate names `host`, which it also sends as SNI.
    const std::string bracketed = host.find(':') == std::string::npos ? host : "[" + host + "]";
    http_ = std::make_unique<httplib::Client>(scheme_ + bracketed + ":" + std::to_string(port),
                                              options.tls.cert_file, options.tls.key_file);
    if (!options.tls.ca_file.empty()) http_->set_ca_cert_path(options.tls.ca_file);
    http_->enable_server_certificate_verification(true);
    usable_ = http_->is_valid();
  } else {
    http_ = std::make_unique<httplib::Client>(std::move(host), port);
  }
  http_->set_keep_alive(true);
  // Headers and body go out in separate writes; without TCP_NODELAY every
  // POST would wait for the server's delayed ACK (~40 ms).
  http_->set_tcp_nodelay(true);
  // Paths are encoded by EncodePathSegment; httplib's own pass would re-encode.
  http_->set_url_encode(false);
  http_->set_connection_timeout(std::chrono::milliseconds(options.connect_timeout_ms));
  http_->set_read_timeout(std::chrono::milliseconds(options.io_timeout_ms));
  http_->set_write_timeout(std::chrono::milliseconds(options.io_timeout_ms));
  const char* env_key = std::getenv("SOMM_API_KEY");
  const std::string key = !options.api_key.empty() ? options.api_key : env_key ? env_key : "";
  if (!key.empty()) http_->set_bearer_token_auth(key);
}

HttpClient::~HttpClient() = default;

Status HttpClient::TransportError(const char* method, const std::string& path,
                                  int error) const {
  const auto e = static_cast<httplib::Error>(error);
  std::string hint;
  if (scheme_ == "https://" &&
      (e == httplib::Error::SSLConnection || e == httplib::Error::SSLServerVerification ||
       e == httplib::Error::SSLLoadingCerts)) {
    hint = " (is the port TLS, is its certificate signed by --tls-ca and does it name the "
           "host in --url; if the server requires client certificates, are --tls-cert and "
           "--tls-key given?)";
  }
  return Unavailable(std::string(method) + " " + scheme_ + endpoint_ + path +
                     " failed: " + httplib::to_string(e) + hint);
}

StatusOr<HttpClient::Reply> HttpClient::Get(const std::string& path) {
  if (!usable_) {
    return InvalidArgument("the client certificate (--tls-cert) or its key (--tls-key) "
                           "cannot be loaded");
  }
  httplib::Result res = http_->Get(path.c_str());
  if (!res) return TransportError("GET", path, static_cast<int>(res.error()));
  return Reply{res->status, std::move(res->body), std::nullopt};
}

StatusOr<HttpClient::Reply> HttpClient::Post(const std::string& path, const std::string& body,
                                             std::optional<size_t> json_size) {
  httplib::Headers headers;
  if (json_size.has_value()) {
    headers.emplace(oip::kInferenceHeaderContentLength, std::to_string(*json_size));
  }
  const char* content_type =
      json_size.has_value() ? "application/octet-stream" : "application/json";
  if (!usable_) {
    return InvalidArgument("the client certificate (--tls-cert) or its key (--tls-key) "
                           "cannot be loaded");
  }
  httplib::Result res = http_->Post(path.c_str(), headers, body, content_type);
  if (!res) return TransportError("POST", path, static_cast<int>(res.error()));
  Reply reply{res->status, std::move(res->body), std::nullopt};
  if (res->has_header(oip::kInferenceHeaderContentLength)) {
    SOMM_ASSIGN_OR_RETURN(
        reply.json_size,
        oip::ParseHeaderLength(res->get_header_value(oip::kInferenceHeaderContentLength)));
  }
  return reply;
}

StatusOr<bool> HttpClient::Health(const std::string& path) {
  SOMM_ASSIGN_OR_RETURN(const Reply reply, Get(path));
  if (reply.status == 200) return true;
  // Health answers "false" as a bare 4xx; a 4xx with an error message (an
  // unknown model) is an error, as is any 5xx.
  if (reply.status >= 400 && reply.status < 500 && reply.body.empty()) return false;
  return oip::ErrorFromReply(reply.status, reply.body);
}

StatusOr<bool> HttpClient::ServerLive() { return Health("/v2/health/live"); }

StatusOr<bool> HttpClient::ServerReady() { return Health("/v2/health/ready"); }

StatusOr<bool> HttpClient::ModelReady(const std::string& name, const std::string& version) {
  return Health(ModelPath(name, version) + "/ready");
}

StatusOr<somm::ServerMetadata> HttpClient::ServerMetadata() {
  SOMM_ASSIGN_OR_RETURN(const Reply reply, Get("/v2"));
  if (reply.status != 200) return oip::ErrorFromReply(reply.status, reply.body);
  return oip::DecodeServerMetadata(reply.body);
}

StatusOr<somm::ModelMetadata> HttpClient::ModelMetadata(const std::string& name,
                                                        const std::string& version) {
  SOMM_ASSIGN_OR_RETURN(const Reply reply, Get(ModelPath(name, version)));
  if (reply.status != 200) return oip::ErrorFromReply(reply.status, reply.body);
  return oip::DecodeModelMetadata(reply.body);
}

StatusOr<InferenceResponse> HttpClient::Infer(const InferenceRequest& request, bool binary) {
  if (request.model_name.empty()) return InvalidArgument("inference request names no model");
  return InferAt(ModelPath(request.model_name, request.model_version) + "/infer", request, binary);
}

StatusOr<InferenceResponse> HttpClient::InferTask(const std::string& task,
                                                  const InferenceRequest& request, bool binary) {
  if (task.empty()) return InvalidArgument("task-form inference names no task");
  return InferAt(TaskPath(task), request, binary);
}

StatusOr<InferenceResponse> HttpClient::InferAt(const std::string& path,
                                                const InferenceRequest& request, bool binary) {
  SOMM_ASSIGN_OR_RETURN(const oip::EncodedBody encoded,
                        oip::EncodeInferRequest(request, {binary, binary}));
  SOMM_ASSIGN_OR_RETURN(const Reply reply, Post(path, encoded.body, encoded.json_size));
  return oip::DecodeInferReply(reply.status, reply.body, reply.json_size, endpoint_);
}

StatusOr<std::vector<RepositoryEntry>> HttpClient::RepositoryIndex(bool ready_only) {
  SOMM_ASSIGN_OR_RETURN(
      const Reply reply,
      Post("/v2/repository/index", oip::EncodeRepositoryIndexRequest(ready_only), std::nullopt));
  if (reply.status != 200) return oip::ErrorFromReply(reply.status, reply.body);
  return oip::DecodeRepositoryIndex(reply.body);
}

Status HttpClient::Load(const std::string& name) {
  SOMM_ASSIGN_OR_RETURN(
      const Reply reply,
      Post("/v2/repository/models/" + EncodePathSegment(name) + "/load", "", std::nullopt));
  if (reply.status != 200) return oip::ErrorFromReply(reply.status, reply.body);
  return Status::Ok();
}

Status HttpClient::Unload(const std::string& name) {
  SOMM_ASSIGN_OR_RETURN(
      const Reply reply,
      Post("/v2/repository/models/" + EncodePathSegment(name) + "/unload", "", std::nullopt));
  if (reply.status != 200) return oip::ErrorFromReply(reply.status, reply.body);
  return Status::Ok();
}

Status HttpClient::Register(const RegistrationRequest& request) {
  if (request.name.empty()) return InvalidArgument("registration names no model");
  SOMM_ASSIGN_OR_RETURN(
      const Reply reply,
      Post("/v2/repository/models/" + EncodePathSegment(request.name) + "/register",
           oip::EncodeRegistrationRequest(request), std::nullopt));
  if (reply.status < 200 || reply.status >= 300) {
    return oip::ErrorFromReply(reply.status, reply.body);
  }
  return Status::Ok();
}

StatusOr<RegistrationStatus> HttpClient::GetVariants(const std::string& name) {
  SOMM_ASSIGN_OR_RETURN(const Reply reply, Get(oip::VariantsPath(name)));
  if (reply.status != 200) return oip::ErrorFromReply(reply.status, reply.body);
  StatusOr<RegistrationStatus> status = oip::DecodeRegistrationStatus(reply.body);
  if (!status.ok()) {
    return Internal("malformed response from " + scheme_ + endpoint_ + ": " +
                    status.status().message());
  }
  return status;
}

StatusOr<std::string> HttpClient::GetBody(const std::string& path) {
  SOMM_ASSIGN_OR_RETURN(Reply reply, Get(path));
  if (reply.status != 200) return oip::ErrorFromReply(reply.status, reply.body);
  return std::move(reply.body);
}

StatusOr<std::string> HttpClient::PostBody(const std::string& path, const std::string& body) {
  SOMM_ASSIGN_OR_RETURN(Reply reply, Post(path, body, std::nullopt));
  if (reply.status != 200) return oip::ErrorFromReply(reply.status, reply.body);
  return std::move(reply.body);
}

StatusOr<std::vector<DecisionRecord>> HttpClient::RecentDecisions(size_t limit) {
  SOMM_ASSIGN_OR_RETURN(const Reply reply,
                        Get("/v2/somm/decisions?limit=" + std::to_string(limit)));
  if (reply.status != 200) return oip::ErrorFromReply(reply.status, reply.body);
  StatusOr<std::vector<DecisionRecord>> decisions = oip::DecodeDecisions(reply.body);
  if (!decisions.ok()) {
    return Internal("malformed response from " + scheme_ + endpoint_ + ": " +
                    decisions.status().message());
  }
  return decisions;
}

StatusOr<std::string> HttpClient::Rollout(const std::string& model,
                                          const std::string& change_json) {
  const std::string path = "/v2/repository/models/" + oip::EncodePathSegment(model) + "/rollout";
  SOMM_ASSIGN_OR_RETURN(const Reply reply,
                        change_json.empty() ? Get(path) : Post(path, change_json, std::nullopt));
  if (reply.status != 200) return oip::ErrorFromReply(reply.status, reply.body);
  return reply.body;
}

StatusOr<std::vector<TaskDescription>> HttpClient::Tasks(const std::string& task) {
  std::string path = "/v2/tasks";
  // Each segment encoded, the '/' of "task/dataset" kept: the route reads
  // the task from one or two segments.
  size_t start = 0;
  while (!task.empty() && start <= task.size()) {
    const size_t slash = std::min(task.find('/', start), task.size());
    path += "/" + oip::EncodePathSegment(task.substr(start, slash - start));
    start = slash + 1;
  }
  SOMM_ASSIGN_OR_RETURN(const Reply reply, Get(path));
  if (reply.status != 200) return oip::ErrorFromReply(reply.status, reply.body);
  StatusOr<std::vector<TaskDescription>> tasks =
      task.empty() ? oip::DecodeTaskList(reply.body)
                   : [&]() -> StatusOr<std::vector<TaskDescription>> {
                       SOMM_ASSIGN_OR_RETURN(TaskDescription one, oip::DecodeTask(reply.body));
                       return std::vector<TaskDescription>{std::move(one)};
                     }();
  if (!tasks.ok()) {
    return Internal("malformed response from " + scheme_ + endpoint_ + ": " + tasks.status().message());
  }
  return tasks;
}

}  // namespace somm
