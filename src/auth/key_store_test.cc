#include "auth/key_store.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "crypto/digest.h"

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
  KeyRecord r{"0123456789abcdef", "t", Role::kMetrics, 42, true, std::string(64, 'e'), 0};
  auto back = ParseKeyFile(RenderKeyFile({r}), "keys");
  ASSERT_TRUE(back.ok());
  ASSERT_EQ(back->size(), 1u);
  EXPECT_EQ((*back)[0].role, Role::kMetrics);
  EXPECT_TRUE((*back)[0].revoked);
  auto bad = ParseKeyFile("0123456789abcdef t user 1 active short\n", "keys");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("keys:1"), std::string::npos);
}

// The value, or -1 (and a failure) when there is none.
int64_t ValueOf(const StatusOr<int64_t>& got) {
  EXPECT_TRUE(got.ok()) << got.status().message();
  return got.ok() ? got.value() : -1;
}

TEST(KeyExpiryTest, DurationsAndDatesParseAndJunkIsRefused) {
  EXPECT_EQ(ValueOf(ParseDurationSeconds("90d")), 90 * 86400);
  EXPECT_EQ(ValueOf(ParseDurationSeconds("12h")), 12 * 3600);
  EXPECT_EQ(ValueOf(ParseDurationSeconds("30m")), 30 * 60);
  EXPECT_EQ(ValueOf(ParseDurationSeconds("45s")), 45);
  EXPECT_EQ(ValueOf(ParseDurationSeconds("2w")), 14 * 86400);
  EXPECT_EQ(ValueOf(ParseDurationSeconds("0s")), 0);
  for (const char* bad : {"", "d", "10", "-1d", "1.5h", "10y", " 1d", "1d ", "12345678901d"}) {
    EXPECT_FALSE(ParseDurationSeconds(bad).ok()) << bad;
  }
  const int64_t now = 1'000'000'000;
  EXPECT_EQ(ValueOf(ParseExpiry("90d", now)), now + 90 * 86400);
  EXPECT_EQ(ValueOf(ParseExpiry("2026-03-01", now)), 1772323200);
  EXPECT_EQ(ValueOf(ParseExpiry("2026-03-01T12:00:00Z", now)), 1772366400);
  EXPECT_EQ(ValueOf(ParseExpiry("2026-03-01t12:00:00.250z", now)), 1772366400);
  EXPECT_EQ(ValueOf(ParseExpiry("2026-03-01T14:30:00+02:30", now)), 1772366400);
  EXPECT_EQ(ValueOf(ParseExpiry("2026-03-01T10:00:00-02:00", now)), 1772366400);
  EXPECT_EQ(ValueOf(ParseExpiry("2024-02-29", now)), 1709164800);
  EXPECT_EQ(ValueOf(ParseExpiry("1999-12-31T23:59:59Z", now)), 946684799);
  for (const char* bad :
       {"2025-02-29", "2026-13-01", "2026-3-1", "2026-03-01T12:00:00", "2026-03-01T24:00:00Z",
        "2026-03-01T12:00Z", "2026-03-01Z", "2026-03-01T12:00:00Zjunk", "tomorrow"}) {
    auto got = ParseExpiry(bad, now);
    ASSERT_FALSE(got.ok()) << bad;
    EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(FormatUtc(1772366400), "2026-03-01T12:00:00Z");
}

// A store on a clock the test moves: nothing sleeps.
class ClockedKeyStoreTest : public KeyStoreTest {
 protected:
  UnixClock Clock() {
    return [this] { return now_; };
  }
  int64_t now_ = 1'800'000'000;
};

TEST_F(ClockedKeyStoreTest, ExpiredKeyIsRefusedNamingItsIdAndTimeNeverItsSecret) {
  KeyStore store(KeyStore::DefaultPath(dir_), Clock());
  auto made = store.Create("team-a", Role::kUser, now_ + 3600);
  ASSERT_TRUE(made.ok()) << made.status().message();
  EXPECT_EQ(made->record.created_unix, now_);
  ASSERT_TRUE(store.Verify(made->key).ok());
  now_ += 3599;
  ASSERT_TRUE(store.Verify(made->key).ok());
  now_ += 1;
  auto got = store.Verify(made->key);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(got.status().message(),
            "API key " + made->record.id + " expired at " + FormatUtc(now_));
  EXPECT_EQ(got.status().message().find(made->key.substr(22)), std::string::npos);
  // A key without expiry is unaffected by time.
  auto forever = store.Create("team-a", Role::kUser);
  ASSERT_TRUE(forever.ok());
  now_ += 100 * 365 * 86400LL;
  EXPECT_TRUE(store.Verify(forever->key).ok());
}

TEST_F(ClockedKeyStoreTest, CreateRefusesAnExpiryThatIsNotInTheFuture) {
  KeyStore store(KeyStore::DefaultPath(dir_), Clock());
  for (int64_t at : {now_, now_ - 1}) {
    auto made = store.Create("team-a", Role::kUser, at);
    ASSERT_FALSE(made.ok());
    EXPECT_EQ(made.status().code(), StatusCode::kInvalidArgument);
  }
  EXPECT_FALSE(fs::exists(KeyStore::DefaultPath(dir_)));
}

TEST_F(ClockedKeyStoreTest, RotationKeepsBothKeysUntilTheGraceEndsThenOnlyTheNewOne) {
  // The server's store and the CLI's, as two processes would have.
  KeyStore server(KeyStore::DefaultPath(dir_), Clock());
  KeyStore cli(KeyStore::DefaultPath(dir_), Clock());
  auto old = cli.Create("team-a", Role::kAdmin);
  ASSERT_TRUE(old.ok());
  ASSERT_TRUE(server.Verify(old->key).ok());
  auto rotated = cli.Rotate(old->record.id, 3600);
  ASSERT_TRUE(rotated.ok()) << rotated.status().message();
  EXPECT_EQ(rotated->old.expires_unix, now_ + 3600);
  EXPECT_EQ(rotated->fresh.record.expires_unix, 0);
  EXPECT_NE(rotated->fresh.record.id, old->record.id);
  auto fresh = server.Verify(rotated->fresh.key);
  ASSERT_TRUE(fresh.ok()) << fresh.status().message();
  EXPECT_EQ(fresh->tenant, "team-a");
  EXPECT_EQ(fresh->role, Role::kAdmin);
  EXPECT_TRUE(server.Verify(old->key).ok());
  now_ += 3599;
  EXPECT_TRUE(server.Verify(old->key).ok());
  EXPECT_TRUE(server.Verify(rotated->fresh.key).ok());
  now_ += 1;
  auto refused = server.Verify(old->key);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("expired"), std::string::npos);
  EXPECT_TRUE(server.Verify(rotated->fresh.key).ok());
  auto all = cli.List();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
}

