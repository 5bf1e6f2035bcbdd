// Builds the RegistrationRequest that `somm register` sends from its flags and
// the files they name: the TorchScript file, the optional validation folder
// and the optional model.yaml to copy preprocessing from.
//
// The validation folder has the layout tools/make_demo_repo.py writes into
// models/demo/<m>/1/validation/: meta.json ({"count": N, and optionally
// "files": {"inputs", "labels"}, "input", "datatype", "labels_datatype"}),
// inputs.bin (N samples of the single input, raw little-endian) and
// labels.bin (N INT64 labels). What meta.json declares is checked against the
// flags, so a folder made for another model fails here, not on the server.
//
// Errors are Status values naming the file and the problem. Reads files only.
#pragma once

#include <string>

#include "cli/commands.h"
#include "common/status.h"
#include "api/inference_server.h"

namespace somm {

StatusOr<RegistrationRequest> BuildRegistration(const RegisterOptions& options);

// Fills validation_count, validation_inputs and validation_labels.
Status ReadValidationDir(const std::string& dir, RegistrationRequest* request);

}  // namespace somm
