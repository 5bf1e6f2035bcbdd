// MeasuredMemory: the memory a model version was measured to take when it
// was registered, kept beside its files as <version>/memory.json:
//
//   {"peak_memory_bytes": 268693504, "measured_by": "registration probe"}
//
// Registration (registry/registration.cc) writes it from its probe's
// ProbeReport (sandbox/model_sandbox.h): the peak that loading the model and
// running it once added to a confined child. A tenant's memory quota
// (auth/guard.h, max_private_memory_mb) charges every instance of a private
// model that figure; a version without the record (copied in by the
// operator, or registered before registrations measured) is charged its
// model file's size, which is all that is known of it.
//
// Pure functions over files; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/status.h"

namespace somm {

inline constexpr char kMeasuredMemoryFile[] = "memory.json";

// The record's text for `peak_memory_bytes`.
std::string MeasuredMemoryJson(int64_t peak_memory_bytes);

// The measured peak in `version_dir`'s record; nullopt when there is none
// or it does not parse.
std::optional<int64_t> ReadMeasuredMemory(const std::string& version_dir);

// What one instance of the version whose model file is `model_file`
// (<version_dir>/<the platform's file name>) is charged: the measured peak
// in its folder's record, else the file's size (0 when neither is there).
int64_t ChargedMemoryBytes(const std::string& model_file);

}  // namespace somm
