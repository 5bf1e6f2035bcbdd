#include "worker/input_check.h"

#include <algorithm>
#include <map>

namespace somm {

Status PrepareInputs(const ModelConfig& config, const std::string& label,
                     std::vector<Tensor> given, std::vector<Tensor>* ordered) {
  const bool batched = config.max_batch_size > 0;
  std::map<std::string, Tensor*> by_name;
  for (Tensor& t : given) {
    if (!by_name.emplace(t.name, &t).second) {
      return InvalidArgument("model '" + label + "': input '" + t.name + "' given twice");
    }
  }
  int64_t batch = -1;
  for (const TensorSpec& spec : config.inputs) {
    auto it = by_name.find(spec.name);
    if (it == by_name.end()) {
      return InvalidArgument("model '" + label + "': missing input '" + spec.name + "'");
    }
    Tensor& t = *it->second;
    if (t.datatype != spec.datatype) {
      return InvalidArgument("model '" + label + "': input '" + spec.name + "' has datatype " +
                             DataTypeName(t.datatype) + ", expected " +
                             DataTypeName(spec.datatype));
    }
    const Shape expected = FullShape(config, spec);
    bool shape_ok = t.shape.size() == expected.size();
    for (size_t d = 0; shape_ok && d < expected.size(); ++d) {
      shape_ok = t.shape[d] >= 0 && (expected[d] == -1 || expected[d] == t.shape[d]);
    }
    if (!shape_ok) {
      return InvalidArgument("model '" + label + "': input '" + spec.name + "' has shape " +
                             ShapeToString(t.shape) + ", expected " + ShapeToString(expected) +
                             (batched ? " (batch dimension first)" : ""));
    }
    if (batched) {
      if (t.shape[0] < 1 || t.shape[0] > config.max_batch_size) {
        return InvalidArgument("model '" + label + "': input '" + spec.name + "' has batch size " +
                               std::to_string(t.shape[0]) + ", allowed 1.." +
                               std::to_string(config.max_batch_size));
      }
      if (batch >= 0 && t.shape[0] != batch) {
        return InvalidArgument("model '" + label + "': inputs disagree on batch size (" +
                               std::to_string(batch) + " vs " + std::to_string(t.shape[0]) + ")");
      }
      batch = t.shape[0];
    }
    Status size = t.CheckByteSize();
    if (!size.ok()) return InvalidArgument("model '" + label + "': " + size.message());
    ordered->push_back(std::move(t));
    by_name.erase(it);
  }
  if (!by_name.empty()) {
    std::string expected;
    for (const auto& spec : config.inputs) expected += (expected.empty() ? "" : ", ") + spec.name;
    return InvalidArgument("model '" + label + "': unknown input '" + by_name.begin()->first +
                           "' (expected: " + expected + ")");
  }
  return Status::Ok();
}

StatusOr<std::vector<bool>> SelectOutputs(const ModelConfig& config, const std::string& label,
                                          const std::vector<RequestedOutput>& requested) {
  std::vector<bool> keep(config.outputs.size(), requested.empty());
  for (const auto& ro : requested) {
    auto it = std::find_if(config.outputs.begin(), config.outputs.end(),
                           [&](const TensorSpec& s) { return s.name == ro.name; });
    if (it == config.outputs.end()) {
      return InvalidArgument("model '" + label + "': unknown output '" + ro.name + "'");
    }
    keep[static_cast<size_t>(it - config.outputs.begin())] = true;
  }
  return keep;
}

}  // namespace somm
