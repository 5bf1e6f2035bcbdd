#include "client/http_client.h"

#include <httplib.h>

#include <cctype>
#include <chrono>
#include <utility>

#include "frontend/http/http_status.h"
#include "frontend/http/oip_json.h"
#include "frontend/http/oip_metadata_json.h"

namespace somm {
namespace {

// Percent-encodes a path segment (RFC 3986 unreserved characters pass), so a
// model name can never change the shape of the URL.
std::string EncodeSegment(const std::string& s) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string ModelPath(const std::string& name, const std::string& version) {
  std::string path = "/v2/models/" + EncodeSegment(name);
  if (!version.empty()) path += "/versions/" + EncodeSegment(version);
  return path;
}

}  // namespace

struct HttpClient::Reply {
  int status = 0;
  std::string body;
  std::optional<size_t> json_size;  // Inference-Header-Content-Length
};

HttpClient::HttpClient(std::string host, int port, HttpClientOptions options)
    : endpoint_(host + ":" + std::to_string(port)),
      http_(std::make_unique<httplib::Client>(std::move(host), port)) {
  http_->set_keep_alive(true);
  // Headers and body go out in separate writes; without TCP_NODELAY every
  // POST would wait for the server's delayed ACK (~40 ms).
  http_->set_tcp_nodelay(true);
  // Paths are encoded by EncodeSegment; httplib's own pass would re-encode.
  http_->set_url_encode(false);
  http_->set_connection_timeout(std::chrono::milliseconds(options.connect_timeout_ms));
  http_->set_read_timeout(std::chrono::milliseconds(options.io_timeout_ms));
  http_->set_write_timeout(std::chrono::milliseconds(options.io_timeout_ms));
}

HttpClient::~HttpClient() = default;

StatusOr<HttpClient::Reply> HttpClient::Get(const std::string& path) {
  httplib::Result res = http_->Get(path.c_str());
  if (!res) {
    return Unavailable("GET http://" + endpoint_ + path +
                       " failed: " + httplib::to_string(res.error()));
  }
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
  httplib::Result res = http_->Post(path.c_str(), headers, body, content_type);
  if (!res) {
    return Unavailable("POST http://" + endpoint_ + path +
                       " failed: " + httplib::to_string(res.error()));
  }
  Reply reply{res->status, std::move(res->body), std::nullopt};
  if (res->has_header(oip::kInferenceHeaderContentLength)) {
    SOMM_ASSIGN_OR_RETURN(
        reply.json_size,
        oip::ParseHeaderLength(res->get_header_value(oip::kInferenceHeaderContentLength)));
  }
  return reply;
}

namespace {

// A non-2xx reply as a Status carrying the server's message.
Status ErrorFrom(int http_status, const std::string& body) {
  std::string message = oip::DecodeError(body);
  if (message.empty()) message = "HTTP " + std::to_string(http_status);
  return Status(oip::StatusCodeFromHttp(http_status), std::move(message));
}

}  // namespace

StatusOr<bool> HttpClient::Health(const std::string& path) {
  SOMM_ASSIGN_OR_RETURN(const Reply reply, Get(path));
  if (reply.status == 200) return true;
  // Health answers "false" as a bare 4xx; a 4xx with an error message (an
  // unknown model) is an error, as is any 5xx.
  if (reply.status >= 400 && reply.status < 500 && reply.body.empty()) return false;
  return ErrorFrom(reply.status, reply.body);
}

StatusOr<bool> HttpClient::ServerLive() { return Health("/v2/health/live"); }

StatusOr<bool> HttpClient::ServerReady() { return Health("/v2/health/ready"); }

StatusOr<bool> HttpClient::ModelReady(const std::string& name, const std::string& version) {
  return Health(ModelPath(name, version) + "/ready");
}

StatusOr<somm::ServerMetadata> HttpClient::ServerMetadata() {
  SOMM_ASSIGN_OR_RETURN(const Reply reply, Get("/v2"));
  if (reply.status != 200) return ErrorFrom(reply.status, reply.body);
  return oip::DecodeServerMetadata(reply.body);
}

StatusOr<somm::ModelMetadata> HttpClient::ModelMetadata(const std::string& name,
                                                        const std::string& version) {
  SOMM_ASSIGN_OR_RETURN(const Reply reply, Get(ModelPath(name, version)));
  if (reply.status != 200) return ErrorFrom(reply.status, reply.body);
  return oip::DecodeModelMetadata(reply.body);
}

StatusOr<InferenceResponse> HttpClient::Infer(const InferenceRequest& request, bool binary) {
  if (request.model_name.empty()) return InvalidArgument("inference request names no model");
  SOMM_ASSIGN_OR_RETURN(const oip::EncodedBody encoded,
                        oip::EncodeInferRequest(request, {binary, binary}));
  SOMM_ASSIGN_OR_RETURN(const Reply reply,
                        Post(ModelPath(request.model_name, request.model_version) + "/infer",
                             encoded.body, encoded.json_size));
  if (reply.status != 200) return ErrorFrom(reply.status, reply.body);
  StatusOr<InferenceResponse> response = oip::DecodeInferResponse(reply.body, reply.json_size);
  if (!response.ok()) {
    return Internal("malformed response from http://" + endpoint_ + ": " +
                    response.status().message());
  }
  return response;
}

StatusOr<std::vector<RepositoryEntry>> HttpClient::RepositoryIndex(bool ready_only) {
  SOMM_ASSIGN_OR_RETURN(
      const Reply reply,
      Post("/v2/repository/index", oip::EncodeRepositoryIndexRequest(ready_only), std::nullopt));
  if (reply.status != 200) return ErrorFrom(reply.status, reply.body);
  return oip::DecodeRepositoryIndex(reply.body);
}

Status HttpClient::Load(const std::string& name) {
  SOMM_ASSIGN_OR_RETURN(
      const Reply reply,
      Post("/v2/repository/models/" + EncodeSegment(name) + "/load", "", std::nullopt));
  if (reply.status != 200) return ErrorFrom(reply.status, reply.body);
  return Status::Ok();
}

Status HttpClient::Unload(const std::string& name) {
  SOMM_ASSIGN_OR_RETURN(
      const Reply reply,
      Post("/v2/repository/models/" + EncodeSegment(name) + "/unload", "", std::nullopt));
  if (reply.status != 200) return ErrorFrom(reply.status, reply.body);
  return Status::Ok();
}

}  // namespace somm
