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
      // Triton's statistics and model configuration extensions.
      {"/v2/models/stats", RestEndpoint::kStatisticsAll, "", "", "GET"},
      {"/v2/models/stats/", RestEndpoint::kStatisticsAll, "", "", "GET"},
      {"/v2/models/m/stats", RestEndpoint::kModelStatistics, "m", "", "GET"},
      {"/v2/models/m/versions/3/stats", RestEndpoint::kModelStatistics, "m", "3", "GET"},
      {"/v2/models/m/config", RestEndpoint::kModelConfig, "m", "", "GET"},
      {"/v2/models/m/versions/3/config", RestEndpoint::kModelConfig, "m", "3", "GET"},
      {"/v2/models/stats/ready", RestEndpoint::kModelReady, "stats", "", "GET"},
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
        "/v2/repository/models//load", "v2/health/live", "/v2//health/live",
        "/v2/tasks/infer", "/v2/tasks/a/b/c", "/v2/tasks//b", "/v2/tasks/a/b/c/infer", "/v2/tasks//b/infer", "/v2/tasks/a//infer",
        "/v2/somm", "/v2/somm/decisions/x", "/v2/repository/models//register",
        "/v2/repository/models/m/variants/x"}) {
    SCOPED_TRACE(path);
    EXPECT_EQ(MatchRestRoute(path).endpoint, RestEndpoint::kNone);
  }
}

TEST(RestRoutesTest, TellsTaskDiscoveryFromTaskInference) {
  RestRoute r = MatchRestRoute("/v2/tasks");
  EXPECT_EQ(r.endpoint, RestEndpoint::kTaskList);
  EXPECT_STREQ(r.method, "GET");
  r = MatchRestRoute("/v2/tasks/classification/digits");
  EXPECT_EQ(r.endpoint, RestEndpoint::kTaskMetadata);
  EXPECT_EQ(r.task, "classification/digits");
  EXPECT_STREQ(r.method, "GET");
  r = MatchRestRoute("/v2/tasks/classification/");
  EXPECT_EQ(r.endpoint, RestEndpoint::kTaskMetadata);
  EXPECT_EQ(r.task, "classification");
  r = MatchRestRoute("/v2/tasks/classification/digits/infer");
  EXPECT_EQ(r.endpoint, RestEndpoint::kTaskInfer);
  EXPECT_EQ(r.task, "classification/digits");
}

TEST(RestRoutesTest, MatchesTheModelLessExtension) {
  RestRoute r = MatchRestRoute("/v2/tasks/classification/digits/infer");
  EXPECT_EQ(r.endpoint, RestEndpoint::kTaskInfer);
  EXPECT_EQ(r.task, "classification/digits");
  EXPECT_EQ(r.model, "");
  EXPECT_STREQ(r.method, "POST");
  r = MatchRestRoute("/v2/tasks/classification/infer/");
  EXPECT_EQ(r.endpoint, RestEndpoint::kTaskInfer);
  EXPECT_EQ(r.task, "classification");

  r = MatchRestRoute("/v2/repository/models/m/register");
  EXPECT_EQ(r.endpoint, RestEndpoint::kRepositoryRegister);
  EXPECT_EQ(r.model, "m");
  EXPECT_STREQ(r.method, "POST");
  r = MatchRestRoute("/v2/repository/models/m/variants");
  EXPECT_EQ(r.endpoint, RestEndpoint::kModelVariants);
  EXPECT_EQ(r.model, "m");
  EXPECT_STREQ(r.method, "GET");
  r = MatchRestRoute("/v2/somm/decisions");
  EXPECT_EQ(r.endpoint, RestEndpoint::kDecisions);
  EXPECT_STREQ(r.method, "GET");
  EXPECT_EQ(MatchRestRoute("/v2/somm/overview").endpoint, RestEndpoint::kOverview);
  EXPECT_EQ(MatchRestRoute("/v2/somm/workers/").endpoint, RestEndpoint::kWorkers);
  r = MatchRestRoute("/v2/somm/actions");
  EXPECT_EQ(r.endpoint, RestEndpoint::kActions);
  EXPECT_STREQ(r.method, "GET");
  EXPECT_EQ(MatchRestRoute("/v2/somm/actions/x").endpoint, RestEndpoint::kNone);
}

TEST(RestRoutesTest, EncodePathSegmentKeepsUnreservedOnly) {
  EXPECT_EQ(EncodePathSegment("digits-mlp_1.0~"), "digits-mlp_1.0~");
  EXPECT_EQ(EncodePathSegment("a/b c?%"), "a%2Fb%20c%3F%25");
  EXPECT_EQ(EncodePathSegment("\xff"), "%FF");
}

}  // namespace
}  // namespace somm::oip
