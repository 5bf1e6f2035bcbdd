// Turns an image file into a model input tensor, following the model's
// `preprocessing.image` config: decode (image/image_decode.h), grayscale or RGB, resize
// (area interpolation), scale, optional inversion, per-channel mean/std, and
// HWC -> CHW. The result is reshaped to the model input's shape with a batch
// of one, as long as the element counts agree (e.g. 1x8x8 -> [1, 64]).
#pragma once

#include <string>

#include "common/status.h"
#include "common/tensor.h"
#include "repository/model_config.h"

namespace somm {

// `input_shape` is the model's input shape as metadata reports it (a leading
// -1 is the batch dim, set to 1 here).
StatusOr<Tensor> LoadImageAsTensor(const std::string& path, const ImagePreprocessing& prep,
                                   const std::string& input_name, const Shape& input_shape);

}  // namespace somm
