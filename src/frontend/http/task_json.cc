#include "frontend/http/task_json.h"

#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

namespace somm::oip {
namespace {

using nlohmann::json;

json SpecsToJson(const std::vector<TensorSpec>& specs) {
  json out = json::array();
  for (const TensorSpec& s : specs) {
    out.push_back({{"name", s.name}, {"datatype", DataTypeName(s.datatype)}, {"shape", s.shape}});
  }
  return out;
}

StatusOr<std::vector<TensorSpec>> SpecsFromJson(const json& j) {
  std::vector<TensorSpec> out;
  for (const json& e : j) {
    TensorSpec s;
    s.name = e.at("name").get<std::string>();
    s.datatype = DataTypeFromString(e.at("datatype").get<std::string>());
    if (s.datatype == DataType::kInvalid) {
      return InvalidArgument("task signature: unknown datatype for '" + s.name + "'");
    }
    s.shape = e.at("shape").get<Shape>();
    out.push_back(std::move(s));
  }
  return out;
}

void PutOptional(json& j, const char* key, const std::optional<double>& v) {
  if (v) j[key] = *v;
}

std::optional<double> GetOptional(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  return it->get<double>();
}

json TaskJson(const TaskDescription& d) {
  json j;
  j["task"] = d.task;
  j["signature"] = {{"inputs", SpecsToJson(d.signature.inputs)},
                    {"outputs", SpecsToJson(d.signature.outputs)},
                    {"batched", d.signature.batched}};
  json models = json::array();
  for (const TaskModel& m : d.models) {
    json mj = {{"name", m.name}, {"versions", m.versions}, {"usable_variants", m.usable_variants}};
    PutOptional(mj, "accuracy", m.accuracy);
    if (!m.mismatch.empty()) mj["mismatch"] = m.mismatch;
    models.push_back(std::move(mj));
  }
  j["models"] = std::move(models);
  j["usable_variants"] = d.usable_variants;
  json accuracy = json::object();
  PutOptional(accuracy, "min", d.min_accuracy);
  PutOptional(accuracy, "max", d.max_accuracy);
  j["accuracy"] = std::move(accuracy);
  json latency = json::object();
  PutOptional(latency, "min", d.min_latency_ms);
  PutOptional(latency, "max", d.max_latency_ms);
  j["latency_ms_batch1"] = std::move(latency);
  return j;
}

StatusOr<TaskDescription> TaskFrom(const json& j) {
  try {
    TaskDescription d;
    d.task = j.at("task").get<std::string>();
    const json& sig = j.at("signature");
    SOMM_ASSIGN_OR_RETURN(d.signature.inputs, SpecsFromJson(sig.at("inputs")));
    SOMM_ASSIGN_OR_RETURN(d.signature.outputs, SpecsFromJson(sig.at("outputs")));
    d.signature.batched = sig.at("batched").get<bool>();
    for (const json& mj : j.at("models")) {
      TaskModel m;
      m.name = mj.at("name").get<std::string>();
      m.versions = mj.at("versions").get<std::vector<std::string>>();
      m.usable_variants = mj.at("usable_variants").get<int>();
      m.accuracy = GetOptional(mj, "accuracy");
      m.mismatch = mj.value("mismatch", "");
      d.models.push_back(std::move(m));
    }
    d.usable_variants = j.at("usable_variants").get<int>();
    d.min_accuracy = GetOptional(j.at("accuracy"), "min");
    d.max_accuracy = GetOptional(j.at("accuracy"), "max");
    d.min_latency_ms = GetOptional(j.at("latency_ms_batch1"), "min");
    d.max_latency_ms = GetOptional(j.at("latency_ms_batch1"), "max");
    return d;
  } catch (const json::exception& e) {
    return InvalidArgument(std::string("task description: ") + e.what());
  }
}

}  // namespace

std::string EncodeTask(const TaskDescription& task) { return TaskJson(task).dump(); }

std::string EncodeTaskList(const std::vector<TaskDescription>& tasks) {
  json list = json::array();
  for (const TaskDescription& t : tasks) list.push_back(TaskJson(t));
  return json{{"tasks", std::move(list)}}.dump();
}

StatusOr<TaskDescription> DecodeTask(const std::string& text) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("task description: not JSON");
  return TaskFrom(j);
}

StatusOr<std::vector<TaskDescription>> DecodeTaskList(const std::string& text) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("tasks") || !j["tasks"].is_array()) {
    return InvalidArgument("task list: expected {\"tasks\": [...]}");
  }
  std::vector<TaskDescription> out;
  for (const json& t : j["tasks"]) {
    SOMM_ASSIGN_OR_RETURN(TaskDescription d, TaskFrom(t));
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace somm::oip
