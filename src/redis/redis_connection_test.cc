// RedisConnection and the store over it against real redis-servers that ask
// for a password (--requirepass, and an ACL user), select a database, and
// speak TLS only (--tls-port). Certificates come from scripts/make-certs.
#include "redis/redis_connection.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include "cluster/cluster_state.h"
#include "redis/redis_cluster_state_store.h"
#include "redis/redis_test_server.h"

namespace somm::redis {
namespace {

using namespace std::chrono_literals;
using testing::FreePort;
using testing::RedisServer;
namespace fs = std::filesystem;

// Distinctive, so that a message that leaks them is caught.
const std::string kPassword = "Tr0ub4dor-default-" + std::to_string(getpid());
const std::string kAlicePassword = "c0rrect-h0rse-alice-" + std::to_string(getpid());

StatusOr<RedisEndpoint> Endpoint(const std::string& url, const std::string& password) {
  std::map<std::string, std::string> vars;
  if (!password.empty()) vars["SOMM_REDIS_PASSWORD"] = password;
  auto e = ParseRedisEndpoint(url, [&](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
  if (e.ok()) e->timeout = 500ms;
  return e;
}

RedisEndpoint MustEndpoint(const std::string& url, const std::string& password) {
  auto e = Endpoint(url, password);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? *e : RedisEndpoint{};
}

// Polls `done` until it holds; false after 10 s.
bool Eventually(const std::function<bool()>& done) {
  for (int i = 0; i < 1000; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

cluster::WorkerReport Report(const std::string& worker, int64_t sequence) {
  cluster::WorkerReport r;
  r.worker = worker;
  r.incarnation = "inc-1";
  r.address = "127.0.0.1:9001";
  r.sequence = sequence;
  r.devices.push_back(cluster::DeviceState{"cpu", int64_t{1} << 30, 0, 2, worker});
  return r;
}

StatusOr<std::unique_ptr<RedisClusterStateStore>> OpenStore(const RedisEndpoint& endpoint,
                                                            bool watch = true) {
  RedisStoreOptions o;
  o.endpoint = endpoint;
  o.repoll = 100ms;
  o.watch = watch;
  return RedisClusterStateStore::Open(o);
}

// A store writes a report and another store's view shows it (over its
// watch connection's SUBSCRIBE and its read connection); `then` runs while
// both are open.
void ExpectStoresWork(const RedisEndpoint& endpoint, const std::function<void()>& then = {}) {
  auto writer = OpenStore(endpoint, /*watch=*/false);
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  auto reader = OpenStore(endpoint);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  ASSERT_TRUE((*writer)->WriteWorker(Report("w1", 1)).ok());
  EXPECT_TRUE(Eventually([&] { return (*reader)->Workers().count("w1") == 1; }));
  if (then) then();
}

class RedisAuthTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { signal(SIGPIPE, SIG_IGN); }
  void SetUp() override {
    port_ = FreePort();
    server_ = std::make_unique<RedisServer>(
        port_, std::vector<std::string>{"--requirepass", kPassword, "--user", "alice", "on",
                                        ">" + kAlicePassword, "~*", "&*", "+@all"});
    ASSERT_TRUE(RedisServer::WaitReady(MustEndpoint(Url(), kPassword)))
        << "redis-server did not start (is it installed? scripts/setup)";
  }
  std::string Url(const std::string& user = "", const std::string& db = "") const {
    return "redis://" + (user.empty() ? "" : user + "@") + "127.0.0.1:" + std::to_string(port_) +
           db;
  }
  // Refused, with `code`, naming the endpoint and no password.
  void ExpectOpenRefused(const RedisEndpoint& endpoint, StatusCode code, const std::string& says) {
    auto store = OpenStore(endpoint);
    ASSERT_FALSE(store.ok());
    const std::string message = store.status().message();
    EXPECT_EQ(store.status().code(), code) << message;
    EXPECT_NE(message.find("127.0.0.1:" + std::to_string(port_)), std::string::npos) << message;
    EXPECT_NE(message.find(says), std::string::npos) << message;
    for (const std::string& secret : {kPassword, kAlicePassword, std::string("wrong-pass")}) {
      EXPECT_EQ(message.find(secret), std::string::npos) << message;
    }
  }
  int port_ = 0;
  std::unique_ptr<RedisServer> server_;
};

TEST_F(RedisAuthTest, StoreWithThePasswordWorksEndToEnd) {
  RedisEndpoint endpoint = MustEndpoint(Url(), kPassword);
  endpoint.client_name = "router:r1";
  ExpectStoresWork(endpoint, [&] {
    // The stores' names are set, and the password is nowhere in what Redis
    // shows of its clients.
    RedisConnection admin(MustEndpoint(Url(), kPassword));
    auto list = admin.Command({"CLIENT", "LIST"});
    ASSERT_TRUE(list.ok()) << list.status().ToString();
    for (const char* name :
         {"name=router:r1.read", "name=router:r1.write", "name=router:r1.watch"}) {
      EXPECT_NE(list->str.find(name), std::string::npos) << list->str;
    }
    EXPECT_EQ(list->str.find(kPassword), std::string::npos);
  });
}

TEST_F(RedisAuthTest, AclUserAuthenticatesAsItself) {
  RedisConnection c(MustEndpoint(Url("alice"), kAlicePassword));
  auto who = c.Command({"ACL", "WHOAMI"});
  ASSERT_TRUE(who.ok()) << who.status().ToString();
  EXPECT_EQ(who->str, "alice");
  ExpectStoresWork(MustEndpoint(Url("alice"), kAlicePassword));
}

TEST_F(RedisAuthTest, WrongPasswordIsRefusedClearly) {
  ExpectOpenRefused(MustEndpoint(Url(), "wrong-pass"), StatusCode::kUnauthenticated, "AUTH");
  ExpectOpenRefused(MustEndpoint(Url("alice"), kPassword), StatusCode::kUnauthenticated,
                    "AUTH as user 'alice' refused");
}

TEST_F(RedisAuthTest, MissingPasswordIsRefusedClearly) {
  ExpectOpenRefused(MustEndpoint(Url(), ""), StatusCode::kUnauthenticated,
                    "requires a password and none is set: set SOMM_REDIS_PASSWORD_FILE");
}

TEST_F(RedisAuthTest, ReconnectAfterClientKillAuthenticatesAgain) {
  RedisEndpoint endpoint = MustEndpoint(Url("", "/2"), kPassword);
  endpoint.client_name = "victim";
  RedisConnection c(endpoint);
  ASSERT_TRUE(c.Command({"SET", "k", "before"}).ok());
  RedisConnection admin(MustEndpoint(Url(), kPassword));
  auto killed = admin.Command({"CLIENT", "KILL", "SKIPME", "yes"});
  ASSERT_TRUE(killed.ok()) << killed.status().ToString();
  ASSERT_GE(killed->integer, 1);
  // The killed connection fails one call at most; the next connects again
  // with AUTH, SELECT and its name.
  StatusOr<RedisReply> after = c.Command({"SET", "k", "after"});
  if (!after.ok()) after = c.Command({"SET", "k", "after"});
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_FALSE(after->is_error()) << after->str;
  auto name = c.Command({"CLIENT", "GETNAME"});
  ASSERT_TRUE(name.ok());
  EXPECT_EQ(name->str, "victim");
  auto in_db2 = admin.Pipeline({{"SELECT", "2"}, {"GET", "k"}});
  ASSERT_TRUE(in_db2.ok());
  EXPECT_EQ((*in_db2)[1].str, "after");
}

TEST_F(RedisAuthTest, StoreKeepsWorkingAfterEveryClientIsKilled) {
  const RedisEndpoint endpoint = MustEndpoint(Url(), kPassword);
  auto writer = OpenStore(endpoint, /*watch=*/false);
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  auto reader = OpenStore(endpoint);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  RedisConnection admin(endpoint);
  ASSERT_TRUE(admin.Command({"CLIENT", "KILL", "TYPE", "pubsub"}).ok());
  ASSERT_TRUE(admin.Command({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"}).ok());
  // The writer's next write may meet the dead connection; a heartbeat
  // writes again.
  ASSERT_TRUE(Eventually([&] { return (*writer)->WriteWorker(Report("w2", 1)).ok(); }));
  EXPECT_TRUE(Eventually([&] { return (*reader)->Workers().count("w2") == 1; }));
}

TEST_F(RedisAuthTest, DatabaseInTheUrlIsSelected) {
  auto store = OpenStore(MustEndpoint(Url("", "/3"), kPassword), /*watch=*/false);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_TRUE((*store)->WriteWorker(Report("w3", 1)).ok());
  RedisConnection raw(MustEndpoint(Url(), kPassword));
  auto counts =
      raw.Pipeline({{"EXISTS", "somm:worker:w3"}, {"SELECT", "3"}, {"EXISTS", "somm:worker:w3"}});
  ASSERT_TRUE(counts.ok()) << counts.status().ToString();
  EXPECT_EQ((*counts)[0].integer, 0) << "the key landed in db 0";
  EXPECT_EQ((*counts)[2].integer, 1) << "the key is not in db 3";
}

TEST_F(RedisAuthTest, DatabaseOutOfRangeIsRefusedClearly) {
  ExpectOpenRefused(MustEndpoint(Url("", "/99"), kPassword), StatusCode::kInvalidArgument,
                    "SELECT 99 refused");
}

// TLS: a redis-server that listens with TLS only.
class RedisTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    signal(SIGPIPE, SIG_IGN);
    dir_ = new fs::path(fs::temp_directory_path() /
                        ("somm-redis-tls-test-" + std::to_string(getpid())));
    fs::remove_all(*dir_);
    for (const char* ca : {"a", "b"}) {
      const std::string command = std::string(SOMM_SOURCE_DIR) + "/scripts/make-certs " +
                                  (*dir_ / ca).string() + " >/dev/null";
      ASSERT_EQ(std::system(command.c_str()), 0) << command;
    }
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }
  static std::string File(const char* ca, const char* name) { return (*dir_ / ca / name).string(); }

  // A TLS-only server with CA a's certificate; `auth_clients`: whether it
  // requires client certificates.
  void StartServer(bool auth_clients) {
    port_ = FreePort();
    server_ = std::make_unique<RedisServer>(
        port_,
        std::vector<std::string>{"--port", "0", "--tls-port", std::to_string(port_),
                                 "--tls-cert-file", File("a", "server.pem"), "--tls-key-file",
                                 File("a", "server.key"), "--tls-ca-cert-file", File("a", "ca.pem"),
                                 "--tls-auth-clients", auth_clients ? "yes" : "no", "--requirepass",
                                 kPassword},
        /*tls=*/true);
    ASSERT_TRUE(RedisServer::WaitReady(
        MustEndpoint(Url("ca=" + File("a", "ca.pem") + "&cert=" + File("a", "client.pem") +
                         "&key=" + File("a", "client.key")),
                     kPassword)))
        << "redis-server did not start with TLS";
  }
  std::string Url(const std::string& query, const std::string& host = "127.0.0.1") const {
    return "rediss://" + host + ":" + std::to_string(port_) + "/1?" + query;
  }
  static inline fs::path* dir_ = nullptr;
  int port_ = 0;
  std::unique_ptr<RedisServer> server_;
};

TEST_F(RedisTlsTest, StoreWorksOverTls) {
  StartServer(/*auth_clients=*/false);
  ExpectStoresWork(MustEndpoint(Url("ca=" + File("a", "ca.pem")), kPassword));
  // By name too: the certificate names localhost.
  RedisConnection by_name(MustEndpoint(Url("ca=" + File("a", "ca.pem"), "localhost"), kPassword));
  auto pong = by_name.Command({"PING"});
  ASSERT_TRUE(pong.ok()) << pong.status().ToString();
  EXPECT_EQ(pong->str, "PONG");
}

TEST_F(RedisTlsTest, WrongCaIsRefusedClearly) {
  StartServer(/*auth_clients=*/false);
  auto store = OpenStore(MustEndpoint(Url("ca=" + File("b", "ca.pem")), kPassword));
  ASSERT_FALSE(store.ok());
  const std::string message = store.status().message();
  EXPECT_EQ(store.status().code(), StatusCode::kUnavailable) << message;
  EXPECT_NE(message.find("127.0.0.1:" + std::to_string(port_)), std::string::npos) << message;
  EXPECT_NE(message.find("certificate verify failed"), std::string::npos) << message;
  EXPECT_EQ(message.find(kPassword), std::string::npos) << message;
}

TEST_F(RedisTlsTest, ClientCertificateWhenTheServerAsksForOne) {
  StartServer(/*auth_clients=*/true);
  ExpectStoresWork(MustEndpoint(Url("ca=" + File("a", "ca.pem") + "&cert=" +
                                    File("a", "client.pem") + "&key=" + File("a", "client.key")),
                                kPassword));
  // Without one, the server hangs up on us.
  auto store = OpenStore(MustEndpoint(Url("ca=" + File("a", "ca.pem")), kPassword));
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kUnavailable) << store.status().ToString();
}

TEST_F(RedisTlsTest, MissingCaFileIsRefusedClearly) {
  StartServer(/*auth_clients=*/false);
  auto store = OpenStore(MustEndpoint(Url("ca=" + (*dir_ / "absent.pem").string()), kPassword));
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kInvalidArgument) << store.status().ToString();
  EXPECT_NE(store.status().message().find("absent.pem: no such file"), std::string::npos)
      << store.status().ToString();
}

TEST_F(RedisTlsTest, PlaintextServerIsNotMistakenForTls) {
  port_ = FreePort();
  server_ = std::make_unique<RedisServer>(port_);
  RedisEndpoint plain;
  plain.port = port_;
  ASSERT_TRUE(RedisServer::WaitReady(plain));
  auto store = OpenStore(MustEndpoint(Url("ca=" + File("a", "ca.pem")), ""));
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find("TLS"), std::string::npos) << store.status().ToString();
}

}  // namespace
}  // namespace somm::redis
