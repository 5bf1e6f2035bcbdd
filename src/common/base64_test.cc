#include "common/base64.h"

#include <gtest/gtest.h>

#include <string>

namespace somm {
namespace {

TEST(Base64Test, EncodesTheRfc4648Vectors) {
  EXPECT_EQ(Base64Encode(""), "");
  EXPECT_EQ(Base64Encode("f"), "Zg==");
  EXPECT_EQ(Base64Encode("fo"), "Zm8=");
  EXPECT_EQ(Base64Encode("foo"), "Zm9v");
  EXPECT_EQ(Base64Encode("foob"), "Zm9vYg==");
  EXPECT_EQ(Base64Encode("fooba"), "Zm9vYmE=");
  EXPECT_EQ(Base64Encode("foobar"), "Zm9vYmFy");
}

TEST(Base64Test, RoundTripsEveryByteAndLength) {
  std::string all;
  for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
  for (size_t n = 0; n <= all.size(); ++n) {
    const std::string in = all.substr(0, n);
    StatusOr<std::string> out = Base64Decode(Base64Encode(in));
    ASSERT_TRUE(out.ok()) << n << ": " << out.status().ToString();
    EXPECT_EQ(*out, in) << n;
  }
  EXPECT_EQ(Base64Encode("\xfb\xff"), "+/8=");
}

void ExpectInvalid(const std::string& text, const std::string& fragment) {
  StatusOr<std::string> out = Base64Decode(text);
  ASSERT_FALSE(out.ok()) << text;
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find(fragment), std::string::npos)
      << text << ": " << out.status().message();
}

TEST(Base64Test, RejectsInvalidCharactersAndPadding) {
  ExpectInvalid("Zm9", "length 3 is not a multiple of 4");
  ExpectInvalid("Zm9v\n", "length 5");
  ExpectInvalid("Zm 9", "byte 0x20 at offset 2");
  ExpectInvalid("Zm-v", "'-' at offset 2");  // URL-safe alphabet
  ExpectInvalid("Zm_v", "'_' at offset 2");
  ExpectInvalid("Zm9\x01", "byte 0x01 at offset 3");
  ExpectInvalid("Zm9\xff", "byte 0xff at offset 3");
  ExpectInvalid("Z=9v", "padding '=' at offset 1");
  ExpectInvalid("Zg==Zg==", "padding '=' at offset 2");
  ExpectInvalid("Z===", "padding '=' at offset 1");
  ExpectInvalid("====", "padding '=' at offset 0");
  ExpectInvalid("Zh==", "non-zero padding bits");  // "f" is Zg==
  ExpectInvalid("Zm9=", "non-zero padding bits");  // "fo" is Zm8=
}

}  // namespace
}  // namespace somm
