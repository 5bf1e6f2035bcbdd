// somm's registration payload (somm_json.h, POST
// /v2/repository/models/{name}/register) on hostile bytes: JSON, strict
// base64, preprocessing and shapes. Invariant: whatever decodes re-encodes
// and decodes again to a request that encodes the same way (the client's
// encoder and the server's decoder agree on the wire form).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "frontend/http/somm_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  const auto request = somm::oip::DecodeRegistrationRequest(body, "m");
  if (!request.ok()) return 0;
  const std::string encoded = somm::oip::EncodeRegistrationRequest(request.value());
  const auto again = somm::oip::DecodeRegistrationRequest(encoded, "m");
  if (!again.ok() || somm::oip::EncodeRegistrationRequest(again.value()) != encoded) std::abort();
  return 0;
}
