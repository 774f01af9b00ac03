// Query parameters shared by the HTTP routes (the API's and the agent's log port), read strictly:
// a value that is not exactly what the parameter takes is refused, never read as its default.
//
// Thread safety: pure functions.
#pragma once

#include <string>

#include "common/result.h"

namespace httplib {
struct Request;
}  // namespace httplib

namespace arbiter::net {

// A boolean query parameter: absent is false; present, it must be given once, as exactly `true`
// or `false` (?dry_run=1, ?dry_run=yes, ?dry_run=True or ?dry_run= are refused, so that a
// spelling the server does not read never does the opposite of what was meant). The error is an
// InvalidArgument whose field is the parameter's name.
Result<bool> QueryBool(const httplib::Request& req, const std::string& name);

}  // namespace arbiter::net
