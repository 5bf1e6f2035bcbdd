#include "crypto/digest.h"

#include <gtest/gtest.h>

namespace somm::crypto {
namespace {

TEST(Sha256HexTest, MatchesTheFipsVectors) {
  // FIPS 180-2, appendix B.1 and the empty message.
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(RandomBytesTest, GivesTheAskedLengthAndDiffersBetweenDraws) {
  auto a = RandomBytes(32);
  auto b = RandomBytes(32);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a->size(), 32u);
  EXPECT_NE(*a, *b);
}

TEST(ConstantTimeEqualsTest, ComparesContentAndLength) {
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abcd"));
  EXPECT_EQ(Hex(std::string("\x01\xff", 2)), "01ff");
}

}  // namespace
}  // namespace somm::crypto
