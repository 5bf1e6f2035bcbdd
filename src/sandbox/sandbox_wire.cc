#include "sandbox/sandbox_wire.h"

#include <nlohmann/json.hpp>

namespace somm::sandbox_wire {
namespace {

using json = nlohmann::json;

StatusCode CodeFromName(const std::string& name) {
  for (int c = 0; c <= static_cast<int>(StatusCode::kPermissionDenied); ++c) {
    if (name == StatusCodeName(static_cast<StatusCode>(c))) return static_cast<StatusCode>(c);
  }
  return StatusCode::kInternal;
}

Device DeviceFromString(const std::string& text) {
  Device d;
  if (text.rfind("cuda:", 0) == 0) {
    d.kind = DeviceKind::kCuda;
    d.index = std::atoi(text.c_str() + 5);
  }
  return d;
}

template <typename T>
StatusOr<T> Decoded(const std::string& text, const char* what, T (*decode)(const json&)) {
  try {
    return decode(json::parse(text));
  } catch (const json::exception& e) {
    return InvalidArgument(std::string("malformed ") + what + ": " + e.what());
  }
}

}  // namespace

std::string EncodeProbe(const ProbeRequest& r) {
  return json{{"model_name", r.model_name},
              {"model_dir", r.model_dir},
              {"version", r.version},
              {"device", r.device.ToString()}}
      .dump();
}

StatusOr<ProbeRequest> DecodeProbe(const std::string& text) {
  return Decoded<ProbeRequest>(text, "probe request", [](const json& j) {
    ProbeRequest r;
    r.model_name = j.at("model_name").get<std::string>();
    r.model_dir = j.at("model_dir").get<std::string>();
    r.version = j.at("version").get<int64_t>();
    r.device = DeviceFromString(j.at("device").get<std::string>());
    return r;
  });
}

std::string EncodeVariantJob(const VariantJobRequest& r) {
  const VariantPipelineOptions& o = r.options;
  json hardware = json::array();
  for (const HardwareConfig& hw : o.hardware) {
    hardware.push_back({{"cuda", hw.device == DeviceKind::kCuda},
                        {"index", hw.device_index},
                        {"threads", hw.threads}});
  }
  return json{{"name", r.config.name},
              {"version", r.version},
              {"model_dir", r.model_dir},
              {"private_files", r.private_files},
              {"variants_root", o.variants_root},
              {"hardware", hardware},
              {"accuracy_tolerance", o.accuracy_tolerance},
              {"profile_batches", o.profile_batches},
              {"warmup_runs", o.warmup_runs},
              {"runs_per_point", o.runs_per_point},
              {"point_budget_ms", o.point_budget_ms},
              {"python", o.python},
              {"tools_dir", o.tools_dir}}
      .dump();
}

StatusOr<VariantJobRequest> DecodeVariantJob(const std::string& text) {
  return Decoded<VariantJobRequest>(text, "variant job", [](const json& j) {
    VariantJobRequest r;
    r.config.name = j.at("name").get<std::string>();
    r.version = j.at("version").get<int64_t>();
    r.model_dir = j.at("model_dir").get<std::string>();
    r.private_files = j.at("private_files").get<bool>();
    VariantPipelineOptions& o = r.options;
    o.variants_root = j.at("variants_root").get<std::string>();
    for (const json& hw : j.at("hardware")) {
      o.hardware.push_back({hw.at("cuda").get<bool>() ? DeviceKind::kCuda : DeviceKind::kCpu,
                            hw.at("index").get<int>(), hw.at("threads").get<int>()});
    }
    o.accuracy_tolerance = j.at("accuracy_tolerance").get<double>();
    o.profile_batches = j.at("profile_batches").get<std::vector<int64_t>>();
    o.warmup_runs = j.at("warmup_runs").get<int>();
    o.runs_per_point = j.at("runs_per_point").get<int>();
    o.point_budget_ms = j.at("point_budget_ms").get<double>();
    o.python = j.at("python").get<std::string>();
    o.tools_dir = j.at("tools_dir").get<std::string>();
    return r;
  });
}

std::string ConfinementLine(const std::string& description) {
  return json{{"confinement", description}}.dump() + "\n";
}

std::string ProgressLine(const VariantProgress& p) {
  return json{{"progress",
               {{"phase", p.phase}, {"done", p.done}, {"total", p.total}, {"current", p.current}}}}
             .dump() +
         "\n";
}

std::string ResultLine(const Status& status, bool out_of_memory,
                       const std::vector<std::string>& warnings, int64_t peak_memory_bytes) {
  json result{{"ok", status.ok()}, {"warnings", warnings}};
  if (status.ok() && peak_memory_bytes > 0) result["peak_memory_bytes"] = peak_memory_bytes;
  if (!status.ok()) {
    result["code"] = StatusCodeName(status.code());
    result["message"] = status.message();
    result["out_of_memory"] = out_of_memory;
  }
  // Invalid UTF-8 in a message (a path, libtorch's text) is replaced, not
  // thrown on.
  return json{{"result", result}}.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

StatusOr<ChildLine> ParseChildLine(const std::string& line) {
  return Decoded<ChildLine>(line, "line from the model sandbox", [](const json& j) {
    ChildLine out;
    if (j.contains("confinement")) out.confinement = j.at("confinement").get<std::string>();
    if (j.contains("progress")) {
      const json& p = j.at("progress");
      out.progress = VariantProgress{p.at("phase").get<std::string>(), p.at("done").get<int>(),
                                     p.at("total").get<int>(), p.at("current").get<std::string>()};
    }
    if (j.contains("result")) {
      const json& r = j.at("result");
      ChildLine::Result result;
      if (!r.at("ok").get<bool>()) {
        result.status = Status(CodeFromName(r.at("code").get<std::string>()),
                               r.at("message").get<std::string>());
        result.out_of_memory = r.value("out_of_memory", false);
      }
      result.warnings = r.value("warnings", std::vector<std::string>{});
      result.peak_memory_bytes = r.value("peak_memory_bytes", int64_t{0});
      out.result = std::move(result);
    }
    return out;
  });
}

bool LooksLikeOutOfMemory(const std::string& text) {
  for (const char* phrase : {"can't allocate memory", "bad_alloc", "Cannot allocate memory",
                             "out of memory"}) {
    if (text.find(phrase) != std::string::npos) return true;
  }
  return false;
}

}  // namespace somm::sandbox_wire
