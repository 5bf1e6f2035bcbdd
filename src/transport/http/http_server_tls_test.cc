// http::Server with ServerOptions::tls, driven by the curl command line (an
// independent TLS client): HTTPS with the CA, large bodies both ways, answers
// from another thread, keep-alive, mutual TLS, and a plaintext client told
// to use https. Certificates come from scripts/make-certs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <thread>

#include "crypto/tls_stream.h"
#include "transport/http/http_server.h"

namespace somm::http {
namespace {

namespace fs = std::filesystem;

struct CurlResult {
  int exit_code = -1;
  std::string output;
};

// Runs curl with `arguments`; -w appends the HTTP status on its own line.
CurlResult Curl(const std::string& arguments) {
  const std::string command = "curl -sS --max-time 20 -w '\\n%{http_code}' " + arguments + " 2>&1";
  CurlResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[65536];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.output.append(buffer, n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

std::string Slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class HttpServerTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() /
                        ("somm-http-tls-test-" + std::to_string(getpid())));
    fs::remove_all(*dir_);
    for (const char* name : {"a", "b"}) {
      const std::string command = std::string(SOMM_SOURCE_DIR) + "/scripts/make-certs " +
                                  (*dir_ / name).string() + " >/dev/null";
      ASSERT_EQ(std::system(command.c_str()), 0) << command;
    }
    std::ofstream(*dir_ / "body.bin") << std::string(3 << 20, 'x');
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }
  static std::string File(const char* ca, const char* name) { return (*dir_ / ca / name).string(); }

  void Start(bool mutual) {
    auto context = crypto::TlsServerContext::Create(
        {File("a", "server.pem"), File("a", "server.key"), mutual ? File("a", "ca.pem") : ""});
    ASSERT_TRUE(context.ok()) << context.status().message();
    ServerOptions options;
    options.address = "127.0.0.1";
    options.tls = *context;
    auto server = Server::Start(
        options,
        [](Request request, Responder responder) {
          Response response;
          if (request.head.target == "/big") {
            response.body = std::string(2 << 20, 'b');
          } else if (request.head.target == "/later") {
            std::thread([r = std::move(responder)]() mutable {
              Response later;
              later.body = "later";
              r.Send(std::move(later));
            }).detach();
            return;
          } else {
            response.body = request.head.target + " " + std::to_string(request.body.size());
          }
          responder.Send(std::move(response));
        },
        [](int status, std::string_view message) {
          Response r;
          r.status = status;
          r.body = "error: " + std::string(message);
          return r;
        });
    ASSERT_TRUE(server.ok()) << server.status().message();
    server_ = std::move(*server);
  }

  std::string Url(const std::string& scheme, const std::string& path) {
    return scheme + "://localhost:" + std::to_string(server_->port()) + path;
  }
  std::string CaArg() { return "--cacert " + File("a", "ca.pem") + " "; }

  std::unique_ptr<Server> server_;
  static fs::path* dir_;
};

fs::path* HttpServerTlsTest::dir_ = nullptr;

TEST_F(HttpServerTlsTest, ServesHttpsWithTheCa) {
  Start(false);
  CurlResult small = Curl(CaArg() + Url("https", "/hello"));
  EXPECT_EQ(small.exit_code, 0) << small.output;
  EXPECT_EQ(small.output, "/hello 0\n200");

  // Bodies of many TLS records each way, and an answer from another thread,
  // on one kept-alive connection (curl reuses it for the URLs it is given).
  // curl pairs each -o with the URL of the same rank.
  CurlResult many = Curl(CaArg() + "--data-binary @" + (*dir_ / "body.bin").string() + " " +
                         Url("https", "/upload") + " " + Url("https", "/later") + " " +
                         Url("https", "/big") + " -o " + (*dir_ / "upload.out").string() +
                         " -o " + (*dir_ / "later.out").string() + " -o " +
                         (*dir_ / "big.out").string());
  EXPECT_EQ(many.exit_code, 0) << many.output;
  EXPECT_EQ(Slurp(*dir_ / "upload.out"), "/upload 3145728");
  EXPECT_EQ(Slurp(*dir_ / "later.out"), "later");
  EXPECT_EQ(fs::file_size(*dir_ / "big.out"), size_t{2} << 20);
}

// TLS 1.2 offers ECDHE with AEAD ciphers only: a client that offers only a
// CBC suite (or no forward secrecy) gets no handshake.
TEST_F(HttpServerTlsTest, Tls12OffersOnlyForwardSecretAeadCiphers) {
  Start(false);
  for (const char* weak : {"ECDHE-ECDSA-AES128-SHA", "ECDHE-ECDSA-AES256-SHA384", "AES128-GCM-SHA256"}) {
    CurlResult r = Curl(CaArg() + "--tls-max 1.2 --ciphers " + weak + " " + Url("https", "/hello"));
    EXPECT_NE(r.exit_code, 0) << weak << ": " << r.output;
  }
  CurlResult aead =
      Curl(CaArg() + "--tls-max 1.2 --ciphers ECDHE-ECDSA-AES128-GCM-SHA256 " + Url("https", "/hello"));
  EXPECT_EQ(aead.exit_code, 0) << aead.output;
  EXPECT_EQ(aead.output, "/hello 0\n200");
}

TEST_F(HttpServerTlsTest, RefusesAClientThatDoesNotTrustItsCa) {
  Start(false);
  CurlResult wrong_ca = Curl("--cacert " + File("b", "ca.pem") + " " + Url("https", "/hello"));
  EXPECT_NE(wrong_ca.exit_code, 0);
  EXPECT_NE(wrong_ca.output.find("certificate"), std::string::npos) << wrong_ca.output;
}

TEST_F(HttpServerTlsTest, TellsAPlaintextClientToUseHttps) {
  Start(false);
  CurlResult plain = Curl(Url("http", "/hello"));
  EXPECT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_NE(plain.output.find("https://"), std::string::npos) << plain.output;
  EXPECT_NE(plain.output.find("400"), std::string::npos) << plain.output;
  // The server still serves TLS clients afterwards.
  EXPECT_EQ(Curl(CaArg() + Url("https", "/after")).output, "/after 0\n200");
}

TEST_F(HttpServerTlsTest, MutualTlsNeedsAClientCertificateOfItsCa) {
  Start(true);
  CurlResult without = Curl(CaArg() + Url("https", "/hello"));
  EXPECT_NE(without.exit_code, 0) << without.output;
  CurlResult foreign = Curl(CaArg() + "--cert " + File("b", "client.pem") + " --key " +
                            File("b", "client.key") + " " + Url("https", "/hello"));
  EXPECT_NE(foreign.exit_code, 0) << foreign.output;
  CurlResult with = Curl(CaArg() + "--cert " + File("a", "client.pem") + " --key " +
                         File("a", "client.key") + " " + Url("https", "/hello"));
  EXPECT_EQ(with.exit_code, 0) << with.output;
  EXPECT_EQ(with.output, "/hello 0\n200");
}

}  // namespace
}  // namespace somm::http
