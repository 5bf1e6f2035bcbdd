// BackendRegistry: the runtimes this binary knows, keyed by the `platform`
// of model.yaml. Everything outside runtime/<name>/ that depends on which
// runtime a model is for asks here: the model file's name in each version
// folder, the platform OIP model metadata reports, the variants the
// runtime can make of a model, and the Backend that loads it.
//
// Adding a runtime: a folder runtime/<name>/ whose torch-free
// <name>_registration.cc returns its BackendRegistration, plus one line in
// BuiltinBackends() (backend_registry.cc) that lists it. The folder's heavy
// library, which links the framework, binds the factory
// (BindBackendFactory) from a static initialiser, so a binary without the
// framework still knows the platform's files and variants; its
// CMakeLists.txt makes every binary that links the library keep that
// initialiser (runtime/torch/CMakeLists.txt: nothing else calls into it).
//
// Contract:
//   * The built-in registrations are in place before main() and before any
//     function here returns; RegisterBackend adds more (tests, plug-ins).
//     Each registration also adds its names to repository/platform_names.h,
//     so ParseModelConfig accepts them.
//   * Lookups take the platform's own name or an alias. A registration is
//     never removed, so a returned pointer stays valid for the process.
//   * Unknown platforms are refused with InvalidArgument listing the
//     registered ones.
// Thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/duty_cycle_pacer.h"
#include "common/host_probe.h"
#include "common/status.h"
#include "profiles/variant_profile.h"
#include "repository/model_config.h"
#include "runtime/backend.h"

namespace somm {

// What variants/ knows of the host when it asks which variants apply.
struct VariantHost {
  std::vector<HardwareConfig> hardware;  // the configurations to profile on
  CpuFeatures cpu;
  bool has_tools_dir = false;  // a folder of variant tools is configured
};

// One variant a runtime can make of a registered model.
struct VariantKind {
  enum class Build {
    kAsRegistered,  // the registered file itself (hard-linked or copied)
    kBackend,       // Backend::BuildVariant(recipe)
    kTool,          // `python <tools_dir>/<tool> <src> <dst>`; exit 3: does not apply
  };
  std::string name;          // VariantProfile::variant, e.g. "ts-opt"
  std::string precision;     // VariantProfile::precision: "fp32", "int8", "bf16", "fp16"
  std::string optimization;  // VariantProfile::optimization (a tool's summary replaces it)
  Build build = Build::kAsRegistered;
  // kBackend: what BuildVariant gets. With `runs_on` set, its device is the
  // first hardware configuration of that kind.
  VariantRecipe recipe;
  std::string tool;  // kTool
  // Loaded with LoadOptions::optimize_for_inference.
  bool optimize_at_load = false;
  // Profiled on the configurations of this kind only; unset: on all.
  std::optional<DeviceKind> runs_on;
  // Why it is not made on `host` ("" or unset: it is).
  std::function<std::string(const VariantHost& host)> skip_reason;
};

// What a process tunes in every backend it makes, whatever the runtime;
// each runtime keeps its defaults for the rest.
struct BackendOptions {
  // Every load and unload records the CPU time it used here
  // (common/duty_cycle_pacer.h); whoever starts a background load waits on
  // the same pacer (worker/worker.h). Null: nothing recorded.
  std::shared_ptr<DutyCyclePacer> background_pacer;
};

// Makes a backend. Processes reach it through CreateBackend or a BackendSet
// (runtime/backend_set.h), never through the runtime's own functions.
using BackendFactory = std::function<std::unique_ptr<Backend>(const BackendOptions&)>;

struct BackendRegistration {
  // model.yaml's `platform`: the name registration writes, and aliases a
  // model.yaml may use instead (the config holds `platform` either way).
  std::string platform;
  std::vector<std::string> aliases;
  // The model file in each version folder and variant folder ("model.pt").
  std::string model_file;
  // The platform OIP model metadata reports ("pytorch_torchscript").
  std::string metadata_platform;
  // Every variant the runtime can make, in generation order; the first is
  // the model as registered (Build::kAsRegistered).
  std::vector<VariantKind> variants;
  // Makes the backend; unset until the runtime's library binds it.
  BackendFactory factory;
};

// Adds `registration`; FailedPrecondition when its platform or one of its
// names is registered already, InvalidArgument when it lacks a name, a model
// file or an as-registered first variant.
Status RegisterBackend(BackendRegistration registration);
// Sets the factory of a registered platform (the runtime's library calls
// it from a static initialiser; see the file comment). Returns true so it
// can initialise a static.
bool BindBackendFactory(const std::string& platform, BackendFactory factory);

// The registration of `platform` (its name or an alias), or null.
const BackendRegistration* FindBackend(std::string_view platform);
// The same, or InvalidArgument naming the registered platforms.
StatusOr<const BackendRegistration*> BackendFor(std::string_view platform);
// The registered platforms' own names, sorted.
std::vector<std::string> RegisteredPlatforms();
// A new backend for `platform`; FailedPrecondition when this binary has no
// factory for it (its framework is not linked).
StatusOr<std::unique_ptr<Backend>> CreateBackend(std::string_view platform,
                                                 const BackendOptions& options = {});
// The name of `platform`'s variant that is the model file as registered
// (its first, Build::kAsRegistered); "" for an unknown platform.
std::string AsRegisteredVariant(std::string_view platform);

// <model_dir>/<version>/<the model file of config.platform>.
StatusOr<std::string> ModelFilePath(const ModelConfig& config, const std::string& model_dir,
                                    int64_t version);
// Whether `file_name` is the model file of some registered platform.
bool IsModelFileName(std::string_view file_name);
// The variant `variant` of `platform`, or null.
const VariantKind* FindVariantKind(std::string_view platform, std::string_view variant);
// The first registration that lists the variant `variant`, or null (a
// profile names its variant, not its platform).
const BackendRegistration* BackendOfVariant(std::string_view variant);
// Where `variant` comes in its runtime's generation order (the first
// registration that lists it); past every known variant when none does.
int VariantRank(std::string_view variant);

}  // namespace somm
