#include "registry/published_model.h"

#include <nlohmann/json.hpp>

namespace somm {

using nlohmann::json;

std::string PublishedModelToJson(const PublishedModel& model) {
  json versions = json::array();
  for (const VersionPtr& v : model.versions) {
    json profiles = json::array();
    for (const VariantProfile& p : v->profiles) profiles.push_back(json::parse(ProfileToJson(p)));
    versions.push_back({{"version", v->version}, {"path", v->path}, {"profiles", profiles}});
  }
  json problems = json::array();
  for (const RepositoryEntry& e : model.problems) {
    problems.push_back(
        {{"name", e.name}, {"version", e.version}, {"state", e.state}, {"reason", e.reason}});
  }
  json out = {{"name", model.name},
              {"config_yaml", model.config_yaml},
              {"versions", versions},
              {"problems", problems}};
  if (model.rollout) out["rollout"] = json::parse(RolloutToJson(*model.rollout));
  return out.dump();
}

StatusOr<PublishedModel> PublishedModelFromJson(const std::string& text, const std::string& name) {
  const std::string source = "published model '" + name + "'";
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return InvalidArgument(source + ": not a JSON object");
  PublishedModel out;
  out.name = name;
  try {
    out.config_yaml = j.at("config_yaml").get<std::string>();
    for (const json& e : j.at("problems")) {
      out.problems.push_back({e.at("name").get<std::string>(), e.at("version").get<std::string>(),
                              e.at("state").get<std::string>(), e.at("reason").get<std::string>()});
    }
    if (j.contains("rollout")) {
      SOMM_ASSIGN_OR_RETURN(Rollout rollout, RolloutFromJson(j.at("rollout").dump()));
      out.rollout = std::move(rollout);
    }
    if (j.at("versions").empty()) return out;  // only problems: no config to parse
    SOMM_ASSIGN_OR_RETURN(ModelConfig config, ParseModelConfig(out.config_yaml, source));
    if (config.name.empty()) config.name = name;
    if (config.name != name) {
      return InvalidArgument(source + ": its config names '" + config.name + "'");
    }
    for (const json& v : j.at("versions")) {
      auto record = std::make_shared<VersionRecord>();
      record->config = config;
      record->version = v.at("version").get<int64_t>();
      record->version_str = std::to_string(record->version);
      record->path = v.at("path").get<std::string>();
      record->generation = NextVersionGeneration();
      for (const json& p : v.at("profiles")) {
        SOMM_ASSIGN_OR_RETURN(VariantProfile profile, ProfileFromJson(p.dump(), source));
        record->profiles.push_back(std::move(profile));
      }
      out.versions.push_back(std::move(record));
    }
  } catch (const json::exception& e) {
    return InvalidArgument(source + ": " + e.what());
  }
  return out;
}

}  // namespace somm
