// DecodeImage on OpenCV: the only file of somm that includes it.
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <cmath>

#include "image/image_decode.h"

namespace somm::image {
namespace {

int CvInterpolation(Interpolation i) {
  return i == Interpolation::kBilinear ? cv::INTER_LINEAR : cv::INTER_AREA;
}

// Resizes (and centre-crops) to transform's height x width.
cv::Mat Fit(const cv::Mat& image, const ImageTransform& t) {
  cv::Mat out = image;
  if (t.resize_shorter > 0) {
    const int w = image.cols, h = image.rows, s = t.resize_shorter;
    // The shorter side becomes s; the longer keeps the aspect, truncated
    // (as torchvision's Resize with one size).
    const int nw = w <= h ? s : static_cast<int>(int64_t{s} * w / h);
    const int nh = w <= h ? static_cast<int>(int64_t{s} * h / w) : s;
    if (nw != w || nh != h) {
      cv::resize(image, out, cv::Size(nw, nh), 0, 0, CvInterpolation(t.interpolation));
    }
    const int top = static_cast<int>(std::nearbyint((nh - t.height) / 2.0));
    const int left = static_cast<int>(std::nearbyint((nw - t.width) / 2.0));
    return out(cv::Rect(left, top, t.width, t.height)).clone();
  }
  if (image.cols != t.width || image.rows != t.height) {
    cv::resize(image, out, cv::Size(t.width, t.height), 0, 0, CvInterpolation(t.interpolation));
  }
  return out;
}

}  // namespace

StatusOr<std::vector<float>> DecodeImage(std::string_view bytes, const ImageLimits& limits,
                                         const ImageTransform& t) {
  SOMM_RETURN_IF_ERROR(CheckTransform(t));
  SOMM_RETURN_IF_ERROR(CheckImageLimits(bytes, limits));
  SOMM_ASSIGN_OR_RETURN(const ImageHeader header, ReadImageHeader(bytes));
  cv::Mat image;
  try {
    // OpenCV reads the buffer without copying it.
    const cv::Mat encoded(1, static_cast<int>(bytes.size()), CV_8U,
                          const_cast<char*>(bytes.data()));
    const int flags = (t.channels == 1 ? cv::IMREAD_GRAYSCALE : cv::IMREAD_COLOR) |
                      cv::IMREAD_IGNORE_ORIENTATION;
    image = cv::imdecode(encoded, flags);
    if (image.empty()) {
      return InvalidArgument("cannot decode the " + header.format + " image (corrupt or cut short)");
    }
    // The decoder read its own header: it must be the one the limits saw.
    if (image.cols != header.width || image.rows != header.height) {
      return InvalidArgument(header.format + " decoded to " + std::to_string(image.cols) + "x" +
                             std::to_string(image.rows) + " but declares " +
                             std::to_string(header.width) + "x" + std::to_string(header.height));
    }
    if (t.channels == 3) cv::cvtColor(image, image, cv::COLOR_BGR2RGB);
    if (t.resize_shorter > 0 &&
        (static_cast<int64_t>(t.resize_shorter) * std::max(image.cols, image.rows) /
             std::max(1, std::min(image.cols, image.rows)) >
         int64_t{1} << 16)) {
      return InvalidArgument("a " + std::to_string(image.cols) + "x" + std::to_string(image.rows) +
                             " image resized to a shorter side of " +
                             std::to_string(t.resize_shorter) + " is too long");
    }
    image = Fit(image, t);
  } catch (const cv::Exception& e) {
    return InvalidArgument("cannot decode the " + header.format + " image: " + e.what());
  }
  cv::Mat pixels;
  image.convertTo(pixels, CV_32F);
  const int c = t.channels, h = t.height, w = t.width;
  std::vector<float> chw(static_cast<size_t>(c) * h * w);
  for (int y = 0; y < h; ++y) {
    const float* row = pixels.ptr<float>(y);
    for (int x = 0; x < w; ++x) {
      for (int ch = 0; ch < c; ++ch) {
        float v = row[x * c + ch];
        if (t.invert) v = 255.0f - v;
        v *= t.scale;
        if (!t.mean.empty()) v -= t.mean[static_cast<size_t>(ch)];
        if (!t.stddev.empty()) v /= t.stddev[static_cast<size_t>(ch)];
        chw[(static_cast<size_t>(ch) * h + y) * w + x] = v;
      }
    }
  }
  return chw;
}

}  // namespace somm::image
