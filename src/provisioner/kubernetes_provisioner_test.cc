// KubernetesProvisioner against responses in the shape the API server sends
// (testdata/: Scale objects of autoscaling/v1, and the Status objects of a
// 403, 404 and 409), fed through the KubernetesApi seam.
#include "provisioner/kubernetes_provisioner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <deque>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace somm {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

std::string Recorded(const std::string& name) {
  std::ifstream in(std::string(SOMM_PROVISIONER_TESTDATA) + "/" + name);
  std::stringstream s;
  s << in.rdbuf();
  EXPECT_FALSE(s.str().empty()) << name;
  return s.str();
}

struct Request {
  std::string method, path, content_type, body;
};

// Answers each call with the next recorded reply and keeps the requests.
class RecordedApi : public KubernetesApi {
 public:
  RecordedApi(std::deque<KubernetesReply> replies, std::vector<Request>* requests)
      : replies_(std::move(replies)), requests_(requests) {}
  StatusOr<KubernetesReply> Call(const std::string& method, const std::string& path,
                                 const std::string& content_type,
                                 const std::string& body) override {
    requests_->push_back({method, path, content_type, body});
    if (replies_.empty()) return Unavailable("no recorded reply left");
    KubernetesReply r = replies_.front();
    replies_.pop_front();
    return r;
  }

 private:
  std::deque<KubernetesReply> replies_;
  std::vector<Request>* requests_;
};

constexpr char kPath[] = "/apis/apps/v1/namespaces/somm/deployments/somm-worker/scale";

KubernetesProvisioner Make(std::deque<KubernetesReply> replies, std::vector<Request>* requests) {
  KubernetesProvisionerOptions o;
  o.namespace_name = "somm";
  o.deployment = "somm-worker";
  return KubernetesProvisioner(o, std::make_unique<RecordedApi>(std::move(replies), requests));
}

TEST(KubernetesProvisionerTest, StartPatchesReplicasWithTheResourceVersionItRead) {
  std::vector<Request> requests;
  auto p = Make({{200, Recorded("scale_get_3.json")}, {200, Recorded("scale_patched_4.json")}},
                &requests);
  ASSERT_TRUE(p.Start(1).ok());
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].method, "GET");
  EXPECT_EQ(requests[0].path, kPath);
  EXPECT_EQ(requests[1].method, "PATCH");
  EXPECT_EQ(requests[1].path, kPath);
  EXPECT_EQ(requests[1].content_type, "application/merge-patch+json");
  const json patch = json::parse(requests[1].body);
  EXPECT_EQ(patch["spec"]["replicas"], 4);
  EXPECT_EQ(patch["metadata"]["resourceVersion"], "48213");
}

TEST(KubernetesProvisionerTest, AConflictIsReadAgainAndRetried) {
  std::vector<Request> requests;
  auto p = Make({{200, Recorded("scale_get_3.json")},
                 {409, Recorded("status_409_conflict.json")},
                 {200, Recorded("scale_get_3_newer.json")},
                 {200, Recorded("scale_patched_4.json")}},
                &requests);
  ASSERT_TRUE(p.Start(1).ok());
  ASSERT_EQ(requests.size(), 4u);
  EXPECT_EQ(json::parse(requests[3].body)["metadata"]["resourceVersion"], "48219");
}

TEST(KubernetesProvisionerTest, ConflictsBeyondTheRetriesAreAnError) {
  std::vector<Request> requests;
  std::deque<KubernetesReply> replies;
  for (int i = 0; i < 4; ++i) {
    replies.push_back({200, Recorded("scale_get_3.json")});
    replies.push_back({409, Recorded("status_409_conflict.json")});
  }
  auto p = Make(replies, &requests);
  const Status s = p.Start(1);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("the object has been modified"));
  EXPECT_EQ(requests.size(), 8u);  // 1 try + 3 retries
}

TEST(KubernetesProvisionerTest, ForbiddenNamesTheMissingPermission) {
  std::vector<Request> requests;
  auto p = Make({{200, Recorded("scale_get_3.json")}, {403, Recorded("status_403_forbidden.json")}},
                &requests);
  const Status s = p.Start(1);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("cannot patch resource \"deployments/scale\""));
  EXPECT_THAT(s.message(), HasSubstr("service account"));
}

TEST(KubernetesProvisionerTest, AMissingDeploymentIsNotFound) {
  std::vector<Request> requests;
  auto p = Make({{404, Recorded("status_404_not_found.json")}}, &requests);
  const auto replicas = p.Replicas();
  ASSERT_FALSE(replicas.ok());
  EXPECT_EQ(replicas.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(replicas.status().message(), HasSubstr("\"somm-worker\" not found"));
}

TEST(KubernetesProvisionerTest, StopLowersReplicasByOne) {
  std::vector<Request> requests;
  auto p = Make({{200, Recorded("scale_get_3.json")}, {200, Recorded("scale_patched_2.json")}},
                &requests);
  ASSERT_TRUE(p.Stop("somm-worker-7d9c-abcde").ok());
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(json::parse(requests[1].body)["spec"]["replicas"], 2);
}

TEST(KubernetesProvisionerTest, PendingIsReplicasAskedForMinusRegistered) {
  std::vector<Request> requests;
  auto p = Make({{200, Recorded("scale_patched_4.json")}, {200, Recorded("scale_patched_2.json")}},
                &requests);
  const std::set<std::string> registered = {"a", "b", "c"};
  EXPECT_EQ(p.Pending(registered).value(), 1);
  EXPECT_EQ(p.Pending(registered).value(), 0);  // scaling in: never negative
  EXPECT_EQ(p.Removable(registered), registered);
}

TEST(KubernetesProvisionerTest, OutsideAPodTheInClusterApiSaysSo) {
  InClusterOptions o;
  o.host = "10.96.0.1";
  o.port = 443;
  o.token_path = (std::filesystem::temp_directory_path() / "somm-no-such-token").string();
  const auto api = InClusterKubernetesApi(o);
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(api.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(api.status().message(), HasSubstr("somm-no-such-token"));
}

}  // namespace
}  // namespace somm
