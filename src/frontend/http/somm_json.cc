#include "frontend/http/somm_json.h"

#include <charconv>
#include <cmath>
#include <exception>
#include <initializer_list>
#include <limits>
#include <set>
#include <utility>

#include "common/base64.h"
#include "frontend/http/json_util.h"
#include "frontend/http/rest_routes.h"

namespace somm::oip {
namespace {

using internal::Json;
using internal::JsonTypeName;

// The datatype names a registration may use, for error messages.
constexpr const char* kDatatypes =
    "BOOL, UINT8, UINT16, UINT32, UINT64, INT8, INT16, INT32, INT64, FP16, BF16, FP32, FP64, "
    "BYTES";

// Reads one registration body, remembering the model name for every message.
class RegistrationDecoder {
 public:
  explicit RegistrationDecoder(const std::string& name) : name_(name) {}

  StatusOr<RegistrationRequest> Decode(std::string_view body) {
    StatusOr<Json> parsed = internal::ParseJson(body);
    if (!parsed.ok()) return Error(parsed.status().message());
    const Json& root = *parsed;
    if (!root.is_object()) {
      return Error(std::string("the body must be a JSON object, got ") + JsonTypeName(root));
    }
    SOMM_RETURN_IF_ERROR(CheckKeys(root, "",
                                   {"name", "task", "inputs", "outputs", "max_batch_size", "model",
                                    "validation", "preprocessing", "description", "private",
                                    "platform"}));
    RegistrationRequest r;
    r.name = name_;
    if (const Json* n = Find(root, "name")) {
      SOMM_ASSIGN_OR_RETURN(const std::string body_name, String(*n, "name"));
      if (body_name != name_) {
        return Field("name", "is '" + body_name + "' but the URL names model '" + name_ + "'");
      }
    }
    const Json* task = Find(root, "task");
    if (task == nullptr) return Field("task", "is required (e.g. \"classification/digits\")");
    SOMM_ASSIGN_OR_RETURN(r.task, String(*task, "task"));
    if (r.task.empty()) return Field("task", "must not be empty");
    SOMM_RETURN_IF_ERROR(Tensors(root, "inputs", &r.inputs));
    SOMM_RETURN_IF_ERROR(Tensors(root, "outputs", &r.outputs));
    if (const Json* m = Find(root, "max_batch_size")) {
      SOMM_ASSIGN_OR_RETURN(r.max_batch_size, Integer(*m, "max_batch_size", 0));
    }
    if (const Json* p = Find(root, "platform")) {
      SOMM_ASSIGN_OR_RETURN(r.platform, String(*p, "platform"));
      if (r.platform.empty()) return Field("platform", "must not be empty");
    }
    const Json* model = Find(root, "model");
    if (model == nullptr) return Field("model", "is required (the base64 TorchScript file)");
    SOMM_ASSIGN_OR_RETURN(r.model_bytes, Bytes(*model, "model"));
    if (r.model_bytes.empty()) return Field("model", "is empty");
    if (const Json* v = Find(root, "validation")) SOMM_RETURN_IF_ERROR(Validation(*v, &r));
    if (const Json* p = Find(root, "preprocessing")) SOMM_RETURN_IF_ERROR(Preprocessing(*p, &r));
    if (const Json* d = Find(root, "description")) {
      SOMM_ASSIGN_OR_RETURN(r.description, String(*d, "description"));
    }
    if (const Json* p = Find(root, "private")) {
      if (!p->is_boolean()) return Field("private", "must be true or false");
      r.private_model = p->get<bool>();
    }
    return r;
  }

 private:
  Status Error(const std::string& problem) const {
    return InvalidArgument("registration of model '" + name_ + "': " + problem);
  }
  Status Field(const std::string& field, const std::string& problem) const {
    return Error("field '" + field + "' " + problem);
  }

  static const Json* Find(const Json& object, const char* key) {
    const auto it = object.find(key);
    return it == object.end() ? nullptr : &*it;
  }

