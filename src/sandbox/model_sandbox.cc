#include "sandbox/model_sandbox.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "runtime/backend_registry.h"

namespace somm {
namespace fs = std::filesystem;

LoadOptions ProbeLoadOptions(const ModelConfig& config, const std::string& model_file,
                             int64_t version, const Device& device) {
  LoadOptions lo;
  lo.model_name = config.name;
  lo.model_version = version;
  lo.model_path = model_file;
  lo.device = device;
  lo.max_batch_size = config.max_batch_size;
  lo.inputs = config.inputs;
  lo.outputs = config.outputs;
  return lo;
}

Status ProbeWithBackend(const ProbeRequest& request, const BackendSet& backends) {
  StatusOr<ModelConfig> config = LoadModelConfig(request.model_dir);
  if (!config.ok()) return config.status();
  config->name = request.model_name;
  SOMM_ASSIGN_OR_RETURN(Backend* const backend, backends.For(config->platform));
  SOMM_ASSIGN_OR_RETURN(const std::string file,
                        ModelFilePath(*config, request.model_dir, request.version));
  // Loading runs the model once on zeros of the declared signature: a model
  // that does not load or does not match its signature fails here.
  auto loaded = backend->Load(ProbeLoadOptions(*config, file, request.version, request.device));
  return loaded.ok() ? Status::Ok() : loaded.status();
}

namespace {

// A "VmRSS:" or "VmHWM:" line of /proc/self/status, in bytes; 0 if absent.
int64_t StatusBytes(const std::string& field) {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind(field, 0) == 0) return std::stoll(line.substr(field.size())) * 1024;  // kB
  }
  return 0;
}

}  // namespace

PeakMemoryMark PeakMemoryMark::Begin() {
  // "5" resets VmHWM to the current resident set (Linux 4.0 on); without
  // it the peak is the process's whole life's, which only overstates.
  std::ofstream("/proc/self/clear_refs") << "5";
  PeakMemoryMark mark;
  mark.resident_at_begin_ = StatusBytes("VmRSS:");
  return mark;
}

int64_t PeakMemoryMark::AddedBytes() const {
  return std::max<int64_t>(0, StatusBytes("VmHWM:") - resident_at_begin_);
}

void RestrictToOwner(const std::string& path) {
  std::error_code ec;
  const auto restrict = [](const fs::path& p, const fs::file_status& st) {
    if (fs::is_symlink(st)) return;
    chmod(p.c_str(), fs::is_directory(st) ? 0700 : 0600);
  };
  restrict(path, fs::symlink_status(path, ec));
  if (ec || !fs::is_directory(path, ec)) return;
  for (auto it = fs::recursive_directory_iterator(path, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    restrict(it->path(), it->symlink_status(ec));
  }
}

}  // namespace somm
