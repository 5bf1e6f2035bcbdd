// OriginPolicy: the review's browser attacks on `--auth none` (a page POSTs
// to 127.0.0.1:8000; a rebound name points at it) and CORS kept off unless
// origins are named.
#include "transport/http/origin_policy.h"

#include <gtest/gtest.h>

namespace somm::http {
namespace {

RequestHead Head(const std::string& method, const std::string& host, const std::string& origin = "") {
  RequestHead h;
  h.method = method;
  h.target = h.path = "/v2/repository/models/m/unload";
  h.headers.emplace_back("host", host);
  if (!origin.empty()) h.headers.emplace_back("origin", origin);
  return h;
}

TEST(OriginPolicyTest, WithoutAuthOnlyLoopbackHostsAreServed) {
  const OriginPolicy none{true, {}};
  for (const char* host : {"127.0.0.1:8000", "localhost:8000", "LOCALHOST", "[::1]:8000", "127.1.2.3"}) {
    EXPECT_EQ(CheckOrigin(none, Head("GET", host)).refuse_status, 0) << host;
  }
  for (const char* host : {"evil.example:8000", "10.0.0.1:8000", "127.0.0.1.evil.example", "[::2]"}) {
    const OriginVerdict v = CheckOrigin(none, Head("GET", host));
    EXPECT_EQ(v.refuse_status, 403) << host;
    EXPECT_NE(v.message.find("loopback"), std::string::npos);
  }
  // With keys, any Host: the key is the check.
  EXPECT_EQ(CheckOrigin(OriginPolicy{false, {}}, Head("GET", "somm.example:8000")).refuse_status, 0);
}

TEST(OriginPolicyTest, CrossOriginMutationsAreRefusedAndCorsIsOffUnlessNamed) {
  const OriginPolicy none{true, {}};
  const OriginVerdict page = CheckOrigin(none, Head("POST", "127.0.0.1:8000", "https://evil.example"));
  EXPECT_EQ(page.refuse_status, 403);
  EXPECT_TRUE(page.headers.empty());
  // The dashboard's own page posts same-origin.
  EXPECT_EQ(CheckOrigin(none, Head("POST", "127.0.0.1:8000", "http://127.0.0.1:8000")).refuse_status, 0);
  // A cross-origin GET is served but gets no CORS header: the page cannot read it.
  const OriginVerdict read = CheckOrigin(none, Head("GET", "127.0.0.1:8000", "https://evil.example"));
  EXPECT_EQ(read.refuse_status, 0);
  EXPECT_TRUE(read.headers.empty());
  // Named origins: allowed, with CORS headers, and their preflight answered.
  const OriginPolicy named{false, {"https://app.example"}};
  const OriginVerdict app = CheckOrigin(named, Head("POST", "somm:8000", "https://app.example"));
  EXPECT_EQ(app.refuse_status, 0);
  ASSERT_FALSE(app.headers.empty());
  EXPECT_EQ(app.headers[0].second, "https://app.example");
  RequestHead preflight = Head("OPTIONS", "somm:8000", "https://app.example");
  preflight.headers.emplace_back("access-control-request-method", "POST");
  EXPECT_EQ(CheckOrigin(named, preflight).refuse_status, 204);
  EXPECT_EQ(CheckOrigin(named, Head("POST", "somm:8000", "https://other.example")).refuse_status, 403);
}

}  // namespace
}  // namespace somm::http