  Status CheckKeys(const Json& object, const std::string& prefix,
                   std::initializer_list<const char*> allowed) const {
    for (const auto& item : object.items()) {
      bool known = false;
      for (const char* key : allowed) known |= item.key() == key;
      if (!known) {
        std::string list;
        for (const char* key : allowed) list += std::string(list.empty() ? "" : ", ") + key;
        return Field(prefix + item.key(), "is not a known field (expected one of: " + list + ")");
      }
    }
    return Status::Ok();
  }

  StatusOr<std::string> String(const Json& value, const std::string& field) const {
    if (!value.is_string()) {
      return Field(field, std::string("must be a string, got ") + JsonTypeName(value));
    }
    return value.get<std::string>();
  }

  // A JSON integer (1.0 is not one) of at least `min`.
  StatusOr<int64_t> Integer(const Json& value, const std::string& field, int64_t min) const {
    const bool fits =
        value.is_number_integer() &&
        (!value.is_number_unsigned() ||
         value.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()));
    if (fits && value.get<int64_t>() >= min) return value.get<int64_t>();
    return Field(field, "must be an integer >= " + std::to_string(min) + ", got " +
                            internal::DumpJson(value));
  }

  StatusOr<double> Number(const Json& value, const std::string& field) const {
    if (!value.is_number()) {
      return Field(field, std::string("must be a number, got ") + JsonTypeName(value));
    }
    return value.get<double>();
  }

  StatusOr<std::string> Bytes(const Json& value, const std::string& field) const {
    SOMM_ASSIGN_OR_RETURN(const std::string text, String(value, field));
    StatusOr<std::string> bytes = Base64Decode(text);
    if (!bytes.ok()) return Field(field, "is " + bytes.status().message());
    return bytes;
  }

  Status Tensors(const Json& root, const char* key, std::vector<TensorSpec>* out) const {
    const Json* list = Find(root, key);
    if (list == nullptr) return Field(key, "is required (a list of {name, datatype, shape})");
    if (!list->is_array()) {
      return Field(key, std::string("must be a list, got ") + JsonTypeName(*list));
    }
    if (list->empty()) return Field(key, "must list at least one tensor");
    std::set<std::string> seen;
    for (size_t i = 0; i < list->size(); ++i) {
      const std::string field = std::string(key) + "[" + std::to_string(i) + "]";
      const Json& item = (*list)[i];
      if (!item.is_object()) {
        return Field(field, std::string("must be an object, got ") + JsonTypeName(item));
      }
      SOMM_RETURN_IF_ERROR(CheckKeys(item, field + ".", {"name", "datatype", "shape"}));
      TensorSpec spec;
      const Json* name = Find(item, "name");
      if (name == nullptr) return Field(field + ".name", "is required");
      SOMM_ASSIGN_OR_RETURN(spec.name, String(*name, field + ".name"));
      if (spec.name.empty()) return Field(field + ".name", "must not be empty");
      if (!seen.insert(spec.name).second) {
        return Field(field + ".name", "'" + spec.name + "' appears more than once");
      }
      const Json* datatype = Find(item, "datatype");
      if (datatype == nullptr) return Field(field + ".datatype", "is required");
      SOMM_ASSIGN_OR_RETURN(const std::string type, String(*datatype, field + ".datatype"));
      spec.datatype = DataTypeFromString(type);
      if (spec.datatype == DataType::kInvalid) {
        return Field(field + ".datatype",
                     "has unknown datatype '" + type + "' (expected one of " + kDatatypes + ")");
      }
      SOMM_RETURN_IF_ERROR(ShapeOf(item, field + ".shape", &spec.shape));
      out->push_back(std::move(spec));
    }
    return Status::Ok();
  }

  Status ShapeOf(const Json& item, const std::string& field, Shape* out) const {
    const Json* shape = Find(item, "shape");
    if (shape == nullptr) return Field(field, "is required (per-sample dims, -1 = variable)");
    const auto not_ints = [&] {
      return Field(field, "must be a list of integers >= -1 (-1 = variable), got " +
                              internal::DumpJson(*shape));
    };
    if (!shape->is_array()) return not_ints();
    for (const Json& dim : *shape) {
      if (!dim.is_number_integer()) return not_ints();
      if (dim.is_number_unsigned() &&
          dim.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return not_ints();
      }
      const int64_t d = dim.get<int64_t>();
      if (d < -1) return not_ints();
      out->push_back(d);
    }
    return Status::Ok();
  }

