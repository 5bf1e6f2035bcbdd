#include "frontend/grpc/operator_call.h"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <utility>

#include "frontend/http/http_status.h"
#include "frontend/http/rest_routes.h"
#include "proto/somm.grpc.pb.h"
#include "transport/http/http_request_parser.h"

namespace somm::grpc_async {
namespace {

// REST's {"error": message}, or the body as it is.
std::string ErrorMessageOf(const std::string& body) {
  nlohmann::json parsed = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_object() && parsed.contains("error") && parsed["error"].is_string()) {
    return parsed["error"].get<std::string>();
  }
  return body;
}

}  // namespace

OperatorCallService::OperatorCallService(std::vector<RestMount> mounts, CallGuard* guard)
    : mounts_(std::move(mounts)), guard_(guard) {}

void OperatorCallService::Declare(CallQueue* queue, KeyFirstService* service,
                                  KeyFirstTable& table) {
  const std::string path =
      std::string("/") + somm::SommControl::service_full_name() + "/OperatorCall";
  table.Serve<somm::OperatorCallRequest, somm::OperatorCallResponse>(
      queue, service, path, Operation::kOperator,
      [this](const GatedContext& context, const somm::OperatorCallRequest& request,
             somm::OperatorCallResponse* response, Answer answer) {
        const std::string& target = request.path();
        const size_t question = target.find('?');
        std::optional<std::string> decoded =
            http::PercentDecode(target.substr(0, question), /*plus_is_space=*/false);
        if (!decoded) return answer(InvalidArgument("path '" + target + "' is not a valid URL path"));
        const std::string method = request.method() == "HEAD" ? "GET" : request.method();
        const oip::RestRoute route = oip::MatchRestRoute(*decoded, method);
        const RestMount* mount = nullptr;
        for (const RestMount& m : mounts_) {
          for (oip::RestEndpoint endpoint : m.endpoints) {
            if (endpoint == route.endpoint) mount = &m;
          }
        }
        if (mount == nullptr) {
          return answer(NotFound("no operator endpoint at " + request.method() + " " + target +
                                 " (OperatorCall serves the /v2/somm/ views and batch jobs)"));
        }
        if (method != route.method) {
          return answer(InvalidArgument(*decoded + " accepts " + route.method + ", not '" +
                                        request.method() + "'"));
        }
        Caller caller;
        if (guard_ != nullptr) {
          Admission a = guard_->Admit(CallInfo{Operation::kOperator, route.model,
                                               AuthorizationOf(&context.grpc), false, 0,
                                               &context.verified});
          if (!a.status.ok()) return answer(a.status);
          caller = std::move(a.caller);
        }
        http::Request rest;
        rest.head.method = method;
        rest.head.target = target;
        rest.head.path = *decoded;
        rest.head.query = question == std::string::npos ? "" : target.substr(question + 1);
        const std::string authorization = AuthorizationOf(&context.grpc);
        if (!authorization.empty()) rest.head.headers.emplace_back("authorization", authorization);
        rest.head.headers.emplace_back("content-type", "application/json");
        rest.body = request.body();
        http::Response answered = mount->handler(route, rest, caller);
        Status status = Status::Ok();
        if (answered.status >= 200 && answered.status < 300) {
          response->set_body(std::move(answered.body));
        } else {
          status = Status(oip::StatusCodeFromHttp(answered.status), ErrorMessageOf(answered.body));
        }
        if (guard_ != nullptr) {
          guard_->Done(caller, CallInfo{Operation::kOperator, route.model, {}, false, 0}, status);
        }
        answer(status);
      });
}

}  // namespace somm::grpc_async
