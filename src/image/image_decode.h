// Image decoding: PNG and JPEG bytes into a model's input, with limits.
//
// The one adapter of OpenCV (image_decode.cc; the header parse in
// image_header.cc does not use it): `somm infer`'s client-side
// preprocessing and the pipelines' built-in `preprocess` step
// (pipeline/builtin_steps.h) both decode here.
//
// Contract:
//   * ReadImageHeader reads the dimensions a PNG (IHDR) or a JPEG (its first
//     SOFn segment) declares, without decoding and without allocating by
//     them. Anything else, or a header cut short, is InvalidArgument.
//   * DecodeImage refuses, before any decoding, bytes over
//     ImageLimits::max_encoded_bytes and images whose header declares more
//     than max_pixels pixels or a side over max_side (a 100k x 100k PNG
//     costs a header read, not 10^10 pixels); then decodes, converts to
//     grayscale or RGB, resizes, centre-crops, scales, normalises and lays
//     the pixels out channel-major (CHW, FP32). Every refusal is
//     InvalidArgument, its message naming the limit or the problem.
//   * Pure functions of their arguments; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace somm::image {

struct ImageHeader {
  std::string format;  // "png" or "jpeg"
  int64_t width = 0;
  int64_t height = 0;
};

struct ImageLimits {
  int64_t max_encoded_bytes = int64_t{16} << 20;  // one image's encoded bytes
  int64_t max_pixels = int64_t{4096} * 4096;      // width x height as declared
  int64_t max_side = 16384;                       // either side as declared
};

enum class Interpolation { kArea, kBilinear };

// What becomes of the decoded pixels, in order.
struct ImageTransform {
  int channels = 3;  // 1 = grayscale, 3 = RGB
  // > 0: the shorter side is resized to this (aspect kept), then the centre
  // height x width is cut out (torchvision's Resize + CenterCrop). 0: the
  // image is resized to height x width directly.
  int resize_shorter = 0;
  int height = 224;
  int width = 224;
  Interpolation interpolation = Interpolation::kArea;
  bool invert = false;          // 255 - v first (white-on-black digits)
  float scale = 1.0f / 255.0f;  // then times scale
  std::vector<float> mean;      // per channel, after scale; empty = 0
  std::vector<float> stddev;    // per channel; empty = 1
};

StatusOr<ImageHeader> ReadImageHeader(std::string_view bytes);

// Checks `bytes` against `limits` from the header alone.
Status CheckImageLimits(std::string_view bytes, const ImageLimits& limits);

// channels x height x width floats, channel-major.
StatusOr<std::vector<float>> DecodeImage(std::string_view bytes, const ImageLimits& limits,
                                         const ImageTransform& transform);

// Whether a transform is one DecodeImage can apply (sizes positive and
// bounded, mean/stddev empty or one per channel, stddev non-zero).
Status CheckTransform(const ImageTransform& transform);

}  // namespace somm::image
