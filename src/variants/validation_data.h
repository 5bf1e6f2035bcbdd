// ValidationData: a model version's held-out inputs and labels
// (<repo>/<model>/<version>/validation/), and top-1 accuracy measured by
// running them through an ExecutableModel.
//
// Layout (written by tools/make_demo_repo.py, documented in its meta.json):
//   meta.json   {"count": N, "input": NAME, "datatype": "FP32", "shape": [...],
//                "labels_datatype": "INT64",
//                "files": {"inputs": "inputs.bin", "labels": "labels.bin"}}
//   inputs.bin  N samples, raw little-endian, row-major, `shape` each
//   labels.bin  N int64 class indices
// One input tensor only; a model with several inputs has no accuracy figure.
//
// Values; thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"
#include "runtime/backend.h"

namespace somm {

struct ValidationData {
  std::string dir;
  std::string input;  // the input tensor's name
  DataType datatype = DataType::kInvalid;
  Shape sample_shape;
  int64_t count = 0;
  std::string inputs;           // count samples of raw bytes
  std::vector<int64_t> labels;  // count class indices
};

// nullopt when `dir` has no meta.json; an InvalidArgument naming the file
// and the field when the data is there but inconsistent.
StatusOr<std::optional<ValidationData>> LoadValidationData(const std::string& dir);

// Top-1 accuracy: the argmax of each sample's slice of the first output,
// compared with its label. Runs `batch` samples per Execute (the last batch
// may be smaller); batch 0 = the model does not batch, so each sample goes
// alone with no batch dim. The caller has bound `model` to this thread.
StatusOr<double> MeasureTop1(ExecutableModel& model, const ValidationData& data, int64_t batch);

}  // namespace somm
