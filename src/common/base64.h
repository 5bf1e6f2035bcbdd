// Base64 (RFC 4648 section 4, the standard alphabet with '=' padding), for
// binary payloads inside JSON: the model file and validation data of a REST
// model registration.
//
// Decoding is strict, because a silently mangled model file would only fail
// much later and far away: the input must be a whole number of 4-character
// groups, use only the standard alphabet (no whitespace, no URL-safe '-' or
// '_'), carry '=' only as the last one or two characters, and leave the
// unused bits of the last group zero (section 3.5), so that every byte string
// has exactly one accepted encoding. Errors are InvalidArgument and name the
// offending offset.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace somm {

std::string Base64Encode(std::string_view bytes);
StatusOr<std::string> Base64Decode(std::string_view text);

}  // namespace somm
