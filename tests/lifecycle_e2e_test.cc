// End-to-end, the model lifecycle (docs/lifecycle.md): task discovery over
// REST, gRPC and `somm tasks`; registration refused when a model does not
// fit its task's signature; a task query with a wrong input told the task's
// signature. Runs embedded and, registered a second time, through a router
// in front of two workers (tests/server_process.h).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <array>
#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "e2e_fixture.h"
#include "proto/somm.grpc.pb.h"

namespace somm::testing {
namespace {

using nlohmann::json;

constexpr char kDigitsSignature[] = "inputs pixels FP32 [-1,64]; outputs logits FP32 [-1,10]";

class LifecycleE2ETest : public DemoServerSuite<LifecycleE2ETest> {
 protected:
  httplib::Client Client() {
    httplib::Client c("127.0.0.1", server_->http_port());
    c.set_read_timeout(60, 0);
    return c;
  }
  std::unique_ptr<somm::SommControl::Stub> Control() {
    return somm::SommControl::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(server_->grpc_port()), grpc::InsecureChannelCredentials()));
  }
  // Runs a command; its exit status and what it wrote (stdout and stderr).
  static std::pair<int, std::string> Run(const std::string& command) {
    std::string out;
    FILE* pipe = popen((command + " 2>&1").c_str(), "r");
    if (pipe == nullptr) return {-1, ""};
    std::array<char, 4096> buf;
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
    return {pclose(pipe), out};
  }
  std::string Url() const { return "127.0.0.1:" + std::to_string(server_->http_port()); }
};

TEST_F(LifecycleE2ETest, TaskListShowsSignatureModelsAndRanges) {
  auto c = Client();
  auto res = c.Get("/v2/tasks");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const json list = json::parse(res->body);
  const json* digits = nullptr;
  for (const json& t : list.at("tasks")) {
    if (t.at("task") == "classification/digits") digits = &t;
  }
  ASSERT_NE(digits, nullptr) << res->body;
  const json& sig = digits->at("signature");
  EXPECT_EQ(sig.at("inputs").at(0).at("name"), "pixels");
  EXPECT_EQ(sig.at("inputs").at(0).at("shape"), json::array({64}));
  EXPECT_EQ(sig.at("outputs").at(0).at("name"), "logits");
  EXPECT_TRUE(sig.at("batched").get<bool>());
  std::vector<std::string> names;
  for (const json& m : digits->at("models")) names.push_back(m.at("name"));
  for (const std::string& m : kDigitsModels) {
    EXPECT_NE(std::find(names.begin(), names.end(), m), names.end()) << m << " in " << res->body;
  }
  // The accuracy range covers what the models' configs state.
  const json& acc = digits->at("accuracy");
  ASSERT_TRUE(acc.contains("min") && acc.contains("max")) << res->body;
  EXPECT_LE(acc["min"].get<double>(), acc["max"].get<double>());
  EXPECT_LT(acc["min"].get<double>(), 0.95);  // digits-logistic is the weakest
  EXPECT_GT(acc["max"].get<double>(), 0.95);  // digits-cnn the strongest
  const json& lat = digits->at("latency_ms_batch1");
  if (lat.contains("min")) {
    EXPECT_LE(lat["min"].get<double>(), lat["max"].get<double>());
  }

  // One task by its two-segment name, told apart from .../infer.
  res = c.Get("/v2/tasks/classification/digits");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(json::parse(res->body), *digits);
  res = c.Get("/v2/tasks/classification/no-such-dataset");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404) << res->body;
  res = c.Post("/v2/tasks/classification/digits", "{}", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 405);
}

TEST_F(LifecycleE2ETest, TaskDiscoveryOverGrpcMatchesRest) {
  auto control = Control();
  somm::TasksResponse all;
  grpc::ClientContext ctx;
  ASSERT_TRUE(control->ListTasks(&ctx, somm::ListTasksRequest(), &all).ok());
  bool found = false;
  for (const auto& t : all.tasks()) {
    if (t.task() != "classification/digits") continue;
    found = true;
    ASSERT_EQ(t.inputs_size(), 1);
    EXPECT_EQ(t.inputs(0).name(), "pixels");
    EXPECT_EQ(t.inputs(0).datatype(), "FP32");
    EXPECT_GE(t.models_size(), 3);
    EXPECT_TRUE(t.has_min_accuracy());
  }
  EXPECT_TRUE(found);
  somm::DescribeTaskRequest request;
  request.set_task("classification/digits");
  somm::TasksResponse one;
  grpc::ClientContext ctx2;
  ASSERT_TRUE(control->DescribeTask(&ctx2, request, &one).ok());
  ASSERT_EQ(one.tasks_size(), 1);
  EXPECT_EQ(one.tasks(0).task(), "classification/digits");
  request.set_task("nothing/here");
  grpc::ClientContext ctx3;
  EXPECT_EQ(control->DescribeTask(&ctx3, request, &one).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(LifecycleE2ETest, SommTasksCommandOverBothProtocols) {
  auto [rc, out] = Run(SommBinary() + " tasks --url " + Url());
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("classification/digits"), std::string::npos) << out;
  EXPECT_NE(out.find("pixels FP32 [-1,64]"), std::string::npos) << out;
  std::tie(rc, out) = Run(SommBinary() + " tasks classification/digits -i grpc --url 127.0.0.1:" +
                          std::to_string(server_->grpc_port()));
  EXPECT_EQ(rc, 0) << out;
  for (const std::string& m : kDigitsModels) EXPECT_NE(out.find(m), std::string::npos) << out;
  std::tie(rc, out) = Run(SommBinary() + " tasks nothing/here --url " + Url());
  EXPECT_NE(rc, 0) << out;
}

TEST_F(LifecycleE2ETest, TaskQueryWithAWrongInputIsToldTheTaskSignature) {
  auto c = Client();
  json body = {{"inputs", json::array({{{"name", "image"},
                                         {"datatype", "FP32"},
                                         {"shape", {1, 64}},
                                         {"data", std::vector<float>(64, 0.0f)}}})}};
  auto res = c.Post("/v2/tasks/classification/digits/infer", body.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400) << res->body;
  const std::string error = json::parse(res->body).at("error");
  EXPECT_NE(error.find("task 'classification/digits' takes " + std::string(kDigitsSignature)),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("unknown input 'image'"), std::string::npos) << error;
  // The right input passes the check (whether it is then served depends on
  // profiles, which this repository has not generated).
  body["inputs"][0]["name"] = "pixels";
  res = c.Post("/v2/tasks/classification/digits/infer", body.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->body.find("takes inputs"), std::string::npos) << res->body;
}

TEST_F(LifecycleE2ETest, RegistrationThatDoesNotFitItsTaskIsRefusedWithBothSignatures) {
  // The smallest digits model: the suite's server takes bodies up to 200 kB.
  const std::string dir = *demo_ + "/digits-logistic/1";
  auto [rc, out] = Run(SommBinary() + " register misfit --model " + dir + "/model.pt" +
                       " --task classification/digits --input image:FP32:64" +
                       " --output logits:FP32:10 --max-batch-size 64 --url " + Url());
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find(kDigitsSignature), std::string::npos) << out;
  EXPECT_NE(out.find("inputs image FP32 [-1,64]"), std::string::npos) << out;
  auto res = Client().Get("/v2/tasks/classification/digits");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->body.find("misfit"), std::string::npos) << res->body;
}

}  // namespace
}  // namespace somm::testing
