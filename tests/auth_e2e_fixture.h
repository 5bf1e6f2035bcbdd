// The fixture of the API-key end-to-end tests (auth_e2e_test.cc,
// auth_hidden_model_e2e_test.cc): one real `somm serve --auth keys` (or a
// cluster's router) for the whole suite, its keys, and the helpers both
// files ask with. One type for both files: GoogleTest requires every test
// of a suite to use the same fixture class.
#pragma once

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "e2e_fixture.h"
#include "proto/inference.grpc.pb.h"
#include "proto/somm.grpc.pb.h"

namespace somm::testing {

namespace fs = std::filesystem;
using json = nlohmann::json;

inline constexpr char kPrivate[] = "alice-mlp";
inline constexpr char kPrivateTask[] = "classification/alice";

// The identities every rule is tried with.
enum class Who { kOwner, kOther, kNoKey, kWrongKey, kRevoked };
inline constexpr Who kEveryone[] = {Who::kOwner, Who::kOther, Who::kNoKey, Who::kWrongKey, Who::kRevoked};
inline const char* Name(Who w) {
  switch (w) {
    case Who::kOwner:
      return "owner";
    case Who::kOther:
      return "other tenant";
    case Who::kNoKey:
      return "no key";
    case Who::kWrongKey:
      return "wrong key";
    case Who::kRevoked:
      return "revoked key";
  }
  return "?";
}
inline bool Unauthenticated(Who w) {
  return w == Who::kNoKey || w == Who::kWrongKey || w == Who::kRevoked;
}

// Runs `command` and returns its stdout's last line ("" on failure).
inline std::string LastLine(const std::string& command, int* exit_code) {
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) return "";
  std::string out;
  char buf[512];
  while (fgets(buf, sizeof buf, p) != nullptr) out += buf;
  *exit_code = pclose(p);
  while (!out.empty() && out.back() == '\n') out.pop_back();
  const size_t nl = out.rfind('\n');
  return nl == std::string::npos ? out : out.substr(nl + 1);
}

