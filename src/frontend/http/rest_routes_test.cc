#include "frontend/http/rest_routes.h"

#include <gtest/gtest.h>

namespace somm::oip {
namespace {

TEST(RestRoutesTest, MatchesEveryEndpoint) {
  struct Case {
    const char* path;
    RestEndpoint endpoint;
    const char* model;
    const char* version;
    const char* method;
  };
  const Case cases[] = {
      {"/v2", RestEndpoint::kServerMetadata, "", "", "GET"},
      {"/v2/", RestEndpoint::kServerMetadata, "", "", "GET"},
      {"/v2/health/live", RestEndpoint::kServerLive, "", "", "GET"},
      {"/v2/health/ready", RestEndpoint::kServerReady, "", "", "GET"},
      {"/v2/models/m", RestEndpoint::kModelMetadata, "m", "", "GET"},
      {"/v2/models/m/versions/3", RestEndpoint::kModelMetadata, "m", "3", "GET"},
      {"/v2/models/m/ready", RestEndpoint::kModelReady, "m", "", "GET"},
      {"/v2/models/m/versions/3/ready", RestEndpoint::kModelReady, "m", "3", "GET"},
      {"/v2/models/m/infer", RestEndpoint::kModelInfer, "m", "", "POST"},
      {"/v2/models/m/versions/3/infer", RestEndpoint::kModelInfer, "m", "3", "POST"},
      {"/v2/models/versions/ready", RestEndpoint::kModelReady, "versions", "", "GET"},
      {"/v2/repository/index", RestEndpoint::kRepositoryIndex, "", "", "POST"},
      {"/v2/repository/models/m/load", RestEndpoint::kRepositoryLoad, "m", "", "POST"},
      {"/v2/repository/models/m/unload", RestEndpoint::kRepositoryUnload, "m", "", "POST"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.path);
    const RestRoute r = MatchRestRoute(c.path);
    EXPECT_EQ(r.endpoint, c.endpoint);
    EXPECT_EQ(r.model, c.model);
    EXPECT_EQ(r.version, c.version);
    EXPECT_STREQ(r.method, c.method);
  }
}

TEST(RestRoutesTest, RejectsOtherPaths) {
  for (const char* path :
       {"", "/", "/v1", "/v2/health", "/v2/health/dead", "/v2/models", "/v2/models/",
        "/v2/models/m/versions", "/v2/models/m/predict", "/v2/models/m/versions//infer",
        "/v2/models/m/infer/x", "/v2/repository", "/v2/repository/models/m",
        "/v2/repository/models//load", "v2/health/live", "/v2//health/live"}) {
    SCOPED_TRACE(path);
    EXPECT_EQ(MatchRestRoute(path).endpoint, RestEndpoint::kNone);
  }
}

}  // namespace
}  // namespace somm::oip
