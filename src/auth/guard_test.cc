#include "auth/guard.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "repository/measured_memory.h"

namespace somm::auth {
namespace {
namespace fs = std::filesystem;

void Write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

class GuardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "somm-guard-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    repo_ = pattern;
    Write(fs::path(repo_) / "pub" / "model.yaml", "name: pub\n");
    Write(fs::path(repo_) / "priv" / "model.yaml", "name: priv\nowner_tenant: \"a\"\n");
    Write(fs::path(repo_) / "priv" / "1" / "model.pt", std::string(1000, 'x'));
    Write(fs::path(repo_) / ".somm" / "tenants.yaml",
          "tenants:\n  a: {requests_per_s: 1, burst: 1, max_private_memory_mb: 1}\n");
    KeyStore keys(KeyStore::DefaultPath(repo_));
    admin_ = "Bearer " + keys.Create("ops", Role::kAdmin)->key;
    user_a_ = "Bearer " + keys.Create("a", Role::kUser)->key;
    user_b_ = "Bearer " + keys.Create("b", Role::kUser)->key;
    metrics_ = "Bearer " + keys.Create("ops", Role::kMetrics)->key;
    GuardOptions o;
    o.mode = AuthMode::kKeys;
    o.repository = repo_;
    o.clock = &clock_;
    auto g = Guard::Create(o);
    ASSERT_TRUE(g.ok()) << g.status().message();
    guard_ = std::move(g).value();
  }
  void TearDown() override { fs::remove_all(repo_); }

  Status Admit(Operation op, const std::string& model, const std::string& auth,
               bool private_model = false) {
    CallInfo call{op, model, auth, private_model, 0};
    Admission a = guard_->Admit(call);
    if (a.status.ok()) guard_->Done(a.caller, call, Status::Ok());
    return a.status;
  }
  std::string AuditText() const {
    std::ifstream in(AuditLog::DefaultPath(repo_));
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }

  ManualClock clock_;
  std::string repo_, admin_, user_a_, user_b_, metrics_;
  std::unique_ptr<Guard> guard_;
};

