#include "provisioner/kubernetes_provisioner.h"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace somm {
namespace {

using nlohmann::json;

StatusOr<std::string> ReadWhole(const std::string& path) {
  std::ifstream in(path);
  if (!in) return FailedPrecondition("cannot read " + path + " (not running in a pod?)");
  std::stringstream s;
  s << in.rdbuf();
  std::string text = s.str();
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
class HttpsApi : public KubernetesApi {
 public:
  explicit HttpsApi(InClusterOptions o) : options_(std::move(o)) {}
  StatusOr<KubernetesReply> Call(const std::string& method, const std::string& path,
                                 const std::string& content_type,
                                 const std::string& body) override {
    SOMM_ASSIGN_OR_RETURN(std::string token, ReadWhole(options_.token_path));
    httplib::SSLClient client(options_.host, options_.port);
    client.set_ca_cert_path(options_.ca_path.c_str());
    client.enable_server_certificate_verification(true);
    const auto secs = static_cast<time_t>(options_.timeout_s);
    client.set_connection_timeout(secs, 0);
    client.set_read_timeout(secs, 0);
    client.set_write_timeout(secs, 0);
    const httplib::Headers headers = {{"Authorization", "Bearer " + token},
                                      {"Accept", "application/json"}};
    httplib::Result r = method == "GET" ? client.Get(path, headers)
                                        : client.Patch(path, headers, body, content_type);
    if (!r) {
      return Unavailable("kubernetes API at " + options_.host + ":" +
                         std::to_string(options_.port) + ": " + httplib::to_string(r.error()));
    }
    return KubernetesReply{r->status, r->body};
  }

 private:
  const InClusterOptions options_;
};
#endif

std::string StatusMessage(const std::string& body) {
  const json j = json::parse(body, nullptr, false);
  if (j.is_object() && j.value("kind", "") == "Status") return j.value("message", body);
  return body.substr(0, 300);
}

}  // namespace

StatusOr<std::unique_ptr<KubernetesApi>> InClusterKubernetesApi(InClusterOptions o) {
  if (o.host.empty()) {
    const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
    const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
    if (!host || !port) {
      return FailedPrecondition(
          "KUBERNETES_SERVICE_HOST/PORT are not set: --provisioner kubernetes runs in a pod");
    }
    o.host = host;
    o.port = std::atoi(port);
  }
  SOMM_RETURN_IF_ERROR(ReadWhole(o.token_path).status());
  SOMM_RETURN_IF_ERROR(ReadWhole(o.ca_path).status());
#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
  return std::unique_ptr<KubernetesApi>(std::make_unique<HttpsApi>(std::move(o)));
#else
  return Unimplemented("this build of cpp-httplib has no OpenSSL support: no HTTPS to the API");
#endif
}

StatusOr<std::string> InClusterNamespace(const std::string& path) { return ReadWhole(path); }

KubernetesProvisioner::KubernetesProvisioner(KubernetesProvisionerOptions options,
                                             std::unique_ptr<KubernetesApi> api)
    : options_(std::move(options)), api_(std::move(api)) {}

std::string KubernetesProvisioner::Path() const {
  return "/apis/apps/v1/namespaces/" + options_.namespace_name + "/deployments/" +
         options_.deployment + "/scale";
}

Status KubernetesProvisioner::ErrorFrom(const KubernetesReply& reply,
                                        const std::string& verb) const {
  const std::string what = "kubernetes: " + verb + " " + options_.namespace_name + "/" +
                           options_.deployment + "/scale: HTTP " + std::to_string(reply.status) +
                           ": " + StatusMessage(reply.body);
  switch (reply.status) {
    case 401:
    case 403:
      return FailedPrecondition(what +
                                " (the controller's service account needs get and patch on "
                                "deployments/scale: deploy/kubernetes/base/controller.yaml)");
    case 404:
      return NotFound(what);
    case 409:
      return Unavailable(what);
    default:
      return Unavailable(what);
  }
}

StatusOr<KubernetesProvisioner::Scale> KubernetesProvisioner::Get() {
  SOMM_ASSIGN_OR_RETURN(KubernetesReply reply, api_->Call("GET", Path(), "", ""));
  if (reply.status != 200) return ErrorFrom(reply, "get");
  const json j = json::parse(reply.body, nullptr, false);
  if (!j.is_object() || !j.contains("spec") || !j.contains("metadata")) {
    return Internal("kubernetes: get " + Path() +
                    ": not a Scale object: " + reply.body.substr(0, 200));
  }
  Scale s;
  s.replicas = j["spec"].value("replicas", 0);  // an omitted field is 0
  s.resource_version = j["metadata"].value("resourceVersion", "");
  return s;
}

StatusOr<int> KubernetesProvisioner::Replicas() {
  SOMM_ASSIGN_OR_RETURN(Scale s, Get());
  return s.replicas;
}

Status KubernetesProvisioner::Change(int delta, const std::string& why) {
  for (int attempt = 0;; ++attempt) {
    SOMM_ASSIGN_OR_RETURN(Scale s, Get());
    const int want = std::max(s.replicas + delta, 0);
    json patch;
    patch["spec"]["replicas"] = want;
    // The precondition: a Deployment changed since the read answers 409.
    if (!s.resource_version.empty()) patch["metadata"]["resourceVersion"] = s.resource_version;
    SOMM_ASSIGN_OR_RETURN(
        KubernetesReply reply,
        api_->Call("PATCH", Path(), "application/merge-patch+json", patch.dump()));
    if (reply.status == 200) {
      spdlog::info("kubernetes provisioner: {}/{} replicas {} -> {} ({})", options_.namespace_name,
                   options_.deployment, s.replicas, want, why);
      return Status::Ok();
    }
    if (reply.status != 409 || attempt >= options_.conflict_retries)
      return ErrorFrom(reply, "patch");
    spdlog::info("kubernetes provisioner: {} changed meanwhile (409); reading it again",
                 options_.deployment);
  }
}

Status KubernetesProvisioner::Start(int count) { return Change(count, "scale out"); }

Status KubernetesProvisioner::Stop(const std::string& id) {
  // The ReplicaSet picks the pod; `id` is the scaler's choice, logged.
  return Change(-1, "scale in; the scaler would drain " + id);
}

StatusOr<int> KubernetesProvisioner::Pending(const std::set<std::string>& registered) {
  SOMM_ASSIGN_OR_RETURN(Scale s, Get());
  return std::max(s.replicas - static_cast<int>(registered.size()), 0);
}

std::set<std::string> KubernetesProvisioner::Removable(const std::set<std::string>& registered) {
  return registered;
}

}  // namespace somm
