// Digests and random bytes, from OpenSSL's libcrypto. auth/ hashes API keys
// with Sha256Hex and draws new keys with RandomBytes; nothing outside
// crypto/ includes OpenSSL.
//
// Thread-safety: every function may be called concurrently.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "common/status.h"

namespace somm::crypto {

// SHA-256 of `data` as 64 lowercase hex digits.
std::string Sha256Hex(std::string_view data);

// `n` bytes from OpenSSL's CSPRNG (RAND_bytes). Fails only when the
// generator cannot be seeded.
StatusOr<std::string> RandomBytes(size_t n);

// Lowercase hex of arbitrary bytes.
std::string Hex(std::string_view bytes);

// Compares in time that depends on the lengths only (CRYPTO_memcmp), so a
// stored hash cannot be guessed byte by byte from response times.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

}  // namespace somm::crypto
