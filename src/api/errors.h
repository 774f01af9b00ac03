// API errors: a Status as the JSON error body and the HTTP status of each StatusCode.
//
//   {"error": {"code": "invalid_argument", "message": "must be between 0 and 1024, got -2",
//              "field": "resources.gpus"}}
//
// Thread safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace arbiter::api {

// The error body of `s` (`field` left out when empty). Message and field are made valid UTF-8
// (invalid bytes become U+FFFD), so dumping the body never throws.
nlohmann::json ErrorBody(const Status& s);

// 200 ok, 400 invalid_argument, 404 not_found, 409 already_exists, failed_precondition and
// conflict, 403 permission_denied, 401 unauthenticated, 429 resource_exhausted, 503 unavailable,
// 500 internal. A failed precondition is 409: the request is well formed but the object's state
// forbids it (resuming a job that is not suspended).
int HttpStatusFor(StatusCode code);

// An error answer read back by a client (the CLI, an agent): the code the body names, else one for
// the HTTP status (400, 411, 413 invalid_argument, 401, 403, 404, 409 conflict, 429, 503
// unavailable, others internal); the body's message and field where it has them.
Status StatusFromErrorReply(int http_status, std::string_view body);

}  // namespace arbiter::api
