// HttpFrontend's model-less extension over loopback against the fake server:
// task-form inference, SLO parameters, registration, variants, decisions.
#include <gtest/gtest.h>
#include <httplib.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>
#include <vector>

#include "common/base64.h"
#include "dashboard/operator_routes.h"
#include "frontend/http/http_frontend.h"
#include "frontend/http/oip_json.h"
#include "frontend/http/somm_json.h"
#include "api/testing/fake_inference_server.h"

namespace somm {
namespace {

using nlohmann::json;
using ::somm::testing::FakeInferenceServer;

constexpr char kFloatInput[] =
    R"({"id":"q1","inputs":[{"name":"IN0","datatype":"FP32","shape":[1,4],)"
    R"("data":[[1,2,3,4]]}]})";

json RegistrationBody() {
  return {{"task", "classification/digits"},
          {"inputs", {{{"name", "pixels"}, {"datatype", "FP32"}, {"shape", {64}}}}},
          {"outputs", {{{"name", "logits"}, {"datatype", "FP32"}, {"shape", {10}}}}},
          {"max_batch_size", 64},
          {"model", Base64Encode("torchscript bytes")},
          {"description", "d"}};
}

class HttpFrontendSommTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HttpFrontendOptions options;
    options.address = "127.0.0.1";
    options.port = 0;
    StatusOr<std::unique_ptr<HttpFrontend>> frontend = HttpFrontend::Start(server_, options);
    ASSERT_TRUE(frontend.ok()) << frontend.status().ToString();
    frontend_ = std::move(frontend).value();
    client_ = std::make_unique<httplib::Client>("127.0.0.1", frontend_->port());
    client_->set_keep_alive(true);
  }

  httplib::Result Post(const std::string& path, const std::string& body) {
    return client_->Post(path.c_str(), body, "application/json");
  }

  FakeInferenceServer server_;
  std::unique_ptr<HttpFrontend> frontend_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(HttpFrontendSommTest, TaskInferReachesTheServerWithTheTaskSet) {
  auto res = Post("/v2/tasks/test/echo/infer", kFloatInput);
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  // The response names the model the server picked.
  EXPECT_EQ(res->body.rfind(R"({"model_name":"echo","model_version":"2","id":"q1")", 0), 0u)
      << res->body;
  const InferenceRequest seen = server_.last_request();
  EXPECT_EQ(seen.task, "test/echo");
  EXPECT_EQ(seen.model_name, "");
  EXPECT_EQ(seen.model_version, "");
  ASSERT_EQ(seen.inputs.size(), 1u);

  res = Post("/v2/tasks/test/unknown/infer", kFloatInput);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  EXPECT_EQ(oip::DecodeError(res->body), "no loaded model serves task 'test/unknown'");

  res = client_->Get("/v2/tasks/test/echo/infer");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 405);

  // A bad body is decoded (and refused) exactly as on the model route.
  res = Post("/v2/tasks/test/echo/infer", R"({"inputs":3})");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
}

TEST_F(HttpFrontendSommTest, SloParametersKeepTheirTypes) {
  const std::string body =
      R"({"parameters":{"latency_slo_ms":5,"min_accuracy":0.9,"max_cost":1e-6,)"
      R"("best_effort":true,"task":"classification/digits","other":2.0},)"
      R"("inputs":[{"name":"IN0","datatype":"FP32","shape":[1],"data":[1]}]})";
  for (const char* path : {"/v2/models/echo/infer", "/v2/tasks/test/echo/infer"}) {
    SCOPED_TRACE(path);
    auto res = Post(path, body);
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    const Parameters p = server_.last_request().parameters;
    ASSERT_TRUE(std::holds_alternative<int64_t>(p.at("latency_slo_ms")));
    EXPECT_EQ(std::get<int64_t>(p.at("latency_slo_ms")), 5);
    ASSERT_TRUE(std::holds_alternative<double>(p.at("min_accuracy")));
    EXPECT_DOUBLE_EQ(std::get<double>(p.at("min_accuracy")), 0.9);
    ASSERT_TRUE(std::holds_alternative<double>(p.at("max_cost")));
    EXPECT_DOUBLE_EQ(std::get<double>(p.at("max_cost")), 1e-6);
    ASSERT_TRUE(std::holds_alternative<bool>(p.at("best_effort")));
    EXPECT_TRUE(std::get<bool>(p.at("best_effort")));
    ASSERT_TRUE(std::holds_alternative<std::string>(p.at("task")));
    EXPECT_EQ(std::get<std::string>(p.at("task")), "classification/digits");
    // 2.0 is written as a double and stays one.
    ASSERT_TRUE(std::holds_alternative<double>(p.at("other")));
  }
}

