#include "transport/http/origin_policy.h"

#include <arpa/inet.h>

#include <algorithm>

namespace somm::http {
namespace {

// "host:port", "[v6]:port", "host": the host alone.
std::string HostPart(const std::string& host) {
  if (!host.empty() && host[0] == '[') {
    const size_t close = host.find(']');
    return close == std::string::npos ? host : host.substr(1, close - 1);
  }
  const size_t colon = host.find(':');
  return colon != std::string::npos && host.find(':', colon + 1) == std::string::npos
             ? host.substr(0, colon)
             : host;
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

bool Mutates(const std::string& method) {
  return method != "GET" && method != "HEAD" && method != "OPTIONS";
}

}  // namespace

bool IsLoopbackHost(const std::string& host) {
  const std::string name = Lower(HostPart(host));
  if (name == "localhost" || name == "localhost.") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, name.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, name.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
  return false;
}

OriginVerdict CheckOrigin(const OriginPolicy& policy, const RequestHead& head) {
  OriginVerdict v;
  const std::string* host = head.Find("host");
  if (policy.loopback_hosts_only && host != nullptr && !IsLoopbackHost(*host)) {
    v.refuse_status = 403;
    v.message = "Host '" + *host +
                "' is not served: without --auth this server answers only to loopback names "
                "(localhost, 127.0.0.1, [::1])";
    return v;
  }
  const std::string* origin = head.Find("origin");
  if (origin == nullptr) return v;
  const bool listed =
      std::any_of(policy.cors_origins.begin(), policy.cors_origins.end(),
                  [origin](const std::string& o) { return o == "*" || o == *origin; });
  const bool same = host != nullptr && (Lower(*origin) == "http://" + Lower(*host) ||
                                        Lower(*origin) == "https://" + Lower(*host));
  if (listed) {
    v.headers = {{"Access-Control-Allow-Origin", *origin}, {"Vary", "Origin"}};
    if (head.method == "OPTIONS" && head.Find("access-control-request-method") != nullptr) {
      v.refuse_status = 204;  // the preflight, answered
      v.headers.emplace_back("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
      v.headers.emplace_back("Access-Control-Allow-Headers",
                             "authorization, content-type, content-encoding, "
                             "inference-header-content-length");
      v.headers.emplace_back("Access-Control-Max-Age", "600");
    }
    return v;
  }
  if (!same && Mutates(head.method)) {
    v.refuse_status = 403;
    v.message = "a cross-origin " + head.method + " from '" + *origin +
                "' is refused: this server allows the origins --cors-origin names, and none "
                "is named for it";
  }
  return v;
}

}  // namespace somm::http
