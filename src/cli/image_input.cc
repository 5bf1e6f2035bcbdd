#include "cli/image_input.h"

#include <fstream>
#include <iterator>

#include "image/image_decode.h"

namespace somm {

StatusOr<Tensor> LoadImageAsTensor(const std::string& path, const ImagePreprocessing& prep,
                                   const std::string& input_name, const Shape& input_shape) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return InvalidArgument("cannot read image " + path);
  const std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  image::ImageTransform t;
  t.channels = prep.channels;
  t.height = prep.height;
  t.width = prep.width;
  t.interpolation = image::Interpolation::kArea;
  t.invert = prep.invert;
  t.scale = prep.scale;
  t.mean = prep.mean;
  t.stddev = prep.stddev;
  // The user's own file: the limits only keep a mistaken one from taking
  // the machine's memory.
  image::ImageLimits limits;
  limits.max_encoded_bytes = int64_t{256} << 20;
  limits.max_pixels = int64_t{1} << 28;
  limits.max_side = 1 << 16;
  auto chw = image::DecodeImage(bytes, limits, t);
  if (!chw.ok()) return InvalidArgument("image " + path + ": " + chw.status().message());
  Tensor out;
  out.name = input_name;
  out.datatype = DataType::kFp32;
  out.shape = input_shape;
  if (!out.shape.empty() && out.shape[0] == -1) out.shape[0] = 1;
  if (ElementCount(out.shape) != static_cast<int64_t>(chw->size())) {
    return InvalidArgument("image preprocessing yields " + std::to_string(chw->size()) +
                           " values but input '" + input_name + "' has shape " +
                           ShapeToString(input_shape));
  }
  out.data.assign(reinterpret_cast<const char*>(chw->data()), chw->size() * sizeof(float));
  return out;
}

}  // namespace somm
