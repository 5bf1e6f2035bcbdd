// ParseRedisEndpoint: every form --redis takes, the password from the
// environment only, and the refusals, none of which repeats a password.
#include "redis/redis_endpoint.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

namespace somm::redis {
namespace {

namespace fs = std::filesystem;

// A fake environment.
struct Env {
  std::map<std::string, std::string> vars;
  EnvLookup lookup() const {
    return [this](const char* name) -> const char* {
      auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  }
};

StatusOr<RedisEndpoint> Parse(const std::string& text, const Env& env = {}) {
  return ParseRedisEndpoint(text, env.lookup());
}

// Refused with InvalidArgument, the message holding `says` and not `secret`.
void ExpectRefused(const std::string& text, const std::string& says, const Env& env = {},
                   const std::string& secret = "s3cret") {
  const auto e = Parse(text, env);
  ASSERT_FALSE(e.ok()) << text;
  EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument) << text;
  EXPECT_NE(e.status().message().find(says), std::string::npos) << e.status().message();
  EXPECT_EQ(e.status().message().find(secret), std::string::npos) << e.status().message();
}

TEST(RedisEndpointTest, HostPortAsBefore) {
  auto e = Parse("10.0.0.7:7001");
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->host, "10.0.0.7");
  EXPECT_EQ(e->port, 7001);
  EXPECT_FALSE(e->tls);
  EXPECT_EQ(e->db, 0);
  EXPECT_TRUE(e->user.empty());
  EXPECT_TRUE(e->password.empty());
  EXPECT_EQ(e->ToString(), "10.0.0.7:7001");

  e = Parse("redis-host");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->host, "redis-host");
  EXPECT_EQ(e->port, 6379);
}

TEST(RedisEndpointTest, UrlForms) {
  auto e = Parse("redis://cache.internal:7000");
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->host, "cache.internal");
  EXPECT_EQ(e->port, 7000);
  EXPECT_FALSE(e->tls);

  e = Parse("redis://cache.internal/");
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->port, 6379);
  EXPECT_EQ(e->db, 0);

  Env env;
  env.vars["SOMM_REDIS_PASSWORD"] = "s3cret";
  e = Parse("redis://somm-router@cache.internal:7000/3", env);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->user, "somm-router");
  EXPECT_EQ(e->password, "s3cret");
  EXPECT_EQ(e->db, 3);
  EXPECT_EQ(e->ToString(), "cache.internal:7000");

  e = Parse("redis://a%40b@h:1", env);  // a user name with an escaped @
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->user, "a@b");

  e = Parse("redis://[::1]:7000/2");
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->host, "::1");
  EXPECT_EQ(e->port, 7000);
  EXPECT_EQ(e->db, 2);
  EXPECT_EQ(e->ToString(), "[::1]:7000");
}

TEST(RedisEndpointTest, TlsUrlWithFiles) {
  auto e = Parse(
      "rediss://cache.internal:6380/1?ca=/etc/somm/ca.pem&cert=/etc/somm/c.pem"
      "&key=/etc/somm/c%20key.pem");
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_TRUE(e->tls);
  EXPECT_EQ(e->port, 6380);
  EXPECT_EQ(e->db, 1);
  EXPECT_EQ(e->tls_files.ca_file, "/etc/somm/ca.pem");
  EXPECT_EQ(e->tls_files.cert_file, "/etc/somm/c.pem");
  EXPECT_EQ(e->tls_files.key_file, "/etc/somm/c key.pem");

  e = Parse("rediss://cache.internal");  // the system's trust store
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_TRUE(e->tls);
  EXPECT_TRUE(e->tls_files.ca_file.empty());
}

TEST(RedisEndpointTest, PasswordInTheUrlIsRefusedAndNeverShown) {
  for (const std::string text : {"redis://alice:s3cret@h:6379", "redis://:s3cret@h:6379/0",
                                 "rediss://alice:s3cret@h:6379?ca=/x", "alice:s3cret@h:6379",
                                 "redis://alice:s3/cret@h:6379", "redis://u:s3cret@x@h:1"}) {
    ExpectRefused(text, "SOMM_REDIS_PASSWORD_FILE", {}, "cret");
  }
}

TEST(RedisEndpointTest, BadPortDbSchemeAndOptions) {
  for (const std::string text : {"h:0", "h:65536", "h:x", "h:", "redis://h:12ab", "redis://h:/1",
                                 "redis://[::1]:", "redis://[::1]x"}) {
    ExpectRefused(text, "redis address");
  }
  ExpectRefused("h:70000", "1..65535");
  for (const std::string text :
       {"redis://h:1/x", "redis://h:1/-1", "redis://h:1/99999999999", "redis://h/1/2"}) {
    ExpectRefused(text, "database");
  }
  ExpectRefused("http://h:1", "neither redis:// nor rediss://");
  ExpectRefused("redis://:1", "names no host");
  ExpectRefused(":6379", "names no host");
  ExpectRefused("h:1/2", "redis:// form");
  ExpectRefused("redis://h:1?ca=/x", "rediss:// only");
  ExpectRefused("rediss://h:1?cafile=/x", "unknown option 'cafile'");
  ExpectRefused("rediss://h:1?cert=/x", "cert and key go together");
  ExpectRefused("rediss://h:1?ca=", "names no file");
  ExpectRefused("redis://a%4@h:1", "hex digits", {{{"SOMM_REDIS_PASSWORD", "pw"}}});
}

TEST(RedisEndpointTest, PasswordFromEnvironmentOrFile) {
  const fs::path dir =
      fs::temp_directory_path() / ("somm-redis-endpoint-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string file = (dir / "password").string();
  std::ofstream(file) << "s3cret\n";

  Env env;
  env.vars["SOMM_REDIS_PASSWORD_FILE"] = file;
  auto e = Parse("127.0.0.1:6379", env);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->password, "s3cret");  // the newline stripped
  EXPECT_TRUE(e->user.empty());

  std::ofstream(file) << "with spaces \r\n\n";
  e = Parse("127.0.0.1:6379", env);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->password, "with spaces ");

  env.vars["SOMM_REDIS_PASSWORD"] = "s3cret";
  ExpectRefused("127.0.0.1:6379", "set one", env);
  env.vars.erase("SOMM_REDIS_PASSWORD_FILE");
  e = Parse("127.0.0.1:6379", env);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->password, "s3cret");

  Env missing;
  missing.vars["SOMM_REDIS_PASSWORD_FILE"] = (dir / "absent").string();
  ExpectRefused("127.0.0.1:6379", "cannot be read", missing);
  std::ofstream(file) << "\n";
  Env empty;
  empty.vars["SOMM_REDIS_PASSWORD_FILE"] = file;
  ExpectRefused("127.0.0.1:6379", "holds no password", empty);

  // A user with no password to go with it.
  ExpectRefused("redis://alice@127.0.0.1:6379", "no password is set");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace somm::redis
