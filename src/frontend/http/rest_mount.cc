#include "frontend/http/rest_mount.h"

#include <utility>

#include "frontend/http/http_status.h"
#include "frontend/http/oip_json.h"

namespace somm::rest {

http::Response JsonResponse(int status, std::string body) {
  http::Response res;
  res.status = status;
  res.body = std::move(body);
  res.headers.emplace_back("Content-Type", "application/json");
  return res;
}

http::Response ErrorResponse(int status, std::string_view message) {
  return JsonResponse(status, oip::EncodeError(message));
}

http::Response StatusResponse(const Status& status) {
  return ErrorResponse(oip::HttpStatusFromCode(status.code()), status.message());
}

http::Response RefusalResponse(const Admission& a) {
  http::Response res = StatusResponse(a.status);
  if (a.status.code() == StatusCode::kUnauthenticated) {
    res.headers.emplace_back("WWW-Authenticate", "Bearer");
  }
  if (a.retry_after_s > 0) res.headers.emplace_back("Retry-After", std::to_string(a.retry_after_s));
  return res;
}

std::string AuthorizationOf(const http::RequestHead& head) {
  const std::string* value = head.Find("authorization");
  return value == nullptr ? std::string() : *value;
}

const VerifiedKey* VerifiedKeyOf(const http::Request& request) {
  return static_cast<const VerifiedKey*>(request.head_note.get());
}

}  // namespace somm::rest
