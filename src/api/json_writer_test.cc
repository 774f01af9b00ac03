#include "api/json_writer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace arbiter::api {
namespace {

TEST(JsonWriter, WritesNestedValuesWithCommasInTheirPlaces) {
  std::string out;
  JsonWriter w(&out);
  w.BeginObject()
      .Field("a", int64_t{-3})
      .Field("b", true)
      .Key("c")
      .BeginArray()
      .Uint(18446744073709551615ULL)
      .Null()
      .BeginObject()
      .EndObject()
      .BeginArray()
      .EndArray()
      .EndArray()
      .Field("d", std::vector<std::string>{"x", "y"})
      .Key("e")
      .Raw(R"({"pre":"made"})")
      .EndObject();
  EXPECT_EQ(out, R"({"a":-3,"b":true,"c":[18446744073709551615,null,{},[]],"d":["x","y"],)"
                 R"("e":{"pre":"made"}})");
  EXPECT_TRUE(nlohmann::json::accept(out));
}

TEST(JsonWriter, EscapesAsJsonDoesAndPassesUtf8Through) {
  std::string raw = "quote\" back\\ nl\n cr\r tab\t bs\b ff\f ";
  raw.push_back('\x01');
  raw.push_back('\x1f');
  raw += " del\x7f é 漢字 /";
  std::string out;
  JsonWriter(&out).String(raw);
  EXPECT_EQ(out, nlohmann::json(raw).dump());
  EXPECT_EQ(nlohmann::json::parse(out).get<std::string>(), raw);
}

}  // namespace
}  // namespace arbiter::api
