// Status <-> HTTP status codes for the OIP REST protocol: the one place each
// direction is decided.
//
// Server side (HttpFrontend): HttpStatusFromCode. FAILED_PRECONDITION ("the
// model exists but is not ready") maps to 400, not 409, because that is what
// Triton answers for a model that is not ready and what OIP clients expect
// ("typically 400" in the KServe spec); 409 stays reserved for
// ALREADY_EXISTS. Bodies over the frontend's limit are 413, decided in the
// frontend because no StatusCode means "too large" alone.
//
// Client side (HttpClient): StatusCodeFromHttp inverts the table; 413 and 429
// both come back as RESOURCE_EXHAUSTED, other 4xx as INVALID_ARGUMENT and
// other 5xx as INTERNAL.
//
// Thread-safety: pure functions.
#pragma once

#include "common/status.h"

namespace somm::oip {

int HttpStatusFromCode(StatusCode code);
StatusCode StatusCodeFromHttp(int http_status);

}  // namespace somm::oip
