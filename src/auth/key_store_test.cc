#include "auth/key_store.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace somm::auth {
namespace {
namespace fs = std::filesystem;

class KeyStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "somm-keys-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string FileText() const {
    std::ifstream in(KeyStore::DefaultPath(dir_));
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }
  std::string dir_;
};

TEST_F(KeyStoreTest, CreatedKeyVerifiesWithItsTenantAndRole) {
  KeyStore store(KeyStore::DefaultPath(dir_));
  auto made = store.Create("team-a", Role::kUser);
  ASSERT_TRUE(made.ok()) << made.status().message();
  auto got = store.Verify(made->key);
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(got->tenant, "team-a");
  EXPECT_EQ(got->role, Role::kUser);
  EXPECT_EQ(got->id, made->record.id);
}

TEST_F(KeyStoreTest, FileHoldsTheHashNeverTheKey) {
  KeyStore store(KeyStore::DefaultPath(dir_));
  auto made = store.Create("team-a", Role::kAdmin);
  ASSERT_TRUE(made.ok());
  const std::string text = FileText();
  const std::string secret = made->key.substr(made->key.rfind('_') + 1);
  EXPECT_EQ(text.find(secret), std::string::npos);
  EXPECT_NE(text.find(made->record.hash), std::string::npos);
  const auto perms = fs::status(KeyStore::DefaultPath(dir_)).permissions();
  EXPECT_EQ(perms & (fs::perms::group_all | fs::perms::others_all), fs::perms::none);
}

TEST_F(KeyStoreTest, WrongSecretUnknownIdAndGarbageAreUnauthenticatedWithoutEcho) {
  KeyStore store(KeyStore::DefaultPath(dir_));
  auto made = store.Create("team-a", Role::kUser);
  ASSERT_TRUE(made.ok());
  std::string wrong = made->key;
  wrong.back() = wrong.back() == '0' ? '1' : '0';
  for (const std::string& bad :
       {wrong, std::string("somm_0123456789abcdef_") + std::string(64, 'a'),
        std::string("not-a-key")}) {
    auto got = store.Verify(bad);
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), StatusCode::kUnauthenticated);
    EXPECT_EQ(got.status().message().find(bad), std::string::npos);
  }
}

TEST_F(KeyStoreTest, RevocationByAnotherStoreTakesEffectWithoutRestart) {
  KeyStore server(KeyStore::DefaultPath(dir_));
  KeyStore cli(KeyStore::DefaultPath(dir_));
  auto made = cli.Create("team-a", Role::kUser);
  ASSERT_TRUE(made.ok());
  ASSERT_TRUE(server.Verify(made->key).ok());
  ASSERT_TRUE(cli.Revoke(made->record.id).ok());
  auto got = server.Verify(made->key);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kUnauthenticated);
  EXPECT_NE(got.status().message().find("revoked"), std::string::npos);
  // A key created after the server's first read is seen too.
  auto later = cli.Create("team-b", Role::kMetrics);
  ASSERT_TRUE(later.ok());
  EXPECT_TRUE(server.Verify(later->key).ok());
}

TEST_F(KeyStoreTest, ListShowsEveryKeyAndRevokeOfUnknownIdIsNotFound) {
  KeyStore store(KeyStore::DefaultPath(dir_));
  ASSERT_TRUE(store.Create("a", Role::kAdmin).ok());
  ASSERT_TRUE(store.Create("b", Role::kUser).ok());
  auto all = store.List();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].tenant, "a");
  EXPECT_EQ((*all)[1].role, Role::kUser);
  EXPECT_EQ(store.Revoke("ffffffffffffffff").code(), StatusCode::kNotFound);
}

TEST_F(KeyStoreTest, BadTenantAndRoleNamesAreRefused) {
  KeyStore store(KeyStore::DefaultPath(dir_));
  EXPECT_FALSE(store.Create("a b", Role::kUser).ok());
  EXPECT_FALSE(store.Create("", Role::kUser).ok());
  EXPECT_FALSE(ParseRole("root").ok());
}

TEST(KeyFileTest, RenderThenParseRoundTripsAndMalformedLinesAreNamed) {
  KeyRecord r{"0123456789abcdef", "t", Role::kMetrics, 42, true, std::string(64, 'e')};
  auto back = ParseKeyFile(RenderKeyFile({r}), "keys");
  ASSERT_TRUE(back.ok());
  ASSERT_EQ(back->size(), 1u);
  EXPECT_EQ((*back)[0].role, Role::kMetrics);
  EXPECT_TRUE((*back)[0].revoked);
  auto bad = ParseKeyFile("0123456789abcdef t user 1 active short\n", "keys");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("keys:1"), std::string::npos);
}

}  // namespace
}  // namespace somm::auth
