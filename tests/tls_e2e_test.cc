// TLS end to end (docs/security.md, "TLS"): the real `somm serve` with
// --tls-cert, --tls-key and --tls-client-ca from scripts/make-certs, driven by
// curl --cacert (REST and /metrics), gRPC's own SSL credentials and the somm
// client's --tls-ca; plaintext clients and clients without a certificate of
// the CA are refused with a clear error. Then a cluster whose router, workers
// and controller authenticate each other with mutual TLS.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <memory>
#include <string>

#include "cluster_process.h"
#include "e2e_fixture.h"
#include "proto/cluster.grpc.pb.h"
#include "proto/inference.grpc.pb.h"

namespace somm::testing {
namespace {

namespace fs = std::filesystem;

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

CommandResult Shell(const std::string& command) {
  CommandResult run;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return run;
  char buffer[65536];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) run.output.append(buffer, n);
  const int status = pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

// curl -w appends the HTTP status on a line of its own.
CommandResult Curl(const std::string& arguments) {
  return Shell("curl -sS --max-time 20 -w '\\n%{http_code}' " + arguments);
}

class TlsE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    certs_ = new std::string((fs::temp_directory_path() /
                              ("somm-tls-e2e-" + std::to_string(getpid()))).string());
    fs::remove_all(*certs_);
    for (const char* ca : {"", "/other"}) {
      const std::string command =
          std::string(SOMM_SOURCE_DIR) + "/scripts/make-certs " + *certs_ + ca + " >/dev/null";
      ASSERT_EQ(std::system(command.c_str()), 0) << command;
    }
    repo_ = new std::string(MakeTestRepository(DemoRepository(), "tls"));
    server_ = new ServerProcess(SommBinary(), *repo_,
                                {"--tls-cert", File("server.pem"),
                                 "--tls-key", File("server.key"), "--tls-client-ca",
                                 File("ca.pem")},
                                Topology::kEmbedded);
  }
  static void TearDownTestSuite() {
    delete server_;
    fs::remove_all(*repo_);
    fs::remove_all(*certs_);
    delete repo_;
    delete certs_;
  }
  void SetUp() override { ASSERT_TRUE(server_->ok()) << "somm serve --tls-* did not start"; }

  static std::string File(const std::string& name) { return *certs_ + "/" + name; }
  // A client trusting the CA and presenting its client certificate.
  static std::string MutualArgs() {
    return "--cacert " + File("ca.pem") + " --cert " + File("client.pem") + " --key " +
           File("client.key") + " ";
  }
  static std::string Url(int port, const std::string& scheme, const std::string& path) {
    // localhost: a name the server certificate holds (as is 127.0.0.1).
    return scheme + "://localhost:" + std::to_string(port) + path;
  }
  static std::string Digit() { return DemoRepository() + "/.examples/digit_3.json"; }

  static std::shared_ptr<grpc::Channel> GrpcChannel(bool with_ca, bool with_cert) {
    const std::string target = "localhost:" + std::to_string(server_->grpc_port());
    if (!with_ca) return grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
    grpc::SslCredentialsOptions options;
    options.pem_root_certs = ReadAll(File("ca.pem"));
    if (with_cert) {
      options.pem_cert_chain = ReadAll(File("client.pem"));
      options.pem_private_key = ReadAll(File("client.key"));
    }
    return grpc::CreateChannel(target, grpc::SslCredentials(options));
  }
  static std::string ReadAll(const std::string& path) {
    std::string text;
    FILE* f = std::fopen(path.c_str(), "rb");
    char buffer[4096];
    size_t n;
    while (f != nullptr && (n = std::fread(buffer, 1, sizeof(buffer), f)) > 0) text.append(buffer, n);
    if (f != nullptr) std::fclose(f);
    return text;
  }
  static grpc::Status ServerLive(const std::shared_ptr<grpc::Channel>& channel) {
    auto stub = inference::GRPCInferenceService::NewStub(channel);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    inference::ServerLiveRequest request;
    inference::ServerLiveResponse response;
    return stub->ServerLive(&context, request, &response);
  }

  static std::string* certs_;
  static std::string* repo_;
  static ServerProcess* server_;
};

std::string* TlsE2eTest::certs_ = nullptr;
std::string* TlsE2eTest::repo_ = nullptr;
ServerProcess* TlsE2eTest::server_ = nullptr;

