#include "api/value.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <limits>

#include "api/parse_tree.h"

namespace arbiter::api {
namespace {

struct DecimalCase {
  std::string text;
  bool ok;
  int64_t milli;       // when ok
  std::string reason;  // part of why, when not ok
};

TEST(ParseDecimalMilli, ExactThousandths) {
  const DecimalCase cases[] = {
      {"0.5", true, 500, ""},
      {"2.5", true, 2500, ""},
      {"8", true, 8000, ""},
      {"0", true, 0, ""},
      {"-0.125", true, -125, ""},
      {"+1.2", true, 1200, ""},
      {"0.001", true, 1, ""},
      {"0.1", true, 100, ""},  // 0.1 has no exact double; no double is involved
      {"1.000000", true, 1000, ""},
      {"9223372036854775.807", true, std::numeric_limits<int64_t>::max() / 1000 * 1000 + 807, ""},
      {"0.0005", false, 0, "more than 3 decimals"},
      {"1e3", false, 0, "exponent"},
      {"1.5E2", false, 0, "exponent"},
      {"", false, 0, "not a decimal"},
      {".5", false, 0, "not a decimal"},
      {"5.", false, 0, "not a decimal"},
      {"-", false, 0, "not a decimal"},
      {"1.2.3", false, 0, "not a decimal"},
      {"abc", false, 0, "not a decimal"},
      {"99999999999999999999", false, 0, "too large"},
      {"1e400", false, 0, "exponent"},
  };
  for (const DecimalCase& c : cases) {
    SCOPED_TRACE(c.text);
    int64_t milli = -1;
    std::string why;
    EXPECT_EQ(ParseDecimalMilli(c.text, &milli, &why), c.ok) << why;
    if (c.ok) {
      EXPECT_EQ(milli, c.milli);
    } else {
      EXPECT_NE(why.find(c.reason), std::string::npos) << why;
    }
  }
}

TEST(ParseMib, IntegersAndBinarySuffixes) {
  const DecimalCase cases[] = {
      {"65536", true, 65536, ""},          {"512Mi", true, 512, ""},
      {"64Gi", true, 65536, ""},           {"1.5Gi", true, 1536, ""},
      {"1Ti", true, 1048576, ""},          {"2048Ki", true, 2, ""},
      {"1Pi", true, int64_t{1} << 30, ""}, {"1Ki", false, 0, "whole number"},
      {"0.5", false, 0, "whole number"},   {"64GB", false, 0, "unknown unit"},
      {"64G", false, 0, "unknown unit"},   {"Gi", false, 0, "unknown unit"},
      {"-1Gi", false, 0, ">= 0"},          {"9999999999999999Pi", false, 0, "too large"},
  };
  for (const DecimalCase& c : cases) {
    SCOPED_TRACE(c.text);
    int64_t mib = -1;
    std::string why;
    EXPECT_EQ(ParseMib(c.text, &mib, &why), c.ok) << why;
    if (c.ok) {
      EXPECT_EQ(mib, c.milli);
    } else {
      EXPECT_NE(why.find(c.reason), std::string::npos) << why;
    }
  }
}

TEST(Paths, DottedAndBracketed) {
  EXPECT_EQ(ChildPath("", "resources"), "resources");
  EXPECT_EQ(ChildPath("resources", "gpus"), "resources.gpus");
  EXPECT_EQ(IndexPath("tenants", 0), "tenants[0]");
  EXPECT_EQ(ChildPath(IndexPath("tenants", 0), "queues"), "tenants[0].queues");
  EXPECT_EQ(ChildPath("labels", "topology.example.com/zone"),
            "labels[\"topology.example.com/zone\"]");
  EXPECT_EQ(ChildPath("env", "A B"), "env[\"A B\"]");
  EXPECT_EQ(Quote("a\"b\n"), "\"a\\\"b\\n\"");
  EXPECT_EQ(Quote(std::string("\xff\x01", 2)), "\"\\xff\\x01\"");
  EXPECT_LT(Quote(std::string(1000, 'x')).size(), 100u);
}

TEST(IsValidUtf8, RefusesOverlongAndSurrogates) {
  EXPECT_TRUE(IsValidUtf8("plain"));
  EXPECT_TRUE(IsValidUtf8("\xc3\xa9"));          // é
  EXPECT_TRUE(IsValidUtf8("\xf0\x9f\x98\x80"));  // emoji
  EXPECT_FALSE(IsValidUtf8("\xc3"));
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));      // surrogate
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));  // above U+10FFFF
}

