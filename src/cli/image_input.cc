#include "cli/image_input.h"

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

namespace somm {

StatusOr<Tensor> LoadImageAsTensor(const std::string& path, const ImagePreprocessing& prep,
                                   const std::string& input_name, const Shape& input_shape) {
  cv::Mat image;
  try {
    image = cv::imread(path, prep.channels == 1 ? cv::IMREAD_GRAYSCALE : cv::IMREAD_COLOR);
  } catch (const cv::Exception& e) {
    return InvalidArgument("cannot decode image " + path + ": " + e.what());
  }
  if (image.empty()) return InvalidArgument("cannot read image " + path + " (not a PNG/JPEG?)");
  if (prep.channels == 3) cv::cvtColor(image, image, cv::COLOR_BGR2RGB);
  cv::Mat resized;
  cv::resize(image, resized, cv::Size(prep.width, prep.height), 0, 0, cv::INTER_AREA);
  cv::Mat pixels;
  resized.convertTo(pixels, CV_32F);

  const int c = prep.channels, h = prep.height, w = prep.width;
  std::vector<float> chw(static_cast<size_t>(c * h * w));
  for (int y = 0; y < h; ++y) {
    const float* row = pixels.ptr<float>(y);
    for (int x = 0; x < w; ++x) {
      for (int ch = 0; ch < c; ++ch) {
        float v = row[x * c + ch];
        if (prep.invert) v = 255.0f - v;
        v *= prep.scale;
        if (!prep.mean.empty()) v -= prep.mean[static_cast<size_t>(ch)];
        if (!prep.stddev.empty()) v /= prep.stddev[static_cast<size_t>(ch)];
        chw[static_cast<size_t>((ch * h + y) * w + x)] = v;
      }
    }
  }
  Tensor t;
  t.name = input_name;
  t.datatype = DataType::kFp32;
  t.shape = input_shape;
  if (!t.shape.empty() && t.shape[0] == -1) t.shape[0] = 1;
  if (ElementCount(t.shape) != static_cast<int64_t>(chw.size())) {
    return InvalidArgument("image preprocessing yields " + std::to_string(chw.size()) +
                           " values but input '" + input_name + "' has shape " +
                           ShapeToString(input_shape));
  }
  t.data.assign(reinterpret_cast<const char*>(chw.data()), chw.size() * sizeof(float));
  return t;
}

}  // namespace somm
