#include "router/answer_compare.h"

#include <cmath>
#include <cstring>

namespace somm {

namespace {

std::vector<float> Floats(const Tensor& t) {
  std::vector<float> out;
  if (t.datatype == DataType::kFp32) {
    out.resize(t.data.size() / sizeof(float));
    std::memcpy(out.data(), t.data.data(), out.size() * sizeof(float));
  } else if (t.datatype == DataType::kFp16 || t.datatype == DataType::kBf16) {
    out.resize(t.data.size() / 2);
    for (size_t i = 0; i < out.size(); ++i) {
      uint16_t h;
      std::memcpy(&h, t.data.data() + 2 * i, 2);
      out[i] = t.datatype == DataType::kFp16 ? HalfToFloat(h) : Bf16ToFloat(h);
    }
  }
  return out;
}

bool TensorsDiffer(const Tensor& a, const Tensor& b, double tolerance) {
  if (a.datatype != b.datatype || a.shape != b.shape || a.data.size() != b.data.size()) return true;
  const bool floating = a.datatype == DataType::kFp32 || a.datatype == DataType::kFp16 ||
                        a.datatype == DataType::kBf16;
  if (!floating) return a.data != b.data;
  const std::vector<float> x = Floats(a);
  const std::vector<float> y = Floats(b);
  if (a.shape.size() == 2 && a.shape[1] > 1) {
    const auto classes = static_cast<size_t>(a.shape[1]);
    for (size_t row = 0; row + classes <= x.size(); row += classes) {
      size_t best_x = row;
      size_t best_y = row;
      for (size_t i = row; i < row + classes; ++i) {
        if (x[i] > x[best_x]) best_x = i;
        if (y[i] > y[best_y]) best_y = i;
      }
      if (best_x != best_y) return true;
    }
    return false;
  }
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) != std::isnan(y[i])) return true;
    if (std::fabs(x[i] - y[i]) > tolerance * std::max(1.0f, std::fabs(x[i]))) return true;
  }
  return false;
}

}  // namespace

bool AnswersDiffer(const std::vector<Tensor>& stable, const std::vector<Tensor>& shadow,
                   double relative_tolerance) {
  if (stable.size() != shadow.size()) return true;
  for (const Tensor& a : stable) {
    const Tensor* b = nullptr;
    for (const Tensor& t : shadow) {
      if (t.name == a.name) b = &t;
    }
    if (b == nullptr || TensorsDiffer(a, *b, relative_tolerance)) return true;
  }
  return false;
}

}  // namespace somm
