// Who calls is checked before the body costs anything (security review): a
// request without a valid key is refused as soon as its head is read, its
// body never read, on a raw socket that declares 60 MiB and sends none of it.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "frontend/http/http_frontend.h"
#include "api/testing/holding_inference_server.h"
#include "serving/testing/one_key_guard.h"
#include "transport/http/testing/raw_head.h"

namespace somm {
namespace {

using testing::OneKeyGuard;

class HttpGuardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HttpFrontendOptions options;
    options.address = "127.0.0.1";
    options.port = 0;
    options.guard = &guard_;
    options.max_body_bytes = 64 << 20;
    auto frontend = HttpFrontend::Start(server_, options);
    ASSERT_TRUE(frontend.ok()) << frontend.status().ToString();
    frontend_ = std::move(frontend).value();
  }
  // Sends `head` on a new connection and returns what arrives within
  // `wait_ms` ("" = nothing).
  std::string SendHead(const std::string& head, int wait_ms) {
    return testing::SendHead(frontend_->port(), head, wait_ms);
  }

  testing::HoldingInferenceServer server_;
  OneKeyGuard guard_;
  std::unique_ptr<HttpFrontend> frontend_;
};

TEST_F(HttpGuardTest, AnUnknownCallerIsRefusedBeforeItsBodyIsRead) {
  for (const char* path : {"/v2/repository/models/big/register", "/v2/models/echo/infer",
                           "/v2/somm/batch"}) {
    const auto start = std::chrono::steady_clock::now();
    const std::string answer = SendHead(std::string("POST ") + path +
                                            " HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                            "Content-Length: 62914560\r\n\r\n",
                                        5000);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(answer.rfind("HTTP/1.1 401", 0), 0u) << path << ": " << answer;
    EXPECT_NE(answer.find("WWW-Authenticate: Bearer"), std::string::npos) << answer;
    EXPECT_LT(ms, 1000) << path << ": answered only after waiting for the body";
  }
  EXPECT_EQ(guard_.admitted.load(), 0) << "nothing reached the full admission";
}

TEST_F(HttpGuardTest, AKnownCallersBodyIsReadAsBefore) {
  // With the key, the server waits for the 60 MiB it was promised.
  const std::string answer = SendHead(
      "POST /v2/models/echo/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer good\r\n"
      "Content-Length: 62914560\r\n\r\n",
      300);
  EXPECT_EQ(answer, "");
  // Health probes carry no key and are answered.
  const std::string health =
      SendHead("GET /v2/health/live HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 5000);
  EXPECT_EQ(health.rfind("HTTP/1.1 200", 0), 0u) << health;
}

TEST_F(HttpGuardTest, TheKeyIsVerifiedOncePerCall) {
  // The head check's verified caller is carried into the full admission:
  // a query with a body is verified there only, one without (GET) in the
  // admission only.
  const std::string body = R"({"inputs":[{"name":"IN0","datatype":"FP32","shape":[1,4],)"
                           R"("data":[1,2,3,4]}]})";
  std::string answer;
  std::thread client([&] {
    answer = SendHead(
        "POST /v2/models/echo/infer HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        "Authorization: Bearer good\r\nContent-Length: " +
            std::to_string(body.size()) + "\r\n\r\n" + body,
        5000);
  });
  ASSERT_TRUE(server_.WaitHeld(1));
  server_.Release();
  client.join();
  EXPECT_EQ(answer.rfind("HTTP/1.1 200", 0), 0u) << answer;
  EXPECT_EQ(guard_.admitted.load(), 1);
  EXPECT_EQ(guard_.authenticated.load(), 1) << "a query verified its key twice";
  answer = SendHead(
      "GET /v2/models/echo HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer good\r\n\r\n",
      5000);
  EXPECT_EQ(answer.rfind("HTTP/1.1 200", 0), 0u) << answer;
  EXPECT_EQ(guard_.authenticated.load(), 2);
}

// This process's resident set, in MiB.
double RssMib() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024;
  }
  return 0;
}

TEST_F(HttpGuardTest, ARefusedBodyThatComesAnywayIsDroppedAsItArrives) {
  // A client that sends its 60 MiB body without waiting: the 401 and the
  // close are on their way, and what arrives meanwhile is not gathered.
  const std::string body(60 << 20, 'x');
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(frontend_->port()));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const double before = RssMib();
  const std::string head =
      "POST /v2/models/echo/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n";
  ASSERT_EQ(send(fd, head.data(), head.size(), MSG_NOSIGNAL), static_cast<ssize_t>(head.size()));
  size_t sent = 0;
  while (sent < body.size()) {
    const ssize_t n = send(fd, body.data() + sent, body.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server closed: what it had was dropped
    sent += static_cast<size_t>(n);
  }
  const double grown = RssMib() - before;
  char buf[256] = {};
  EXPECT_GT(read(fd, buf, sizeof buf - 1), 0);
  EXPECT_EQ(std::string(buf).rfind("HTTP/1.1 401", 0), 0u) << buf;
  close(fd);
  EXPECT_LT(grown, 16) << "the server kept " << grown << " MiB of a refused body ("
                       << (sent >> 20) << " MiB sent)";
}

}  // namespace
}  // namespace somm