TEST_F(TlsE2eTest, RestAndMetricsOverMutualTls) {
  CommandResult infer = Curl(MutualArgs() + "-d @" + Digit() + " " +
                   Url(server_->http_port(), "https", "/v2/models/digits-mlp/infer"));
  EXPECT_EQ(infer.exit_code, 0) << infer.output;
  EXPECT_NE(infer.output.find("\"outputs\""), std::string::npos) << infer.output;
  EXPECT_TRUE(infer.output.ends_with("\n200")) << infer.output;

  CommandResult metrics = Curl(MutualArgs() + Url(server_->metrics_port(), "https", "/metrics"));
  EXPECT_EQ(metrics.exit_code, 0) << metrics.output;
  EXPECT_NE(metrics.output.find("somm_inference_request_success_total"), std::string::npos);
}

TEST_F(TlsE2eTest, ClientsWithoutACertificateOfTheCaAreRefused) {
  for (int port : {server_->http_port(), server_->metrics_port()}) {
    CommandResult without = Curl("--cacert " + File("ca.pem") + " " + Url(port, "https", "/v2/health/live"));
    EXPECT_NE(without.exit_code, 0) << without.output;
    EXPECT_NE(without.output.find("certificate required"), std::string::npos) << without.output;
    CommandResult foreign = Curl("--cacert " + File("ca.pem") + " --cert " + File("other/client.pem") +
                       " --key " + File("other/client.key") + " " +
                       Url(port, "https", "/v2/health/live"));
    EXPECT_NE(foreign.exit_code, 0) << foreign.output;
    // And the client checks the server: a CA that did not sign it fails.
    CommandResult distrust = Curl("--cacert " + File("other/ca.pem") + " " +
                        Url(port, "https", "/v2/health/live"));
    EXPECT_NE(distrust.exit_code, 0) << distrust.output;
  }
  const std::string log = ReadAll(server_->log());
  EXPECT_NE(log.find("TLS: refused the connection"), std::string::npos);
}

TEST_F(TlsE2eTest, PlaintextClientsAreToldToUseTls) {
  for (int port : {server_->http_port(), server_->metrics_port()}) {
    CommandResult plain = Curl(Url(port, "http", "/v2/health/live"));
    EXPECT_EQ(plain.exit_code, 0) << plain.output;
    EXPECT_TRUE(plain.output.ends_with("\n400")) << plain.output;
    EXPECT_NE(plain.output.find("this port speaks TLS (HTTPS)"), std::string::npos) << plain.output;
  }
  // gRPC: a plaintext channel never connects; the somm client says what to check.
  EXPECT_EQ(ServerLive(GrpcChannel(false, false)).error_code(), grpc::StatusCode::UNAVAILABLE);
  CommandResult client = Shell(SommBinary() + " models -i grpc -u localhost:" +
                     std::to_string(server_->grpc_port()));
  EXPECT_NE(client.exit_code, 0);
  EXPECT_NE(client.output.find("if the server uses TLS, pass --tls-ca"), std::string::npos)
      << client.output;
}

TEST_F(TlsE2eTest, GrpcWithSslCredentials) {
  EXPECT_TRUE(ServerLive(GrpcChannel(true, true)).ok());
  // Mutual TLS: the CA alone is not enough.
  EXPECT_EQ(ServerLive(GrpcChannel(true, false)).error_code(), grpc::StatusCode::UNAVAILABLE);

  // The somm client: a query over gRPC with --tls-ca and its certificate.
  CommandResult infer = Shell(SommBinary() + " infer digits-mlp " + Digit() + " -i grpc -u localhost:" +
                    std::to_string(server_->grpc_port()) + " --tls-ca " + File("ca.pem") +
                    " --tls-cert " + File("client.pem") + " --tls-key " + File("client.key"));
  EXPECT_EQ(infer.exit_code, 0) << infer.output;
  EXPECT_NE(infer.output.find("digits-mlp"), std::string::npos) << infer.output;
}

