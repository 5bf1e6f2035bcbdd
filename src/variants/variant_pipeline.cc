#include "variants/variant_pipeline.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "common/subprocess.h"
#include "runtime/backend_registry.h"
#include "variants/validation_data.h"
#include "variants/variant_profiler.h"

namespace somm {
namespace {

namespace fs = std::filesystem;

// Exit code of a variant tool (VariantKind::Build::kTool) for "does not
// apply to this model" (tools/quantize_dynamic.py: nothing to quantise).
constexpr int kToolNothingToDo = 3;

using Build = VariantKind::Build;

// One variant this run will try to build.
struct Plan {
  std::string name;
  std::string precision;     // VariantProfile::precision
  std::string optimization;  // VariantProfile::optimization (a tool's: its summary)
  Build build = Build::kAsRegistered;
  VariantRecipe recipe;  // kBackend only
  std::string tool;      // kTool only
  std::vector<HardwareConfig> hardware;
};

std::vector<HardwareConfig> Only(const std::vector<HardwareConfig>& all, DeviceKind kind) {
  std::vector<HardwareConfig> out;
  for (const auto& hw : all) {
    if (hw.device == kind) out.push_back(hw);
  }
  return out;
}

// Which of the runtime's variants apply (runtime/backend_registry.h lists
// them, with why each may not): everything here is decided from the options
// and the hardware, before any file is touched.
std::vector<Plan> PlanVariants(const BackendRegistration& runtime,
                               const VariantPipelineOptions& options,
                               const std::vector<HardwareConfig>& hardware,
                               std::vector<SkippedVariant>* skipped) {
  VariantHost host;
  host.hardware = hardware;
  host.cpu = options.cpu_features ? *options.cpu_features : DetectCpuFeatures();
  host.has_tools_dir = !options.tools_dir.empty();
  std::vector<Plan> plans;
  for (const VariantKind& kind : runtime.variants) {
    std::string reason = kind.skip_reason ? kind.skip_reason(host) : "";
    std::vector<HardwareConfig> on = kind.runs_on ? Only(hardware, *kind.runs_on) : hardware;
    if (reason.empty() && on.empty()) reason = "no hardware config to run it on";
    if (!reason.empty()) {
      skipped->push_back({kind.name, std::move(reason)});
      continue;
    }
    Plan plan{kind.name, kind.precision, kind.optimization, kind.build, kind.recipe, kind.tool,
              std::move(on)};
    if (kind.runs_on) {
      const HardwareConfig& first = plan.hardware.front();
      plan.recipe.device = Device{first.device, first.device_index};
    }
    plans.push_back(std::move(plan));
  }
  return plans;
}

std::string LastLine(const std::string& text) {
  std::string t = text;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  const auto nl = t.rfind('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

Status LinkOrCopy(const std::string& src, const std::string& dst) {
  std::error_code ec;
  fs::remove(dst, ec);
  fs::create_hard_link(src, dst, ec);
  if (!ec) return Status::Ok();
  fs::copy_file(src, dst, fs::copy_options::overwrite_existing, ec);
  if (ec) return Internal("cannot copy " + src + " to " + dst + ": " + ec.message());
  return Status::Ok();
}

// Runs a variant's tool. Returns the tool's summary line; a
// FailedPrecondition carries the reason the variant does not apply.
StatusOr<std::string> RunTool(const std::string& name, const VariantPipelineOptions& options,
                              const std::string& src, const std::string& dst) {
  const std::string tool = (fs::path(options.tools_dir) / name).string();
  if (!fs::exists(tool)) return FailedPrecondition(tool + " does not exist");
  const std::string tmp = dst + ".tmp";
  SOMM_ASSIGN_OR_RETURN(ProcessResult r, RunProcess({options.python, tool, src, tmp}));
  const std::string line = LastLine(r.output);
  if (r.exit_code == kToolNothingToDo) return FailedPrecondition(line);
  std::error_code ec;
  if (r.exit_code != 0) {
    fs::remove(tmp, ec);
    return Internal(name + " exited with " + std::to_string(r.exit_code) + ": " + line);
  }
  fs::rename(tmp, dst, ec);
  if (ec) return Internal("cannot move " + tmp + " to " + dst + ": " + ec.message());
  return line;
}

// Builds `plan`'s file; updates its optimization text for int8.
Status BuildOne(Plan& plan, const std::string& src, const std::string& dst, Backend& backend,
                const VariantPipelineOptions& options) {
  switch (plan.build) {
    case Build::kAsRegistered:
      return LinkOrCopy(src, dst);
    case Build::kBackend:
      return backend.BuildVariant(plan.recipe, src, dst);
    case Build::kTool: {
      SOMM_ASSIGN_OR_RETURN(plan.optimization, RunTool(plan.tool, options, src, dst));
      return Status::Ok();
    }
  }
  return Internal("unknown build kind");
}

Status WriteFileAtomically(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out || !(out << text) || !out.flush()) return Internal("cannot write " + tmp.string());
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec)
    return Internal("cannot move " + tmp.string() + " to " + path.string() + ": " + ec.message());
  return Status::Ok();
}

// Validation data the model can take, or the reason it has none.
struct AccuracyInputs {
  std::optional<ValidationData> data;
  std::string absent_reason;
};

AccuracyInputs FindValidation(const ModelConfig& config, const std::string& dir) {
  AccuracyInputs a;
  auto loaded = LoadValidationData(dir);
  if (!loaded.ok()) {
    a.absent_reason = "validation data unusable: " + loaded.status().message();
    return a;
  }
  if (!loaded->has_value()) {
    a.absent_reason = "no validation data in " + dir;
    return a;
  }
  const ValidationData& v = **loaded;
  if (config.inputs.size() != 1) {
    a.absent_reason =
        "validation data covers one input; the model has " + std::to_string(config.inputs.size());
    return a;
  }
  const TensorSpec& spec = config.inputs[0];
  bool shape_ok = spec.shape.size() == v.sample_shape.size();
  for (size_t i = 0; shape_ok && i < spec.shape.size(); ++i) {
    shape_ok = spec.shape[i] < 0 || spec.shape[i] == v.sample_shape[i];
  }
  if (v.datatype != spec.datatype || !shape_ok) {
    a.absent_reason = "validation data in " + dir + " (" + DataTypeName(v.datatype) + " " +
                      ShapeToString(v.sample_shape) + ") does not match input '" + spec.name +
                      "' (" + DataTypeName(spec.datatype) + " " + ShapeToString(spec.shape) + ")";
    return a;
  }
  a.data = std::move(**loaded);
  return a;
}

std::string Fixed(double v, int digits = 4) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

// Marks variants that lost too much accuracy against the model as
// registered (profiles[0]).
void MarkAccuracyLosses(std::vector<VariantProfile>& profiles, double tolerance) {
  if (profiles.empty() || !profiles[0].accuracy) return;
  const double ref = *profiles[0].accuracy;
  for (size_t i = 1; i < profiles.size(); ++i) {
    VariantProfile& p = profiles[i];
    if (!p.usable || !p.accuracy || *p.accuracy >= ref - tolerance) continue;
    p.usable = false;
    p.unusable_reason = "accuracy " + Fixed(*p.accuracy) + " is " + Fixed(ref - *p.accuracy) +
                        " below " + profiles[0].variant + "'s " + Fixed(ref) + " (tolerance " +
                        Fixed(tolerance, 3) + ")";
  }
}

std::string SkippedToJson(const std::vector<SkippedVariant>& skipped) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& s : skipped) j.push_back({{"variant", s.variant}, {"reason", s.reason}});
  return j.dump(2);
}