TEST(ParseTrees, JsonKeepsNumberTextAndRefusesDuplicates) {
  const TreeLimits limits;
  Result<Value> v =
      ParseJsonTree(R"({"a": [1, 4.50, -0, 18446744073709551615, 1e2]})", limits, "body");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  const Value* a = v->Find("a");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->items.size(), 5u);
  EXPECT_EQ(a->items[1].text, "4.50");
  EXPECT_EQ(a->items[3].text, "18446744073709551615");
  EXPECT_EQ(a->items[4].text, "1e2");

  Result<Value> dup = ParseJsonTree(R"({"x": {"k": 1, "k": 2}})", limits, "body");
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.status().field(), "x.k");
  EXPECT_NE(dup.status().message().find("duplicate"), std::string::npos);
}

TEST(ParseTrees, YamlScalarsKeepQuotingAndPositions) {
  const TreeLimits limits;
  Result<Value> v = ParseYamlTree("a: 1\nb: \"1\"\nc: ~\nd:\n", limits, "config");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->Find("a")->kind, Value::Kind::kPlain);
  EXPECT_EQ(v->Find("a")->line, 1);
  EXPECT_EQ(v->Find("b")->kind, Value::Kind::kString);
  EXPECT_EQ(v->Find("b")->line, 2);
  EXPECT_TRUE(v->Find("c")->is_null());
  EXPECT_TRUE(v->Find("d")->is_null());
}

TEST(ParseTrees, YamlAliasesExpandWithinLimits) {
  TreeLimits limits;
  Result<Value> v = ParseYamlTree("base: &b {x: 1}\ncopy: *b\n", limits, "config");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->Find("copy")->Find("x")->text, "1");

  // Each level doubles: 2^30 values if expanded.
  std::string bomb = "a0: &a0 [x, x]\n";
  for (int i = 1; i <= 30; ++i) bomb += fmt::format("a{0}: &a{0} [*a{1}, *a{1}]\n", i, i - 1);
  limits.max_depth = 100;
  Result<Value> b = ParseYamlTree(bomb, limits, "config");
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("more than"), std::string::npos) << b.status().ToString();

  Result<Value> self = ParseYamlTree("a: &x [1, *x]\n", limits, "config");
  ASSERT_FALSE(self.ok());
  EXPECT_NE(self.status().message().find("alias"), std::string::npos);
}

TEST(ParseTrees, DeepNestingIsRefusedEarly) {
  const TreeLimits limits;
  for (const std::string& deep :
       {fmt::format("{:[<10000}{:]<10000}", "", ""), fmt::format("{:[<10000}", "")}) {
    Result<Value> j = ParseJsonTree(deep, limits, "body");
    ASSERT_FALSE(j.ok());
    EXPECT_NE(j.status().message().find("nesting"), std::string::npos) << j.status().ToString();
    EXPECT_FALSE(ParseYamlTree(deep, limits, "config").ok());  // "[[" is a mapping with a list key
  }
  std::vector<std::string> maps(10000, "{a: ");
  Result<Value> m = ParseYamlTree(
      fmt::format("{}1{}", fmt::join(maps, ""), std::string(10000, '}')), limits, "config");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("nesting"), std::string::npos) << m.status().ToString();
  std::string block;
  for (int i = 0; i < 200; ++i) block += fmt::format("{:{}}a:\n", "", i);
  Result<Value> y = ParseYamlTree(block, limits, "config");
  ASSERT_FALSE(y.ok());
  EXPECT_NE(y.status().message().find("nesting"), std::string::npos) << y.status().ToString();
}

TEST(ParseTrees, ValueCountIsBounded) {
  TreeLimits limits;
  limits.max_values = 100;
  const std::vector<std::string> zeros(200, "0");
  const std::string many = fmt::format("[{}]", fmt::join(zeros, ","));
  EXPECT_FALSE(ParseJsonTree(many, limits, "body").ok());
  EXPECT_FALSE(ParseYamlTree(many, limits, "config").ok());
}

}  // namespace
}  // namespace arbiter::api