  Status Validation(const Json& v, RegistrationRequest* r) const {
    if (!v.is_object()) {
      return Field("validation", std::string("must be an object {count, inputs, labels}, got ") +
                                     JsonTypeName(v));
    }
    SOMM_RETURN_IF_ERROR(CheckKeys(v, "validation.", {"count", "inputs", "labels"}));
    for (const char* key : {"count", "inputs", "labels"}) {
      if (Find(v, key) == nullptr) return Field(std::string("validation.") + key, "is required");
    }
    SOMM_ASSIGN_OR_RETURN(r->validation_count, Integer(v["count"], "validation.count", 0));
    SOMM_ASSIGN_OR_RETURN(r->validation_inputs, Bytes(v["inputs"], "validation.inputs"));
    SOMM_ASSIGN_OR_RETURN(r->validation_labels, Bytes(v["labels"], "validation.labels"));
    const auto count = static_cast<uint64_t>(r->validation_count);
    if (count > std::numeric_limits<uint64_t>::max() / 8 ||
        r->validation_labels.size() != count * 8) {
      return Field("validation.labels", "holds " + std::to_string(r->validation_labels.size()) +
                                            " bytes but " + std::to_string(count) +
                                            " INT64 labels need " + std::to_string(count * 8));
    }
    // The inputs' size is checked here only when the signature fixes it; the
    // server rejects the rest (one input, fixed shape) with its own message.
    if (r->inputs.size() == 1 && r->inputs[0].datatype != DataType::kBytes) {
      const int64_t per_sample = ElementCount(r->inputs[0].shape);
      const auto item = static_cast<uint64_t>(DataTypeSize(r->inputs[0].datatype));
      if (per_sample >= 0 && count <= (uint64_t{1} << 40) &&
          static_cast<uint64_t>(per_sample) <= (uint64_t{1} << 20)) {
        const uint64_t need = count * static_cast<uint64_t>(per_sample) * item;
        if (r->validation_inputs.size() != need) {
          return Field("validation.inputs",
                       "holds " + std::to_string(r->validation_inputs.size()) + " bytes but " +
                           std::to_string(count) + " samples of " +
                           DataTypeName(r->inputs[0].datatype) + " " +
                           ShapeToString(r->inputs[0].shape) + " need " + std::to_string(need));
        }
      }
    }
    return Status::Ok();
  }

  Status Floats(const Json& image, const char* key, std::vector<float>* out) const {
    const std::string field = std::string("preprocessing.image.") + key;
    const Json* list = Find(image, key);
    if (list == nullptr) return Status::Ok();
    if (!list->is_array()) {
      return Field(field, std::string("must be a list of numbers, got ") + JsonTypeName(*list));
    }
    for (const Json& x : *list) {
      if (!x.is_number()) {
        return Field(field, "must be a list of numbers, got " + internal::DumpJson(*list));
      }
      SOMM_ASSIGN_OR_RETURN(const float f, Float(x, field));
      out->push_back(f);
    }
    return Status::Ok();
  }

  // A number the model's float arithmetic can hold: one past float's range
  // would become infinity (a std of inf zeroes every pixel), and could not
  // be written back as JSON.
  StatusOr<float> Float(const Json& value, const std::string& field) const {
    SOMM_ASSIGN_OR_RETURN(const double x, Number(value, field));
    if (!(std::fabs(x) <= std::numeric_limits<float>::max())) {
      return Field(field, "must be within float range (magnitude at most 3.4e38), got " +
                              internal::DumpJson(value));
    }
    return static_cast<float>(x);
  }