// Runs GenerateAndProfile's steps; one instance per call.
class Pipeline {
 public:
  Pipeline(const ModelConfig& config, int64_t version, const std::string& model_dir,
           Backend& backend, const VariantPipelineOptions& options,
           std::function<void(const VariantProgress&)> progress)
      : config_(config),
        version_(version),
        version_dir_(fs::path(model_dir) / std::to_string(version)),
        out_dir_(fs::path(options.variants_root) / config.name / std::to_string(version)),
        backend_(backend),
        options_(options),
        progress_(std::move(progress)) {}

  StatusOr<VariantSet> Run() {
    SOMM_ASSIGN_OR_RETURN(runtime_, BackendFor(config_.platform));
    const std::string src = (version_dir_ / runtime_->model_file).string();
    if (!fs::is_regular_file(src))
      return NotFound("model '" + Label() + "': no model file at " + src);
    std::error_code ec;
    fs::create_directories(out_dir_, ec);
    if (ec) return Internal("cannot create " + out_dir_.string() + ": " + ec.message());

    hardware_ = options_.hardware.empty() ? DefaultHardware(backend_) : options_.hardware;
    std::vector<Plan> plans = PlanVariants(*runtime_, options_, hardware_, &set_.skipped);
    total_ = 0;
    for (const auto& p : plans) total_ += 1 + static_cast<int>(p.hardware.size());
    accuracy_ = FindValidation(config_, (version_dir_ / "validation").string());

    for (Plan& plan : plans) {
      if (Cancelled()) return Unavailable("variant generation for '" + Label() + "' cancelled");
      Report("build", plan.name);
      const fs::path dir = out_dir_ / plan.name;
      fs::create_directories(dir, ec);
      if (ec) return Internal("cannot create " + dir.string() + ": " + ec.message());
      const std::string file = (dir / runtime_->model_file).string();
      Status built = BuildOne(plan, src, file, backend_, options_);
      ++done_;
      if (!built.ok()) {
        if (plan.build == Build::kAsRegistered) return built;
        set_.skipped.push_back({plan.name, built.code() == StatusCode::kFailedPrecondition
                                               ? built.message()
                                               : "build failed: " + built.message()});
        done_ += static_cast<int>(plan.hardware.size());
        continue;
      }
      VariantProfile profile = ProfileAll(plan, file);
      if (Cancelled()) return Unavailable("variant generation for '" + Label() + "' cancelled");
      if (plan.build == Build::kAsRegistered && profile.hardware.empty()) {
        return FailedPrecondition("model '" + Label() + "' as registered " +
                                  profile.unusable_reason);
      }
      set_.profiles.push_back(std::move(profile));
    }
    MarkAccuracyLosses(set_.profiles, options_.accuracy_tolerance);
    SOMM_RETURN_IF_ERROR(Persist());
    Report("done", "");
    return std::move(set_);
  }

