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

Status StatusFromErrorReply(int http_status, std::string_view body) {
  const nlohmann::json doc = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  std::string message;
  std::string field;
  std::string name;
  if (doc.is_object() && doc.contains("error") && doc["error"].is_object()) {
    const nlohmann::json& e = doc["error"];
    message = e.value("message", "");
    field = e.value("field", "");
    name = e.value("code", "");
  }
  for (StatusCode c :
       {StatusCode::kInvalidArgument, StatusCode::kNotFound, StatusCode::kAlreadyExists,
        StatusCode::kFailedPrecondition, StatusCode::kConflict, StatusCode::kUnprocessable,
        StatusCode::kPermissionDenied, StatusCode::kUnauthenticated, StatusCode::kResourceExhausted,
        StatusCode::kUnavailable, StatusCode::kInternal}) {
    if (!name.empty() && StatusCodeName(c) == name) return Status(c, message, field);
  }
  StatusCode code = StatusCode::kInternal;
  switch (http_status) {
    case 400:
    case 411:
    case 413:
      code = StatusCode::kInvalidArgument;
      break;
    case 401:
      code = StatusCode::kUnauthenticated;
      break;
    case 403:
      code = StatusCode::kPermissionDenied;
      break;
    case 404:
      code = StatusCode::kNotFound;
      break;
    case 409:
      code = StatusCode::kConflict;
      break;
    case 422:
      code = StatusCode::kUnprocessable;
      break;
    case 429:
      code = StatusCode::kResourceExhausted;
      break;
    case 503:
      code = StatusCode::kUnavailable;
      break;
  }
  return Status(code, message, field);
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
    case StatusCode::kUnprocessable:
      return 422;
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
