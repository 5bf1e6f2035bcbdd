#include "image/image_decode.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "image/testing/png_writer.h"

namespace somm::image {
namespace {

using testing::PngBytes;
using testing::PngHeaderOnly;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A 32x32 grayscale digit of 4x4 blocks, as tools/make_demo_repo.py writes
// the demo's PNGs: area resizing to 8x8 gives each block's value exactly.
TEST(ImageDecodeTest, AreaResizeOfBlocksGivesTheBlockValues) {
  std::vector<uint8_t> pixels(32 * 32);
  for (int y = 0; y < 32; ++y) {
    for (int x = 0; x < 32; ++x) pixels[static_cast<size_t>(y * 32 + x)] = static_cast<uint8_t>((y / 4) * 32 + (x / 4) * 4);
  }
  ImageTransform t;
  t.channels = 1;
  t.height = t.width = 8;
  t.scale = 0.5f;
  auto chw = DecodeImage(PngBytes(32, 32, 1, pixels), {}, t);
  ASSERT_TRUE(chw.ok()) << chw.status().message();
  ASSERT_EQ(chw->size(), 64u);
  for (int y = 0; y < 8; ++y) {
    for (int x = 0; x < 8; ++x) EXPECT_FLOAT_EQ((*chw)[static_cast<size_t>(y * 8 + x)], (y * 32 + x * 4) * 0.5f);
  }
}

TEST(ImageDecodeTest, RgbComesChannelMajorNormalised) {
  // 2x1: a red pixel, then a blue one.
  const std::vector<uint8_t> pixels = {255, 0, 0, 0, 0, 255};
  ImageTransform t;
  t.channels = 3;
  t.height = 1;
  t.width = 2;
  t.mean = {0.5f, 0.25f, 0.0f};
  t.stddev = {0.5f, 0.5f, 2.0f};
  auto chw = DecodeImage(PngBytes(2, 1, 3, pixels), {}, t);
  ASSERT_TRUE(chw.ok()) << chw.status().message();
  // (v / 255 - mean) / std, channel by channel: R of both, G of both, B of both.
  const std::vector<float> want = {1.0f, -1.0f, -0.5f, -0.5f, 0.0f, 0.5f};
  ASSERT_EQ(chw->size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR((*chw)[i], want[i], 1e-6) << i;
}

TEST(ImageDecodeTest, ResizeShorterSideThenCentreCrop) {
  // 6 wide, 4 high, each pixel's value its index: the shorter side is
  // already 4, so the centre 2x2 crop starts at column 2, row 1.
  std::vector<uint8_t> pixels(24);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i * 10);
  ImageTransform t;
  t.channels = 1;
  t.resize_shorter = 4;
  t.height = t.width = 2;
  t.scale = 1.0f;
  auto chw = DecodeImage(PngBytes(6, 4, 1, pixels), {}, t);
  ASSERT_TRUE(chw.ok()) << chw.status().message();
  EXPECT_EQ(*chw, (std::vector<float>{80, 90, 140, 150}));
}

TEST(ImageDecodeTest, JpegDecodesToItsColours) {
  const std::string jpeg = ReadFile(std::string(SOMM_IMAGE_TESTDATA) + "/halves.jpg");
  auto header = ReadImageHeader(jpeg);
  ASSERT_TRUE(header.ok()) << header.status().message();
  EXPECT_EQ(header->format, "jpeg");
  EXPECT_EQ(header->width, 16);
  EXPECT_EQ(header->height, 16);
  ImageTransform t;
  t.channels = 3;
  t.height = t.width = 16;
  t.scale = 1.0f;
  auto chw = DecodeImage(jpeg, {}, t);
  ASSERT_TRUE(chw.ok()) << chw.status().message();
  auto at = [&](int c, int y, int x) { return (*chw)[static_cast<size_t>((c * 16 + y) * 16 + x)]; };
  // Left half red, right half blue (PIL reads 254 at both).
  EXPECT_NEAR(at(0, 8, 2), 255, 4);
  EXPECT_NEAR(at(2, 8, 2), 0, 4);
  EXPECT_NEAR(at(0, 8, 13), 0, 4);
  EXPECT_NEAR(at(2, 8, 13), 255, 4);
}

// A 100k x 100k PNG is refused from its header: 10^10 pixels are never
// allocated, and the message says which limit.
TEST(ImageDecodeTest, HugeDeclaredPngIsRefusedBeforeDecoding) {
  ImageTransform t;
  t.channels = 1;
  auto chw = DecodeImage(PngHeaderOnly(100000, 100000), {}, t);
  ASSERT_FALSE(chw.ok());
  EXPECT_EQ(chw.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(chw.status().message().find("100000x100000"), std::string::npos) << chw.status().message();
  EXPECT_NE(chw.status().message().find("limit"), std::string::npos) << chw.status().message();
  ImageLimits small;
  small.max_pixels = 1 << 20;
  small.max_side = 100000;
  EXPECT_NE(CheckImageLimits(PngHeaderOnly(2000, 1000), small).message().find("decoded pixels"),
            std::string::npos);
  EXPECT_TRUE(CheckImageLimits(PngHeaderOnly(1000, 1000), small).ok());
}

TEST(ImageDecodeTest, EncodedBytesOverTheLimitAreRefused) {
  ImageLimits limits;
  limits.max_encoded_bytes = 100;
  const std::string png = PngBytes(32, 32, 1, std::vector<uint8_t>(32 * 32, 7));
  ASSERT_GT(png.size(), 0u);
  const std::string padded = png + std::string(200, '\0');
  const Status s = CheckImageLimits(padded, limits);
  EXPECT_NE(s.message().find("encoded bytes"), std::string::npos) << s.message();
}

TEST(ImageDecodeTest, TruncatedAndForeignBytesAreRefused) {
  ImageTransform t;
  t.channels = 1;
  t.height = t.width = 8;
  const std::string png = PngBytes(32, 32, 1, std::vector<uint8_t>(32 * 32, 7));
  auto cut = DecodeImage(png.substr(0, png.size() / 2), {}, t);
  ASSERT_FALSE(cut.ok());
  EXPECT_EQ(cut.status().code(), StatusCode::kInvalidArgument);
  auto head = DecodeImage(png.substr(0, 20), {}, t);
  ASSERT_FALSE(head.ok());
  EXPECT_NE(head.status().message().find("cut short"), std::string::npos) << head.status().message();
  auto gif = DecodeImage("GIF89a\x01\x00\x01\x00", {}, t);
  ASSERT_FALSE(gif.ok());
  EXPECT_NE(gif.status().message().find("not a PNG or JPEG"), std::string::npos);
  const std::string jpeg = ReadFile(std::string(SOMM_IMAGE_TESTDATA) + "/halves.jpg");
  auto jpeg_head = ReadImageHeader(jpeg.substr(0, 6));
  ASSERT_FALSE(jpeg_head.ok());
  EXPECT_NE(jpeg_head.status().message().find("JPEG"), std::string::npos);
}

TEST(ImageDecodeTest, TransformsOutsideTheirBoundsAreRefused) {
  ImageTransform t;
  t.channels = 2;
  EXPECT_FALSE(CheckTransform(t).ok());
  t.channels = 3;
  t.mean = {0.5f};
  EXPECT_FALSE(CheckTransform(t).ok());
  t.mean = {};
  t.stddev = {1, 0, 1};
  EXPECT_FALSE(CheckTransform(t).ok());
  t.stddev = {};
  t.resize_shorter = 100;  // below the 224 crop
  EXPECT_FALSE(CheckTransform(t).ok());
  t.resize_shorter = 256;
  EXPECT_TRUE(CheckTransform(t).ok());
}

}  // namespace
}  // namespace somm::image