 private:
  std::string Label() const { return config_.name + ":" + std::to_string(version_); }

  bool Cancelled() const { return options_.cancelled && options_.cancelled(); }

  void Report(const std::string& phase, const std::string& current) {
    if (progress_) progress_(VariantProgress{phase, done_, total_, current});
  }

  LoadOptions BaseLoadOptions(const Plan& plan, const std::string& file) const {
    VariantProfile p;
    p.variant = plan.name;
    p.precision = plan.precision;
    p.file = file;
    p.version = version_;
    return LoadOptionsForVariant(config_, p, plan.hardware.front());
  }

  VariantProfile ProfileAll(const Plan& plan, const std::string& file) {
    VariantProfile profile;
    profile.model = config_.name;
    profile.version = version_;
    profile.variant = plan.name;
    profile.precision = plan.precision;
    profile.optimization = plan.optimization;
    profile.file = file;
    ProfilerOptions popts;
    popts.batches = options_.profile_batches.empty() ? DefaultProfileBatches(config_.max_batch_size)
                                                     : options_.profile_batches;
    popts.warmup_runs = options_.warmup_runs;
    popts.runs_per_point = options_.runs_per_point;
    popts.point_budget_ms = options_.point_budget_ms;
    popts.resident_bytes = options_.resident_bytes;

    std::string accuracy_error, failures;
    bool accuracy_done = false;
    for (const HardwareConfig& hw : plan.hardware) {
      if (Cancelled()) break;
      Report("profile", plan.name + " on " + hw.Name());
      const ValidationData* data = accuracy_done || !accuracy_.data ? nullptr : &*accuracy_.data;
      auto m = ProfileVariantOn(backend_, BaseLoadOptions(plan, file), hw, popts, data);
      ++done_;
      if (!m.ok()) {
        failures += (failures.empty() ? "" : "; ") + hw.Name() + ": " + m.status().message();
        continue;
      }
      if (data != nullptr) {
        accuracy_done = true;
        profile.accuracy = m->accuracy;
        accuracy_error = m->accuracy_error;
        profile.accuracy_source = m->accuracy ? "top-1 on " + std::to_string(data->count) +
                                                    " validation samples in " + data->dir +
                                                    " (measured on " + hw.Name() + ")"
                                              : "validation run failed: " + accuracy_error;
      }
      profile.hardware.push_back(std::move(m->profile));
    }
    if (!accuracy_done && !accuracy_.data) SetAccuracyWithoutData(profile);
    if (profile.hardware.empty()) {
      profile.usable = false;
      profile.unusable_reason = "failed on every hardware config: " + failures;
    } else if (!failures.empty()) {
      set_.warnings.push_back(profile.Id() + " failed on " + failures);
    }
    return profile;
  }

