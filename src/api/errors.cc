#include "api/errors.h"

#include <string>
#include <string_view>

#include "api/value.h"

namespace arbiter::api {

namespace {

// Replaces every byte that does not start a valid UTF-8 sequence with U+FFFD.
std::string ValidUtf8(std::string_view s) {
  if (IsValidUtf8(s)) return std::string(s);
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    size_t len = 1;
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0xF0) {
      len = 4;
    } else if (c >= 0xE0) {
      len = 3;
    } else if (c >= 0xC0) {
      len = 2;
    }
    if (i + len <= s.size() && IsValidUtf8(s.substr(i, len))) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

}  // namespace

nlohmann::json ErrorBody(const Status& s) {
  nlohmann::json error = {{"code", std::string(StatusCodeName(s.code()))},
                          {"message", ValidUtf8(s.message())}};
  if (!s.field().empty()) error["field"] = ValidUtf8(s.field());
  return {{"error", std::move(error)}};
}

int HttpStatusFor(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return 200;
    case StatusCode::kInvalidArgument:
      return 400;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kAlreadyExists:
    case StatusCode::kFailedPrecondition:
    case StatusCode::kConflict:
      return 409;
    case StatusCode::kPermissionDenied:
      return 403;
    case StatusCode::kUnauthenticated:
      return 401;
    case StatusCode::kResourceExhausted:
      return 429;
    case StatusCode::kUnavailable:
      return 503;
    case StatusCode::kInternal:
      return 500;
  }
  return 500;
}

}  // namespace arbiter::api
