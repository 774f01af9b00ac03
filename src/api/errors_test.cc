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

// What a client reads back is what the server sent: the code the body names (409 stands for three),
// its message and field; without a body, the HTTP status decides.
TEST(StatusFromErrorReply, ReadsBackTheErrorBody) {
  for (StatusCode code :
       {StatusCode::kInvalidArgument, StatusCode::kNotFound, StatusCode::kAlreadyExists,
        StatusCode::kFailedPrecondition, StatusCode::kConflict, StatusCode::kPermissionDenied,
        StatusCode::kUnauthenticated, StatusCode::kResourceExhausted, StatusCode::kUnavailable,
        StatusCode::kInternal}) {
    const Status sent(code, "why", "resources.gpus");
    const Status got = StatusFromErrorReply(HttpStatusFor(code), ErrorBody(sent).dump());
    EXPECT_EQ(got.code(), code) << StatusCodeName(code);
    EXPECT_EQ(got.message(), "why");
    EXPECT_EQ(got.field(), "resources.gpus");
  }
  const std::pair<int, StatusCode> bare[] = {
      {400, StatusCode::kInvalidArgument},  {411, StatusCode::kInvalidArgument},
      {413, StatusCode::kInvalidArgument},  {401, StatusCode::kUnauthenticated},
      {403, StatusCode::kPermissionDenied}, {404, StatusCode::kNotFound},
      {409, StatusCode::kConflict},         {429, StatusCode::kResourceExhausted},
      {503, StatusCode::kUnavailable},      {500, StatusCode::kInternal},
      {502, StatusCode::kInternal}};
  for (const auto& [http, code] : bare) {
    const Status got = StatusFromErrorReply(http, "<html>proxy error</html>");
    EXPECT_EQ(got.code(), code) << http;
    EXPECT_TRUE(got.message().empty());
  }
}

}  // namespace
}  // namespace arbiter::api
