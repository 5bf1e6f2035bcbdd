// The one reader of OpenSSL's per-thread error queue for crypto/'s adapters
// (TLS streams, TLS client contexts). Private to src/crypto/.
#pragma once

#include <openssl/err.h>

#include <string>

namespace somm::crypto::internal {

// The first error on this thread's OpenSSL queue, as its reason text
// ("certificate verify failed"), and the queue emptied.
inline std::string TakeOpenSslError() {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "unknown TLS error";
  const char* reason = ERR_reason_error_string(code);
  return reason != nullptr ? reason : "TLS error " + std::to_string(code);
}

}  // namespace somm::crypto::internal
