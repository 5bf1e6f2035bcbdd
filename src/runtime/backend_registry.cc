#include "runtime/backend_registry.h"

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <mutex>

#include "repository/platform_names.h"
#include "runtime/torch/torch_registration.h"

namespace somm {
namespace {

// The runtimes built into every binary: one line each. Their registrations
// are torch-free (names, files, variants); factories come from the
// runtimes' own libraries (BindBackendFactory).
std::vector<BackendRegistration> BuiltinBackends() {
  return {
      TorchScriptRegistration(),
  };
}

struct Registry {
  std::mutex mu;
  // A deque: registrations never move, so FindBackend's pointers stay valid.
  std::deque<BackendRegistration> all;
};

Registry& Table() {
  static Registry* registry = new Registry;
  return *registry;
}

const BackendRegistration* FindLocked(Registry& r, std::string_view name) {
  for (const BackendRegistration& b : r.all) {
    if (b.platform == name) return &b;
    if (std::find(b.aliases.begin(), b.aliases.end(), name) != b.aliases.end()) return &b;
  }
  return nullptr;
}

Status AddLocked(Registry& r, BackendRegistration b) {
  if (b.platform.empty()) return InvalidArgument("a backend registration needs a platform");
  if (b.model_file.empty()) {
    return InvalidArgument("platform '" + b.platform + "' names no model file");
  }
  if (b.variants.empty() || b.variants.front().build != VariantKind::Build::kAsRegistered) {
    return InvalidArgument("platform '" + b.platform +
                           "' must list the model as registered as its first variant");
  }
  std::vector<std::string> names = b.aliases;
  names.push_back(b.platform);
  for (const std::string& n : names) {
    if (FindLocked(r, n) != nullptr) {
      return FailedPrecondition("platform '" + n + "' is registered already");
    }
  }
  SOMM_RETURN_IF_ERROR(AddPlatformNames(b.platform, b.aliases));
  r.all.push_back(std::move(b));
  return Status::Ok();
}

// Registers the built-in runtimes once; every entry point calls it, and so
// does a static initialiser, so ParseModelConfig (which cannot call up
// here) sees them from main() on.
Registry& Registered() {
  static Registry* registry = [] {
    Registry& r = Table();
    std::lock_guard lock(r.mu);
    for (BackendRegistration& b : BuiltinBackends()) {
      const Status added = AddLocked(r, std::move(b));
      if (!added.ok()) std::abort();  // two built-ins clash: a build mistake
    }
    return &r;
  }();
  return *registry;
}

[[maybe_unused]] const bool kBuiltinsRegistered = (Registered(), true);

std::string PlatformList(Registry& r) {
  std::vector<std::string> names;
  for (const BackendRegistration& b : r.all) names.push_back("'" + b.platform + "'");
  std::sort(names.begin(), names.end());
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "none" : out;
}

}  // namespace

Status RegisterBackend(BackendRegistration registration) {
  Registry& r = Registered();
  std::lock_guard lock(r.mu);
  return AddLocked(r, std::move(registration));
}

bool BindBackendFactory(const std::string& platform, BackendFactory factory) {
  Registry& r = Registered();
  std::lock_guard lock(r.mu);
  for (BackendRegistration& b : r.all) {
    if (b.platform == platform) {
      b.factory = std::move(factory);
      return true;
    }
  }
  std::abort();  // a runtime's library binds a platform its registration lacks
}

const BackendRegistration* FindBackend(std::string_view platform) {
  Registry& r = Registered();
  std::lock_guard lock(r.mu);
  return FindLocked(r, platform);
}

StatusOr<const BackendRegistration*> BackendFor(std::string_view platform) {
  Registry& r = Registered();
  std::lock_guard lock(r.mu);
  if (const BackendRegistration* b = FindLocked(r, platform)) return b;
  return InvalidArgument("unsupported platform '" + std::string(platform) +
                         "' (this build supports " + PlatformList(r) + ")");
}

std::vector<std::string> RegisteredPlatforms() {
  Registry& r = Registered();
  std::lock_guard lock(r.mu);
  std::vector<std::string> out;
  for (const BackendRegistration& b : r.all) out.push_back(b.platform);
  std::sort(out.begin(), out.end());
  return out;
}

StatusOr<std::unique_ptr<Backend>> CreateBackend(std::string_view platform,
                                                 const BackendOptions& options) {
  BackendFactory factory;
  {
    Registry& r = Registered();
    std::lock_guard lock(r.mu);
    const BackendRegistration* b = FindLocked(r, platform);
    if (b == nullptr) {
      return InvalidArgument("unsupported platform '" + std::string(platform) +
                             "' (this build supports " + PlatformList(r) + ")");
    }
    if (!b->factory) {
      return FailedPrecondition("platform '" + b->platform +
                                "' has no backend in this binary (its runtime is not linked)");
    }
    factory = b->factory;
  }
  std::unique_ptr<Backend> backend = factory(options);
  if (backend == nullptr) {
    return Internal("the factory of platform '" + std::string(platform) + "' made no backend");
  }
  return backend;
}

std::string AsRegisteredVariant(std::string_view platform) {
  const BackendRegistration* b = FindBackend(platform);
  // AddLocked refuses a registration without variants.
  return b == nullptr ? "" : b->variants.front().name;
}

StatusOr<std::string> ModelFilePath(const ModelConfig& config, const std::string& model_dir,
                                    int64_t version) {
  SOMM_ASSIGN_OR_RETURN(const BackendRegistration* b, BackendFor(config.platform));
  return (std::filesystem::path(model_dir) / std::to_string(version) / b->model_file).string();
}

bool IsModelFileName(std::string_view file_name) {
  Registry& r = Registered();
  std::lock_guard lock(r.mu);
  return std::any_of(r.all.begin(), r.all.end(),
                     [&](const BackendRegistration& b) { return b.model_file == file_name; });
}

const VariantKind* FindVariantKind(std::string_view platform, std::string_view variant) {
  const BackendRegistration* b = FindBackend(platform);
  if (b == nullptr) return nullptr;
  for (const VariantKind& k : b->variants) {
    if (k.name == variant) return &k;
  }
  return nullptr;
}

const BackendRegistration* BackendOfVariant(std::string_view variant) {
  Registry& r = Registered();
  std::lock_guard lock(r.mu);
  for (const BackendRegistration& b : r.all) {
    for (const VariantKind& k : b.variants) {
      if (k.name == variant) return &b;
    }
  }
  return nullptr;
}

int VariantRank(std::string_view variant) {
  Registry& r = Registered();
  std::lock_guard lock(r.mu);
  int past = 0;
  for (const BackendRegistration& b : r.all) {
    for (size_t i = 0; i < b.variants.size(); ++i) {
      if (b.variants[i].name == variant) return static_cast<int>(i);
    }
    past = std::max(past, static_cast<int>(b.variants.size()));
  }
  return past;
}

}  // namespace somm