// somm status and somm batch status reach a TLS server on both wires: over
// REST (HTTPS) with --tls-ca or an https:// --url, over gRPC with --tls-ca;
// they check the server as curl does.
TEST_F(TlsE2eTest, StatusAndBatchStatusOverHttpsAndGrpc) {
  const std::string mutual =
      " --tls-cert " + File("client.pem") + " --tls-key " + File("client.key");
  const std::string rest = std::to_string(server_->http_port());
  const std::string grpc = std::to_string(server_->grpc_port());
  for (const std::string& wire : {"-i http -u localhost:" + rest,
                                  "-i http -u https://localhost:" + rest,
                                  "-i grpc -u localhost:" + grpc}) {
    CommandResult status =
        Shell(SommBinary() + " status " + wire + " --tls-ca " + File("ca.pem") + mutual);
    EXPECT_EQ(status.exit_code, 0) << wire << ": " << status.output;
    EXPECT_NE(status.output.find("digits-mlp"), std::string::npos) << status.output;
    CommandResult jobs =
        Shell(SommBinary() + " batch status " + wire + " --tls-ca " + File("ca.pem") + mutual);
    EXPECT_EQ(jobs.exit_code, 0) << wire << ": " << jobs.output;
    EXPECT_NE(jobs.output.find("JOB"), std::string::npos) << jobs.output;
  }
  // A server whose certificate the CA given did not sign is refused.
  CommandResult distrust = Shell(SommBinary() + " status -u https://localhost:" + rest +
                                 " --tls-ca " + File("other/ca.pem") + mutual);
  EXPECT_NE(distrust.exit_code, 0) << distrust.output;
  EXPECT_NE(distrust.output.find("signed by --tls-ca"), std::string::npos) << distrust.output;
  // Mutual TLS: the CA alone is not enough.
  CommandResult no_cert = Shell(SommBinary() + " batch status -u https://localhost:" + rest +
                                " --tls-ca " + File("ca.pem"));
  EXPECT_NE(no_cert.exit_code, 0) << no_cert.output;

  // The other client commands reach it over both wires: REST as HTTPS.
  CommandResult infer = Shell(SommBinary() + " infer digits-mlp " + Digit() +
                              " -u https://localhost:" + rest + " --tls-ca " + File("ca.pem") +
                              mutual);
  EXPECT_EQ(infer.exit_code, 0) << infer.output;
  EXPECT_NE(infer.output.find("model digits-mlp"), std::string::npos) << infer.output;
  CommandResult models = Shell(SommBinary() + " models -i grpc -u https://localhost:" + grpc +
                               " --tls-ca " + File("ca.pem") + mutual);
  EXPECT_EQ(models.exit_code, 0) << models.output;
  EXPECT_NE(models.output.find("digits-mlp"), std::string::npos) << models.output;

  // somm bench too, a short closed loop on each wire: HTTPS, then TLS gRPC.
  for (const std::string& wire : {"-i http -u https://localhost:" + rest,
                                  "-i grpc -u localhost:" + grpc}) {
    CommandResult bench = Shell(SommBinary() + " bench digits-mlp " + wire + " --tls-ca " +
                                File("ca.pem") + mutual + " --input " + Digit() +
                                " --concurrency 2 --warmup 200ms --window 500ms --max-windows 3");
    EXPECT_EQ(bench.exit_code, 0) << wire << ": " << bench.output;
    EXPECT_NE(bench.output.find("p50"), std::string::npos) << wire << ": " << bench.output;
  }
}

