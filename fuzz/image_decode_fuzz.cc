// The image decoder (image/image_decode.h) on hostile bytes: the header
// read, the limits and OpenCV's decoders behind them. Beyond "no crash":
// what the limits refuse is never decoded, and what decodes has exactly
// the transform's size. The limits here are small, so libFuzzer's
// -malloc_limit_mb catches a decode that allocates past them.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "image/image_decode.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  using namespace somm::image;
  // The first byte picks the transform; the rest is the image.
  ImageTransform t;
  t.channels = (data[0] & 1) ? 3 : 1;
  t.height = t.width = (data[0] & 2) ? 16 : 8;
  t.resize_shorter = (data[0] & 4) ? 20 : 0;
  t.interpolation = (data[0] & 8) ? Interpolation::kBilinear : Interpolation::kArea;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  ImageLimits limits;
  limits.max_encoded_bytes = 1 << 20;
  limits.max_pixels = 1 << 20;
  limits.max_side = 4096;
  const somm::Status allowed = CheckImageLimits(bytes, limits);
  const auto decoded = DecodeImage(bytes, limits, t);
  if (decoded.ok()) {
    if (!allowed.ok()) abort();  // decoded what the limits refuse
    if (decoded->size() != static_cast<size_t>(t.channels * t.height * t.width)) abort();
  }
  return 0;
}