class AuthE2ETest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string demo = DemoRepository();
    digits_ = new HeldOutDigits(LoadHeldOutDigits(demo));
    repo_ = new std::string(MakeTestRepository(demo, "auth"));
    // A copy of digits-mlp private to tenant "a", for a task nobody else serves.
    const fs::path priv = fs::path(*repo_) / kPrivate;
    fs::create_directories(priv);
    std::ifstream in(fs::path(demo) / "digits-mlp" / "model.yaml");
    std::ostringstream yaml;
    yaml << in.rdbuf();
    std::string text = yaml.str();
    const size_t task = text.find("task:");
    if (task != std::string::npos) text.erase(task, text.find('\n', task) - task + 1);
    const size_t name = text.find("name:");
    if (name != std::string::npos) text.erase(name, text.find('\n', name) - name + 1);
    std::ofstream(priv / "model.yaml")
        << text << "task: " << kPrivateTask << "\nowner_tenant: \"a\"\n";
    fs::create_directory_symlink(fs::absolute(fs::path(demo) / "digits-mlp" / "1"), priv / "1");
    fs::create_directories(fs::path(*repo_) / ".somm");
    std::ofstream(fs::path(*repo_) / ".somm" / "tenants.yaml")
        << "tenants:\n  q: {requests_per_s: 0.001, burst: 1}\n  c: {max_concurrent: 1}\n";

    admin_ = new std::string(MakeKey("ops", "admin"));
    owner_ = new std::string(MakeKey("a", "user"));
    other_ = new std::string(MakeKey("b", "user"));
    metrics_ = new std::string(MakeKey("ops", "metrics"));
    quota_ = new std::string(MakeKey("q", "user"));
    one_slot_ = new std::string(MakeKey("c", "user"));
    revoked_ = new std::string(MakeKey("a", "user"));
    // The cluster's readiness check reads the index, which needs a key.
    setenv("SOMM_API_KEY", admin_->c_str(), 1);
    server_ = new ServerProcess(SommBinary(), *repo_, {"--auth", "keys"});
    if (!server_->ok()) return;
    // The revoked key works until `somm keys revoke`, with no restart between.
    httplib::Client c("127.0.0.1", server_->http_port());
    auto before =
        c.Get(std::string("/v2/models/") + kPrivate, {{"Authorization", "Bearer " + *revoked_}});
    revoked_status_before_ = before ? before->status : -1;
    int code = 0;
    LastLine(SommBinary() + " keys revoke --repo " + *repo_ + " " + revoked_->substr(5, 16) +
                 " 2>/dev/null",
             &code);
    revoke_exit_ = code;
  }
  static void TearDownTestSuite() {
    if (server_) {
      EXPECT_EQ(server_->Terminate(), 0);
    }
    delete server_;
    if (repo_) fs::remove_all(*repo_);
    for (std::string* s : {repo_, admin_, owner_, other_, metrics_, quota_, revoked_, one_slot_}) delete s;
    delete digits_;
  }
  void SetUp() override {
    ASSERT_FALSE(owner_->empty()) << "somm keys create failed";
    ASSERT_TRUE(server_->ok()) << "server did not start; log: " << server_->log();
  }

  static std::string MakeKey(const std::string& tenant, const std::string& role) {
    int code = 0;
    std::string key = LastLine(SommBinary() + " keys create --repo " + *repo_ + " --tenant " +
                                   tenant + " --role " + role + " 2>/dev/null",
                               &code);
    return code == 0 && key.rfind("somm_", 0) == 0 ? key : "";
  }
  static std::string KeyOf(Who w) {
    switch (w) {
      case Who::kOwner:
        return *owner_;
      case Who::kOther:
        return *other_;
      case Who::kRevoked:
        return *revoked_;
      case Who::kWrongKey:
        return "somm_0123456789abcdef_" + std::string(64, '7');
      case Who::kNoKey:
        return "";
    }
    return "";
  }
  static httplib::Headers Headers(Who w) {
    if (w == Who::kNoKey) return {};
    return {{"Authorization", "Bearer " + KeyOf(w)}};
  }
  static std::unique_ptr<grpc::ClientContext> Context(Who w) {
    auto ctx = std::make_unique<grpc::ClientContext>();
    if (w != Who::kNoKey) ctx->AddMetadata("authorization", "Bearer " + KeyOf(w));
    return ctx;
  }
  static std::shared_ptr<grpc::Channel> Channel() {
    return grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->grpc_port()),
                               grpc::InsecureChannelCredentials());
  }
  static std::string Query() {
    json body = {{"inputs",
                  {{{"name", "pixels"},
                    {"datatype", "FP32"},
                    {"shape", {1, 64}},
                    {"data", digits_->pixels[0]}}}}};
    return body.dump();
  }
  static inference::ModelInferRequest GrpcQuery(const std::string& model) {
    inference::ModelInferRequest req;
    req.set_model_name(model);
    auto* in = req.add_inputs();
    in->set_name("pixels");
    in->set_datatype("FP32");
    in->add_shape(1);
    in->add_shape(64);
    req.add_raw_input_contents(
        std::string(reinterpret_cast<const char*>(digits_->pixels[0].data()), 64 * sizeof(float)));
    return req;
  }
  static std::string Message(const httplib::Result& r) {
    if (!r) return "";
    auto j = json::parse(r->body, nullptr, false);
    return j.is_object() && j.contains("error") ? j["error"].get<std::string>() : "";
  }
  static void ExpectHidden(int status, const std::string& message, const std::string& what) {
    EXPECT_EQ(status, 404) << what;
    EXPECT_EQ(message, std::string("unknown model '") + kPrivate + "'") << what;
  }

  static inline HeldOutDigits* digits_ = nullptr;
  static inline std::string *repo_ = nullptr, *admin_ = nullptr, *owner_ = nullptr,
                            *other_ = nullptr, *metrics_ = nullptr, *quota_ = nullptr,
                            *revoked_ = nullptr;
  static inline std::string* one_slot_ = nullptr;  // tenant "c": one query in flight at most
  static inline ServerProcess* server_ = nullptr;
  static inline int revoked_status_before_ = 0, revoke_exit_ = -1;
};


inline std::string Base64(const std::string& bytes) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t v =
        (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8) | uint8_t(bytes[i + 2]);
    for (int k = 3; k >= 0; --k) out += kAlphabet[(v >> (6 * k)) & 63];
  }
  if (i < bytes.size()) {
    uint32_t v = uint8_t(bytes[i]) << 16;
    if (i + 1 < bytes.size()) v |= uint8_t(bytes[i + 1]) << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

}  // namespace somm::testing
