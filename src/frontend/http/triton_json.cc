#include "frontend/http/triton_json.h"

#include <nlohmann/json.hpp>

#include <utility>


namespace somm::oip {
namespace {

using nlohmann::json;

json Duration(const DurationStat& d) { return json{{"count", d.count}, {"ns", d.ns}}; }

json OneModel(const ModelStatistics& s) {
  const InferStatistics& i = s.inference_stats;
  json batches = json::array();
  for (const BatchSizeStatistics& b : s.batch_stats) {
    batches.push_back(json{{"batch_size", b.batch_size},
                           {"compute_input", Duration(b.compute_input)},
                           {"compute_infer", Duration(b.compute_infer)},
                           {"compute_output", Duration(b.compute_output)}});
  }
  return json{{"name", s.name},
              {"version", s.version},
              {"last_inference", s.last_inference_ms},
              {"inference_count", s.inference_count},
              {"execution_count", s.execution_count},
              {"inference_stats",
               {{"success", Duration(i.success)},
                {"fail", Duration(i.fail)},
                {"queue", Duration(i.queue)},
                {"compute_input", Duration(i.compute_input)},
                {"compute_infer", Duration(i.compute_infer)},
                {"compute_output", Duration(i.compute_output)},
                {"cache_hit", Duration(i.cache_hit)},
                {"cache_miss", Duration(i.cache_miss)}}},
              {"response_stats", json::object()},
              {"batch_stats", std::move(batches)},
              {"memory_usage", json::array()}};
}

json VersionPolicy(const somm::VersionPolicy& p) {
  switch (p.kind) {
    case somm::VersionPolicy::Kind::kAll:
      return json{{"all", json::object()}};
    case somm::VersionPolicy::Kind::kSpecific:
      return json{{"specific", {{"versions", p.specific}}}};
    case somm::VersionPolicy::Kind::kLatest:
      break;
  }
  return json{{"latest", {{"num_versions", p.latest_count}}}};
}

json InstanceGroups(const ModelConfiguration& c) {
  json groups = json::array();
  for (const ModelConfiguration::Instances& g : c.instance_groups) {
    const bool gpu = g.device == "cuda";
    json row{{"name", g.name}, {"kind", gpu ? "KIND_GPU" : "KIND_CPU"}, {"count", g.count}};
    row["gpus"] = gpu ? json::array({g.index}) : json::array();
    groups.push_back(std::move(row));
  }
  if (groups.empty()) {
    // Nothing loaded now: the instances model.yaml asks for, on the device
    // somm will choose when the first query comes.
    groups.push_back(json{{"name", c.config.name},
                          {"kind", "KIND_AUTO"},
                          {"count", c.config.instance_count},
                          {"gpus", json::array()}});
  }
  return groups;
}

}  // namespace

std::string EncodeModelStatistics(const std::vector<ModelStatistics>& stats) {
  json rows = json::array();
  for (const ModelStatistics& s : stats) rows.push_back(OneModel(s));
  return json{{"model_stats", std::move(rows)}}.dump();
}

std::string EncodeModelConfiguration(const ModelConfiguration& c) {
  const ModelConfig& m = c.config;
  json inputs = json::array();
  for (const TensorSpec& t : m.inputs) {
    inputs.push_back(json{{"name", t.name},
                          {"data_type", TritonDataTypeName(t.datatype)},
                          {"format", "FORMAT_NONE"},
                          {"dims", t.shape},
                          {"is_shape_tensor", false},
                          {"allow_ragged_batch", false},
                          {"optional", false}});
  }
  json outputs = json::array();
  for (const TensorSpec& t : m.outputs) {
    outputs.push_back(json{{"name", t.name},
                           {"data_type", TritonDataTypeName(t.datatype)},
                           {"dims", t.shape},
                           {"label_filename", ""},
                           {"is_shape_tensor", false}});
  }
  json parameters = json::object();
  for (const auto& [key, value] : c.parameters) parameters[key] = json{{"string_value", value}};
  json out{{"name", m.name},
           {"platform", c.platform},
           {"backend", m.platform},
           {"version_policy", VersionPolicy(m.version_policy)},
           {"max_batch_size", m.max_batch_size},
           {"input", std::move(inputs)},
           {"output", std::move(outputs)},
           {"instance_group", InstanceGroups(c)},
           {"default_model_filename", c.model_filename},
           {"parameters", std::move(parameters)},
           {"response_cache", {{"enable", m.response_cache.enable}}}};
  if (m.dynamic_batching) {
    const DynamicBatchingOptions& d = *m.dynamic_batching;
    out["dynamic_batching"] = json{
        {"preferred_batch_size", d.preferred_batch_sizes},
        {"max_queue_delay_microseconds", d.max_queue_delay_us},
        {"preserve_ordering", false},
        {"default_queue_policy",
         {{"timeout_action", "REJECT"},
          {"default_timeout_microseconds", 0},
          {"allow_timeout_override", false},
          {"max_queue_size", d.max_queue_size}}}};
  }
  return out.dump();
}

}  // namespace somm::oip
