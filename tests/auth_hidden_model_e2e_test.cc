// The walk of every route and RPC that names a model, as the owner,
// another tenant, a metrics key and no key (auth_e2e_fixture.h).
#include "auth_e2e_fixture.h"

namespace somm::testing {
namespace {


// A model another tenant cannot see answers exactly as a model that does not
// exist (docs/security.md, "Tenants"): every REST route and gRPC RPC that
// names a model - metadata, ready, versions (a served one, a missing one, a
// malformed one), infer with a good and a bad body, variants, rollout, load,
// unload, register-over, batch submission, and the task routes - is walked
// for the private model and for a name nobody holds, as the owner, another
// tenant, a metrics key and no key. Every answer but the owner's must be the
// same bytes (status or code, and body or message) once the name is
// swapped, and no answer may name a server path.
TEST_F(AuthE2ETest, AHiddenModelAnswersEveryRouteAndRpcAsAMissingOne) {
  const std::string missing = "no-such-model";
  const std::string missing_task = "classification/no-such-task";
  httplib::Client c("127.0.0.1", server_->http_port());
  c.set_read_timeout(60, 0);
  auto oip = inference::GRPCInferenceService::NewStub(Channel());
  auto control = somm::SommControl::NewStub(Channel());
  // An earlier test unloads the private model: the owner loads it again.
  auto loaded = c.Post(std::string("/v2/repository/models/") + kPrivate + "/load",
                       Headers(Who::kOwner), "{}", "application/json");
  ASSERT_TRUE(loaded);
  ASSERT_EQ(loaded->status, 200) << loaded->body;
  // A batch job's input in tenant b's folder, so that a submission gets as
  // far as the model it names.
  const fs::path b_home = fs::path(*repo_) / ".somm" / "batch-files" / "b";
  fs::create_directories(b_home);
  std::ofstream(b_home / "walk.jsonl") << json::parse(Query()).dump() << "\n";

  struct Identity {
    const char* name;
    std::string key;  // "" = none sent
  };
  const std::vector<Identity> identities = {
      {"owner", *owner_}, {"other tenant", *other_}, {"metrics key", *metrics_}, {"no key", ""}};
  auto swap = [](std::string text, const std::string& from, const std::string& to) {
    for (size_t at = text.find(from); at != std::string::npos;
         at = text.find(from, at + to.size())) {
      text.replace(at, from.size(), to);
    }
    return text;
  };
  // One answer as text: the status and the body (REST) or the code and the
  // message (gRPC), with the model's (or task's) name swapped for <name>.
  auto rest = [&](const Identity& who, const std::string& method, const std::string& path,
                  const std::string& body, const std::string& name) {
    httplib::Headers h;
    if (!who.key.empty()) h.emplace("Authorization", "Bearer " + who.key);
    auto r = method == "GET" ? c.Get(path, h) : c.Post(path, h, body, "application/json");
    if (!r) return std::string("no answer");
    EXPECT_EQ(r->body.find(*repo_), std::string::npos)
        << who.name << " " << method << " " << path << " names the repository: " << r->body;
    EXPECT_EQ(r->body.find(".somm/"), std::string::npos)
        << who.name << " " << method << " " << path << " names a server path: " << r->body;
    return swap(std::to_string(r->status) + " " + r->body, name, "<name>");
  };
  auto grpc_answer = [&](const Identity& who, const grpc::Status& g, const std::string& name,
                         const std::string& what) {
    EXPECT_EQ(g.error_message().find(*repo_), std::string::npos)
        << who.name << " " << what << " names the repository: " << g.error_message();
    EXPECT_EQ(g.error_message().find(".somm/"), std::string::npos)
        << who.name << " " << what << " names a server path: " << g.error_message();
    return swap(std::to_string(g.error_code()) + " " + g.error_message(), name, "<name>");
  };
  auto context = [](const Identity& who) {
    auto ctx = std::make_unique<grpc::ClientContext>();
    if (!who.key.empty()) ctx->AddMetadata("authorization", "Bearer " + who.key);
    return ctx;
  };
  // A registration whose signature differs from the task's models (the
  // public digits models' task), and one of the private task's signature
  // with a model file that does not load.
  auto registration = [](const std::string& task, const std::string& input, int64_t width) {
    return json{{"task", task},
                {"inputs", {{{"name", input}, {"datatype", "FP32"}, {"shape", {width}}}}},
                {"outputs", {{{"name", "logits"}, {"datatype", "FP32"}, {"shape", {10}}}}},
                {"max_batch_size", 8},
                {"model", "AAAA"},
                {"private", true}};
  };
  auto grpc_registration = [](const std::string& name, const json& body) {
    somm::RegisterModelRequest req;
    req.set_name(name);
    req.set_task(body["task"].get<std::string>());
    auto* in = req.add_inputs();
    in->set_name(body["inputs"][0]["name"].get<std::string>());
    in->set_datatype("FP32");
    in->add_shape(body["inputs"][0]["shape"][0].get<int64_t>());
    auto* out = req.add_outputs();
    out->set_name("logits");
    out->set_datatype("FP32");
    out->add_shape(10);
    req.set_max_batch_size(8);
    req.set_model("AAAA");
    req.set_private_model(true);
    return req;
  };
  const json misfit = registration("classification/digits", "x", 3);
  const json unloadable = registration(kPrivateTask, "pixels", 64);
  const std::string bad_body = "{\"inputs\": [{\"name\": \"pixels\"";
  const std::string repo_models = "/v2/repository/models/";

  // A route or RPC: what it answers `who` for a model's (or a task's) name.
  struct Route {
    std::string what;
    std::function<std::string(const Identity&, const std::string& name)> ask;
  };
  // The task routes, for the private task and a task nobody serves (first:
  // the private model is loaded); and a new model's registration into the
  // private task with another signature is checked only against the models
  // its registrant may see.
  std::vector<Route> task_routes;
  task_routes.push_back({"GET /v2/tasks/{t}", [&](const Identity& who, const std::string& t) {
                           return rest(who, "GET", "/v2/tasks/" + t, "", t);
                         }});
  task_routes.push_back(
      {"POST /v2/tasks/{t}/infer", [&](const Identity& who, const std::string& t) {
         return rest(who, "POST", "/v2/tasks/" + t + "/infer", Query(), t);
       }});
  task_routes.push_back({"POST /v2/repository/models/bob-walk/register into {t}",
                         [&](const Identity& who, const std::string& t) {
                           return rest(who, "POST", repo_models + "bob-walk/register",
                                       registration(t, "x", 3).dump(), t);
                         }});
  task_routes.push_back({"gRPC DescribeTask", [&](const Identity& who, const std::string& t) {
                           somm::DescribeTaskRequest req;
                           req.set_task(t);
                           somm::TasksResponse resp;
                           return grpc_answer(who,
                                              control->DescribeTask(context(who).get(), req, &resp),
                                              t, "DescribeTask");
                         }});
  task_routes.push_back(
      {"gRPC ModelInfer task {t}", [&](const Identity& who, const std::string& t) {
         inference::ModelInferRequest req = GrpcQuery("");
         (*req.mutable_parameters())["task"].set_string_param(t);
         inference::ModelInferResponse resp;
         return grpc_answer(who, oip->ModelInfer(context(who).get(), req, &resp), t,
                            "ModelInfer task");
       }});
  task_routes.push_back(
      {"gRPC RegisterModel bob-walk into {t}", [&](const Identity& who, const std::string& t) {
         somm::RegisterModelResponse resp;
         return grpc_answer(
             who,
             control->RegisterModel(context(who).get(),
                                    grpc_registration("bob-walk", registration(t, "x", 3)), &resp),
             t, "RegisterModel");
       }});
  for (const Route& route : task_routes) {
    for (const Identity& who : identities) {
      if (std::string(who.name) == "owner") continue;
      const std::string theirs = route.ask(who, kPrivateTask);
      EXPECT_EQ(theirs, route.ask(who, missing_task)) << who.name << ": " << route.what;
      EXPECT_EQ(theirs.find(kPrivate), std::string::npos) << who.name << ": " << route.what;
    }
  }
  // Each route: what it answers for `name`. The owner's unload comes last.
  std::vector<Route> routes;
  auto rest_route = [&](const std::string& method, const std::string& suffix,
                        const std::string& body, const std::string& prefix = "/v2/models/") {
    routes.push_back({method + " " + prefix + "{m}" + suffix,
                      [&, method, suffix, body, prefix](const Identity& who, const std::string& m) {
                        return rest(who, method, prefix + m + suffix, body, m);
                      }});
  };
  for (const std::string v : {"", "/versions/1", "/versions/999", "/versions/abc"}) {
    rest_route("GET", v, "");
    rest_route("GET", v + "/ready", "");
    rest_route("POST", v + "/infer", Query());
    rest_route("POST", v + "/infer", bad_body);
    rest_route("GET", v + "/stats", "");   // Triton's statistics
    rest_route("GET", v + "/config", "");  // and model configuration
  }
  rest_route("GET", "/variants", "", repo_models);
  rest_route("GET", "/rollout", "", repo_models);
  rest_route("POST", "/rollout", "{\"action\": \"rollback\"}", repo_models);
  rest_route("POST", "/rollout", "[1]", repo_models);
  rest_route("POST", "/register", misfit.dump(), repo_models);
  rest_route("POST", "/register", unloadable.dump(), repo_models);
  routes.push_back(
      {"POST /v2/somm/batch {model: {m}}", [&](const Identity& who, const std::string& m) {
         const json submit = {{"model", m}, {"input", "walk.jsonl"}, {"output", "out-" + m}};
         return rest(who, "POST", "/v2/somm/batch", submit.dump(), m);
       }});
  for (const std::string v : {"", "1", "999", "abc"}) {
    routes.push_back({"gRPC ModelMetadata version '" + v + "'",
                      [&, v](const Identity& who, const std::string& m) {
                        inference::ModelMetadataRequest req;
                        req.set_name(m);
                        req.set_version(v);
                        inference::ModelMetadataResponse resp;
                        return grpc_answer(who, oip->ModelMetadata(context(who).get(), req, &resp),
                                           m, "ModelMetadata");
                      }});
    routes.push_back(
        {"gRPC ModelReady version '" + v + "'", [&, v](const Identity& who, const std::string& m) {
           inference::ModelReadyRequest req;
           req.set_name(m);
           req.set_version(v);
           inference::ModelReadyResponse resp;
           return grpc_answer(who, oip->ModelReady(context(who).get(), req, &resp), m,
                              "ModelReady");
         }});
    routes.push_back({"gRPC ModelStatistics version '" + v + "'",
                      [&, v](const Identity& who, const std::string& m) {
                        inference::ModelStatisticsRequest req;
                        req.set_name(m);
                        req.set_version(v);
                        inference::ModelStatisticsResponse resp;
                        return grpc_answer(who, oip->ModelStatistics(context(who).get(), req, &resp),
                                           m, "ModelStatistics");
                      }});
    routes.push_back({"gRPC ModelConfig version '" + v + "'",
                      [&, v](const Identity& who, const std::string& m) {
                        inference::ModelConfigRequest req;
                        req.set_name(m);
                        req.set_version(v);
                        inference::ModelConfigResponse resp;
                        return grpc_answer(who, oip->ModelConfig(context(who).get(), req, &resp), m,
                                           "ModelConfig");
                      }});
    for (const bool good : {true, false}) {
      routes.push_back({std::string("gRPC ModelInfer (") + (good ? "good" : "bad") +
                            " request) version '" + v + "'",
                        [&, v, good](const Identity& who, const std::string& m) {
                          inference::ModelInferRequest req = GrpcQuery(m);
                          req.set_model_version(v);
                          if (!good) req.mutable_raw_input_contents(0)->resize(3);
                          inference::ModelInferResponse resp;
                          return grpc_answer(who, oip->ModelInfer(context(who).get(), req, &resp),
                                             m, "ModelInfer");
                        }});
    }
  }
  routes.push_back({"gRPC GetVariants", [&](const Identity& who, const std::string& m) {
                      somm::GetVariantsRequest req;
                      req.set_name(m);
                      somm::GetVariantsResponse resp;
                      return grpc_answer(who, control->GetVariants(context(who).get(), req, &resp),
                                         m, "GetVariants");
                    }});
  routes.push_back({"gRPC GetRollout", [&](const Identity& who, const std::string& m) {
                      somm::GetRolloutRequest req;
                      req.set_model_name(m);
                      somm::RolloutResponse resp;
                      return grpc_answer(who, control->GetRollout(context(who).get(), req, &resp),
                                         m, "GetRollout");
                    }});
  for (const std::string change : {"{\"action\": \"rollback\"}", "[1]"}) {
    routes.push_back(
        {"gRPC Rollout " + change, [&, change](const Identity& who, const std::string& m) {
           somm::RolloutRequest req;
           req.set_model_name(m);
           req.set_change_json(change);
           somm::RolloutResponse resp;
           return grpc_answer(who, control->Rollout(context(who).get(), req, &resp), m, "Rollout");
         }});
  }
  for (const json* body : {&misfit, &unloadable}) {
    routes.push_back(
        {"gRPC RegisterModel task " + (*body)["task"].get<std::string>(),
         [&, body](const Identity& who, const std::string& m) {
           somm::RegisterModelResponse resp;
           return grpc_answer(
               who, control->RegisterModel(context(who).get(), grpc_registration(m, *body), &resp),
               m, "RegisterModel");
         }});
  }
  // Load and unload, each with a bad request first: the owner's unload is last.
  rest_route("POST", "/load", "[1]", repo_models);
  rest_route("POST", "/load", "{\"parameters\": {\"config\": \"{}\"}}", repo_models);
  routes.push_back(
      {"gRPC RepositoryModelLoad with a config", [&](const Identity& who, const std::string& m) {
         inference::RepositoryModelLoadRequest req;
         req.set_model_name(m);
         (*req.mutable_parameters())["config"].set_string_param("{}");
         inference::RepositoryModelLoadResponse resp;
         return grpc_answer(who, oip->RepositoryModelLoad(context(who).get(), req, &resp), m,
                            "RepositoryModelLoad");
       }});
  rest_route("POST", "/load", "{}", repo_models);
  routes.push_back({"gRPC RepositoryModelLoad", [&](const Identity& who, const std::string& m) {
                      inference::RepositoryModelLoadRequest req;
                      req.set_model_name(m);
                      inference::RepositoryModelLoadResponse resp;
                      return grpc_answer(who,
                                         oip->RepositoryModelLoad(context(who).get(), req, &resp),
                                         m, "RepositoryModelLoad");
                    }});
  rest_route("POST", "/unload", "[1]", repo_models);
  routes.push_back({"gRPC RepositoryModelUnload", [&](const Identity& who, const std::string& m) {
                      inference::RepositoryModelUnloadRequest req;
                      req.set_model_name(m);
                      inference::RepositoryModelUnloadResponse resp;
                      return grpc_answer(who,
                                         oip->RepositoryModelUnload(context(who).get(), req, &resp),
                                         m, "RepositoryModelUnload");
                    }});
  rest_route("POST", "/unload", "{}", repo_models);

  const std::string unknown = "unknown model '" + std::string(kPrivate) + "'";
  for (const Route& route : routes) {
    for (const Identity& who : identities) {
      const bool owner = std::string(who.name) == "owner";
      // The owner's unload would take the model away from the owner's next
      // asks: it is answered last, after the others'.
      if (owner) continue;
      EXPECT_EQ(route.ask(who, kPrivate), route.ask(who, missing))
          << who.name << ": " << route.what;
    }
    const std::string mine = route.ask(identities[0], kPrivate);
    EXPECT_EQ(mine.find(unknown), std::string::npos) << "the owner sees its model: " << route.what;
  }

  auto tasks = c.Get("/v2/tasks", Headers(Who::kOther));
  ASSERT_TRUE(tasks);
  EXPECT_EQ(tasks->body.find(kPrivateTask), std::string::npos) << tasks->body;
  EXPECT_FALSE(fs::exists(fs::path(*repo_) / "bob-walk"));
  EXPECT_FALSE(fs::exists(fs::path(*repo_) / missing));
}

}  // namespace
}  // namespace somm::testing
