#include "api/errors.h"

#include <gtest/gtest.h>

namespace arbiter::api {
namespace {

TEST(ErrorBody, CodeMessageAndField) {
  EXPECT_EQ(ErrorBody(InvalidArgument("resources.gpus", "must be >= 0, got -2")),
            nlohmann::json::parse(R"({"error": {"code": "invalid_argument",
                                  "message": "must be >= 0, got -2",
                                  "field": "resources.gpus"}})"));
  const nlohmann::json nf = ErrorBody(NotFound("job 7 not found"));
  EXPECT_EQ(nf["error"]["code"], "not_found");
  EXPECT_FALSE(nf["error"].contains("field"));
}

TEST(ErrorBody, AlwaysDumpable) {
  const nlohmann::json j = ErrorBody(InvalidArgument("labels[\"\xff\"]", "bad \xc3 byte"));
  std::string dumped;
  EXPECT_NO_THROW(dumped = j.dump());
  EXPECT_NE(dumped.find("bad \xEF\xBF\xBD byte"), std::string::npos) << dumped;
}

TEST(HttpStatusFor, EveryCode) {
  const std::pair<StatusCode, int> cases[] = {
      {StatusCode::kOk, 200},
      {StatusCode::kInvalidArgument, 400},
      {StatusCode::kNotFound, 404},
      {StatusCode::kAlreadyExists, 409},
      {StatusCode::kFailedPrecondition, 409},
      {StatusCode::kConflict, 409},
      {StatusCode::kPermissionDenied, 403},
      {StatusCode::kUnauthenticated, 401},
      {StatusCode::kResourceExhausted, 429},
      {StatusCode::kUnavailable, 503},
      {StatusCode::kInternal, 500},
  };
  for (const auto& [code, http] : cases) {
    EXPECT_EQ(HttpStatusFor(code), http) << StatusCodeName(code);
  }
}

}  // namespace
}  // namespace arbiter::api
