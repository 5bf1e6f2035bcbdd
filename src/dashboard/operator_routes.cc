#include "dashboard/operator_routes.h"

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>

#include "dashboard/operator_api.h"
#include "dashboard/static_files.h"
#include "frontend/http/somm_json.h"
#include "transport/http/http_request_parser.h"

namespace somm::dashboard {

RestMount OperatorViews(OperatorApi& server, CallGuard* guard,
                        std::function<std::string()> metrics_text) {
  using oip::RestEndpoint;
  auto handler = [&server, guard, metrics_text = std::move(metrics_text)](
                     const oip::RestRoute& route, const http::Request& req,
                     const Caller& caller) -> http::Response {
    // A user's views hold the models it may see (operator_api.h), each
    // model's owner looked up once per view.
    ModelFilter visible;
    std::map<std::string, bool> seen;
    if (guard != nullptr && caller.authenticated && !caller.admin) {
      visible = [&](const std::string& model) {
        auto it = seen.find(model);
        if (it == seen.end()) it = seen.emplace(model, guard->MaySee(caller, model)).first;
        return it->second;
      };
    }
    if (route.endpoint == RestEndpoint::kWorkers) {
      return rest::JsonResponse(200, EncodeWorkers(server, visible));
    }
    if (route.endpoint == RestEndpoint::kActions) {
      const std::optional<std::string> limit_text = http::QueryParam(req.head.query, "limit");
      const StatusOr<size_t> limit = oip::ParseDecisionLimit(limit_text);
      if (!limit.ok()) return rest::StatusResponse(limit.status());
      return rest::JsonResponse(200, EncodeActions(server.RecentActions(limit.value()), visible));
    }
    const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
    const std::string text = metrics_text ? metrics_text() : std::string();
    StatusOr<std::string> overview = EncodeOverview(server, text, now_ms, visible);
    if (!overview.ok()) return rest::StatusResponse(overview.status());
    return rest::JsonResponse(200, std::move(overview).value());
  };
  return RestMount{{RestEndpoint::kOverview, RestEndpoint::kWorkers, RestEndpoint::kActions},
                   std::move(handler)};
}

PageMount DashboardPages() {
  return [](const http::RequestHead& head) -> std::optional<http::Response> {
    if (!IsDashboardPath(head.path)) return std::nullopt;
    return ServeDashboard(head.method, head.path);
  };
}

}  // namespace somm::dashboard