  // The same fields and rules as model.yaml's preprocessing.image.
  Status Preprocessing(const Json& p, RegistrationRequest* r) const {
    if (!p.is_object()) {
      return Field("preprocessing",
                   std::string("must be an object {\"image\": {...}}, got ") + JsonTypeName(p));
    }
    SOMM_RETURN_IF_ERROR(CheckKeys(p, "preprocessing.", {"image"}));
    const Json* image = Find(p, "image");
    if (image == nullptr) return Field("preprocessing.image", "is required");
    const std::string f = "preprocessing.image";
    if (!image->is_object()) {
      return Field(f, std::string("must be an object, got ") + JsonTypeName(*image));
    }
    SOMM_RETURN_IF_ERROR(CheckKeys(
        *image, f + ".", {"channels", "height", "width", "scale", "mean", "std", "invert"}));
    ImagePreprocessing prep;
    const auto dim = [&](const char* key, int* out) -> Status {
      const Json* v = Find(*image, key);
      if (v == nullptr) return Status::Ok();
      SOMM_ASSIGN_OR_RETURN(const int64_t x, Integer(*v, f + "." + key, 1));
      if (x > 8192) return Field(f + "." + key, "must be between 1 and 8192");
      *out = static_cast<int>(x);
      return Status::Ok();
    };
    SOMM_RETURN_IF_ERROR(dim("channels", &prep.channels));
    if (prep.channels != 1 && prep.channels != 3) return Field(f + ".channels", "must be 1 or 3");
    SOMM_RETURN_IF_ERROR(dim("height", &prep.height));
    SOMM_RETURN_IF_ERROR(dim("width", &prep.width));
    if (const Json* s = Find(*image, "scale")) {
      SOMM_ASSIGN_OR_RETURN(prep.scale, Float(*s, f + ".scale"));
    }
    SOMM_RETURN_IF_ERROR(Floats(*image, "mean", &prep.mean));
    SOMM_RETURN_IF_ERROR(Floats(*image, "std", &prep.stddev));
    if (!prep.mean.empty() && prep.mean.size() != static_cast<size_t>(prep.channels)) {
      return Field(f + ".mean", "needs one value per channel");
    }
    if (!prep.stddev.empty() && prep.stddev.size() != static_cast<size_t>(prep.channels)) {
      return Field(f + ".std", "needs one value per channel");
    }
    for (float s : prep.stddev) {
      if (s == 0.0f) return Field(f + ".std", "must not contain 0");
    }
    if (const Json* inv = Find(*image, "invert")) {
      if (!inv->is_boolean()) {
        return Field(f + ".invert", std::string("must be a boolean, got ") + JsonTypeName(*inv));
      }
      prep.invert = inv->get<bool>();
    }
    r->preprocessing = std::move(prep);
    return Status::Ok();
  }

  const std::string& name_;
};

Json TensorsToJson(const std::vector<TensorSpec>& specs) {
  Json out = Json::array();
  for (const TensorSpec& s : specs) {
    Json t = Json::object();
    t["name"] = s.name;
    t["datatype"] = DataTypeName(s.datatype);
    t["shape"] = s.shape;
    out.push_back(std::move(t));
  }
  return out;
}

// Runs a decoder body, turning any exception a hostile body could still
// provoke (nlohmann type errors, allocation failures) into a Status.
template <typename Fn>
auto Guarded(const char* what, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const std::exception& e) {
    return InvalidArgument(std::string(what) + ": " + e.what());
  }
}

StatusOr<Json> ParseObject(std::string_view body, const char* what) {
  StatusOr<Json> json = internal::ParseJson(body);
  if (!json.ok()) return InvalidArgument(std::string(what) + ": " + json.status().message());
  if (!json->is_object()) {
    return InvalidArgument(std::string(what) + ": expected a JSON object, got " +
                           JsonTypeName(*json));
  }
  return json;
}

Status ReadNumber(const Json& object, const char* key, const std::string& what, double* out) {
  const auto it = object.find(key);
  if (it == object.end()) return Status::Ok();
  if (it->is_null()) {  // NaN and infinity travel as null
    *out = std::numeric_limits<double>::quiet_NaN();
    return Status::Ok();
  }
  if (!it->is_number()) {
    return InvalidArgument(what + ": '" + key + "' must be a number, got " + JsonTypeName(*it));
  }
  *out = it->get<double>();
  return Status::Ok();
}

