// OriginPolicy: which browsers' requests the REST port serves. A web page
// can make a browser POST to any address, a loopback one included (unload a
// model, submit a batch job), and DNS rebinding lets a page's own name point
// at 127.0.0.1. So:
//   * without authentication (--auth none, loopback only), only requests
//     whose Host names loopback (localhost, 127.x.x.x, [::1]) are served:
//     a rebound name is refused;
//   * a cross-origin request that may change something (any method but GET,
//     HEAD and OPTIONS) is refused unless its Origin is one --cors-origin
//     names; a same-origin one (the dashboard's own page) is served;
//   * CORS is off unless --cors-origin names origins: only then are
//     Access-Control-Allow-* headers sent and preflights answered.
// Clients that are not browsers send no Origin and are not affected.
//
// Pure: a function of the request's head. Thread-safe.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "transport/http/http_request_parser.h"

namespace somm::http {

struct OriginPolicy {
  bool loopback_hosts_only = false;  // --auth none
  std::vector<std::string> cors_origins;  // "https://app.example.com"; "*" = any
};

struct OriginVerdict {
  int refuse_status = 0;  // 0 = serve; else 403 (or 204 for an answered preflight)
  std::string message;    // why it is refused
  // CORS headers for the answer, when the Origin is allowed.
  std::vector<std::pair<std::string, std::string>> headers;
};

OriginVerdict CheckOrigin(const OriginPolicy& policy, const RequestHead& head);

// Whether a Host header's value (with or without its port) names loopback.
bool IsLoopbackHost(const std::string& host);

}  // namespace somm::http
