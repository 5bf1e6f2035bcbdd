#include "pipeline/builtin_steps.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "image/image_decode.h"

namespace somm::pipeline {
namespace {

template <typename T>
Tensor MakeTensor(const std::string& name, DataType type, Shape shape, const std::vector<T>& v) {
  Tensor t;
  t.name = name;
  t.datatype = type;
  t.shape = std::move(shape);
  t.data.assign(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  return t;
}

}  // namespace

StatusOr<std::vector<std::string_view>> SplitBytes(const Tensor& tensor) {
  if (tensor.datatype != DataType::kBytes) {
    return InvalidArgument("input '" + tensor.name + "' must be BYTES");
  }
  std::vector<std::string_view> out;
  const std::string& d = tensor.data;
  size_t at = 0;
  while (at < d.size()) {
    if (d.size() - at < 4) return InvalidArgument("input '" + tensor.name + "': BYTES element cut short");
    uint32_t len = 0;
    for (int i = 3; i >= 0; --i) len = (len << 8) | static_cast<unsigned char>(d[at + static_cast<size_t>(i)]);
    at += 4;
    if (len > d.size() - at) return InvalidArgument("input '" + tensor.name + "': BYTES element cut short");
    out.emplace_back(d.data() + at, len);
    at += len;
  }
  return out;
}

std::string JoinBytes(const std::vector<std::string>& elements) {
  std::string out;
  for (const std::string& e : elements) {
    const auto len = static_cast<uint32_t>(e.size());
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((len >> (8 * i)) & 0xFF));
    out += e;
  }
  return out;
}

StatusOr<Tensor> RunPreprocess(const PreprocessOptions& options, const Tensor& images,
                               int64_t batch) {
  SOMM_ASSIGN_OR_RETURN(const auto elements, SplitBytes(images));
  if (static_cast<int64_t>(elements.size()) != batch) {
    return InvalidArgument("input '" + images.name + "' holds " + std::to_string(elements.size()) +
                           " images for a batch of " + std::to_string(batch) +
                           " (one BYTES element per image)");
  }
  // Every header first: nothing is decoded while any image is refused.
  for (size_t i = 0; i < elements.size(); ++i) {
    if (Status s = image::CheckImageLimits(elements[i], options.limits); !s.ok()) {
      return InvalidArgument("image " + std::to_string(i) + ": " + s.message());
    }
  }
  const auto& t = options.transform;
  const size_t per_image = static_cast<size_t>(t.channels) * t.height * t.width;
  Tensor out;
  out.name = "pixels";
  out.datatype = DataType::kFp32;
  out.shape = {batch, t.channels, t.height, t.width};
  out.data.resize(per_image * elements.size() * sizeof(float));
  for (size_t i = 0; i < elements.size(); ++i) {
    auto chw = image::DecodeImage(elements[i], options.limits, t);
    if (!chw.ok()) return InvalidArgument("image " + std::to_string(i) + ": " + chw.status().message());
    std::memcpy(out.data.data() + i * per_image * sizeof(float), chw->data(), per_image * sizeof(float));
  }
  return out;
}

StatusOr<std::vector<Tensor>> RunPostprocess(const PostprocessOptions& options,
                                             const Tensor& scores, int64_t batch) {
  if (scores.datatype != DataType::kFp32) return InvalidArgument("postprocess takes FP32 scores");
  const size_t n = scores.data.size() / sizeof(float);
  if (batch < 1 || n == 0 || n % static_cast<size_t>(batch) != 0) {
    return InvalidArgument("scores of " + std::to_string(n) + " values for a batch of " +
                           std::to_string(batch));
  }
  const size_t classes = n / static_cast<size_t>(batch);
  std::vector<float> p(n);
  std::memcpy(p.data(), scores.data.data(), n * sizeof(float));
  if (options.softmax) {
    for (size_t r = 0; r < static_cast<size_t>(batch); ++r) {
      float* row = p.data() + r * classes;
      const float top = *std::max_element(row, row + classes);
      double sum = 0;
      for (size_t c = 0; c < classes; ++c) sum += std::exp(static_cast<double>(row[c] - top));
      for (size_t c = 0; c < classes; ++c) {
        row[c] = static_cast<float>(std::exp(static_cast<double>(row[c] - top)) / sum);
      }
    }
  }
  std::vector<Tensor> out;
  out.push_back(MakeTensor("probabilities", DataType::kFp32, {batch, static_cast<int64_t>(classes)}, p));
  const int k = options.argmax ? 1 : options.top_k;
  if (k <= 0) return out;
  if (static_cast<size_t>(k) > classes) {
    return InvalidArgument("top_k " + std::to_string(k) + " is over the " +
                           std::to_string(classes) + " classes");
  }
  std::vector<int64_t> best;
  std::vector<float> best_scores;
  std::vector<std::string> labels;
  std::vector<size_t> order(classes);
  for (size_t r = 0; r < static_cast<size_t>(batch); ++r) {
    const float* row = p.data() + r * classes;
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [row](size_t a, size_t b) {
      return row[a] > row[b] || (row[a] == row[b] && a < b);
    });
    for (int i = 0; i < k; ++i) {
      best.push_back(static_cast<int64_t>(order[static_cast<size_t>(i)]));
      best_scores.push_back(row[order[static_cast<size_t>(i)]]);
      if (!options.labels.empty()) {
        const size_t c = order[static_cast<size_t>(i)];
        labels.push_back(c < options.labels.size() ? options.labels[c] : std::to_string(c));
      }
    }
  }
  const bool one = options.argmax;
  out.push_back(MakeTensor(one ? "class" : "classes", DataType::kInt64, {batch, k}, best));
  out.push_back(MakeTensor(one ? "score" : "scores", DataType::kFp32, {batch, k}, best_scores));
  if (!options.labels.empty()) {
    Tensor t;
    t.name = one ? "label" : "labels";
    t.datatype = DataType::kBytes;
    t.shape = {batch, k};
    t.data = JoinBytes(labels);
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace somm::pipeline