  void SetAccuracyWithoutData(VariantProfile& profile) const {
    const std::string& as_registered = runtime_->variants.front().name;
    if (profile.variant == as_registered && config_.accuracy.value) {
      profile.accuracy = config_.accuracy.value;
      profile.accuracy_source =
          "declared in model.yaml (" + accuracy_.absent_reason + "): " + config_.accuracy.source;
      return;
    }
    profile.accuracy_source = accuracy_.absent_reason;
    if (profile.variant != as_registered && config_.accuracy.value) {
      profile.accuracy_source +=
          "; the accuracy declared in model.yaml applies to " + as_registered + " only";
    }
  }

  Status Persist() {
    for (const auto& p : set_.profiles) {
      SOMM_RETURN_IF_ERROR(
          WriteFileAtomically(out_dir_ / p.variant / "profile.json", ProfileToJson(p)));
    }
    SOMM_RETURN_IF_ERROR(
        WriteFileAtomically(out_dir_ / "skipped.json", SkippedToJson(set_.skipped)));
    // Whatever an earlier run left that this one did not produce is stale.
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(out_dir_, ec)) {
      if (!entry.is_directory()) continue;
      const std::string name = entry.path().filename().string();
      const bool kept = std::any_of(set_.profiles.begin(), set_.profiles.end(),
                                    [&](const VariantProfile& p) { return p.variant == name; });
      if (!kept) fs::remove_all(entry.path(), ec);
    }
    return Status::Ok();
  }

  const ModelConfig& config_;
  const int64_t version_;
  const fs::path version_dir_;
  const fs::path out_dir_;
  Backend& backend_;
  const BackendRegistration* runtime_ = nullptr;  // config_.platform's, set by Run()
  const VariantPipelineOptions& options_;
  const std::function<void(const VariantProgress&)> progress_;
  std::vector<HardwareConfig> hardware_;
  AccuracyInputs accuracy_;
  VariantSet set_;
  int done_ = 0;
  int total_ = 0;
};