TEST_F(GuardTest, MissingMalformedAndWrongKeysAreUnauthenticated) {
  EXPECT_EQ(Admit(Operation::kModelMetadata, "pub", "").code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(Admit(Operation::kModelMetadata, "pub", "Basic abc").code(),
            StatusCode::kUnauthenticated);
  EXPECT_EQ(Admit(Operation::kModelMetadata, "pub", "Bearer somm_nope").code(),
            StatusCode::kUnauthenticated);
}

TEST_F(GuardTest, RolesFollowTheTable) {
  EXPECT_TRUE(Admit(Operation::kMetrics, "", metrics_).ok());
  EXPECT_EQ(Admit(Operation::kModelMetadata, "pub", metrics_).code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(Admit(Operation::kMetrics, "", user_a_).code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(Admit(Operation::kMetrics, "", admin_).ok());
  EXPECT_TRUE(Admit(Operation::kUnload, "pub", admin_).ok());
  EXPECT_EQ(Admit(Operation::kUnload, "pub", user_a_).code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(Admit(Operation::kRegister, "new", user_a_).code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(Admit(Operation::kRegister, "new", user_a_, true).ok());
}

TEST_F(GuardTest, AnotherTenantsPrivateModelLooksUnknown) {
  // Refused before anything else about the call, exactly as a model that
  // does not exist is: no later check (version, body) tells them apart.
  for (Operation op : {Operation::kModelMetadata, Operation::kInfer, Operation::kLoad,
                       Operation::kUnload, Operation::kRollout}) {
    for (const std::string model : {"priv", "nope"}) {
      Status s = Admit(op, model, user_b_, true);
      EXPECT_EQ(s.code(), StatusCode::kNotFound) << OperationName(op) << " " << model;
      EXPECT_EQ(s.message(), "unknown model '" + model + "'");
    }
  }
  // A registration over it is admitted as one of a new name is: the
  // registry answers both alike (ModelRegistrar::Register).
  EXPECT_TRUE(Admit(Operation::kRegister, "priv", user_b_, true).ok());
  EXPECT_TRUE(Admit(Operation::kRegister, "nope", user_b_, true).ok());
  // An admin is told what the server says of a missing model.
  EXPECT_TRUE(Admit(Operation::kModelMetadata, "nope", admin_).ok());
  EXPECT_TRUE(Admit(Operation::kModelMetadata, "priv", user_a_).ok());
  EXPECT_TRUE(Admit(Operation::kUnload, "priv", user_a_).ok());
  EXPECT_TRUE(Admit(Operation::kModelMetadata, "priv:1:ts-fp32", admin_).ok());
  EXPECT_EQ(Admit(Operation::kModelMetadata, "priv:1:ts-fp32", user_b_).code(),
            StatusCode::kNotFound);
  Caller b{true, "id", "b", false};
  Caller a{true, "id", "a", false};
  EXPECT_FALSE(guard_->MaySee(b, "priv"));
  EXPECT_TRUE(guard_->MaySee(a, "priv"));
  EXPECT_TRUE(guard_->MaySee(b, "pub"));
}

// A cluster's router in Kubernetes has no repository mounted: the owner of
// a model only its registry (the leader's catalog) knows comes from there,
// and the registry's word wins over a model.yaml.
TEST_F(GuardTest, OwnersComeFromTheRegistryFirst) {
  guard_->SetOwnerLookup([](const std::string& model) -> std::optional<std::string> {
    if (model == "catalog-only") return "a";
    if (model == "pub") return "b";  // the registry's word over model.yaml's
    return std::nullopt;
  });
  Caller a{true, "id", "a", false};
  Caller b{true, "id", "b", false};
  EXPECT_TRUE(guard_->MaySee(a, "catalog-only"));
  EXPECT_FALSE(guard_->MaySee(b, "catalog-only"));
  EXPECT_EQ(Admit(Operation::kModelMetadata, "catalog-only:1:ts-fp32", user_b_).code(),
            StatusCode::kNotFound);
  EXPECT_TRUE(Admit(Operation::kModelMetadata, "catalog-only", user_a_).ok());
  EXPECT_FALSE(guard_->MaySee(a, "pub"));
  // Not in the registry: model.yaml decides, as before.
  EXPECT_FALSE(guard_->MaySee(b, "priv"));
  EXPECT_TRUE(guard_->MaySee(a, "priv"));
}

TEST_F(GuardTest, QueriesTakeTheTenantsRateQuota) {
  CallInfo call{Operation::kInfer, "pub", user_a_, false, 0};
  Admission first = guard_->Admit(call);
  ASSERT_TRUE(first.status.ok());
  guard_->Done(first.caller, call, Status::Ok());
  Admission second = guard_->Admit(call);
  EXPECT_EQ(second.status.code(), StatusCode::kResourceExhausted);
  EXPECT_GE(second.retry_after_s, 1);
  // Tenant b has no limits.
  CallInfo other{Operation::kInfer, "pub", user_b_, false, 0};
  EXPECT_TRUE(guard_->Admit(other).status.ok());
  EXPECT_NE(guard_->MetricsText().find(
                "somm_tenant_queries_total{tenant=\"a\",outcome=\"rate_limited\"} 1"),
            std::string::npos);
}

TEST_F(GuardTest, PrivateRegistrationPastTheMemoryLimitIsRefused) {
  CallInfo call{Operation::kRegister, "big", user_a_, true, 2 * 1024 * 1024};
  Admission a = guard_->Admit(call);
  EXPECT_EQ(a.status.code(), StatusCode::kResourceExhausted);
}

TEST_F(GuardTest, RepositoryChangesAreAuditedWithoutSecrets) {
  EXPECT_TRUE(Admit(Operation::kUnload, "priv", user_a_).ok());
  EXPECT_FALSE(Admit(Operation::kUnload, "priv", user_b_).ok());
  const std::string text = AuditText();
  EXPECT_NE(text.find("\"action\":\"unload\""), std::string::npos);
  EXPECT_NE(text.find("\"outcome\":\"ok\""), std::string::npos);
  EXPECT_NE(text.find("\"outcome\":\"NOT_FOUND\""), std::string::npos);
  for (const std::string& key : {admin_, user_a_, user_b_}) {
    EXPECT_EQ(text.find(key.substr(7 + 22)), std::string::npos);  // no secret
  }
}

TEST(AuthModeTest, NoneRefusesNonLoopbackAndNamesTheWayOut) {
  EXPECT_TRUE(CheckListenAddress(AuthMode::kNone, "127.0.0.1", "--address").ok());
  EXPECT_TRUE(CheckListenAddress(AuthMode::kNone, "::1", "--address").ok());
  EXPECT_TRUE(CheckListenAddress(AuthMode::kKeys, "0.0.0.0", "--address").ok());
  Status s = CheckListenAddress(AuthMode::kNone, "0.0.0.0", "--address");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--auth"), std::string::npos);
  EXPECT_NE(s.message().find("somm keys"), std::string::npos);
  EXPECT_FALSE(ParseAuthMode("maybe").ok());
}

// Anyone can send refused calls; the audit log must not grow with them
// without limit. Callers with a valid key are audited in full.
TEST_F(GuardTest, RefusedCallsWithoutAKeyAreAuditedAtABoundedRate) {
  auto lines = [this] {
    const std::string text = AuditText();
    return static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
  };
  const size_t before = lines();
  for (int i = 0; i < 1000; ++i) {
    EXPECT_EQ(Admit(Operation::kUnload, "pub", "Bearer somm_0000000000000000_nope").code(),
              StatusCode::kUnauthenticated);
  }
  const size_t burst = lines() - before;
  EXPECT_GE(burst, 1u);
  EXPECT_LE(burst, 20u);
  clock_.Advance(std::chrono::seconds(1));
  EXPECT_EQ(Admit(Operation::kUnload, "pub", "").code(), StatusCode::kUnauthenticated);
  EXPECT_NE(AuditText().find("not recorded one by one"), std::string::npos) << AuditText();
  // A known key's refused change is always recorded.
  const size_t known_before = lines();
  for (int i = 0; i < 50; ++i) (void)Admit(Operation::kUnload, "pub", metrics_);
  EXPECT_EQ(lines() - known_before, 50u);
}

// A frontend's early check (REST's head check, gRPC's metadata check)
// refuses calls before their body is read; those refusals are audited as
// Admit's are: every call without a valid key, at a bounded rate, and every
// call whose key's role may not make it.
TEST_F(GuardTest, RefusalsOfTheEarlyCheckAreAuditedAtABoundedRate) {
  // The records that hold every one of `parts`.
  auto lines = [this](std::initializer_list<std::string> parts) {
    std::istringstream text(AuditText());
    size_t n = 0;
    for (std::string line; std::getline(text, line);) {
      n += std::all_of(parts.begin(), parts.end(),
                       [&](const std::string& p) { return line.find(p) != std::string::npos; });
    }
    return n;
  };
  for (int i = 0; i < 1000; ++i) {
    EXPECT_EQ(guard_->Authenticate("Bearer somm_0000000000000000_nope", Operation::kInfer, "pub")
                  .status()
                  .code(),
              StatusCode::kUnauthenticated);
  }
  const size_t unknown =
      lines({"\"action\":\"infer\"", "\"target\":\"pub\"", "\"outcome\":\"UNAUTHENTICATED\""});
  EXPECT_GE(unknown, 1u) << AuditText();
  EXPECT_LE(unknown, 20u);
  // A metrics key may not query: refused from the head, audited in full.
  for (int i = 0; i < 30; ++i) {
    EXPECT_EQ(guard_->Authenticate(metrics_, Operation::kInfer, "pub").status().code(),
              StatusCode::kPermissionDenied);
  }
  EXPECT_EQ(lines({"\"outcome\":\"PERMISSION_DENIED\""}), 30u) << AuditText();
  // A good key passes, is not audited, and Admit takes it as verified.
  const size_t before = lines({});
  StatusOr<VerifiedKey> verified = guard_->Authenticate(user_a_, Operation::kInfer, "priv");
  ASSERT_TRUE(verified.ok()) << verified.status().message();
  EXPECT_EQ(verified->caller.tenant, "a");
  CallInfo call{Operation::kInfer, "pub", "Bearer not-even-a-key", false, 0, &*verified};
  Admission a = guard_->Admit(call);
  EXPECT_TRUE(a.status.ok()) << a.status.message();
  EXPECT_EQ(a.caller.tenant, "a");
  guard_->Done(a.caller, call, Status::Ok());
  EXPECT_EQ(lines({}), before);
  // The role is still applied to the operation Admit is asked for.
  StatusOr<VerifiedKey> metrics_key = guard_->Authenticate(metrics_, std::nullopt, "/metrics");
  ASSERT_TRUE(metrics_key.ok());
  EXPECT_EQ(guard_->Admit(CallInfo{Operation::kInfer, "pub", metrics_, false, 0, &*metrics_key})
                .status.code(),
            StatusCode::kPermissionDenied);
}

// A tenant's memory quota charged its private models' file bytes: a file
// of 1,000 bytes counted 1,000 bytes whatever it took when served, and
// once whatever its instances. Each version is now charged its measured
// peak (<version>/memory.json, written by registration's probe), times
// the model's instance_count.
TEST_F(GuardTest, TheMemoryQuotaChargesEachInstanceTheMeasuredPeak) {
  EXPECT_TRUE(Admit(Operation::kLoad, "priv", user_a_).ok()) << "1,000 bytes of file fit 1 MiB";
  Write(fs::path(repo_) / "priv" / "1" / kMeasuredMemoryFile, MeasuredMemoryJson(600 << 10));
  EXPECT_TRUE(Admit(Operation::kLoad, "priv", user_a_).ok()) << "one instance of 600 KiB fits";
  Write(fs::path(repo_) / "priv" / "model.yaml",
        "name: priv\nowner_tenant: \"a\"\ninstance_count: 2\n");
  const Status two = Admit(Operation::kLoad, "priv", user_a_);
  EXPECT_EQ(two.code(), StatusCode::kResourceExhausted) << "two instances of 600 KiB do not";
  EXPECT_NE(two.message().find("max_private_memory_mb 1 MiB"), std::string::npos) << two.message();
  // A registration's measured figure, asked once its probe has run.
  Caller a;
  a.authenticated = true;
  a.tenant = "a";
  Write(fs::path(repo_) / "priv" / "model.yaml", "name: priv\nowner_tenant: \"a\"\n");
  EXPECT_TRUE(guard_->AdmitPrivateMemory(a, "new", 300 << 10).ok());
  const Status more = guard_->AdmitPrivateMemory(a, "new", 500 << 10);
  EXPECT_EQ(more.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(
      more.message().find("its private models take 0.6 MiB already and 'new' would add 0.5 MiB"),
      std::string::npos)
      << more.message();
}

}  // namespace
}  // namespace somm::auth
