#include "frontend/http/oip_metadata_json.h"

#include <exception>
#include <utility>

#include "frontend/http/json_util.h"

namespace somm::oip {
namespace {

using internal::Json;

template <typename Fn>
auto Guarded(const char* what, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const std::exception& e) {
    return InvalidArgument(std::string(what) + ": " + e.what());
  }
}

StatusOr<Json> ParseObject(std::string_view body, const char* what) {
  SOMM_ASSIGN_OR_RETURN(Json json, internal::ParseJson(body));
  if (!json.is_object()) {
    return InvalidArgument(std::string(what) + " must be a JSON object, got " +
                           internal::JsonTypeName(json));
  }
  return json;
}

// True for a body that carries no JSON at all (the repository extension
// allows an empty body).
bool IsBlank(std::string_view body) {
  return body.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

Status ReadStringArray(const Json& object, const char* key, const std::string& what,
                       std::vector<std::string>* out) {
  const auto it = object.find(key);
  if (it == object.end()) return Status::Ok();
  if (!it->is_array()) return InvalidArgument(what + ": '" + key + "' must be an array");
  for (const Json& item : *it) {
    if (!item.is_string()) return InvalidArgument(what + ": '" + key + "' must hold strings");
    out->push_back(item.get<std::string>());
  }
  return Status::Ok();
}

Json EncodeTensorMetadata(const std::vector<TensorMetadata>& tensors) {
  Json out = Json::array();
  for (const TensorMetadata& t : tensors) {
    out.push_back(Json{{"name", t.name}, {"datatype", t.datatype}, {"shape", t.shape}});
  }
  return out;
}

Status DecodeTensorMetadata(const Json& object, const char* key, std::vector<TensorMetadata>* out) {
  const auto it = object.find(key);
  if (it == object.end())
    return InvalidArgument(std::string("model metadata: '") + key + "' is required");
  if (!it->is_array()) {
    return InvalidArgument(std::string("model metadata: '") + key + "' must be an array");
  }
  for (size_t i = 0; i < it->size(); ++i) {
    const Json& item = (*it)[i];
    const std::string what = std::string("model metadata ") + key + " " + std::to_string(i);
    if (!item.is_object()) return InvalidArgument(what + " must be an object");
    TensorMetadata t;
    SOMM_RETURN_IF_ERROR(internal::ReadString(item, "name", what, true, &t.name));
    SOMM_RETURN_IF_ERROR(internal::ReadString(item, "datatype", what, true, &t.datatype));
    // Metadata shapes may hold -1 (variable dims), so ReadShape's
    // non-negative rule does not apply here.
    const auto shape = item.find("shape");
    if (shape == item.end() || !shape->is_array()) {
      return InvalidArgument(what + ": 'shape' must be an array");
    }
    for (const Json& dim : *shape) {
      if (!dim.is_number_integer()) return InvalidArgument(what + ": shape must hold integers");
      t.shape.push_back(dim.get<int64_t>());
    }
    out->push_back(std::move(t));
  }
  return Status::Ok();
}

}  // namespace

std::string EncodeServerMetadata(const ServerMetadata& metadata) {
  return internal::DumpJson(Json{
      {"name", metadata.name}, {"version", metadata.version}, {"extensions", metadata.extensions}});
}

StatusOr<ServerMetadata> DecodeServerMetadata(std::string_view body) {
  return Guarded("server metadata", [&]() -> StatusOr<ServerMetadata> {
    SOMM_ASSIGN_OR_RETURN(const Json json, ParseObject(body, "server metadata"));
    ServerMetadata out;
    SOMM_RETURN_IF_ERROR(internal::ReadString(json, "name", "server metadata", true, &out.name));
    SOMM_RETURN_IF_ERROR(
        internal::ReadString(json, "version", "server metadata", true, &out.version));
    SOMM_RETURN_IF_ERROR(ReadStringArray(json, "extensions", "server metadata", &out.extensions));
    return out;
  });
}

std::string EncodeModelMetadata(const ModelMetadata& metadata) {
  Json out = Json::object();
  out["name"] = metadata.name;
  if (!metadata.versions.empty()) out["versions"] = metadata.versions;
  out["platform"] = metadata.platform;
  out["inputs"] = EncodeTensorMetadata(metadata.inputs);
  out["outputs"] = EncodeTensorMetadata(metadata.outputs);
  if (!metadata.parameters.empty()) {
    out["parameters"] = internal::ParametersToJson(metadata.parameters);
  }
  return internal::DumpJson(out);
}

StatusOr<ModelMetadata> DecodeModelMetadata(std::string_view body) {
  return Guarded("model metadata", [&]() -> StatusOr<ModelMetadata> {
    SOMM_ASSIGN_OR_RETURN(const Json json, ParseObject(body, "model metadata"));
    ModelMetadata out;
    SOMM_RETURN_IF_ERROR(internal::ReadString(json, "name", "model metadata", true, &out.name));
    SOMM_RETURN_IF_ERROR(ReadStringArray(json, "versions", "model metadata", &out.versions));
    SOMM_RETURN_IF_ERROR(
        internal::ReadString(json, "platform", "model metadata", false, &out.platform));
    SOMM_RETURN_IF_ERROR(DecodeTensorMetadata(json, "inputs", &out.inputs));
    SOMM_RETURN_IF_ERROR(DecodeTensorMetadata(json, "outputs", &out.outputs));
    if (const auto it = json.find("parameters"); it != json.end()) {
      SOMM_RETURN_IF_ERROR(internal::JsonToParameters(*it, "model metadata", &out.parameters));
    }
    return out;
  });
}

StatusOr<bool> DecodeRepositoryIndexRequest(std::string_view body) {
  if (IsBlank(body)) return false;
  return Guarded("repository index request", [&]() -> StatusOr<bool> {
    SOMM_ASSIGN_OR_RETURN(const Json json, ParseObject(body, "repository index request"));
    bool ready = false;
    SOMM_RETURN_IF_ERROR(
        internal::ReadBool(json, "ready", "repository index request", false, &ready));
    return ready;
  });
}

std::string EncodeRepositoryIndexRequest(bool ready_only) {
  return internal::DumpJson(Json{{"ready", ready_only}});
}

std::string EncodeRepositoryIndex(const std::vector<RepositoryEntry>& entries) {
  Json out = Json::array();
  for (const RepositoryEntry& e : entries) {
    Json row = Json::object();
    row["name"] = e.name;
    if (!e.version.empty()) row["version"] = e.version;
    row["state"] = e.state;
    row["reason"] = e.reason;
    out.push_back(std::move(row));
  }
  return internal::DumpJson(out);
}

StatusOr<std::vector<RepositoryEntry>> DecodeRepositoryIndex(std::string_view body) {
  return Guarded("repository index", [&]() -> StatusOr<std::vector<RepositoryEntry>> {
    SOMM_ASSIGN_OR_RETURN(const Json json, internal::ParseJson(body));
    if (!json.is_array()) return InvalidArgument("repository index must be a JSON array");
    std::vector<RepositoryEntry> out;
    for (size_t i = 0; i < json.size(); ++i) {
      const std::string what = "repository index entry " + std::to_string(i);
      if (!json[i].is_object()) return InvalidArgument(what + " must be an object");
      RepositoryEntry e;
      SOMM_RETURN_IF_ERROR(internal::ReadString(json[i], "name", what, true, &e.name));
      SOMM_RETURN_IF_ERROR(internal::ReadString(json[i], "version", what, false, &e.version));
      SOMM_RETURN_IF_ERROR(internal::ReadString(json[i], "state", what, false, &e.state));
      SOMM_RETURN_IF_ERROR(internal::ReadString(json[i], "reason", what, false, &e.reason));
      out.push_back(std::move(e));
    }
    return out;
  });
}

StatusOr<Parameters> DecodeRepositoryModelRequest(std::string_view body) {
  if (IsBlank(body)) return Parameters();
  return Guarded("repository request", [&]() -> StatusOr<Parameters> {
    SOMM_ASSIGN_OR_RETURN(const Json json, ParseObject(body, "repository request"));
    Parameters out;
    if (const auto it = json.find("parameters"); it != json.end()) {
      SOMM_RETURN_IF_ERROR(internal::JsonToParameters(*it, "repository request", &out));
    }
    return out;
  });
}

}  // namespace somm::oip
