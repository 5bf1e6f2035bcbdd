// End-to-end tests of API keys, roles and tenants (docs/security.md): a real
// `somm serve --auth keys` (or a cluster's router, SOMM_E2E_TOPOLOGY=cluster)
// on a repository with a model private to tenant "a". Every tenant rule -
// list, metadata, infer, task infer, register-over, unload - is tried as the
// owner, as another tenant, and with no key, a wrong key and a revoked key,
// over REST and gRPC. Keys are made and revoked with the real `somm keys`.
#include "auth_e2e_fixture.h"

namespace somm::testing {
namespace {

TEST_F(AuthE2ETest, RevokedKeyWorkedUntilRevokedWithoutRestart) {
  EXPECT_EQ(revoked_status_before_, 200);
  EXPECT_EQ(revoke_exit_, 0);
}

TEST_F(AuthE2ETest, UnknownModelAnswerIsTheTemplateHiddenModelsGet) {
  httplib::Client c("127.0.0.1", server_->http_port());
  auto r = c.Get("/v2/models/no-such-model", Headers(Who::kOwner));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(Message(r), "unknown model 'no-such-model'");
}

TEST_F(AuthE2ETest, ListOverRestAndGrpc) {
  httplib::Client c("127.0.0.1", server_->http_port());
  auto stub = inference::GRPCInferenceService::NewStub(Channel());
  for (Who w : kEveryone) {
    auto r = c.Post("/v2/repository/index", Headers(w), "{}", "application/json");
    ASSERT_TRUE(r);
    inference::RepositoryIndexRequest req;
    inference::RepositoryIndexResponse resp;
    const grpc::Status g = stub->RepositoryIndex(Context(w).get(), req, &resp);
    bool grpc_lists = false;
    for (const auto& m : resp.models()) grpc_lists = grpc_lists || m.name() == kPrivate;
    if (Unauthenticated(w)) {
      EXPECT_EQ(r->status, 401) << Name(w);
      EXPECT_EQ(g.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Name(w);
      EXPECT_EQ(r->body.find(KeyOf(w).empty() ? "\x01" : KeyOf(w)), std::string::npos);
      continue;
    }
    ASSERT_EQ(r->status, 200) << Name(w);
    ASSERT_TRUE(g.ok()) << Name(w) << ": " << g.error_message();
    const bool rest_lists = r->body.find(kPrivate) != std::string::npos;
    EXPECT_EQ(rest_lists, w == Who::kOwner) << Name(w);
    EXPECT_EQ(grpc_lists, w == Who::kOwner) << Name(w);
    EXPECT_NE(r->body.find("digits-mlp"), std::string::npos) << "public models are listed";
    // Every model's statistics (Triton's extension) list what the index does.
    auto stats = c.Get("/v2/models/stats", Headers(w));
    ASSERT_TRUE(stats);
    ASSERT_EQ(stats->status, 200) << Name(w) << ": " << stats->body;
    EXPECT_EQ(stats->body.find(kPrivate) != std::string::npos, w == Who::kOwner) << Name(w);
    EXPECT_NE(stats->body.find("digits-mlp"), std::string::npos) << Name(w);
    inference::ModelStatisticsRequest every;
    inference::ModelStatisticsResponse every_stats;
    const grpc::Status gs = stub->ModelStatistics(Context(w).get(), every, &every_stats);
    ASSERT_TRUE(gs.ok()) << Name(w) << ": " << gs.error_message();
    bool grpc_stats_list = false;
    for (const auto& m : every_stats.model_stats()) {
      grpc_stats_list = grpc_stats_list || m.name() == kPrivate;
    }
    EXPECT_EQ(grpc_stats_list, w == Who::kOwner) << Name(w);
  }
}

TEST_F(AuthE2ETest, MetadataOverRestAndGrpc) {
  httplib::Client c("127.0.0.1", server_->http_port());
  auto stub = inference::GRPCInferenceService::NewStub(Channel());
  for (Who w : kEveryone) {
    auto r = c.Get(std::string("/v2/models/") + kPrivate, Headers(w));
    ASSERT_TRUE(r);
    inference::ModelMetadataRequest req;
    req.set_name(kPrivate);
    inference::ModelMetadataResponse resp;
    const grpc::Status g = stub->ModelMetadata(Context(w).get(), req, &resp);
    if (Unauthenticated(w)) {
      EXPECT_EQ(r->status, 401) << Name(w);
      EXPECT_EQ(g.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Name(w);
    } else if (w == Who::kOther) {
      ExpectHidden(r->status, Message(r), "REST metadata");
      EXPECT_EQ(g.error_code(), grpc::StatusCode::NOT_FOUND);
      EXPECT_EQ(g.error_message(), std::string("unknown model '") + kPrivate + "'");
    } else {
      EXPECT_EQ(r->status, 200) << r->body;
      EXPECT_TRUE(g.ok()) << g.error_message();
    }
    // Ready is answered like metadata.
    auto ready = c.Get(std::string("/v2/models/") + kPrivate + "/ready", Headers(w));
    ASSERT_TRUE(ready);
    EXPECT_EQ(ready->status, Unauthenticated(w) ? 401 : w == Who::kOther ? 404 : 200) << Name(w);
  }
}

TEST_F(AuthE2ETest, InferOverRestAndGrpc) {
  httplib::Client c("127.0.0.1", server_->http_port());
  auto stub = inference::GRPCInferenceService::NewStub(Channel());
  for (Who w : kEveryone) {
    auto r = c.Post(std::string("/v2/models/") + kPrivate + "/infer", Headers(w), Query(),
                    "application/json");
    ASSERT_TRUE(r);
    inference::ModelInferResponse resp;
    const grpc::Status g = stub->ModelInfer(Context(w).get(), GrpcQuery(kPrivate), &resp);
    if (Unauthenticated(w)) {
      EXPECT_EQ(r->status, 401) << Name(w);
      EXPECT_EQ(g.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Name(w);
    } else if (w == Who::kOther) {
      ExpectHidden(r->status, Message(r), "REST infer");
      EXPECT_EQ(g.error_code(), grpc::StatusCode::NOT_FOUND);
      EXPECT_EQ(g.error_message(), std::string("unknown model '") + kPrivate + "'");
    } else {
      EXPECT_EQ(r->status, 200) << r->body;
      EXPECT_TRUE(g.ok()) << g.error_message();
    }
  }
  // Public models stay usable by every tenant.
  auto pub =
      c.Post("/v2/models/digits-mlp/infer", Headers(Who::kOther), Query(), "application/json");
  ASSERT_TRUE(pub);
  EXPECT_EQ(pub->status, 200) << pub->body;
}

TEST_F(AuthE2ETest, TaskInferOnlyConsidersModelsTheCallerMayUse) {
  httplib::Client c("127.0.0.1", server_->http_port());
  auto stub = inference::GRPCInferenceService::NewStub(Channel());
  const std::string none = std::string("no loaded model serves task '") + kPrivateTask + "'";
  for (Who w : kEveryone) {
    auto r = c.Post(std::string("/v2/tasks/") + kPrivateTask + "/infer", Headers(w), Query(),
                    "application/json");
    ASSERT_TRUE(r);
    inference::ModelInferRequest req = GrpcQuery("");
    (*req.mutable_parameters())["task"].set_string_param(kPrivateTask);
    inference::ModelInferResponse resp;
    const grpc::Status g = stub->ModelInfer(Context(w).get(), req, &resp);
    if (Unauthenticated(w)) {
      EXPECT_EQ(r->status, 401) << Name(w);
      EXPECT_EQ(g.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Name(w);
    } else if (w == Who::kOther) {
      // As if the task had no model at all.
      EXPECT_EQ(r->status, 404);
      EXPECT_EQ(Message(r), none);
      EXPECT_EQ(g.error_code(), grpc::StatusCode::NOT_FOUND);
      EXPECT_EQ(g.error_message(), none);
    } else {
      // The owner's model is a candidate (with no profiled variants yet the
      // selector may refuse, but never with "no model serves the task").
      EXPECT_NE(Message(r), none) << r->body;
      EXPECT_NE(g.error_message(), none);
    }
  }
}

TEST_F(AuthE2ETest, DecisionLogShowsACallerOnlyItsTenantsDecisions) {
  httplib::Client c("127.0.0.1", server_->http_port());
  // The owner's task query logs a decision naming the private task.
  const std::string target = std::string("task:") + kPrivateTask;
  auto query = c.Post(std::string("/v2/tasks/") + kPrivateTask + "/infer", Headers(Who::kOwner),
                      Query(), "application/json");
  ASSERT_TRUE(query);
  auto mine = c.Get("/v2/somm/decisions?limit=1000", Headers(Who::kOwner));
  auto theirs = c.Get("/v2/somm/decisions?limit=1000", Headers(Who::kOther));
  auto all = c.Get("/v2/somm/decisions?limit=1000", {{"Authorization", "Bearer " + *admin_}});
  ASSERT_TRUE(mine && theirs && all);
  ASSERT_EQ(mine->status, 200);
  EXPECT_NE(mine->body.find(target), std::string::npos) << mine->body;
  EXPECT_EQ(theirs->body.find(target), std::string::npos) << theirs->body;
  EXPECT_NE(all->body.find(target), std::string::npos);
  auto none = c.Get("/v2/somm/decisions", Headers(Who::kNoKey));
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 401);
}

TEST_F(AuthE2ETest, RegisterOverOverRestAndGrpc) {
  httplib::Client c("127.0.0.1", server_->http_port());
  auto control = somm::SommControl::NewStub(Channel());
  json body = {{"task", kPrivateTask},
               {"inputs", {{{"name", "pixels"}, {"datatype", "FP32"}, {"shape", {64}}}}},
               {"outputs", {{{"name", "logits"}, {"datatype", "FP32"}, {"shape", {10}}}}},
               {"max_batch_size", 8},
               {"model", "AAAA"},
               {"private", true}};
  for (Who w : kEveryone) {
    auto r = c.Post(std::string("/v2/repository/models/") + kPrivate + "/register", Headers(w),
                    body.dump(), "application/json");
    ASSERT_TRUE(r);
    somm::RegisterModelRequest req;
    req.set_name(kPrivate);
    req.set_task(kPrivateTask);
    auto* in = req.add_inputs();
    in->set_name("pixels");
    in->set_datatype("FP32");
    in->add_shape(64);
    auto* out = req.add_outputs();
    out->set_name("logits");
    out->set_datatype("FP32");
    out->add_shape(10);
    req.set_max_batch_size(8);
    req.set_model("AAAA");
    req.set_private_model(true);
    somm::RegisterModelResponse resp;
    const grpc::Status g = control->RegisterModel(Context(w).get(), req, &resp);
    if (Unauthenticated(w)) {
      EXPECT_EQ(r->status, 401) << Name(w);
      EXPECT_EQ(g.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Name(w);
    } else if (w == Who::kOther) {
      // As a registration of a new name is: here refused for its model file
      // (AHiddenModelAnswersEveryRouteAndRpcAsAMissingOne compares the two).
      EXPECT_EQ(r->status, 400) << r->body;
      EXPECT_EQ(Message(r).rfind(std::string("registration of '") + kPrivate + "' refused: ", 0),
                0u)
          << r->body;
      EXPECT_EQ(g.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << g.error_message();
    } else {
      // The owner may register over its own name, and learns it exists.
      EXPECT_EQ(r->status, 409) << r->body;
      EXPECT_EQ(g.error_code(), grpc::StatusCode::ALREADY_EXISTS) << g.error_message();
    }
  }
  // A user key may not register a public model.
  body["private"] = false;
  auto pub = c.Post("/v2/repository/models/new-public/register", Headers(Who::kOwner), body.dump(),
                    "application/json");
  ASSERT_TRUE(pub);
  EXPECT_EQ(pub->status, 403) << pub->body;
}

// The operator's views (the dashboard's JSON): a user sees the models it may
// see, with the owner's private model among the owner's and hidden from
// another tenant; an admin sees everything; no key is 401, a metrics key 403.
TEST_F(AuthE2ETest, OperatorViewsShowAUserOnlyTheModelsItMaySee) {
  httplib::Client c("127.0.0.1", server_->http_port());
  c.set_read_timeout(60, 0);
  // The owner's query loads the private model (a control action).
  auto query = c.Post(std::string("/v2/models/") + kPrivate + "/infer", Headers(Who::kOwner),
                      Query(), "application/json");
  ASSERT_TRUE(query);
  ASSERT_EQ(query->status, 200) << query->body;
  auto pub = c.Post("/v2/models/digits-mlp/infer", Headers(Who::kOther), Query(),
                    "application/json");
  ASSERT_TRUE(pub);
  ASSERT_EQ(pub->status, 200) << pub->body;
  const httplib::Headers admin = {{"Authorization", "Bearer " + *admin_}};
  auto view = [&](const std::string& path, const httplib::Headers& h) {
    auto r = c.Get(path, h);
    EXPECT_TRUE(r) << path;
    if (!r) return std::string();
    EXPECT_EQ(r->status, 200) << path << ": " << r->body;
    return r->body;
  };
  // Workers and actions are immediate; the overview's counters come from
  // the model's metrics, which the answered query has made.
  for (const std::string path : {"/v2/somm/workers", "/v2/somm/actions?limit=1000",
                                 "/v2/somm/overview"}) {
    const std::string quoted = std::string("\"") + kPrivate + "\"";
    EXPECT_NE(view(path, admin).find(quoted), std::string::npos) << path << " as admin";
    EXPECT_NE(view(path, Headers(Who::kOwner)).find(quoted), std::string::npos)
        << path << " as the owner";
    const std::string theirs = view(path, Headers(Who::kOther));
    EXPECT_EQ(theirs.find(kPrivate), std::string::npos) << path << " as another tenant: " << theirs;
    // Public models stay in everyone's view.
    EXPECT_NE(theirs.find("\"digits-mlp\""), std::string::npos) << path << ": " << theirs;
    auto none = c.Get(path, Headers(Who::kNoKey));
    ASSERT_TRUE(none);
    EXPECT_EQ(none->status, 401) << path;
    auto metrics_only = c.Get(path, {{"Authorization", "Bearer " + *metrics_}});
    ASSERT_TRUE(metrics_only);
    EXPECT_EQ(metrics_only->status, 403) << path;
  }
}

TEST_F(AuthE2ETest, RolesMetricsAndHealth) {
  httplib::Client c("127.0.0.1", server_->http_port());
  auto ready = c.Get("/v2/health/ready");
  ASSERT_TRUE(ready);
  // Answered without a key: 200, or 400 where the repository holds a model
  // that cannot load (strict readiness), never 401.
  EXPECT_TRUE(ready->status == 200 || ready->status == 400) << "health needs no key: " << ready->status;
  auto stub = inference::GRPCInferenceService::NewStub(Channel());
  grpc::ClientContext ctx;
  inference::ServerLiveResponse live;
  EXPECT_TRUE(stub->ServerLive(&ctx, inference::ServerLiveRequest(), &live).ok());
  // A metrics key reads /metrics and nothing else.
  const httplib::Headers metrics_key = {{"Authorization", "Bearer " + *metrics_}};
  auto denied = c.Get("/v2/models/digits-mlp", metrics_key);
  ASSERT_TRUE(denied);
  EXPECT_EQ(denied->status, 403);
  EXPECT_EQ(denied->body.find(*metrics_), std::string::npos) << "messages never echo a key";
  httplib::Client m("127.0.0.1", server_->metrics_port());
  auto scrape = m.Get("/metrics", metrics_key);
  ASSERT_TRUE(scrape);
  EXPECT_EQ(scrape->status, 200);
  auto anonymous = m.Get("/metrics");
  ASSERT_TRUE(anonymous);
  EXPECT_EQ(anonymous->status, 401);
  auto user = m.Get("/metrics", Headers(Who::kOwner));
  ASSERT_TRUE(user);
  EXPECT_EQ(user->status, 403);
  // Unload is admin-only for public models.
  auto unload = c.Post("/v2/repository/models/digits-mlp/unload", Headers(Who::kOwner), "{}",
                       "application/json");
  ASSERT_TRUE(unload);
  EXPECT_EQ(unload->status, 403);
}

TEST_F(AuthE2ETest, RateQuotaAnswers429WithRetryAfterAndShowsInMetrics) {
  httplib::Client c("127.0.0.1", server_->http_port());
  const httplib::Headers q = {{"Authorization", "Bearer " + *quota_}};
  // Tenant q: burst 1 at 0.001/s, so the second query finds the bucket empty.
  auto first = c.Post("/v2/models/digits-mlp/infer", q, Query(), "application/json");
  auto second = c.Post("/v2/models/digits-mlp/infer", q, Query(), "application/json");
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first->status, 200) << first->body;
  EXPECT_EQ(second->status, 429) << second->body;
  EXPECT_TRUE(second->has_header("Retry-After"));
  auto stub = inference::GRPCInferenceService::NewStub(Channel());
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer " + *quota_);
  inference::ModelInferResponse resp;
  EXPECT_EQ(stub->ModelInfer(&ctx, GrpcQuery("digits-mlp"), &resp).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  httplib::Client m("127.0.0.1", server_->metrics_port());
  auto scrape = m.Get("/metrics", {{"Authorization", "Bearer " + *metrics_}});
  ASSERT_TRUE(scrape);
  EXPECT_GE(
      MetricValue(scrape->body, "somm_tenant_queries_total{tenant=\"q\",outcome=\"rate_limited\"}"),
      2);
  EXPECT_EQ(
      MetricValue(scrape->body, "somm_tenant_queries_total{tenant=\"q\",outcome=\"admitted\"}"), 1);
}

// The CLI's client commands send SOMM_API_KEY on both wires, and
// `somm register --private` makes a model of the key's tenant.
// A batch submission is admitted as a query of its target, which takes one
// of the tenant's concurrency slots: it used to keep it for good, so a
// tenant with max_concurrent 1 could submit once and then query nothing.
TEST_F(AuthE2ETest, ABatchSubmissionGivesItsTenantsQuerySlotBack) {
  const fs::path home = fs::path(*repo_) / ".somm" / "batch-files" / "c";
  fs::create_directories(home);
  {
    std::ofstream in(home / "one.jsonl");
    in << json{{"inputs", json::array({{{"name", "pixels"},
                                         {"datatype", "FP32"},
                                         {"shape", {1, 64}},
                                         {"data", digits_->pixels[0]}}})}}
              .dump()
       << "\n";
  }
  httplib::Client c("127.0.0.1", server_->http_port());
  c.set_read_timeout(30, 0);
  const httplib::Headers key = {{"Authorization", "Bearer " + *one_slot_}};
  for (int i = 0; i < 3; ++i) {
    const json submit = {{"model", "digits-mlp"}, {"input", "one.jsonl"},
                         {"output", "out-" + std::to_string(i)}};
    auto r = c.Post("/v2/somm/batch", key, submit.dump(), "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << "submission " << i << ": " << r->body;
  }
  json q = {{"inputs", json::array({{{"name", "pixels"},
                                      {"datatype", "FP32"},
                                      {"shape", {1, 64}},
                                      {"data", digits_->pixels[0]}}})}};
  auto r = c.Post("/v2/models/digits-mlp/infer", key, q.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  // Another tenant's folder is not this key's.
  r = c.Post("/v2/somm/batch", key,
             json{{"model", "digits-mlp"}, {"input", "../a/x.jsonl"}, {"output", "o"}}.dump(),
             "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 403) << r->body;
}

TEST_F(AuthE2ETest, ClientCommandsSendTheKeyAndRegisterPrivateModels) {
  const std::string url = " --url 127.0.0.1:";
  for (const char* protocol : {"http", "grpc"}) {
    const int port = std::string(protocol) == "http" ? server_->http_port() : server_->grpc_port();
    int code = 0;
    LastLine("SOMM_API_KEY=" + *owner_ + " " + SommBinary() + " models -i " + protocol + url +
                 std::to_string(port) + " > /dev/null 2>&1",
             &code);
    EXPECT_EQ(code, 0) << protocol;
    LastLine("env -u SOMM_API_KEY " + SommBinary() + " models -i " + protocol + url +
                 std::to_string(port) + " > /dev/null 2>&1",
             &code);
    EXPECT_NE(code, 0) << protocol << ": no key must fail";
  }
  int code = 0;
  const std::string model = (fs::path(DemoRepository()) / "digits-mlp" / "1" / "model.pt").string();
  LastLine("SOMM_API_KEY=" + *owner_ + " " + SommBinary() + " register alice-new --model " + model +
               " --task classification/alice-new --input pixels:FP32:64 --output logits:FP32:10"
               " --max-batch-size 8 --private" +
               url + std::to_string(server_->http_port()) + " > /dev/null 2>&1",
           &code);
  ASSERT_EQ(code, 0);
  std::ifstream in(fs::path(*repo_) / "alice-new" / "model.yaml");
  std::stringstream yaml;
  yaml << in.rdbuf();
  EXPECT_NE(yaml.str().find("owner_tenant: \"a\""), std::string::npos) << yaml.str();
  httplib::Client c("127.0.0.1", server_->http_port());
  auto theirs = c.Get("/v2/models/alice-new", Headers(Who::kOther));
  ASSERT_TRUE(theirs);
  EXPECT_EQ(theirs->status, 404);
  EXPECT_EQ(Message(theirs), "unknown model 'alice-new'");
}

// Regression: the task went into model.yaml unquoted, so a task holding a
// newline could add an owner_tenant line and plant a model on another tenant.
TEST_F(AuthE2ETest, RegistrationTaskCannotInjectAnOwner) {
  std::ifstream in(fs::path(DemoRepository()) / "digits-mlp" / "1" / "model.pt", std::ios::binary);
  std::stringstream model;
  model << in.rdbuf();
  json body = {{"task", "classification/x\nowner_tenant: b"},
               {"inputs", {{{"name", "pixels"}, {"datatype", "FP32"}, {"shape", {64}}}}},
               {"outputs", {{{"name", "logits"}, {"datatype", "FP32"}, {"shape", {10}}}}},
               {"max_batch_size", 8},
               {"model", Base64(model.str())},
               {"private", true}};
  httplib::Client c("127.0.0.1", server_->http_port());
  auto r = c.Post("/v2/repository/models/alice-inject/register", Headers(Who::kOwner), body.dump(),
                  "application/json");
  ASSERT_TRUE(r);
  // Refused (the task is not task/dataset) or registered for its own tenant;
  // never another tenant's.
  auto theirs = c.Get("/v2/models/alice-inject", Headers(Who::kOther));
  ASSERT_TRUE(theirs);
  EXPECT_EQ(theirs->status, 404) << r->status << " " << r->body;
  std::ifstream yaml(fs::path(*repo_) / "alice-inject" / "model.yaml");
  std::stringstream text;
  text << yaml.rdbuf();
  EXPECT_EQ(text.str().find("\nowner_tenant: b"), std::string::npos) << text.str();
}

// Last: it takes the private model away.
TEST_F(AuthE2ETest, UnloadOverRestAndGrpcAndTheAuditLog) {
  httplib::Client c("127.0.0.1", server_->http_port());
  auto stub = inference::GRPCInferenceService::NewStub(Channel());
  for (Who w : {Who::kOther, Who::kNoKey, Who::kWrongKey, Who::kRevoked}) {
    auto r = c.Post(std::string("/v2/repository/models/") + kPrivate + "/unload", Headers(w), "{}",
                    "application/json");
    ASSERT_TRUE(r);
    inference::RepositoryModelUnloadRequest req;
    req.set_model_name(kPrivate);
    inference::RepositoryModelUnloadResponse resp;
    const grpc::Status g = stub->RepositoryModelUnload(Context(w).get(), req, &resp);
    if (Unauthenticated(w)) {
      EXPECT_EQ(r->status, 401) << Name(w);
      EXPECT_EQ(g.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Name(w);
    } else {
      ExpectHidden(r->status, Message(r), "REST unload");
      EXPECT_EQ(g.error_code(), grpc::StatusCode::NOT_FOUND);
    }
  }
  auto r = c.Post(std::string("/v2/repository/models/") + kPrivate + "/unload",
                  Headers(Who::kOwner), "{}", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  // The owner loads its model again (gRPC) and unloads it (gRPC).
  inference::RepositoryModelLoadRequest load;
  load.set_model_name(kPrivate);
  inference::RepositoryModelLoadResponse loaded;
  const grpc::Status l = stub->RepositoryModelLoad(Context(Who::kOwner).get(), load, &loaded);
  EXPECT_TRUE(l.ok()) << l.error_message();
  inference::RepositoryModelUnloadRequest req;
  req.set_model_name(kPrivate);
  inference::RepositoryModelUnloadResponse resp;
  const grpc::Status u = stub->RepositoryModelUnload(Context(Who::kOwner).get(), req, &resp);
  EXPECT_TRUE(u.ok()) << u.error_message();

  std::ifstream in(fs::path(*repo_) / ".somm" / "audit.log");
  std::stringstream audit;
  audit << in.rdbuf();
  const std::string text = audit.str();
  const std::string owner_id = owner_->substr(5, 16);
  bool owner_unload_ok = false, other_refused = false, key_revoked = false;
  std::string line;
  while (std::getline(audit, line)) {
    auto j = json::parse(line, nullptr, false);
    ASSERT_TRUE(j.is_object()) << line;
    owner_unload_ok |= j["action"] == "unload" && j["key_id"] == owner_id && j["outcome"] == "ok";
    other_refused |= j["action"] == "unload" && j["tenant"] == "b" && j["outcome"] == "NOT_FOUND";
    key_revoked |= j["action"] == "key_revoke" && j["target"] == revoked_->substr(5, 16);
  }
  EXPECT_TRUE(owner_unload_ok) << text;
  EXPECT_TRUE(other_refused) << text;
  EXPECT_TRUE(key_revoked) << text;
  for (const std::string* key : {admin_, owner_, other_, metrics_, quota_, revoked_}) {
    EXPECT_EQ(text.find(key->substr(22)), std::string::npos) << "a secret in the audit log";
  }
}

// Calls refused before their body or message is read (REST's head check,
// gRPC's metadata check) are in the audit log as other refused calls are:
// without a valid key at a bounded rate, with a key whose role may not, in
// full. They were not recorded at all.
TEST_F(AuthE2ETest, RefusalsBeforeTheBodyOrMessageAreAudited) {
  // Other tests' refusals took the unauthenticated records' burst: 2 s
  // gives it back.
  std::this_thread::sleep_for(std::chrono::seconds(2));
  httplib::Client c("127.0.0.1", server_->http_port());
  auto r =
      c.Post("/v2/models/audit-probe/infer", Headers(Who::kNoKey), Query(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  r = c.Post("/v2/repository/models/audit-probe/register",
             {{"Authorization", "Bearer " + *metrics_}}, "{}", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 403) << r->body;
  auto channel = Channel();
  auto stub = inference::GRPCInferenceService::NewStub(channel);
  inference::ModelInferResponse answer;
  EXPECT_EQ(
      stub->ModelInfer(Context(Who::kNoKey).get(), GrpcQuery("audit-probe"), &answer).error_code(),
      grpc::StatusCode::UNAUTHENTICATED);
  auto control = somm::SommControl::NewStub(channel);
  grpc::ClientContext metrics_context;
  metrics_context.AddMetadata("authorization", "Bearer " + *metrics_);
  somm::RegisterModelResponse registered;
  EXPECT_EQ(control->RegisterModel(&metrics_context, {}, &registered).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);

  std::ifstream in(fs::path(*repo_) / ".somm" / "audit.log");
  const std::string metrics_id = metrics_->substr(5, 16);
  bool rest_unknown = false, rest_forbidden = false, grpc_unknown = false, grpc_forbidden = false;
  std::string text;
  for (std::string line; std::getline(in, line);) {
    text += line + "\n";
    auto j = json::parse(line, nullptr, false);
    if (!j.is_object()) continue;
    rest_unknown |= j["action"] == "infer" && j["target"] == "audit-probe" &&
                    j["outcome"] == "UNAUTHENTICATED" && j["key_id"] == "";
    rest_forbidden |= j["action"] == "register" && j["target"] == "audit-probe" &&
                      j["outcome"] == "PERMISSION_DENIED" && j["key_id"] == metrics_id;
    grpc_unknown |= j["action"] == "infer" &&
                    j["target"] == "/inference.GRPCInferenceService/ModelInfer" &&
                    j["outcome"] == "UNAUTHENTICATED";
    grpc_forbidden |= j["action"] == "register" &&
                      j["target"] == "/somm.SommControl/RegisterModel" &&
                      j["outcome"] == "PERMISSION_DENIED" && j["key_id"] == metrics_id;
  }
  EXPECT_TRUE(rest_unknown) << "REST head check, no key:\n" << text;
  EXPECT_TRUE(rest_forbidden) << "REST head check, a metrics key:\n" << text;
  EXPECT_TRUE(grpc_unknown) << "gRPC metadata check, no key:\n" << text;
  EXPECT_TRUE(grpc_forbidden) << "gRPC metadata check, a metrics key:\n" << text;
}

TEST(AuthE2EStartTest, NoAuthBeyondLoopbackRefusesToStart) {
  if (IsClusterTopology()) GTEST_SKIP() << "a `somm serve` flag check";
  const std::string repo = MakeTestRepository(DemoRepository(), "noauth");
  // The refusal comes before anything loads or listens.
  FILE* p = popen((SommBinary() + " serve --model-repository " + repo +
                   " --address 0.0.0.0 --auth none --http-port 0 --grpc-port 0 --metrics-port 0"
                   " 2>&1")
                      .c_str(),
                  "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  while (fgets(buf, sizeof buf, p) != nullptr) out += buf;
  const int status = pclose(p);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << out;
  EXPECT_NE(out.find("--auth"), std::string::npos) << out;
  EXPECT_NE(out.find("somm keys"), std::string::npos) << out;
  EXPECT_EQ(out.find("somm: listening"), std::string::npos) << out;
  fs::remove_all(repo);
}

// Keys are replaced without downtime: `somm keys rotate` adds a key of the
// same tenant and role and the running server, with no restart, takes both
// until the old one's grace ends, then only the new one. An expired key is
// refused naming its id and expiry, never its secret.
TEST_F(AuthE2ETest, RotatedKeysBothWorkThroughTheGraceThenOnlyTheNewOne) {
  httplib::Client c("127.0.0.1", server_->http_port());
  // A public model: another test unloads the private one.
  const std::string path = "/v2/models/digits-mlp";
  const auto get = [&](const std::string& key) {
    return c.Get(path, {{"Authorization", "Bearer " + key}});
  };
  const auto status_of = [&](const std::string& key) {
    auto r = get(key);
    return r ? r->status : -1;
  };
  const auto id_of = [](const std::string& key) { return key.substr(5, 16); };
  const std::string rotate = SommBinary() + " keys rotate --repo " + *repo_ + " ";
  const std::string old_key = MakeKey("a", "user");
  ASSERT_FALSE(old_key.empty());
  EXPECT_EQ(status_of(old_key), 200);

  int code = 0;
  const std::string first = LastLine(rotate + id_of(old_key) + " --grace 1h 2>/dev/null", &code);
  ASSERT_EQ(code, 0);
  ASSERT_EQ(first.rfind("somm_", 0), 0u) << first;
  EXPECT_NE(id_of(first), id_of(old_key));
  EXPECT_EQ(status_of(old_key), 200) << "the old key works through its grace";
  EXPECT_EQ(status_of(first), 200) << "the new key works at once";
  // Same tenant: the index shows the new key tenant a's private model.
  auto index = c.Post("/v2/repository/index", {{"Authorization", "Bearer " + first}}, "{}",
                      "application/json");
  ASSERT_TRUE(index);
  EXPECT_NE(index->body.find(kPrivate), std::string::npos) << index->body;

  // No grace: the rotated key ends now and its successor takes over.
  const std::string second = LastLine(rotate + id_of(first) + " --grace 0s 2>/dev/null", &code);
  ASSERT_EQ(code, 0);
  ASSERT_EQ(second.rfind("somm_", 0), 0u) << second;
  auto r = get(first);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  EXPECT_EQ(Message(r).rfind("API key " + id_of(first) + " expired at ", 0), 0u) << r->body;
  EXPECT_EQ(r->body.find(first.substr(22)), std::string::npos) << "the secret in an answer";
  EXPECT_EQ(status_of(second), 200);
  EXPECT_EQ(status_of(old_key), 200) << "still within its hour";

  // `somm keys list` says so; an ended, revoked or unknown key cannot be rotated.
  const std::string list = SommBinary() + " keys list --repo " + *repo_ + " 2>/dev/null | grep ";
  EXPECT_NE(LastLine(list + id_of(first), &code).find("EXPIRED"), std::string::npos);
  EXPECT_NE(LastLine(list + id_of(second), &code).find("never"), std::string::npos);
  for (const std::string& id : {id_of(first), id_of(*revoked_), std::string("ffffffffffffffff")}) {
    LastLine(rotate + id + " 2>/dev/null", &code);
    EXPECT_TRUE(WIFEXITED(code) && WEXITSTATUS(code) == 1) << id;
  }

  std::ifstream in(fs::path(*repo_) / ".somm" / "audit.log");
  bool rotated = false;
  for (std::string line; std::getline(in, line);) {
    auto j = json::parse(line, nullptr, false);
    rotated |= j.is_object() && j["action"] == "key_rotate" && j["target"] == id_of(old_key) &&
               j["outcome"] == "ok" &&
               j["detail"].get<std::string>().find("new_key=" + id_of(first)) != std::string::npos;
  }
  EXPECT_TRUE(rotated) << "no key_rotate record for " << id_of(old_key);
}

// `somm keys create --expires`: the key works until then, and the running
// server refuses it from then on with no change to the key file.
TEST_F(AuthE2ETest, KeyCreatedWithAnExpiryIsRefusedOnceItHasPassed) {
  httplib::Client c("127.0.0.1", server_->http_port());
  // A public model: another test unloads the private one.
  const std::string path = "/v2/models/digits-mlp";
  const std::string create =
      SommBinary() + " keys create --repo " + *repo_ + " --tenant a --role user --expires ";
  int code = 0;
  LastLine(create + "2000-01-01 2>/dev/null", &code);
  EXPECT_TRUE(WIFEXITED(code) && WEXITSTATUS(code) != 0) << "an expiry in the past";
  LastLine(create + "soon 2>/dev/null", &code);
  EXPECT_TRUE(WIFEXITED(code) && WEXITSTATUS(code) == 2) << "a malformed expiry";

  // Whole seconds: "4s" lives between 3 and 4 seconds.
  const std::string key = LastLine(create + "4s 2>/dev/null", &code);
  ASSERT_EQ(code, 0);
  ASSERT_EQ(key.rfind("somm_", 0), 0u) << key;
  auto r = c.Get(path, {{"Authorization", "Bearer " + key}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  int status = 200;
  while (status == 200 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    r = c.Get(path, {{"Authorization", "Bearer " + key}});
    status = r ? r->status : -1;
  }
  EXPECT_EQ(status, 401);
  EXPECT_NE(Message(r).find("expired at"), std::string::npos) << (r ? r->body : "");
}

}  // namespace
}  // namespace somm::testing