Status ReadInt(const Json& object, const char* key, const std::string& what, int64_t* out) {
  const auto it = object.find(key);
  if (it == object.end()) return Status::Ok();
  if (!it->is_number_integer()) {
    return InvalidArgument(what + ": '" + key + "' must be an integer, got " + JsonTypeName(*it));
  }
  *out = it->get<int64_t>();
  return Status::Ok();
}

}  // namespace

StatusOr<RegistrationRequest> DecodeRegistrationRequest(std::string_view body,
                                                        const std::string& name) {
  return Guarded("registration", [&] { return RegistrationDecoder(name).Decode(body); });
}

std::string EncodeRegistrationRequest(const RegistrationRequest& r) {
  Json out = Json::object();
  out["name"] = r.name;
  out["task"] = r.task;
  out["inputs"] = TensorsToJson(r.inputs);
  out["outputs"] = TensorsToJson(r.outputs);
  out["max_batch_size"] = r.max_batch_size;
  // Sent only when it is not the default, so that a server older than the
  // field takes a torchscript registration as before.
  if (r.platform != kDefaultPlatform) out["platform"] = r.platform;
  out["model"] = Base64Encode(r.model_bytes);
  if (r.validation_count > 0 || !r.validation_inputs.empty() || !r.validation_labels.empty()) {
    out["validation"] = {{"count", r.validation_count},
                         {"inputs", Base64Encode(r.validation_inputs)},
                         {"labels", Base64Encode(r.validation_labels)}};
  }
  if (r.preprocessing) {
    const ImagePreprocessing& p = *r.preprocessing;
    Json image = Json::object();
    image["channels"] = p.channels;
    image["height"] = p.height;
    image["width"] = p.width;
    image["scale"] = p.scale;
    if (!p.mean.empty()) image["mean"] = p.mean;
    if (!p.stddev.empty()) image["std"] = p.stddev;
    image["invert"] = p.invert;
    out["preprocessing"] = {{"image", std::move(image)}};
  }
  if (!r.description.empty()) out["description"] = r.description;
  if (r.private_model) out["private"] = true;
  return internal::DumpJson(out);
}

std::string VariantsPath(const std::string& name) {
  return "/v2/repository/models/" + EncodePathSegment(name) + "/variants";
}

std::string EncodeRegistrationAccepted(const std::string& name) {
  Json out = Json::object();
  out["name"] = name;
  out["state"] = "GENERATING";
  out["status_url"] = VariantsPath(name);
  return internal::DumpJson(out);
}

std::string EncodeRegistrationStatus(const RegistrationStatus& s) {
  Json out = Json::object();
  out["name"] = s.name;
  out["state"] = s.state;
  out["phase"] = s.phase;
  out["done"] = s.done;
  out["total"] = s.total;
  out["message"] = s.message;
  out["skipped"] = s.skipped;
  Json variants = Json::array();
  for (const VariantProfile& p : s.variants) {
    // ProfileToJson is the one schema of a profile (also profile.json on
    // disk); it is embedded as an object, not re-described here.
    variants.push_back(Json::parse(ProfileToJson(p)));
  }
  out["variants"] = std::move(variants);
  return internal::DumpJson(out);
}

StatusOr<RegistrationStatus> DecodeRegistrationStatus(std::string_view body) {
  return Guarded("registration status", [&]() -> StatusOr<RegistrationStatus> {
    const std::string what = "registration status";
    SOMM_ASSIGN_OR_RETURN(const Json json, ParseObject(body, what.c_str()));
    RegistrationStatus s;
    SOMM_RETURN_IF_ERROR(internal::ReadString(json, "name", what, true, &s.name));
    SOMM_RETURN_IF_ERROR(internal::ReadString(json, "state", what, true, &s.state));
    SOMM_RETURN_IF_ERROR(internal::ReadString(json, "phase", what, false, &s.phase));
    SOMM_RETURN_IF_ERROR(internal::ReadString(json, "message", what, false, &s.message));
    int64_t done = 0, total = 0;
    SOMM_RETURN_IF_ERROR(ReadInt(json, "done", what, &done));
    SOMM_RETURN_IF_ERROR(ReadInt(json, "total", what, &total));
    s.done = static_cast<int>(done);
    s.total = static_cast<int>(total);
    if (const auto it = json.find("skipped"); it != json.end()) {
      if (!it->is_array()) return InvalidArgument(what + ": 'skipped' must be an array");
      for (const Json& item : *it) {
        if (!item.is_string()) return InvalidArgument(what + ": 'skipped' must hold strings");
        s.skipped.push_back(item.get<std::string>());
      }
    }
    if (const auto it = json.find("variants"); it != json.end()) {
      if (!it->is_array()) return InvalidArgument(what + ": 'variants' must be an array");
      for (size_t i = 0; i < it->size(); ++i) {
        SOMM_ASSIGN_OR_RETURN(
            VariantProfile p,
            ProfileFromJson(internal::DumpJson((*it)[i]), what + " variant " + std::to_string(i)));
        s.variants.push_back(std::move(p));
      }
    }
    return s;
  });
}