// The cluster: every process presents server.pem and requires a certificate
// of ca.pem, so a router reaches its workers and the controller only over
// mutual TLS, and a client with no certificate reaches no worker.
TEST(TlsClusterE2eTest, ProcessesAuthenticateEachOtherWithMutualTls) {
  const std::string certs =
      (fs::temp_directory_path() / ("somm-tls-cluster-" + std::to_string(getpid()))).string();
  ASSERT_EQ(std::system((std::string(SOMM_SOURCE_DIR) + "/scripts/make-certs " + certs +
                         " >/dev/null").c_str()), 0);
  const std::string repo = MakeTestRepository(DemoRepository(), "tls-cluster");
  ClusterOptions options;
  options.tls_dir = certs;
  ClusterProcesses cluster(SommBinary(), repo, options);
  ASSERT_TRUE(cluster.ok()) << cluster.error() << "\n" << cluster.Logs();

  // A query through the router is answered by a worker it reached over TLS.
  const std::string mutual = "--cacert " + certs + "/ca.pem --cert " + certs +
                             "/client.pem --key " + certs + "/client.key ";
  CommandResult infer = Curl(mutual + "-d @" + DemoRepository() + "/.examples/digit_3.json https://localhost:" +
                   std::to_string(cluster.http_port()) + "/v2/models/digits-mlp/infer");
  EXPECT_EQ(infer.exit_code, 0) << infer.output;
  EXPECT_TRUE(infer.output.ends_with("\n200")) << infer.output << "\n" << cluster.Logs();

  // A worker's service takes no plaintext caller and no caller without a
  // certificate of the cluster's CA.
  ASSERT_FALSE(cluster.workers().empty());
  const std::string worker = "localhost:" + std::to_string(cluster.workers()[0].port);
  auto plain = grpc::CreateChannel(worker, grpc::InsecureChannelCredentials());
  EXPECT_FALSE(plain->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(3)));
  grpc::SslCredentialsOptions ca_only;
  FILE* f = std::fopen((certs + "/ca.pem").c_str(), "rb");
  ASSERT_NE(f, nullptr);
  char buffer[8192];
  ca_only.pem_root_certs.assign(buffer, std::fread(buffer, 1, sizeof(buffer), f));
  std::fclose(f);
  auto no_cert = grpc::CreateChannel(worker, grpc::SslCredentials(ca_only));
  EXPECT_FALSE(
      no_cert->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(3)));
  // A user's certificate from the same CA (client.pem) reaches the routers
  // only: a worker answers it UNAUTHENTICATED, and the cluster's own
  // certificate (server.pem) gets through. It used to reach Execute, which
  // runs any model, another tenant's private ones included.
  auto report_with = [&](const std::string& pair) {
    grpc::SslCredentialsOptions o = ca_only;
    o.pem_cert_chain = ReadText(certs + "/" + pair + ".pem");
    o.pem_private_key = ReadText(certs + "/" + pair + ".key");
    auto stub = somm::cluster::SommWorker::NewStub(grpc::CreateChannel(worker, grpc::SslCredentials(o)));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    somm::cluster::ReportResponse out;
    return stub->Report(&ctx, somm::cluster::ReportRequest(), &out);
  };
  const grpc::Status user = report_with("client");
  EXPECT_EQ(user.error_code(), grpc::StatusCode::UNAUTHENTICATED) << user.error_message();
  EXPECT_NE(user.error_message().find("cluster's own processes"), std::string::npos)
      << user.error_message();
  const grpc::Status peer = report_with("server");
  EXPECT_TRUE(peer.ok()) << peer.error_message();
  EXPECT_EQ(cluster.Terminate(), 0);
  fs::remove_all(repo);
  fs::remove_all(certs);
}

// A worker or a controller beyond loopback needs mutual TLS and a metrics
// key file: with the shipped manifests they listened on every address in
// plaintext, so anyone who reached one could load and run any model.
TEST(TlsClusterE2eTest, WorkersAndControllersRefuseToListenBeyondLoopbackWithoutMutualTls) {
  const std::string certs =
      (fs::temp_directory_path() / ("somm-tls-refuse-" + std::to_string(getpid()))).string();
  ASSERT_EQ(std::system((std::string(SOMM_SOURCE_DIR) + "/scripts/make-certs " + certs +
                         " >/dev/null").c_str()), 0);
  const std::string keys = certs + "/keys";
  std::system(("touch " + keys).c_str());
  const std::string mtls = " --tls-cert " + certs + "/server.pem --tls-key " + certs +
                           "/server.key --tls-client-ca " + certs + "/ca.pem";
  for (const char* role : {"worker", "controller"}) {
    const std::string base = SommBinary() + " " + role + " --model-repository " + certs +
                             " --redis 127.0.0.1:1 --address 0.0.0.0 --check-args";
    CommandResult plain = Shell(base);
    EXPECT_EQ(plain.exit_code, 2) << role << ": " << plain.output;
    EXPECT_NE(plain.output.find("without mutual TLS"), std::string::npos) << plain.output;
    EXPECT_NE(plain.output.find("scripts/make-certs"), std::string::npos) << plain.output;
    // Server TLS alone is not enough: callers must be the cluster's.
    CommandResult one_way = Shell(base + " --tls-cert " + certs + "/server.pem --tls-key " + certs +
                                  "/server.key");
    EXPECT_NE(one_way.exit_code, 0) << role << ": " << one_way.output;
    CommandResult no_keys = Shell(base + mtls);
    EXPECT_EQ(no_keys.exit_code, 2) << role << ": " << no_keys.output;
    EXPECT_NE(no_keys.output.find("--keys-file"), std::string::npos) << no_keys.output;
    CommandResult ok = Shell(base + mtls + " --keys-file " + keys);
    EXPECT_EQ(ok.exit_code, 0) << role << ": " << ok.output;
    EXPECT_NE(ok.output.find("ok"), std::string::npos) << ok.output;
    // Loopback, as scripts/cluster --plaintext-cluster and the tests run, stays open.
    CommandResult loopback = Shell(SommBinary() + " " + role + " --model-repository " + certs +
                                   " --redis 127.0.0.1:1 --check-args");
    EXPECT_EQ(loopback.exit_code, 0) << role << ": " << loopback.output;
  }
  fs::remove_all(certs);
}

}  // namespace
}  // namespace somm::testing
