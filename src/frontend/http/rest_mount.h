// RestMount: endpoints of the REST route table (rest_routes.h) whose
// handlers live above the frontend, in parts of the process the frontend
// does not include: the operator's views and the dashboard's pages
// (dashboard/operator_routes.h), the offline batch jobs
// (batch/batch_routes.h). Whoever assembles a process (node/, cli/) builds
// the mounts and hands them to HttpFrontendOptions, so those parts include
// the frontend and never the other way round.
//
// Contract:
//   * RestMount: the frontend routes a mounted endpoint as any other (404
//     for no such path, 405 with Allow for a wrong method), sheds nothing
//     and admits the caller with the guard as Operation::kOperator, then
//     calls the handler on its handler pool with the route, the request and
//     the admitted caller. The handler answers with a Response; it may block
//     briefly (it runs beside the metadata calls), and runs on any pool
//     thread, concurrently with itself. An endpoint no mount names is
//     answered 501.
//   * PageMount: asked first for every request, on the I/O thread, before
//     any route is matched or a key asked for: public pages (the
//     dashboard's static files). Must be cheap and never block; nullopt =
//     not its path.
//   * The helpers below build the frontend's own answers (JSON errors with
//     the status mapping of http_status.h, 401 with its scheme, 429 with
//     Retry-After), so that a mounted endpoint's answers look like every
//     other endpoint's. Pure; thread-safe.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "frontend/http/rest_routes.h"
#include "serving/call_guard.h"
#include "api/caller.h"
#include "transport/http/http_server.h"

namespace somm {

struct RestMount {
  // The endpoints this handler answers.
  std::vector<oip::RestEndpoint> endpoints;
  std::function<http::Response(const oip::RestRoute& route, const http::Request& request,
                               const Caller& caller)>
      handler;
};

using PageMount = std::function<std::optional<http::Response>(const http::RequestHead& head)>;

namespace rest {

// `body` as application/json.
http::Response JsonResponse(int status, std::string body);
// {"error": message}.
http::Response ErrorResponse(int status, std::string_view message);
// The error a Status maps to (oip::HttpStatusFromCode).
http::Response StatusResponse(const Status& status);
// A refused call: 401 names the scheme, 429 says when to come back.
http::Response RefusalResponse(const Admission& admission);
// The request's Authorization header ("" without one).
std::string AuthorizationOf(const http::RequestHead& head);
// The caller the head check verified for this request, or null when its
// head was not checked (no body, or no guard).
const VerifiedKey* VerifiedKeyOf(const http::Request& request);

}  // namespace rest
}  // namespace somm
