// End-to-end: the real somm binary on loopback, driven over REST, checked
// against libtorch run directly on the same TorchScript files.
#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "e2e_fixture.h"

namespace somm::testing {
namespace {

using nlohmann::json;

class RestE2ETest : public DemoServerSuite<RestE2ETest> {
 protected:

  httplib::Client Client() {
    httplib::Client c("127.0.0.1", server_->http_port());
    c.set_read_timeout(30, 0);
    return c;
  }

  static json Request(const std::vector<std::vector<float>>& rows) {
    json data = json::array();
    for (const auto& r : rows) {
      for (float v : r) data.push_back(v);
    }
    return {{"inputs", {{{"name", "pixels"}, {"datatype", "FP32"},
                          {"shape", {rows.size(), 64}}, {"data", data}}}}};
  }

};

TEST_F(RestE2ETest, HealthAndMetadata) {
  auto c = Client();
  EXPECT_EQ(c.Get("/v2/health/live")->status, 200);
  // Strict readiness (Triton's): this repository holds models that cannot
  // load (broken-config), so `somm serve` is up but not ready
  // (RestReadinessTest covers both ways). A router is ready when it can
  // serve: it sees the leader and a worker and holds the catalog.
  EXPECT_EQ(c.Get("/v2/health/ready")->status, IsClusterTopology() ? 200 : 400);
  auto server = json::parse(c.Get("/v2")->body);
  EXPECT_EQ(server["name"], "somm");
  EXPECT_TRUE(server["extensions"].is_array());
  // Only what is implemented is advertised: a client (Triton's, KServe's)
  // reads the list and calls the extension's endpoints.
  for (const auto& extension : server["extensions"]) {
    if (extension == "statistics") {
      EXPECT_EQ(c.Get("/v2/models/digits-mlp/stats")->status, 200) << "statistics advertised";
      EXPECT_EQ(c.Get("/v2/models/stats")->status, 200) << "statistics advertised";
    } else if (extension == "model_configuration") {
      EXPECT_EQ(c.Get("/v2/models/digits-mlp/config")->status, 200) << "configuration advertised";
    } else if (extension == "model_repository") {
      EXPECT_EQ(c.Post("/v2/repository/index", "{}", "application/json")->status, 200);
    }
  }
  // Triton's statistics and model configuration extensions are served.
  for (const char* extension : {"statistics", "model_configuration"}) {
    EXPECT_NE(std::find(server["extensions"].begin(), server["extensions"].end(), extension),
              server["extensions"].end())
        << extension;
  }
  auto r = c.Get("/v2/models/digits-mlp");
  ASSERT_EQ(r->status, 200) << r->body;
  auto md = json::parse(r->body);
  EXPECT_EQ(md["name"], "digits-mlp");
  EXPECT_EQ(md["inputs"][0]["name"], "pixels");
  EXPECT_EQ(md["inputs"][0]["shape"], json({-1, 64}));
  EXPECT_EQ(md["outputs"][0]["datatype"], "FP32");
  EXPECT_EQ(c.Get("/v2/models/digits-mlp/versions/1/ready")->status, 200);
  EXPECT_EQ(c.Get("/v2/models/digits-mlp/versions/1")->status, 200);
}

TEST_F(RestE2ETest, EveryDigitsModelMatchesLibtorchElementByElement) {
  auto c = Client();
  const std::vector<std::vector<float>> batch(digits_->pixels.begin(), digits_->pixels.begin() + 4);
  for (const auto& model : kDigitsModels) {
    const auto expected = TorchReference(*demo_ + "/" + model + "/1/model.pt", batch);
    // One query per sample, then all four in one query.
    for (size_t i = 0; i < batch.size(); ++i) {
      auto r = c.Post("/v2/models/" + model + "/infer", Request({batch[i]}).dump(),
                      "application/json");
      ASSERT_EQ(r->status, 200) << model << ": " << r->body;
      auto out = json::parse(r->body)["outputs"][0];
      EXPECT_EQ(out["name"], "logits");
      EXPECT_EQ(out["shape"], json({1, 10}));
      ASSERT_EQ(out["data"].size(), 10u);
      for (size_t k = 0; k < 10; ++k) {
        EXPECT_NEAR(out["data"][k].get<double>(), expected[i * 10 + k], 1e-5) << model << " sample " << i << " logit " << k;
      }
    }
    auto r = c.Post("/v2/models/" + model + "/versions/1/infer", Request(batch).dump(),
                    "application/json");
    ASSERT_EQ(r->status, 200) << r->body;
    auto body = json::parse(r->body);
    EXPECT_EQ(body["model_name"], model);
    EXPECT_EQ(body["model_version"], "1");
    auto data = body["outputs"][0]["data"];
    ASSERT_EQ(data.size(), 40u);
    for (size_t k = 0; k < 40; ++k) EXPECT_NEAR(data[k].get<double>(), expected[k], 1e-5) << model << " element " << k;
  }
}

TEST_F(RestE2ETest, BinaryTensorExtensionBothWays) {
  auto c = Client();
  const auto& x = digits_->pixels[7];
  json header = {{"inputs", {{{"name", "pixels"}, {"datatype", "FP32"}, {"shape", {1, 64}},
                              {"parameters", {{"binary_data_size", 256}}}}}},
                 {"outputs", {{{"name", "logits"}, {"parameters", {{"binary_data", true}}}}}}};
  const std::string h = header.dump();
  std::string body = h + std::string(reinterpret_cast<const char*>(x.data()), 256);
  httplib::Headers headers = {{"Inference-Header-Content-Length", std::to_string(h.size())}};
  auto r = c.Post("/v2/models/digits-cnn/infer", headers, body, "application/octet-stream");
  ASSERT_EQ(r->status, 200) << r->body;
  const size_t json_len = std::stoul(r->get_header_value("Inference-Header-Content-Length"));
  auto meta = json::parse(r->body.substr(0, json_len));
  EXPECT_EQ(meta["outputs"][0]["parameters"]["binary_data_size"], 40);
  ASSERT_EQ(r->body.size(), json_len + 40);
  std::vector<float> got(10);
  std::memcpy(got.data(), r->body.data() + json_len, 40);
  const auto expected = TorchReference(*demo_ + "/digits-cnn/1/model.pt", {x});
  for (size_t k = 0; k < 10; ++k) EXPECT_NEAR(got[k], expected[k], 1e-5) << "logit " << k;
}

TEST_F(RestE2ETest, ResponseCarriesServerTiming) {
  auto c = Client();
  auto r = c.Post("/v2/models/digits-mlp/infer", Request({digits_->pixels[0]}).dump(), "application/json");
  ASSERT_EQ(r->status, 200);
  auto p = json::parse(r->body)["parameters"];
  EXPECT_GE(p["somm_compute_us"].get<int64_t>(), 0);
  EXPECT_GE(p["somm_server_us"].get<int64_t>(), p["somm_compute_us"].get<int64_t>());
  EXPECT_EQ(p["somm_device"], "cpu");
}

// `somm serve` and `somm router` explain every answer in one `somm`
// parameter unless told otherwise (--explain full, or a query's
// somm_explain: "full", which this suite's server already gives).
TEST_F(RestE2ETest, AnswersExplainThemselvesInOneParameterByDefaultAndInFullOnRequest) {
  for (const char* command : {"serve", "router"}) {
    const std::string run = SommBinary() + " " + command + " --help";
    FILE* help = popen(run.c_str(), "r");
    ASSERT_NE(help, nullptr);
    std::string text;
    char buf[4096];
    while (size_t n = fread(buf, 1, sizeof buf, help)) text.append(buf, n);
    pclose(help);
    const size_t at = text.find("--explain");
    ASSERT_NE(at, std::string::npos) << command;
    const std::string line = text.substr(at, text.find('\n', at) - at);
    EXPECT_NE(line.find("=compact"), std::string::npos) << command << ": " << line;
  }
  auto c = Client();
  json compact = Request({digits_->pixels[0]});
  compact["parameters"] = {{"somm_explain", "compact"}};
  auto r = c.Post("/v2/models/digits-mlp/infer", compact.dump(), "application/json");
  ASSERT_EQ(r->status, 200);
  const json p = json::parse(r->body)["parameters"];
  ASSERT_EQ(p.size(), 1u) << p.dump();
  const std::string s = p["somm"].get<std::string>();
  for (const char* fact : {"decision=", "variant=digits-mlp:", "hardware=", "device=cpu",
                           "batch=1", "queue_us=", "compute_us=", "server_us=", "reason="}) {
    EXPECT_NE(s.find(fact), std::string::npos) << fact << " in " << s;
  }
  json full = Request({digits_->pixels[0]});
  full["parameters"] = {{"somm_explain", "full"}};
  r = c.Post("/v2/models/digits-mlp/infer", full.dump(), "application/json");
  ASSERT_EQ(r->status, 200);
  const json f = json::parse(r->body)["parameters"];
  EXPECT_FALSE(f.contains("somm"));
  EXPECT_EQ(f["somm_device"], "cpu");
  EXPECT_TRUE(f.contains("somm_variant"));
  EXPECT_TRUE(f.contains("somm_reason"));
}

struct BadRequest {
  std::string name;
  std::string path;
  std::string body;
  int status;
  std::string message;  // must appear in the error
};

TEST_F(RestE2ETest, EachBadInputGetsItsOwnStatusAndMessageThenServingGoesOn) {
  json good = Request({digits_->pixels[0]});
  json wrong_shape = good;
  wrong_shape["inputs"][0]["shape"] = {1, 63};
  wrong_shape["inputs"][0]["data"].erase(0);
  json wrong_type = good;
  wrong_type["inputs"][0]["datatype"] = "INT32";
  wrong_type["inputs"][0]["data"] = std::vector<int>(64, 1);
  json size_mismatch = good;
  size_mismatch["inputs"][0]["data"].erase(0);
  json bad_name = good;
  bad_name["inputs"][0]["name"] = "pixelz";
  json too_big_batch = Request(std::vector<std::vector<float>>(65, digits_->pixels[0]));
  std::string oversized = Request(std::vector<std::vector<float>>(64, std::vector<float>(64, 12.3456789f))).dump();
  oversized += std::string(250000, ' ');  // JSON allows trailing whitespace
  json throws = {{"inputs", {{{"name", "x"}, {"datatype", "FP32"}, {"shape", {1, 4}},
                              {"data", {1000, 1000, 1000, 1000}}}}}};
  const std::vector<BadRequest> cases = {
      {"malformed JSON", "/v2/models/digits-mlp/infer", "{\"inputs\": [", 400, "JSON"},
      {"wrong shape", "/v2/models/digits-mlp/infer", wrong_shape.dump(), 400, "has shape [1,63], expected [-1,64]"},
      {"wrong datatype", "/v2/models/digits-mlp/infer", wrong_type.dump(), 400, "datatype INT32, expected FP32"},
      {"size mismatch", "/v2/models/digits-mlp/infer", size_mismatch.dump(), 400, "63"},
      {"unknown input", "/v2/models/digits-mlp/infer", bad_name.dump(), 400, "pixels"},
      {"batch above max", "/v2/models/digits-mlp/infer", too_big_batch.dump(), 400, "batch size 65"},
      {"unknown model", "/v2/models/no-such-model/infer", good.dump(), 404, "unknown model 'no-such-model'"},
      {"unknown version", "/v2/models/digits-mlp/versions/9/infer", good.dump(), 404, "no version 9"},
      {"oversized body", "/v2/models/digits-mlp/infer", oversized, 413, "200000"},
      {"model throws", "/v2/models/thrower/infer", throws.dump(), 500, "input sum above 1000"},
      {"broken model", "/v2/models/broken-config/infer", good.dump(), 503, "inputs[0].datatype"},
  };
  auto c = Client();
  for (const auto& bad : cases) {
    auto r = c.Post(bad.path, bad.body, "application/json");
    ASSERT_TRUE(r) << bad.name << ": no response";
    EXPECT_EQ(r->status, bad.status) << bad.name << ": " << r->body;
    json err = json::parse(r->body, nullptr, false);
    ASSERT_TRUE(err.contains("error")) << bad.name << ": " << r->body;
    EXPECT_NE(err["error"].get<std::string>().find(bad.message), std::string::npos)
        << bad.name << ": " << err["error"];
    // The server keeps serving everyone else.
    auto ok = c.Post("/v2/models/digits-mlp/infer", good.dump(), "application/json");
    ASSERT_TRUE(ok);
    EXPECT_EQ(ok->status, 200) << "after " << bad.name;
  }
  // The model that threw still serves inputs it accepts.
  json fine = throws;
  fine["inputs"][0]["data"] = {1, 2, 3, 4};
  auto r = c.Post("/v2/models/thrower/infer", fine.dump(), "application/json");
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["outputs"][0]["data"], json({2.0, 4.0, 6.0, 8.0}));
}

TEST_F(RestE2ETest, RepositoryIndexLoadAndUnload) {
  auto c = Client();
  auto r = c.Post("/v2/repository/index", "", "application/json");
  ASSERT_EQ(r->status, 200) << r->body;
  auto index = json::parse(r->body);
  bool saw_broken = false, saw_mlp = false;
  for (const auto& row : index) {
    if (row["name"] == "broken-config") {
      saw_broken = true;
      EXPECT_EQ(row["state"], "UNAVAILABLE");
      EXPECT_NE(row["reason"].get<std::string>().find("model.yaml: field 'inputs[0].datatype'"),
                std::string::npos) << row;
    }
    if (row["name"] == "digits-mlp") saw_mlp = row["state"] == "READY";
  }
  EXPECT_TRUE(saw_broken);
  EXPECT_TRUE(saw_mlp);

  ASSERT_EQ(c.Post("/v2/repository/models/digits-logistic/unload", "", "application/json")->status, 200);
  EXPECT_NE(c.Get("/v2/models/digits-logistic/ready")->status, 200);
  auto gone = c.Post("/v2/models/digits-logistic/infer", Request({digits_->pixels[0]}).dump(), "application/json");
  EXPECT_EQ(gone->status, 404) << gone->body;
  ASSERT_EQ(c.Post("/v2/repository/models/digits-logistic/load", "", "application/json")->status, 200);
  EXPECT_EQ(c.Get("/v2/models/digits-logistic/ready")->status, 200);
  auto back = c.Post("/v2/models/digits-logistic/infer", Request({digits_->pixels[0]}).dump(), "application/json");
  EXPECT_EQ(back->status, 200) << back->body;
  auto missing = c.Post("/v2/repository/models/nope/load", "", "application/json");
  EXPECT_EQ(missing->status, 404) << missing->body;
}

// Without keys, somm serves loopback only; a web page could still make a
// browser POST to it (unload a model) and a rebound DNS name could read it.
TEST_F(RestE2ETest, WithoutKeysBrowserPagesAndRebindingAreRefused) {
  if (IsClusterTopology()) GTEST_SKIP() << "the cluster fixture's router runs the same code";
  auto c = Client();
  auto rebound = c.Get("/v2/models/digits-mlp", {{"Host", "attacker.example:8000"}});
  ASSERT_TRUE(rebound);
  EXPECT_EQ(rebound->status, 403) << rebound->body;
  auto page = c.Post("/v2/repository/models/digits-mlp/unload",
                     {{"Origin", "https://attacker.example"}}, "{}", "text/plain");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 403) << page->body;
  EXPECT_FALSE(page->has_header("Access-Control-Allow-Origin"));
  EXPECT_EQ(c.Get("/v2/models/digits-mlp/ready")->status, 200) << "still loaded";
  // The dashboard's own page, same-origin, and clients with no Origin work.
  const std::string self = "http://127.0.0.1:" + std::to_string(server_->http_port());
  auto own = c.Post("/v2/repository/index", {{"Origin", self}}, "{}", "application/json");
  ASSERT_TRUE(own);
  EXPECT_EQ(own->status, 200) << own->body;
}

