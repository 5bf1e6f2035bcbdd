// ModelRegistrar's registration path: validate a new model and move it into
// the repository (registrar.h says what happens next).
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <thread>

#include "registry/model_registrar.h"
#include "registry/task_catalog.h"
#include "repository/measured_memory.h"
#include "runtime/backend_registry.h"

namespace somm {
namespace fs = std::filesystem;
namespace {

std::string YamlList(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::string YamlFloats(const std::vector<float>& v) {
  std::ostringstream s;
  s << "[";
  for (size_t i = 0; i < v.size(); ++i) s << (i ? ", " : "") << v[i];
  s << "]";
  return s.str();
}

std::string Quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

// The model.yaml a registration produces.
std::string ConfigYaml(const RegistrationRequest& r) {
  std::ostringstream y;
  // Every caller-given string is quoted: a task or tensor name holding a
  // newline must not add keys (such as owner_tenant) to the model's config.
  y << "name: " << r.name << "\nplatform: " << r.platform << "\ntask: " << Quoted(r.task)
    << "\n";
  if (!r.description.empty()) y << "description: " << Quoted(r.description) << "\n";
  if (!r.owner_tenant.empty()) y << "owner_tenant: " << Quoted(r.owner_tenant) << "\n";
  y << "max_batch_size: " << r.max_batch_size << "\n";
  for (const auto* specs : {&r.inputs, &r.outputs}) {
    y << (specs == &r.inputs ? "inputs:\n" : "outputs:\n");
    for (const auto& t : *specs) {
      y << "  - {name: " << Quoted(t.name) << ", datatype: " << DataTypeName(t.datatype)
        << ", shape: " << YamlList(t.shape) << "}\n";
    }
  }
  if (r.max_batch_size > 0) {
    y << "dynamic_batching: {max_queue_delay_us: 0, max_queue_size: 4096}\n";
  }
  y << "instance_count: 1\nintra_op_threads: 1\n";
  if (r.preprocessing) {
    const auto& p = *r.preprocessing;
    y << "preprocessing:\n  image: {channels: " << p.channels << ", height: " << p.height
      << ", width: " << p.width << ", scale: " << p.scale;
    if (!p.mean.empty()) y << ", mean: " << YamlFloats(p.mean);
    if (!p.stddev.empty()) y << ", std: " << YamlFloats(p.stddev);
    y << ", invert: " << (p.invert ? "true" : "false") << "}\n";
  }
  return y.str();
}

Status CheckRegistration(const RegistrationRequest& r) {
  if (r.name.empty() || r.name.size() > 128 || r.name[0] == '.' ||
      r.name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") !=
          std::string::npos) {
    return InvalidArgument("model name '" + r.name + "' must be 1-128 letters, digits, '-', '_' or '.'");
  }
  if (r.task.find('/') == std::string::npos ||
      std::any_of(r.task.begin(), r.task.end(), [](char c) { return std::iscntrl(static_cast<unsigned char>(c)); })) {
    return InvalidArgument("task '" + r.task + "' must be 'task/dataset', without control characters");
  }
  if (r.inputs.empty() || r.outputs.empty()) {
    return InvalidArgument("registration of '" + r.name + "' needs at least one input and one output");
  }
  if (r.model_bytes.empty()) return InvalidArgument("registration of '" + r.name + "' has no model file");
  // An unknown platform is refused as model.yaml's is, with the list; the
  // check also keeps what is written into model.yaml to a registered name.
  if (const auto runtime = BackendFor(r.platform); !runtime.ok()) {
    return InvalidArgument("registration of '" + r.name + "': " + runtime.status().message());
  }
  if (r.private_model && r.owner_tenant.empty()) {
    return InvalidArgument("a private registration needs a tenant: serve with --auth keys and "
                           "register with a key (SOMM_API_KEY)");
  }
  if (r.validation_count < 0) return InvalidArgument("validation count must not be negative");
  if (r.validation_count > 0) {
    if (r.inputs.size() != 1) {
      return InvalidArgument("validation data needs a model with exactly one input");
    }
    const TensorSpec& in = r.inputs[0];
    const int64_t per_sample = ElementCount(in.shape);
    if (per_sample < 0 || in.datatype == DataType::kBytes) {
      return InvalidArgument("validation data needs input '" + in.name + "' to have a fixed shape");
    }
    const size_t expected = static_cast<size_t>(r.validation_count * per_sample) * DataTypeSize(in.datatype);
    if (r.validation_inputs.size() != expected) {
      return InvalidArgument("validation inputs hold " + std::to_string(r.validation_inputs.size()) +
                             " bytes; " + std::to_string(r.validation_count) + " samples of " +
                             DataTypeName(in.datatype) + " " + ShapeToString(in.shape) + " need " +
                             std::to_string(expected));
    }
    if (r.validation_labels.size() != static_cast<size_t>(r.validation_count) * 8) {
      return InvalidArgument("validation labels hold " + std::to_string(r.validation_labels.size()) +
                             " bytes; " + std::to_string(r.validation_count) +
                             " INT64 labels need " + std::to_string(r.validation_count * 8));
    }
  }
  return Status::Ok();
}

// Writes `bytes` to `path` under `root`, making the folders between them:
// with `owner_only`, folders 0700 and the file 0600 from their creation on
// (a private model's files, docs/security.md); else the process's umask.
Status WriteFile(const fs::path& root, const fs::path& path, const std::string& bytes,
                 bool owner_only) {
  std::error_code ec;
  for (fs::path folder = root; const auto& part : path.parent_path().lexically_relative(root)) {
    folder /= part;
    if (mkdir(folder.c_str(), owner_only ? 0700 : 0777) != 0 && errno != EEXIST) {
      return Internal("cannot create " + folder.string() + ": " + std::strerror(errno));
    }
  }
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                      owner_only ? 0600 : 0666);
  if (fd < 0) return Internal("cannot write " + path.string() + ": " + std::strerror(errno));
  size_t at = 0;
  while (at < bytes.size()) {
    const ssize_t n = write(fd, bytes.data() + at, bytes.size() - at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      close(fd);
      return Internal("cannot write " + path.string() + ": " + std::strerror(errno));
    }
    at += static_cast<size_t>(n);
  }
  if (close(fd) != 0) return Internal("cannot write " + path.string() + ": " + std::strerror(errno));
  return Status::Ok();
}

}  // namespace

bool ModelRegistrar::MaySee(const Caller& caller, const std::string& name) const {
  if (!caller.authenticated || caller.admin) return true;
  if (std::optional<std::string> owner = catalog_.OwnerOf(name)) return caller.MayUse(*owner);
  // Not published: its model.yaml says. One that does not parse has no
  // known owner, and only an admin sees it (as auth::Guard has it).
  auto config = LoadModelConfig((fs::path(catalog_.repository_path()) / name).string());
  return config.ok() && caller.MayUse(config->owner_tenant);
}

StatusOr<ModelConfig> ModelRegistrar::Register(const RegistrationRequest& r) {
  // Errors name the model's files from its own folder, never the server's.
  StatusOr<ModelConfig> config = RegisterChecked(r);
  if (!config.ok()) return catalog_.WithoutPaths(config.status());
  return config;
}

StatusOr<ModelConfig> ModelRegistrar::RegisterChecked(const RegistrationRequest& r) {
  if (shutting_down_) return Unavailable("server is shutting down");
  SOMM_RETURN_IF_ERROR(CheckRegistration(r));
  const fs::path repo(catalog_.repository_path());
  std::error_code ec;
  // A name the registrant may see is refused at once. One it may not see
  // (another tenant's private model) is answered as a new name is, through
  // every check below, and refused only where the model would move in: so
  // no answer tells a hidden model apart from none (docs/security.md).
  const bool taken = fs::exists(repo / r.name, ec);
  const Status name_taken =
      AlreadyExists("model '" + r.name + "' already exists in the repository");
  if (taken && MaySee(r.caller, r.name)) return name_taken;
  {
    // A task's queries are checked against one signature (task_catalog.h):
    // a model that takes other inputs would never fit them. Only the models
    // the registrant may use count: those are the only ones its tenant's
    // task queries share candidates with, and the message quotes them.
    ModelConfig candidate;
    candidate.name = r.name;
    candidate.task = r.task;
    candidate.inputs = r.inputs;
    candidate.outputs = r.outputs;
    candidate.max_batch_size = r.max_batch_size;
    std::vector<VersionPtr> visible = catalog_.All();
    std::erase_if(visible,
                  [&](const VersionPtr& v) { return !r.caller.MayUse(v->config.owner_tenant); });
    SOMM_RETURN_IF_ERROR(CheckTaskSignature(candidate, visible));
  }
  // Stage everything beside the repository, check it, then move it in with
  // one rename: a broken registration leaves nothing behind.
  // Absolute: the sandbox's child runs elsewhere, and its messages name the
  // staged files by the path it was given, which staged() below rewrites.
  static std::atomic<int> counter{0};
  const fs::path staging = fs::absolute(repo, ec).lexically_normal() / ".somm" / "staging" /
                           (std::to_string(getpid()) + "-" + std::to_string(counter++));
  const fs::path dir = staging / r.name;
  // A private model's files are its owner's alone from the first byte:
  // 0700 folders, 0600 files (moved into the repository as they are).
  const bool owner_only = !r.owner_tenant.empty();
  fs::create_directories(staging.parent_path(), ec);
  if (mkdir(staging.c_str(), 0700) != 0) {
    return Internal("cannot stage '" + r.name + "': " + std::strerror(errno));
  }
  struct Cleanup {
    fs::path path;
    ~Cleanup() {
      std::error_code e;
      fs::remove_all(path, e);
    }
  } cleanup{staging};
  // The staged files are named as the model's own ("m/1/<model file>").
  const auto staged = [&](const std::string& message) {
    std::string out = message;
    const std::string from = dir.string();
    for (size_t at = out.find(from); at != std::string::npos;
         at = out.find(from, at + r.name.size())) {
      out.replace(at, from.size(), r.name);
    }
    return out;
  };
  const auto write = [&](const fs::path& path, const std::string& bytes) {
    const Status written = WriteFile(staging, path, bytes, owner_only);
    return written.ok() ? written : Status(written.code(), staged(written.message()));
  };
  SOMM_RETURN_IF_ERROR(write(dir / "model.yaml", ConfigYaml(r)));
  // The file takes the name its platform gives it.
  SOMM_ASSIGN_OR_RETURN(const BackendRegistration* runtime, BackendFor(r.platform));
  SOMM_RETURN_IF_ERROR(write(dir / "1" / runtime->model_file, r.model_bytes));
  if (r.validation_count > 0) {
    SOMM_RETURN_IF_ERROR(write(dir / "1" / "validation" / "inputs.bin", r.validation_inputs));
    SOMM_RETURN_IF_ERROR(write(dir / "1" / "validation" / "labels.bin", r.validation_labels));
    std::ostringstream meta;
    meta << "{\"count\": " << r.validation_count << ", \"input\": \"" << r.inputs[0].name
         << "\", \"datatype\": \"" << DataTypeName(r.inputs[0].datatype)
         << "\", \"shape\": " << YamlList(r.inputs[0].shape)
         << ", \"labels_datatype\": \"INT64\", \"source\": \"somm register\"}\n";
    SOMM_RETURN_IF_ERROR(write(dir / "1" / "validation" / "meta.json", meta.str()));
  }
  auto config = LoadModelConfig(dir.string());
  if (!config.ok()) {
    return InvalidArgument("registration of '" + r.name +
                           "': " + staged(config.status().message()));
  }
  // The probe loads the model and runs it once on zeros of the declared
  // signature, in the sandbox (a confined child process in a server): a
  // model that does not load, does not match its signature, loops or eats
  // memory is refused here, and the server notices nothing else.
  ProbeRequest probe_request;
  probe_request.model_name = r.name;
  probe_request.model_dir = dir.string();
  probe_request.version = 1;
  probe_request.device = options_.device;
  const StatusOr<ProbeReport> probe = sandbox_->Probe(probe_request);
  if (shutting_down_) return Unavailable("server is shutting down");
  if (!probe.ok()) {
    // The sandbox's own trouble (it could not start a child) is not the
    // model's: the registration may be tried again.
    if (probe.status().code() == StatusCode::kUnavailable) return probe.status();
    return InvalidArgument("registration of '" + r.name +
                           "' refused: " + staged(probe.status().message()));
  }
  // What the probe measured goes with the version, and a private model's
  // owner is charged it for every instance, not its file's size: a small
  // file may allocate gigabytes when it runs (repository/measured_memory.h).
  const int64_t measured = probe->peak_memory_bytes;
  if (measured > 0) {
    SOMM_RETURN_IF_ERROR(write(dir / "1" / kMeasuredMemoryFile, MeasuredMemoryJson(measured)));
  }
  if (r.admit_private_memory) {
    const int64_t instances = config->instance_count;
    const int64_t one = measured > 0 ? measured : static_cast<int64_t>(r.model_bytes.size());
    const Status room = r.admit_private_memory(one * instances);
    if (!room.ok()) {
      const std::string figure =
          measured > 0 ? "took " + std::to_string(measured >> 20) +
                             " MiB at its peak when the probe loaded it and ran it once"
                       : "is charged its file's " + std::to_string(one >> 20) + " MiB";
      return Status(room.code(), "registration of '" + r.name + "' refused: one instance " +
                                     figure + ", and it has " + std::to_string(instances) +
                                     " instance(s); " + room.message());
    }
  }
  if (taken || fs::exists(repo / r.name, ec)) return name_taken;
  fs::rename(dir, repo / r.name, ec);
  if (ec) return Internal("cannot move '" + r.name + "' into the repository: " + ec.message());
  spdlog::info("registered model {} for task {}", r.name, r.task);
  return std::move(config).value();
}

}  // namespace somm
