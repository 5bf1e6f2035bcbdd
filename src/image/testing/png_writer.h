// PngBytes: a PNG file in memory (8-bit grayscale or RGB, one IDAT,
// zlib-compressed rows), for the tests of image/ and pipeline/, which
// check decoded pixels against the exact values written. Test-only.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <string>
#include <vector>

namespace somm::image::testing {

inline void AppendBigEndian32(std::string* out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<char>((v >> shift) & 0xFF));
}

inline void AppendChunk(std::string* out, const char* type, const std::string& data) {
  AppendBigEndian32(out, static_cast<uint32_t>(data.size()));
  const std::string body = std::string(type, 4) + data;
  out->append(body);
  AppendBigEndian32(out, static_cast<uint32_t>(
                             crc32(0, reinterpret_cast<const Bytef*>(body.data()),
                                   static_cast<uInt>(body.size()))));
}

// The IHDR chunk alone after the signature: a header that declares any size.
inline std::string PngHeaderOnly(uint32_t width, uint32_t height, int channels = 1) {
  std::string png = "\x89PNG\r\n\x1a\n";
  std::string ihdr;
  AppendBigEndian32(&ihdr, width);
  AppendBigEndian32(&ihdr, height);
  ihdr += std::string{8, static_cast<char>(channels == 3 ? 2 : 0), 0, 0, 0};
  AppendChunk(&png, "IHDR", ihdr);
  return png;
}

// `pixels`: row-major, `channels` (1 or 3) bytes per pixel.
inline std::string PngBytes(int width, int height, int channels, const std::vector<uint8_t>& pixels) {
  std::string png = PngHeaderOnly(static_cast<uint32_t>(width), static_cast<uint32_t>(height), channels);
  std::string raw;
  const size_t row = static_cast<size_t>(width) * channels;
  for (int y = 0; y < height; ++y) {
    raw.push_back(0);  // filter: none
    raw.append(reinterpret_cast<const char*>(pixels.data()) + y * row, row);
  }
  uLongf size = compressBound(static_cast<uLong>(raw.size()));
  std::string idat(size, '\0');
  compress(reinterpret_cast<Bytef*>(idat.data()), &size, reinterpret_cast<const Bytef*>(raw.data()),
           static_cast<uLong>(raw.size()));
  idat.resize(size);
  AppendChunk(&png, "IDAT", idat);
  AppendChunk(&png, "IEND", "");
  return png;
}

}  // namespace somm::image::testing
