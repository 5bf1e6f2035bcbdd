// The load generator's HTTP/1.1 connection: head parsing alone, then whole
// exchanges against a real cpp-httplib server on loopback (keep-alive,
// chunked bodies, servers that close, servers that are not there), then the
// REST BenchClient that sends through it.
#include "loadgen/http_wire.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "loadgen/bench_client.h"

namespace somm::loadgen {
namespace {

TEST(ParseResponseHeadTest, WaitsForTheBlankLine) {
  auto head = ParseResponseHead("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n");
  ASSERT_TRUE(head.ok());
  EXPECT_FALSE(head->has_value());
}

TEST(ParseResponseHeadTest, ReadsStatusLengthsAndConnectionWhateverTheCase) {
  const std::string bytes =
      "HTTP/1.1 429 Too Many Requests\r\ncontent-LENGTH:  12 \r\nConnection: Close\r\n"
      "inference-header-content-length: 7\r\n\r\nbody follows";
  auto head = ParseResponseHead(bytes);
  ASSERT_TRUE(head.ok()) << head.status().message();
  ASSERT_TRUE(head->has_value());
  EXPECT_EQ((*head)->status, 429);
  EXPECT_EQ((*head)->content_length, 12u);
  EXPECT_EQ((*head)->json_size, 7u);
  EXPECT_TRUE((*head)->close);
  EXPECT_FALSE((*head)->chunked);
  EXPECT_EQ(bytes.substr((*head)->head_bytes), "body follows");
}

TEST(ParseResponseHeadTest, ChunkedAndNoLength) {
  auto head = ParseResponseHead("HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
  ASSERT_TRUE(head.ok());
  ASSERT_TRUE(head->has_value());
  EXPECT_TRUE((*head)->chunked);
  EXPECT_FALSE((*head)->content_length.has_value());
}

TEST(ParseResponseHeadTest, NamesWhatIsMalformed) {
  auto not_http = ParseResponseHead("SSH-2.0-OpenSSH\r\n\r\n");
  ASSERT_FALSE(not_http.ok());
  EXPECT_NE(not_http.status().message().find("HTTP/1.x status line"), std::string::npos);
  auto bad_length = ParseResponseHead("HTTP/1.1 200 OK\r\nContent-Length: -4\r\n\r\n");
  ASSERT_FALSE(bad_length.ok());
  EXPECT_NE(bad_length.status().message().find("Content-Length '-4'"), std::string::npos);
  auto huge = ParseResponseHead("HTTP/1.1 200 OK\r\nX: " + std::string(70000, 'a'));
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("head is over"), std::string::npos);
}

TEST(HttpPostBytesTest, JsonAndBinaryRequests) {
  EXPECT_EQ(HttpPostBytes("h:1", "/v2/models/m/infer", "{}", std::nullopt),
            "POST /v2/models/m/infer HTTP/1.1\r\nHost: h:1\r\nConnection: keep-alive\r\n"
            "Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}");
  const std::string binary = HttpPostBytes("h:1", "/p", "{}xyz", 2);
  EXPECT_NE(binary.find("Content-Type: application/octet-stream\r\n"), std::string::npos);
  EXPECT_NE(binary.find("Inference-Header-Content-Length: 2\r\n"), std::string::npos);
  EXPECT_NE(binary.find("Content-Length: 5\r\n\r\n{}xyz"), std::string::npos);
}

TEST(HttpPostBytesTest, AKeyTravelsAsABearerToken) {
  EXPECT_EQ(HttpPostBytes("h:1", "/p", "{}", std::nullopt, "k3y"),
            "POST /p HTTP/1.1\r\nHost: h:1\r\nConnection: keep-alive\r\n"
            "Content-Type: application/json\r\nAuthorization: Bearer k3y\r\n"
            "Content-Length: 2\r\n\r\n{}");
}

// A real HTTP server on a free loopback port, on its own thread.
class LoopbackServer {
 public:
  explicit LoopbackServer(size_t keep_alive_max_count = 100) {
    server.set_keep_alive_max_count(keep_alive_max_count);
    server.Post("/echo", [this](const httplib::Request& req, httplib::Response& res) {
      ++posts;
      res.set_content("echo:" + req.body, "text/plain");
    });
    server.Post("/chunked", [](const httplib::Request&, httplib::Response& res) {
      res.set_chunked_content_provider("text/plain", [](size_t offset, httplib::DataSink& sink) {
        if (offset == 0) {
          sink.write("hello, ", 7);
          sink.write("chunks", 6);
        } else {
          sink.done();
        }
        return true;
      });
    });
    server.Post("/close", [](const httplib::Request&, httplib::Response& res) {
      res.set_header("Connection", "close");
      res.set_content("bye", "text/plain");
    });
    port = server.bind_to_any_port("127.0.0.1");
    thread = std::thread([this] { server.listen_after_bind(); });
    while (!server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~LoopbackServer() {
    server.stop();
    thread.join();
  }
  httplib::Server server;
  std::thread thread;
  std::atomic<int> posts{0};
  int port = 0;
};

TEST(HttpWireConnectionTest, KeepsOneConnectionAcrossExchanges) {
  LoopbackServer server;
  HttpWireConnection wire("127.0.0.1", server.port);
  const std::string request = HttpPostBytes("127.0.0.1", "/echo", "abc", std::nullopt);
  for (int i = 0; i < 5; ++i) {
    auto reply = wire.Exchange(request);
    ASSERT_TRUE(reply.ok()) << reply.status().message();
    EXPECT_EQ(reply->status, 200);
    EXPECT_EQ(reply->body, "echo:abc");
  }
  EXPECT_EQ(server.posts.load(), 5);
}

TEST(HttpWireConnectionTest, ReadsChunkedBodies) {
  LoopbackServer server;
  HttpWireConnection wire("127.0.0.1", server.port);
  for (int i = 0; i < 2; ++i) {  // the second proves the first left nothing behind
    auto reply = wire.Exchange(HttpPostBytes("127.0.0.1", "/chunked", "", std::nullopt));
    ASSERT_TRUE(reply.ok()) << reply.status().message();
    EXPECT_EQ(reply->body, "hello, chunks");
  }
}

TEST(HttpWireConnectionTest, ReconnectsAfterTheServerCloses) {
  // One request per connection: the server closes after every answer, on
  // its own (keep-alive count) or because the answer said so.
  LoopbackServer server(/*keep_alive_max_count=*/1);
  HttpWireConnection wire("127.0.0.1", server.port);
  for (const char* path : {"/echo", "/close", "/echo", "/echo"}) {
    auto reply = wire.Exchange(HttpPostBytes("127.0.0.1", path, "x", std::nullopt));
    ASSERT_TRUE(reply.ok()) << path << ": " << reply.status().message();
    EXPECT_EQ(reply->status, 200);
  }
  EXPECT_EQ(server.posts.load(), 3);
}

TEST(HttpWireConnectionTest, NoServerIsUnavailable) {
  int port = 0;
  {
    LoopbackServer gone;
    port = gone.port;
  }
  HttpWireConnection wire("127.0.0.1", port);
  auto reply = wire.Exchange(HttpPostBytes("127.0.0.1", "/echo", "x", std::nullopt));
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(reply.status().message().find("cannot connect"), std::string::npos);
}

// The REST BenchClient over the wire: an OIP answer decodes, an OIP error
// keeps its code and message, and a request is encoded once however often
// it is sent.
TEST(HttpBenchClientTest, DecodesAnswersAndErrors) {
  httplib::Server server;
  std::atomic<int> infers{0};
  std::string first_body;
  server.Get("/v2/health/ready", [](const httplib::Request&, httplib::Response& res) {
    res.status = 200;
  });
  server.Post("/v2/models/digits/infer", [&](const httplib::Request& req, httplib::Response& res) {
    if (infers++ == 0) first_body = req.body;
    EXPECT_EQ(req.body, first_body);
    res.set_content(
        R"({"model_name":"digits","parameters":{"somm_server_us":120},)"
        R"("outputs":[{"name":"y","datatype":"FP32","shape":[1],"data":[0.5]}]})",
        "application/json");
  });
  server.Post("/v2/models/busy/infer", [](const httplib::Request&, httplib::Response& res) {
    res.status = 429;
    res.set_content(R"({"error":"queue of busy is full"})", "application/json");
  });
  const int port = server.bind_to_any_port("127.0.0.1");
  std::thread thread([&] { server.listen_after_bind(); });
  while (!server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));

  auto factory = MakeOipClientFactory({"127.0.0.1:" + std::to_string(port), "http", false});
  ASSERT_TRUE(factory.ok());
  auto client = (*factory)->NewClient();
  ASSERT_TRUE(client.ok()) << client.status().message();
  InferenceRequest request;
  request.model_name = "digits";
  Tensor x;
  x.name = "x";
  x.datatype = DataType::kFp32;
  x.shape = {1, 2};
  const float values[] = {1.0f, 2.0f};
  x.data.assign(reinterpret_cast<const char*>(values), sizeof(values));
  request.inputs.push_back(x);
  for (int i = 0; i < 3; ++i) {
    auto response = (*client)->Infer(request);
    ASSERT_TRUE(response.ok()) << response.status().message();
    ASSERT_EQ(response->outputs.size(), 1u);
    EXPECT_EQ(response->outputs[0].name, "y");
    EXPECT_TRUE(response->parameters.contains("somm_server_us"));
  }
  EXPECT_EQ(infers.load(), 3);
  InferenceRequest busy = request;
  busy.model_name = "busy";
  auto refused = (*client)->Infer(busy);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(refused.status().message(), "queue of busy is full");
  client->reset();  // closes its connections, so the server need not wait them out
  server.stop();
  thread.join();
}

}  // namespace
}  // namespace somm::loadgen
