#include "frontend/http/json_util.h"

#include <limits>
#include <utility>

namespace somm::oip::internal {
namespace {

// Parser messages echo the last token read, which for an unterminated string
// can be most of a 64 MiB body; error bodies stay readable.
constexpr size_t kMaxParserDetail = 200;

std::string ParserDetail(const std::string& what) {
  // nlohmann: "[json.exception.parse_error.101] parse error at line 1, column 2: <detail>"
  std::string detail = what;
  const size_t at = what.find("parse error");
  if (at != std::string::npos) {
    const size_t colon = what.find(": ", at);
    if (colon != std::string::npos) detail = what.substr(colon + 2);
  }
  if (detail.size() > kMaxParserDetail) detail = detail.substr(0, kMaxParserDetail) + "...";
  return detail;
}

}  // namespace

StatusOr<Json> ParseJson(std::string_view text) {
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const Json::parse_error& e) {
    return InvalidArgument("malformed JSON at byte " + std::to_string(e.byte) + ": " +
                           ParserDetail(e.what()));
  } catch (const Json::exception& e) {
    return InvalidArgument(std::string("malformed JSON: ") + e.what());
  }
}

std::string DumpJson(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

const char* JsonTypeName(const Json& value) {
  if (value.is_boolean()) return "boolean";
  if (value.is_number()) return "number";
  return value.type_name();
}

Json ParametersToJson(const Parameters& parameters) {
  Json out = Json::object();
  for (const auto& [key, value] : parameters) {
    std::visit([&out, &key = key](const auto& v) { out[key] = v; }, value);
  }
  return out;
}

Status JsonToParameters(const Json& value, const std::string& what, Parameters* out) {
  if (!value.is_object()) {
    return InvalidArgument(what + ": 'parameters' must be an object, got " + JsonTypeName(value));
  }
  for (const auto& [key, v] : value.items()) {
    if (v.is_boolean()) {
      (*out)[key] = v.get<bool>();
    } else if (v.is_number_unsigned()) {
      const uint64_t u = v.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return InvalidArgument(what + ": parameter '" + key + "' is out of int64 range");
      }
      (*out)[key] = static_cast<int64_t>(u);
    } else if (v.is_number_integer()) {
      (*out)[key] = v.get<int64_t>();
    } else if (v.is_number_float()) {
      (*out)[key] = v.get<double>();
    } else if (v.is_string()) {
      (*out)[key] = v.get<std::string>();
    } else {
      return InvalidArgument(what + ": parameter '" + key +
                             "' must be a string, number or boolean, got " + JsonTypeName(v));
    }
  }
  return Status::Ok();
}

Status ReadString(const Json& object, const char* key, const std::string& what, bool required,
                  std::string* out) {
  const auto it = object.find(key);
  if (it == object.end()) {
    if (required) return InvalidArgument(what + ": '" + key + "' is required");
    return Status::Ok();
  }
  if (!it->is_string()) {
    return InvalidArgument(what + ": '" + key + "' must be a string, got " + JsonTypeName(*it));
  }
  *out = it->get<std::string>();
  return Status::Ok();
}

Status ReadBool(const Json& object, const char* key, const std::string& what, bool required,
                bool* out) {
  const auto it = object.find(key);
  if (it == object.end()) {
    if (required) return InvalidArgument(what + ": '" + key + "' is required");
    return Status::Ok();
  }
  if (!it->is_boolean()) {
    return InvalidArgument(what + ": '" + key + "' must be a boolean, got " + JsonTypeName(*it));
  }
  *out = it->get<bool>();
  return Status::Ok();
}

Status ReadSize(const Json& value, const std::string& what, int64_t* out) {
  if (value.is_number_unsigned()) {
    const uint64_t u = value.get<uint64_t>();
    if (u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      *out = static_cast<int64_t>(u);
      return Status::Ok();
    }
  } else if (value.is_number_integer() && value.get<int64_t>() >= 0) {
    *out = value.get<int64_t>();
    return Status::Ok();
  }
  return InvalidArgument(what + " must be a non-negative integer, got " + DumpJson(value));
}

Status ReadShape(const Json& object, const std::string& what, Shape* out) {
  const auto it = object.find("shape");
  if (it == object.end()) return InvalidArgument(what + ": 'shape' is required");
  if (!it->is_array()) {
    return InvalidArgument(what + ": 'shape' must be an array, got " + JsonTypeName(*it));
  }
  out->clear();
  out->reserve(it->size());
  for (size_t i = 0; i < it->size(); ++i) {
    int64_t dim = 0;
    SOMM_RETURN_IF_ERROR(ReadSize((*it)[i], what + ": shape dimension " + std::to_string(i), &dim));
    out->push_back(dim);
  }
  return Status::Ok();
}

StatusOr<int64_t> CheckedElementCount(const Shape& shape, const std::string& what) {
  int64_t count = 1;
  for (int64_t dim : shape) {
    if (dim < 0) {
      return InvalidArgument(what + ": shape " + ShapeToString(shape) +
                             " has a negative dimension");
    }
    if (dim != 0 && count > std::numeric_limits<int64_t>::max() / dim) {
      return InvalidArgument(what + ": shape " + ShapeToString(shape) + " is too large");
    }
    count *= dim;
  }
  return count;
}

StatusOr<std::optional<bool>> BoolParameter(const Parameters& parameters, const std::string& key,
                                            const std::string& what) {
  const auto it = parameters.find(key);
  if (it == parameters.end()) return std::optional<bool>();
  if (const bool* b = std::get_if<bool>(&it->second)) return std::optional<bool>(*b);
  return InvalidArgument(what + ": parameter '" + key + "' must be a boolean");
}

}  // namespace somm::oip::internal