TEST_F(ClockedKeyStoreTest, RotationNeverExtendsAKeyAndRefusesDeadOrUnknownKeys) {
  KeyStore store(KeyStore::DefaultPath(dir_), Clock());
  auto soon = store.Create("a", Role::kUser, now_ + 60);
  ASSERT_TRUE(soon.ok());
  auto rotated = store.Rotate(soon->record.id, 3600, now_ + 90 * 86400);
  ASSERT_TRUE(rotated.ok()) << rotated.status().message();
  EXPECT_EQ(rotated->old.expires_unix, now_ + 60);
  EXPECT_EQ(rotated->fresh.record.expires_unix, now_ + 90 * 86400);
  // Grace 0: the old key stops now.
  auto now_ended = store.Rotate(rotated->fresh.record.id, 0);
  ASSERT_TRUE(now_ended.ok());
  EXPECT_FALSE(store.Verify(rotated->fresh.key).ok());
  EXPECT_TRUE(store.Verify(now_ended->fresh.key).ok());

  auto revoked = store.Create("a", Role::kUser);
  ASSERT_TRUE(revoked.ok());
  ASSERT_TRUE(store.Revoke(revoked->record.id).ok());
  const std::string before = FileText();
  auto r = store.Rotate(revoked->record.id, 3600);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("revoked"), std::string::npos);
  r = store.Rotate(rotated->fresh.record.id, 3600);  // expired by the grace-0 rotation
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("expired"), std::string::npos);
  EXPECT_EQ(store.Rotate("ffffffffffffffff", 3600).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store.Rotate(soon->record.id, -1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(FileText(), before) << "a refused rotation changed the file";
}

// A key file from before expiry existed: six fields, the old header.
TEST_F(KeyStoreTest, OldFormatFileStillLoads) {
  const std::string id = "0123456789abcdef", secret(64, 'a');
  fs::create_directories(fs::path(KeyStore::DefaultPath(dir_)).parent_path());
  std::ofstream(KeyStore::DefaultPath(dir_))
      << "# somm API keys (somm keys create|list|revoke); hashes only, never a key.\n"
         "# <id> <tenant> <role> <created_unix> active|revoked <sha256(id:secret)>\n"
      << id << " team-a user 1700000000 active " << crypto::Sha256Hex(id + ":" + secret) << "\n";
  KeyStore store(KeyStore::DefaultPath(dir_));
  auto got = store.Verify("somm_" + id + "_" + secret);
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(got->tenant, "team-a");
  EXPECT_EQ(got->expires_unix, 0);
  // Rewriting it (another key) keeps the old line as it was.
  ASSERT_TRUE(store.Create("b", Role::kUser).ok());
  EXPECT_NE(FileText().find(id + " team-a user 1700000000 active " +
                            crypto::Sha256Hex(id + ":" + secret) + "\n"),
            std::string::npos);
}

TEST_F(ClockedKeyStoreTest, OnlyAKeyThatExpiresHasASeventhField) {
  KeyStore store(KeyStore::DefaultPath(dir_), Clock());
  auto plain = store.Create("a", Role::kUser);
  auto expiring = store.Create("b", Role::kUser, now_ + 10);
  ASSERT_TRUE(plain.ok() && expiring.ok());
  std::istringstream lines(FileText());
  std::string line;
  int keys = 0;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    ++keys;
    std::istringstream fields(line);
    std::vector<std::string> f;
    for (std::string w; fields >> w;) f.push_back(w);
    if (f[0] == plain->record.id) {
      EXPECT_EQ(f.size(), 6u) << line;
    } else {
      ASSERT_EQ(f.size(), 7u) << line;
      EXPECT_EQ(f[6], "expires=" + std::to_string(now_ + 10));
    }
  }
  EXPECT_EQ(keys, 2);
}

TEST(KeyFileTest, ExpiryRoundTripsAndABadSeventhFieldIsRefused) {
  KeyRecord r{"0123456789abcdef", "t", Role::kUser, 42, false, std::string(64, 'e'), 1772366400};
  auto back = ParseKeyFile(RenderKeyFile({r}), "keys");
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->size(), 1u);
  EXPECT_EQ((*back)[0].expires_unix, 1772366400);
  const std::string line = "0123456789abcdef t user 1 active " + std::string(64, 'e');
  for (const char* tail : {" expires=", " expires=x", " expires=-1", " expires=0",
                           " expires=5 more", " owner=me", " expires=1234567890123456789"}) {
    auto bad = ParseKeyFile(line + tail + "\n", "keys");
    ASSERT_FALSE(bad.ok()) << tail;
    EXPECT_NE(bad.status().message().find("keys:1"), std::string::npos) << tail;
  }
}

}  // namespace
}  // namespace somm::auth
