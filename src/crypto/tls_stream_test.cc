// TlsStream against a blocking OpenSSL client over a socket pair: the
// handshake on a non-blocking socket, mutual TLS required, and a plaintext
// client told apart. Certificates come from scripts/make-certs.
#include "crypto/tls_stream.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

namespace somm::crypto {
namespace {

namespace fs = std::filesystem;

class TlsStreamTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() /
                        ("somm-tls-test-" + std::to_string(getpid())));
    fs::remove_all(*dir_);
    for (const char* name : {"a", "b"}) {
      const std::string command = std::string(SOMM_SOURCE_DIR) + "/scripts/make-certs " +
                                  (*dir_ / name).string() + " >/dev/null";
      ASSERT_EQ(std::system(command.c_str()), 0) << command;
    }
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }
  static std::string File(const char* ca, const char* name) { return (*dir_ / ca / name).string(); }

  TlsServerFiles ServerFiles(bool mutual) {
    return {File("a", "server.pem"), File("a", "server.key"), mutual ? File("a", "ca.pem") : ""};
  }

  void SetUp() override {
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds_), 0);
    fcntl(fds_[0], F_SETFL, O_NONBLOCK);
  }
  void TearDown() override {
    close(fds_[0]);
    if (fds_[1] >= 0) close(fds_[1]);
  }

  // Reads from the server stream, waiting on the socket as it asks, until
  // data, the end, an error or a plaintext client.
  static ssize_t PumpRead(TlsStream& stream, int fd, std::string* out) {
    char buffer[4096];
    for (int i = 0; i < 1000; ++i) {
      const ssize_t n = stream.Read(buffer, sizeof(buffer));
      if (n > 0) out->append(buffer, static_cast<size_t>(n));
      if (n != TlsStream::kWantRead && n != TlsStream::kWantWrite) return n;
      pollfd p{fd, static_cast<short>(n == TlsStream::kWantRead ? POLLIN : POLLOUT), 0};
      poll(&p, 1, 5000);
    }
    return TlsStream::kError;
  }

  // A blocking client on fds_[1]: trusts `ca`, presents `cert` if given,
  // sends `message` and reads the reply into *reply.
  std::thread Client(std::string ca, std::string cert, std::string key, std::string message,
                     std::string* reply) {
    return std::thread([=, fd = fds_[1]] {
      SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
      SSL_CTX_load_verify_locations(ctx, ca.c_str(), nullptr);
      SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
      if (!cert.empty()) {
        SSL_CTX_use_certificate_chain_file(ctx, cert.c_str());
        SSL_CTX_use_PrivateKey_file(ctx, key.c_str(), SSL_FILETYPE_PEM);
      }
      SSL* ssl = SSL_new(ctx);
      SSL_set_fd(ssl, fd);
      SSL_set_tlsext_host_name(ssl, "localhost");
      if (SSL_connect(ssl) == 1 && SSL_write(ssl, message.data(), message.size()) > 0) {
        char buffer[256];
        const int n = SSL_read(ssl, buffer, sizeof(buffer));
        if (n > 0) reply->assign(buffer, n);
      }
      SSL_free(ssl);
      SSL_CTX_free(ctx);
      shutdown(fd, SHUT_RDWR);
    });
  }

  int fds_[2] = {-1, -1};
  static fs::path* dir_;
};

fs::path* TlsStreamTest::dir_ = nullptr;

TEST_F(TlsStreamTest, CreateNamesTheFileThatIsWrong) {
  TlsServerFiles files = ServerFiles(false);
  files.cert_file = (*dir_ / "missing.pem").string();
  auto missing = TlsServerContext::Create(files);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("--tls-cert"), std::string::npos);

  files = ServerFiles(false);
  files.key_file = File("b", "server.key");  // another pair's key
  auto mismatched = TlsServerContext::Create(files);
  ASSERT_FALSE(mismatched.ok());
  EXPECT_NE(mismatched.status().message().find("does not match"), std::string::npos);

  files = ServerFiles(false);
  files.key_file.clear();
  EXPECT_FALSE(TlsServerContext::Create(files).ok());
}

TEST_F(TlsStreamTest, MutualTlsExchangesData) {
  auto context = TlsServerContext::Create(ServerFiles(true));
  ASSERT_TRUE(context.ok()) << context.status().message();
  EXPECT_TRUE((*context)->requires_client_certificate());
  auto stream = (*context)->NewStream(fds_[0]);
  std::string reply;
  std::thread client =
      Client(File("a", "ca.pem"), File("a", "client.pem"), File("a", "client.key"), "ping", &reply);
  std::string got;
  EXPECT_EQ(PumpRead(*stream, fds_[0], &got), 4) << stream->error();
  EXPECT_EQ(got, "ping");
  EXPECT_TRUE(stream->handshake_done());
  EXPECT_EQ(stream->Write("pong"), 4);
  client.join();
  EXPECT_EQ(reply, "pong");
}

TEST_F(TlsStreamTest, MutualTlsRefusesAClientWithoutACertificate) {
  auto context = TlsServerContext::Create(ServerFiles(true));
  ASSERT_TRUE(context.ok());
  auto stream = (*context)->NewStream(fds_[0]);
  std::string reply;
  std::thread client = Client(File("a", "ca.pem"), "", "", "ping", &reply);
  std::string got;
  EXPECT_EQ(PumpRead(*stream, fds_[0], &got), TlsStream::kError);
  EXPECT_NE(stream->error().find("certificate"), std::string::npos) << stream->error();
  client.join();
  EXPECT_EQ(reply, "");
}

TEST_F(TlsStreamTest, MutualTlsRefusesACertificateOfAnotherCa) {
  auto context = TlsServerContext::Create(ServerFiles(true));
  ASSERT_TRUE(context.ok());
  auto stream = (*context)->NewStream(fds_[0]);
  std::string reply;
  std::thread client =
      Client(File("a", "ca.pem"), File("b", "client.pem"), File("b", "client.key"), "ping", &reply);
  std::string got;
  EXPECT_EQ(PumpRead(*stream, fds_[0], &got), TlsStream::kError);
  EXPECT_NE(stream->error().find("certificate"), std::string::npos) << stream->error();
  client.join();
  EXPECT_EQ(reply, "");
}

TEST_F(TlsStreamTest, PlaintextClientIsNotTls) {
  auto context = TlsServerContext::Create(ServerFiles(false));
  ASSERT_TRUE(context.ok());
  auto stream = (*context)->NewStream(fds_[0]);
  const std::string request = "GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(write(fds_[1], request.data(), request.size()), static_cast<ssize_t>(request.size()));
  std::string got;
  EXPECT_EQ(PumpRead(*stream, fds_[0], &got), TlsStream::kNotTls);
  // Peeked, not consumed: the server can still read and answer it plainly.
  char first = 0;
  EXPECT_EQ(read(fds_[0], &first, 1), 1);
  EXPECT_EQ(first, 'G');
}

}  // namespace
}  // namespace somm::crypto