StatusOr<std::string> ReadText(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot read " + path.string());
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

StatusOr<VariantSet> GenerateAndProfile(const ModelConfig& config, int64_t version,
                                        const std::string& model_dir, Backend& backend,
                                        const VariantPipelineOptions& options,
                                        std::function<void(const VariantProgress&)> progress) {
  if (options.variants_root.empty()) return InvalidArgument("variants_root is not set");
  return Pipeline(config, version, model_dir, backend, options, std::move(progress)).Run();
}

StatusOr<std::vector<VariantProfile>> LoadProfiles(const std::string& variants_root,
                                                   const std::string& model, int64_t version) {
  const fs::path dir = fs::path(variants_root) / model / std::to_string(version);
  if (!fs::is_directory(dir))
    return NotFound("no variants generated for " + model + ":" + std::to_string(version) + " (" +
                    dir.string() + ")");
  std::vector<VariantProfile> profiles;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const fs::path json = entry.path() / "profile.json";
    if (!entry.is_directory() || !fs::exists(json)) continue;
    SOMM_ASSIGN_OR_RETURN(std::string text, ReadText(json));
    SOMM_ASSIGN_OR_RETURN(VariantProfile p, ProfileFromJson(text, json.string()));
    // The file is named as its runtime names model files (the one that
    // lists the variant), else as the profile did; the folder is wherever
    // the repository is now.
    const BackendRegistration* runtime = BackendOfVariant(p.variant);
    const fs::path file = runtime != nullptr ? fs::path(runtime->model_file)
                                             : fs::path(p.file).filename();
    p.file = (entry.path() / file).string();
    profiles.push_back(std::move(p));
  }
  if (ec) return Internal("cannot list " + dir.string() + ": " + ec.message());
  std::sort(profiles.begin(), profiles.end(), [](const VariantProfile& a, const VariantProfile& b) {
    const int ra = VariantRank(a.variant), rb = VariantRank(b.variant);
    return ra != rb ? ra < rb : a.variant < b.variant;
  });
  return profiles;
}

StatusOr<VariantSet> LoadVariantSet(const std::string& variants_root, const std::string& model,
                                    int64_t version) {
  VariantSet set;
  SOMM_ASSIGN_OR_RETURN(set.profiles, LoadProfiles(variants_root, model, version));
  const fs::path path = fs::path(variants_root) / model / std::to_string(version) / "skipped.json";
  if (!fs::exists(path)) return set;
  SOMM_ASSIGN_OR_RETURN(std::string text, ReadText(path));
  try {
    for (const auto& s : nlohmann::json::parse(text)) {
      set.skipped.push_back(
          {s.at("variant").get<std::string>(), s.at("reason").get<std::string>()});
    }
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(path.string() + ": malformed: " + e.what());
  }
  return set;
}

LoadOptions LoadOptionsForVariant(const ModelConfig& config, const VariantProfile& profile,
                                  const HardwareConfig& hw) {
  LoadOptions o;
  o.model_name = config.name;
  o.model_version = profile.version;
  o.model_path = profile.file;
  o.device = Device{hw.device, hw.device_index};
  o.intra_op_threads = hw.threads;
  o.max_batch_size = config.max_batch_size;
  o.inputs = config.inputs;
  o.outputs = config.outputs;
  const VariantKind* kind = FindVariantKind(config.platform, profile.variant);
  o.optimize_for_inference = kind != nullptr && kind->optimize_at_load;
  if (profile.precision == "bf16") o.precision = DataType::kBf16;
  if (profile.precision == "fp16") o.precision = DataType::kFp16;
  return o;
}

std::vector<HardwareConfig> DefaultHardware(const Backend& backend) {
  return DefaultHardware(backend.Devices());
}

std::vector<HardwareConfig> DefaultHardware(const std::vector<Device>& devices) {
  const int cores = std::max(1u, std::thread::hardware_concurrency());
  std::vector<HardwareConfig> hw;
  for (int t = 1; t <= std::min(cores, 8); t *= 2) hw.push_back({DeviceKind::kCpu, 0, t});
  for (const Device& d : devices) {
    if (d.kind == DeviceKind::kCuda) hw.push_back({DeviceKind::kCuda, d.index, 1});
  }
  return hw;
}

std::vector<int64_t> DefaultProfileBatches(int64_t max_batch_size) {
  std::vector<int64_t> batches;
  for (int64_t b = 1; b < max_batch_size; b *= 2) batches.push_back(b);
  batches.push_back(std::max<int64_t>(1, max_batch_size));
  return batches;
}

}  // namespace somm
