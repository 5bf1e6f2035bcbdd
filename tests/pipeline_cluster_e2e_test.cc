// A pipeline served by `somm router` in a real cluster (redis-server, a
// controller, two workers, a router; tests/cluster_process.h): its built-in
// steps run in the router, its model step goes to a worker as any query
// does. PNG bytes in over REST (the binary tensor extension) and gRPC (raw
// contents), the class out, the step's worker in the explanation, and a
// hostile image refused naming the step.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "cluster_process.h"
#include "e2e_fixture.h"
#include "proto/inference.grpc.pb.h"

namespace somm::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

class PipelineClusterE2ETest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    demo_ = new std::string(DemoRepository());
    repo_ = new std::string(MakeTestRepository(*demo_, "pipeline-cluster"));
    WritePngMlpPipeline(*repo_);
    cluster_ = new ClusterProcesses(SommBinary(), *repo_);
    if (!cluster_->ok()) return;
    // Ready once its model step's model is (the workers load it).
    httplib::Client c("127.0.0.1", cluster_->http_port());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      auto r = c.Get("/v2/models/png-mlp/ready");
      if (r && r->status == 200) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
  static void TearDownTestSuite() {
    delete cluster_;
    if (repo_) fs::remove_all(*repo_);
    delete repo_;
    delete demo_;
  }
  void SetUp() override {
    ASSERT_TRUE(cluster_->ok()) << cluster_->error() << "\n" << cluster_->Logs();
  }
  static std::string Png(int digit) {
    return ReadFileBytes(fs::path(*demo_) / ".examples" / ("digit_" + std::to_string(digit) + ".png"));
  }
  // digits-mlp's class for the example PNG (.examples/expected.json).
  static int64_t Expected(int digit) {
    const json expected =
        json::parse(ReadFileBytes(fs::path(*demo_) / ".examples" / "expected.json"));
    return expected["digit_" + std::to_string(digit) + ".json"]["models"]["digits-mlp"]
                   ["class_from_png"]
                       .get<int64_t>();
  }
  static httplib::Result Post(const std::string& image) {
    const std::string data = OipBytesElement(image);
    const std::string head =
        json{{"inputs",
              {{{"name", "image"}, {"datatype", "BYTES"}, {"shape", {1, 1}},
                {"parameters", {{"binary_data_size", data.size()}}}}}}}
            .dump();
    httplib::Client c("127.0.0.1", cluster_->http_port());
    c.set_read_timeout(30);
    return c.Post("/v2/models/png-mlp/infer",
                  {{"Inference-Header-Content-Length", std::to_string(head.size())}}, head + data,
                  "application/octet-stream");
  }

  static inline std::string* demo_ = nullptr;
  static inline std::string* repo_ = nullptr;
  static inline ClusterProcesses* cluster_ = nullptr;
};

TEST_F(PipelineClusterE2ETest, TheRouterServesAPipelineWhoseModelStepRunsOnAWorker) {
  auto meta = httplib::Client("127.0.0.1", cluster_->http_port()).Get("/v2/models/png-mlp");
  ASSERT_TRUE(meta);
  ASSERT_EQ(meta->status, 200) << meta->body;
  EXPECT_EQ(json::parse(meta->body)["platform"], "somm_pipeline") << meta->body;

  auto r = Post(Png(3));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body << "\n" << cluster_->Logs();
  const json answer = json::parse(r->body);
  EXPECT_EQ(answer["outputs"][0]["data"][0].get<int64_t>(), Expected(3)) << r->body;
  const std::string somm = answer["parameters"]["somm"].get<std::string>();
  EXPECT_NE(somm.find("decision=pipeline"), std::string::npos) << somm;
  // The model step was a cluster query: its explanation names the worker.
  const std::string step = answer["parameters"]["somm_step_classify"].get<std::string>();
  EXPECT_NE(step.find("worker="), std::string::npos) << step;
}

TEST_F(PipelineClusterE2ETest, GrpcCarriesThePngAsRawContents) {
  auto stub = inference::GRPCInferenceService::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(cluster_->grpc_port()), grpc::InsecureChannelCredentials()));
  inference::ModelInferRequest request;
  request.set_model_name("png-mlp");
  auto* input = request.add_inputs();
  input->set_name("image");
  input->set_datatype("BYTES");
  input->add_shape(1);
  input->add_shape(1);
  request.add_raw_input_contents(OipBytesElement(Png(7)));
  inference::ModelInferResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  const grpc::Status s = stub->ModelInfer(&context, request, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(response.raw_output_contents_size(), 1);
  int64_t got = -1;
  ASSERT_EQ(response.raw_output_contents(0).size(), sizeof got);
  std::memcpy(&got, response.raw_output_contents(0).data(), sizeof got);
  EXPECT_EQ(got, Expected(7));
}

TEST_F(PipelineClusterE2ETest, AHostileImageIsRefusedInTheRouterNamingTheStep) {
  auto r = Post("GIF89a not what it says");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_NE(r->body.find("step 'decode'"), std::string::npos) << r->body;
}

}  // namespace
}  // namespace somm::testing
