#include "frontend/http/rest_routes.h"

#include <cctype>
#include <utility>
#include <vector>

namespace somm::oip {
namespace {

std::vector<std::string_view> Split(std::string_view path) {
  std::vector<std::string_view> parts;
  if (path.empty() || path.front() != '/') return parts;
  path.remove_prefix(1);
  if (!path.empty() && path.back() == '/') path.remove_suffix(1);
  while (true) {
    const size_t slash = path.find('/');
    parts.push_back(path.substr(0, slash));
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  return parts;
}

RestRoute Make(RestEndpoint endpoint, const char* method, std::string_view model = {},
               std::string_view version = {}) {
  RestRoute route;
  route.endpoint = endpoint;
  route.method = method;
  route.model = std::string(model);
  route.version = std::string(version);
  return route;
}

// parts = [m] | [m, "versions", v] followed by an optional action.
RestRoute MatchModel(const std::vector<std::string_view>& parts) {
  if (parts.empty() || parts[0].empty()) return {};
  std::string_view model = parts[0];
  std::string_view version;
  size_t next = 1;
  if (parts.size() >= 3 && parts[1] == "versions" && !parts[2].empty()) {
    version = parts[2];
    next = 3;
  }
  if (next == parts.size()) return Make(RestEndpoint::kModelMetadata, "GET", model, version);
  if (next + 1 != parts.size()) return {};
  if (parts[next] == "ready") return Make(RestEndpoint::kModelReady, "GET", model, version);
  if (parts[next] == "infer") return Make(RestEndpoint::kModelInfer, "POST", model, version);
  if (parts[next] == "stats") return Make(RestEndpoint::kModelStatistics, "GET", model, version);
  if (parts[next] == "config") return Make(RestEndpoint::kModelConfig, "GET", model, version);
  return {};
}

// p = ["v2", "tasks", <one or two task segments>, "infer"] (inference), or
// ["v2", "tasks"] (the list), or ["v2", "tasks", <one or two segments>]
// (describe one). Tasks are named "task/dataset" (docs/architecture.md), so
// a task spans two segments; a single segment is accepted for tasks without
// a dataset. A trailing "infer" always means inference, so a two-segment
// task whose dataset is named "infer" cannot be described by path.
RestRoute MatchTask(const std::vector<std::string_view>& p) {
  if (p.size() == 2) return Make(RestEndpoint::kTaskList, "GET");
  if (p.size() < 3 || p.size() > 5) return {};
  const bool infer = p.back() == "infer";
  if (infer && p.size() == 3) return {};  // inference names a task
  if (p.size() == 5 && !infer) return {};
  std::string task;
  for (size_t i = 2; i < p.size() - (infer ? 1 : 0); ++i) {
    if (p[i].empty()) return {};
    if (!task.empty()) task += '/';
    task += p[i];
  }
  RestRoute route = infer ? Make(RestEndpoint::kTaskInfer, "POST")
                          : Make(RestEndpoint::kTaskMetadata, "GET");
  route.task = std::move(task);
  return route;
}

}  // namespace

RestRoute MatchRestRoute(std::string_view path, std::string_view method) {
  RestRoute route = MatchRestRoute(path);
  const bool post = method == "POST";
  // The paths with two methods: GET reads a rollout or lists jobs, POST
  // changes the rollout or submits a job.
  if (route.endpoint == RestEndpoint::kModelRollout && post) {
    route.endpoint = RestEndpoint::kModelRolloutChange;
    route.method = "POST";
  }
  if (route.endpoint == RestEndpoint::kBatchList && post) {
    route.endpoint = RestEndpoint::kBatchSubmit;
    route.method = "POST";
  }
  return route;
}

RestRoute MatchRestRoute(std::string_view path) {
  const std::vector<std::string_view> p = Split(path);
  if (p.empty() || p[0] != "v2") return {};
  if (p.size() == 1) return Make(RestEndpoint::kServerMetadata, "GET");
  if (p[1] == "health" && p.size() == 3) {
    if (p[2] == "live") return Make(RestEndpoint::kServerLive, "GET");
    if (p[2] == "ready") return Make(RestEndpoint::kServerReady, "GET");
    return {};
  }
  if (p[1] == "models") {
    if (p.size() == 3 && p[2] == "stats") return Make(RestEndpoint::kStatisticsAll, "GET");
    return MatchModel(std::vector<std::string_view>(p.begin() + 2, p.end()));
  }
  if (p[1] == "repository") {
    if (p.size() == 3 && p[2] == "index") return Make(RestEndpoint::kRepositoryIndex, "POST");
    if (p.size() == 5 && p[2] == "models" && !p[3].empty()) {
      if (p[4] == "load") return Make(RestEndpoint::kRepositoryLoad, "POST", p[3]);
      if (p[4] == "unload") return Make(RestEndpoint::kRepositoryUnload, "POST", p[3]);
      if (p[4] == "register") return Make(RestEndpoint::kRepositoryRegister, "POST", p[3]);
      if (p[4] == "variants") return Make(RestEndpoint::kModelVariants, "GET", p[3]);
      if (p[4] == "rollout") return Make(RestEndpoint::kModelRollout, "GET", p[3]);
    }
    return {};
  }
  if (p[1] == "tasks") return MatchTask(p);
  if (p[1] == "somm" && p.size() >= 3 && p[2] == "batch") {
    if (p.size() == 3) return Make(RestEndpoint::kBatchList, "GET");
    if (p[3].empty()) return {};
    RestRoute r;
    if (p.size() == 4) {
      r = Make(RestEndpoint::kBatchJob, "GET");
    } else if (p.size() == 5 && p[4] == "cancel") {
      r = Make(RestEndpoint::kBatchCancel, "POST");
    } else {
      return {};
    }
    r.job = std::string(p[3]);
    return r;
  }
  if (p[1] == "somm" && p.size() == 3) {
    if (p[2] == "decisions") return Make(RestEndpoint::kDecisions, "GET");
    if (p[2] == "overview") return Make(RestEndpoint::kOverview, "GET");
    if (p[2] == "workers") return Make(RestEndpoint::kWorkers, "GET");
    if (p[2] == "actions") return Make(RestEndpoint::kActions, "GET");
  }
  return {};
}

std::string EncodePathSegment(std::string_view segment) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(segment.size());
  for (const char ch : segment) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string ModelPath(std::string_view name, std::string_view version) {
  std::string path = "/v2/models/" + EncodePathSegment(name);
  if (!version.empty()) path += "/versions/" + EncodePathSegment(version);
  return path;
}

}  // namespace somm::oip
