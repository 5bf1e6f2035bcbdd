// The parts of image_decode.h that need no decoder: the header read, the
// limits and the transform check. The fuzz target covers them with the
// decoder (fuzz/image_decode_fuzz.cc).
#include <cmath>
#include <cstring>

#include "image/image_decode.h"

namespace somm::image {
namespace {

uint32_t BigEndian32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}
uint32_t BigEndian16(const unsigned char* p) { return (uint32_t{p[0]} << 8) | uint32_t{p[1]}; }

constexpr unsigned char kPngSignature[8] = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A};

StatusOr<ImageHeader> ReadPngHeader(std::string_view bytes) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  // Signature, then the IHDR chunk: length 13, "IHDR", width, height, ...
  if (bytes.size() < 8 + 8 + 13) return InvalidArgument("PNG cut short before its header (IHDR)");
  if (BigEndian32(p + 8) != 13 || std::memcmp(p + 12, "IHDR", 4) != 0) {
    return InvalidArgument("PNG without an IHDR chunk first");
  }
  ImageHeader h{"png", BigEndian32(p + 16), BigEndian32(p + 20)};
  if (h.width == 0 || h.height == 0 || h.width > 0x7fffffff || h.height > 0x7fffffff) {
    return InvalidArgument("PNG declares an invalid size " + std::to_string(h.width) + "x" +
                           std::to_string(h.height));
  }
  return h;
}

bool IsStartOfFrame(unsigned char marker) {
  // SOF0..SOF15 but DHT (C4), JPG (C8) and DAC (CC), which share the range.
  return marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC;
}

StatusOr<ImageHeader> ReadJpegHeader(std::string_view bytes) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t n = bytes.size();
  size_t i = 2;  // past SOI
  while (true) {
    if (i >= n || p[i] != 0xFF) return InvalidArgument("JPEG cut short or corrupt before its frame header");
    while (i < n && p[i] == 0xFF) ++i;  // fill bytes
    if (i >= n) return InvalidArgument("JPEG cut short before its frame header");
    const unsigned char marker = p[i++];
    if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7)) continue;  // no length
    if (marker == 0xD9 || marker == 0xDA || marker == 0xD8) {
      return InvalidArgument("JPEG without a frame header (SOF) before its image data");
    }
    if (i + 2 > n) return InvalidArgument("JPEG cut short inside a segment");
    const size_t length = BigEndian16(p + i);
    if (length < 2) return InvalidArgument("JPEG segment with an invalid length");
    if (IsStartOfFrame(marker)) {
      if (length < 8 || i + 7 > n) return InvalidArgument("JPEG cut short inside its frame header");
      ImageHeader h{"jpeg", BigEndian16(p + i + 5), BigEndian16(p + i + 3)};
      if (h.width == 0 || h.height == 0) {
        return InvalidArgument("JPEG declares an invalid size " + std::to_string(h.width) + "x" +
                               std::to_string(h.height));
      }
      return h;
    }
    i += length;
  }
}

}  // namespace

StatusOr<ImageHeader> ReadImageHeader(std::string_view bytes) {
  if (bytes.size() >= 8 && std::memcmp(bytes.data(), kPngSignature, 8) == 0) {
    return ReadPngHeader(bytes);
  }
  if (bytes.size() >= 3 && static_cast<unsigned char>(bytes[0]) == 0xFF &&
      static_cast<unsigned char>(bytes[1]) == 0xD8) {
    return ReadJpegHeader(bytes);
  }
  return InvalidArgument("not a PNG or JPEG image (" + std::to_string(bytes.size()) + " bytes)");
}

Status CheckImageLimits(std::string_view bytes, const ImageLimits& limits) {
  if (static_cast<int64_t>(bytes.size()) > limits.max_encoded_bytes) {
    return InvalidArgument("image of " + std::to_string(bytes.size()) +
                           " bytes is over the limit of " +
                           std::to_string(limits.max_encoded_bytes) + " encoded bytes");
  }
  SOMM_ASSIGN_OR_RETURN(ImageHeader h, ReadImageHeader(bytes));
  const std::string size = std::to_string(h.width) + "x" + std::to_string(h.height);
  if (h.width > limits.max_side || h.height > limits.max_side) {
    return InvalidArgument(h.format + " declares " + size + " pixels: a side is over the limit of " +
                           std::to_string(limits.max_side));
  }
  if (h.width * h.height > limits.max_pixels) {
    return InvalidArgument(h.format + " declares " + size + " = " +
                           std::to_string(h.width * h.height) + " pixels, over the limit of " +
                           std::to_string(limits.max_pixels) + " decoded pixels");
  }
  return Status::Ok();
}

Status CheckTransform(const ImageTransform& t) {
  constexpr int kMaxSide = 8192;
  if (t.channels != 1 && t.channels != 3) return InvalidArgument("channels must be 1 or 3");
  if (t.height < 1 || t.width < 1 || t.height > kMaxSide || t.width > kMaxSide) {
    return InvalidArgument("height and width must be 1.." + std::to_string(kMaxSide));
  }
  if (t.resize_shorter < 0 || t.resize_shorter > kMaxSide) {
    return InvalidArgument("resize must be 0.." + std::to_string(kMaxSide));
  }
  if (t.resize_shorter > 0 && (t.resize_shorter < t.height || t.resize_shorter < t.width)) {
    return InvalidArgument("resize " + std::to_string(t.resize_shorter) +
                           " is smaller than the crop " + std::to_string(t.height) + "x" +
                           std::to_string(t.width));
  }
  if (!std::isfinite(t.scale)) return InvalidArgument("scale must be a finite number");
  const size_t c = static_cast<size_t>(t.channels);
  if (!t.mean.empty() && t.mean.size() != c) {
    return InvalidArgument("mean needs one value per channel (" + std::to_string(c) + ")");
  }
  if (!t.stddev.empty() && t.stddev.size() != c) {
    return InvalidArgument("std needs one value per channel (" + std::to_string(c) + ")");
  }
  for (float m : t.mean) {
    if (!std::isfinite(m)) return InvalidArgument("mean values must be finite");
  }
  for (float s : t.stddev) {
    if (!std::isfinite(s) || s == 0.0f) return InvalidArgument("std values must be finite and non-zero");
  }
  return Status::Ok();
}

}  // namespace somm::image