StatusOr<size_t> ParseDecisionLimit(std::optional<std::string_view> value) {
  if (!value.has_value()) return kDefaultDecisionLimit;
  size_t limit = 0;
  const char* end = value->data() + value->size();
  const auto [ptr, ec] = std::from_chars(value->data(), end, limit);
  if (value->empty() || ec != std::errc() || ptr != end || limit > kMaxDecisionLimit) {
    return InvalidArgument("query parameter 'limit' must be an integer from 0 to " +
                           std::to_string(kMaxDecisionLimit) + ", got '" + std::string(*value) +
                           "'");
  }
  return limit;
}

std::string EncodeDecisions(const std::vector<DecisionRecord>& decisions) {
  Json list = Json::array();
  for (const DecisionRecord& d : decisions) {
    Json item = Json::object();
    item["unix_ms"] = d.unix_ms;
    item["target"] = d.target;
    item["requirements"] = d.requirements;
    item["outcome"] = d.outcome;
    item["variant"] = d.variant;
    item["hardware"] = d.hardware;
    item["predicted_latency_ms"] = d.predicted_latency_ms;
    item["cost_usd"] = d.cost_usd;
    item["reason"] = d.reason;
    if (d.actual_latency_ms >= 0) item["actual_latency_ms"] = d.actual_latency_ms;
    if (!d.status.empty()) item["status"] = d.status;
    list.push_back(std::move(item));
  }
  Json out = Json::object();
  out["decisions"] = std::move(list);
  return internal::DumpJson(out);
}

StatusOr<std::vector<DecisionRecord>> DecodeDecisions(std::string_view body) {
  return Guarded("decision log", [&]() -> StatusOr<std::vector<DecisionRecord>> {
    SOMM_ASSIGN_OR_RETURN(const Json json, ParseObject(body, "decision log"));
    const auto list = json.find("decisions");
    if (list == json.end() || !list->is_array()) {
      return InvalidArgument("decision log: 'decisions' must be an array");
    }
    std::vector<DecisionRecord> out;
    for (size_t i = 0; i < list->size(); ++i) {
      const Json& item = (*list)[i];
      const std::string what = "decision " + std::to_string(i);
      if (!item.is_object()) return InvalidArgument(what + " must be an object");
      DecisionRecord d;
      SOMM_RETURN_IF_ERROR(ReadInt(item, "unix_ms", what, &d.unix_ms));
      for (const auto& [key, field] :
           {std::pair{"target", &d.target}, std::pair{"requirements", &d.requirements},
            std::pair{"outcome", &d.outcome}, std::pair{"variant", &d.variant},
            std::pair{"hardware", &d.hardware}, std::pair{"reason", &d.reason},
            std::pair{"status", &d.status}}) {
        SOMM_RETURN_IF_ERROR(internal::ReadString(item, key, what, false, field));
      }
      SOMM_RETURN_IF_ERROR(ReadNumber(item, "predicted_latency_ms", what, &d.predicted_latency_ms));
      SOMM_RETURN_IF_ERROR(ReadNumber(item, "cost_usd", what, &d.cost_usd));
      SOMM_RETURN_IF_ERROR(ReadNumber(item, "actual_latency_ms", what, &d.actual_latency_ms));
      out.push_back(std::move(d));
    }
    return out;
  });
}

}  // namespace somm::oip