TEST_F(HttpFrontendSommTest, RegisterAnswers202AndShowsProgress) {
  auto res = Post("/v2/repository/models/new-model/register", RegistrationBody().dump());
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 202) << res->body;
  EXPECT_EQ(res->get_header_value("Content-Type"), "application/json");
  EXPECT_EQ(res->get_header_value("Location"), "/v2/repository/models/new-model/variants");
  EXPECT_EQ(res->body, oip::EncodeRegistrationAccepted("new-model"));
  const RegistrationRequest seen = server_.calls().last_registration;
  EXPECT_EQ(seen.name, "new-model");
  EXPECT_EQ(seen.task, "classification/digits");
  EXPECT_EQ(seen.model_bytes, "torchscript bytes");
  EXPECT_EQ(seen.max_batch_size, 64);
  ASSERT_EQ(seen.inputs.size(), 1u);
  EXPECT_EQ(seen.inputs[0].shape, Shape({64}));

  res = client_->Get("/v2/repository/models/new-model/variants");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  StatusOr<RegistrationStatus> status = oip::DecodeRegistrationStatus(res->body);
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  EXPECT_EQ(status->name, "new-model");
  EXPECT_EQ(status->state, "GENERATING");
  EXPECT_EQ(status->total, 3);

  // A second registration of the same name conflicts.
  res = Post("/v2/repository/models/new-model/register", RegistrationBody().dump());
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 409);
  EXPECT_EQ(oip::DecodeError(res->body), "model 'new-model' already exists");
}

TEST_F(HttpFrontendSommTest, RegisterErrorsNameTheFieldOrPassTheServersCode) {
  json body = RegistrationBody();
  body["inputs"][0]["datatype"] = "FLOAT";
  auto res = Post("/v2/repository/models/m/register", body.dump());
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_NE(oip::DecodeError(res->body).find("field 'inputs[0].datatype'"), std::string::npos)
      << res->body;

  body = RegistrationBody();
  body["model"] = "@@@@";
  res = Post("/v2/repository/models/m/register", body.dump());
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_NE(oip::DecodeError(res->body).find("field 'model' is invalid base64"), std::string::npos);

  res = Post("/v2/repository/models/m/register", "");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);

  server_.Configure([](FakeInferenceServer::Config& c) {
    c.register_status = InvalidArgument("task 'digits' must be 'task/dataset'");
  });
  res = Post("/v2/repository/models/m/register", RegistrationBody().dump());
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_EQ(oip::DecodeError(res->body), "task 'digits' must be 'task/dataset'");
  server_.Configure([](FakeInferenceServer::Config& c) {
    c.register_status = Unimplemented("model registration is not supported");
  });
  res = Post("/v2/repository/models/m/register", RegistrationBody().dump());
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 501);

  res = client_->Get("/v2/repository/models/m/register");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 405);
}

TEST_F(HttpFrontendSommTest, VariantsOfAnUnknownModelIs404) {
  auto res = client_->Get("/v2/repository/models/nope/variants");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  EXPECT_EQ(oip::DecodeError(res->body), "no registered model 'nope'");
  res = Post("/v2/repository/models/nope/variants", "");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 405);
}

TEST_F(HttpFrontendSommTest, DecisionsHonourTheLimit) {
  std::vector<DecisionRecord> log(3);
  for (int i = 0; i < 3; ++i) {
    log[i].unix_ms = 1000 + i;
    log[i].target = "digits-mlp";
    log[i].outcome = "loaded";
    log[i].predicted_latency_ms = 0.5 * i;
  }
  server_.Configure([&](FakeInferenceServer::Config& c) { c.decisions = log; });
  auto res = client_->Get("/v2/somm/decisions");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(server_.calls().last_decision_limit, 100u);
  StatusOr<std::vector<DecisionRecord>> got = oip::DecodeDecisions(res->body);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 3u);
  EXPECT_EQ((*got)[2].unix_ms, 1002);
  EXPECT_DOUBLE_EQ((*got)[2].predicted_latency_ms, 1.0);

  res = client_->Get("/v2/somm/decisions?limit=2");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  EXPECT_EQ(server_.calls().last_decision_limit, 2u);
  EXPECT_EQ(oip::DecodeDecisions(res->body)->size(), 2u);

  for (const char* bad : {"abc", "10001", "-1", ""}) {
    res = client_->Get((std::string("/v2/somm/decisions?limit=") + bad).c_str());
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 400) << bad;
    EXPECT_NE(oip::DecodeError(res->body).find("query parameter 'limit'"), std::string::npos);
  }
}


// The operator's views and the dashboard's files, on the REST port.
TEST(HttpFrontendOperatorTest, ServesTheDashboardAndTheOperatorViews) {
  FakeInferenceServer server;
  HttpFrontendOptions options;
  options.address = "127.0.0.1";
  options.port = 0;
  // Mounted as a process mounts them (dashboard/operator_routes.h).
  options.mounts = {dashboard::OperatorViews(server, nullptr, [] {
    return std::string("somm_inference_request_success_total{model=\"echo\",version=\"1\"} 7\n");
  })};
  options.pages = {dashboard::DashboardPages()};
  auto frontend = HttpFrontend::Start(server, options);
  ASSERT_TRUE(frontend.ok()) << frontend.status().ToString();
  httplib::Client client("127.0.0.1", (*frontend)->port());
  auto res = client.Get("/dashboard/");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_NE(res->body.find("dashboard.js"), std::string::npos);
  res = client.Get("/v2/somm/overview");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(json::parse(res->body)["totals"]["success"], 7);
  res = client.Get("/v2/somm/workers");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_TRUE(json::parse(res->body)["workers"].empty());  // the fake has no cluster view
  res = client.Get("/v2/somm/actions?limit=x");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  res = client.Post("/v2/somm/overview", "{}", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 405);
}

}  // namespace
}  // namespace somm
