// JSON helpers shared by the OIP REST codecs (oip_json.cc, oip_metadata_json.cc).
//
// Private to the codec library: public codec headers do not include
// nlohmann/json, so their users (the HTTP frontend, the REST client, the load
// generator) do not pay for it. Nothing here throws: every nlohmann exception
// that can arise from hostile input becomes an InvalidArgument Status whose
// message names the field concerned.
//
// Thread-safety: free functions on values.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "common/tensor.h"
#include "api/inference.h"

namespace somm::oip::internal {

// ordered_json keeps fields in the order the spec lists them (name, datatype,
// shape, data), which is what people reading responses expect.
using Json = nlohmann::ordered_json;

// Parses a complete JSON document. Errors read
// "malformed JSON at byte N: <what the parser saw>", N counted from 1 (the
// offending byte, or one past the end for truncated input).
StatusOr<Json> ParseJson(std::string_view text);

// Serialises without throwing: invalid UTF-8 in strings (BYTES elements) is
// replaced with U+FFFD rather than failing the whole response.
std::string DumpJson(const Json& value);

// "string", "number", "array", ... for error messages.
const char* JsonTypeName(const Json& value);

// OIP $parameters <-> somm::Parameters. `what` names the owner in errors,
// e.g. "request", "input 'x'".
Json ParametersToJson(const Parameters& parameters);
Status JsonToParameters(const Json& value, const std::string& what, Parameters* out);

// Typed field readers. A missing optional field leaves *out untouched and
// returns OK; a present field of the wrong type is InvalidArgument.
Status ReadString(const Json& object, const char* key, const std::string& what, bool required,
                  std::string* out);
Status ReadBool(const Json& object, const char* key, const std::string& what, bool required,
                bool* out);
// Non-negative integer that fits int64 (shape dims, byte sizes).
Status ReadSize(const Json& value, const std::string& what, int64_t* out);
Status ReadShape(const Json& object, const std::string& what, Shape* out);

// Element count of `shape`, rejecting negative dims and int64 overflow.
StatusOr<int64_t> CheckedElementCount(const Shape& shape, const std::string& what);

// A bool parameter looked up in `parameters`; nullopt when absent,
// InvalidArgument when present with another type.
StatusOr<std::optional<bool>> BoolParameter(const Parameters& parameters, const std::string& key,
                                            const std::string& what);

}  // namespace somm::oip::internal
