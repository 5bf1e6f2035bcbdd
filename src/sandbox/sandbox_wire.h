// The model sandbox's wire between the server and its child
// (process_sandbox.h, sandbox_child.h): the child is
// `<somm> model-sandbox probe|variants REQUEST`, REQUEST one JSON object,
// and it answers on its standard output with JSON lines:
//
//   {"confinement": "rlimits, user and network namespaces, seccomp filter"}
//                              (written before exec: what applied)
//   {"progress": {"phase": "profile", "done": 3, "total": 9, "current": "..."}}
//   {"result": {"ok": true, "warnings": [...], "peak_memory_bytes": N}}
//   {"result": {"ok": false, "code": "INVALID_ARGUMENT", "message": "...",
//               "out_of_memory": false}}
//
// Requests carry paths and options only: the child reads the model's
// model.yaml itself. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "sandbox/model_sandbox.h"

namespace somm::sandbox_wire {

inline constexpr char kCommand[] = "model-sandbox";
inline constexpr char kProbe[] = "probe";
inline constexpr char kVariants[] = "variants";

std::string EncodeProbe(const ProbeRequest& request);
StatusOr<ProbeRequest> DecodeProbe(const std::string& json);

// Sends the model's name, folder, version and VariantPipelineOptions'
// plain fields (not its functions: cancelled, resident_bytes, cpu_features)
// and private_files; the decoded request's config has only the name, which
// the child checks against the model.yaml it reads.
std::string EncodeVariantJob(const VariantJobRequest& request);
StatusOr<VariantJobRequest> DecodeVariantJob(const std::string& json);

std::string ConfinementLine(const std::string& description);
std::string ProgressLine(const VariantProgress& progress);
// `peak_memory_bytes`: a probe's ProbeReport (0 = none).
std::string ResultLine(const Status& status, bool out_of_memory,
                       const std::vector<std::string>& warnings = {},
                       int64_t peak_memory_bytes = 0);

// One line from the child.
struct ChildLine {
  std::optional<std::string> confinement;
  std::optional<VariantProgress> progress;
  struct Result {
    Status status;
    bool out_of_memory = false;
    std::vector<std::string> warnings;
    int64_t peak_memory_bytes = 0;  // a probe's measure; 0 = none
  };
  std::optional<Result> result;
};
StatusOr<ChildLine> ParseChildLine(const std::string& line);

// Whether an error's text is an allocation failure (libtorch's "can't
// allocate memory", std::bad_alloc, ENOMEM's text).
bool LooksLikeOutOfMemory(const std::string& text);

}  // namespace somm::sandbox_wire