// Triton's strict readiness: `somm serve` said ready while a model of its
// repository had failed to load, and before its configured instances were
// up. --strict-readiness false keeps the old meaning, "the server is up".
TEST(RestReadinessTest, ServeIsReadyOnlyWhenEveryModelIsAvailable) {
  if (IsClusterTopology()) GTEST_SKIP() << "a `somm serve` flag";
  const std::string repo = MakeOneModelRepository(DemoRepository(), "digits-mlp", "strict-ready");
  std::filesystem::create_directories(std::filesystem::path(repo) / "broken" / "1");
  std::ofstream(std::filesystem::path(repo) / "broken" / "model.yaml") << "max_batch_size: [not a number\n";
  for (const bool strict : {true, false}) {
    ServerProcess server(SommBinary(), repo, {"--strict-readiness", strict ? "true" : "false"});
    ASSERT_TRUE(server.ok()) << server.log();
    httplib::Client c("127.0.0.1", server.http_port());
    int ready = 0;
    for (int i = 0; i < 50 && ready != 200; ++i) {
      if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      ready = c.Get("/v2/health/ready")->status;
    }
    EXPECT_EQ(ready, strict ? 400 : 200) << (strict ? "strict" : "relaxed");
    EXPECT_EQ(c.Get("/v2/health/live")->status, 200);
    auto mlp = c.Get("/v2/models/digits-mlp/ready");
    EXPECT_EQ(mlp->status, 200) << "the good model serves either way";
  }
  std::filesystem::remove_all(repo);
}

}  // namespace
}  // namespace somm::testing
