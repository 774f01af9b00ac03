// Job arrays in listings, on job objects as the server writes them ("array": {"id", "index",
// "size", "max_running"}): index ranges, grouping, the row's id and state counts.
#include "cli/job_arrays.h"

#include <gtest/gtest.h>

namespace arbiter::cli {
namespace {

using nlohmann::json;

json Element(uint64_t id, uint64_t array, int64_t index, const std::string& state,
             int64_t max_running = 0) {
  return json{
      {"id", id},
      {"state", state},
      {"array", {{"id", array}, {"index", index}, {"size", 100}, {"max_running", max_running}}}};
}

TEST(IndexRanges, SortsAndJoins) {
  EXPECT_EQ(IndexRanges({}), "");
  EXPECT_EQ(IndexRanges({7}), "7");
  EXPECT_EQ(IndexRanges({3, 0, 1, 2}), "0-3");
  EXPECT_EQ(IndexRanges({0, 1, 2, 3, 5, 7, 8, 9}), "0-3,5,7-9");
  EXPECT_EQ(IndexRanges({4, 4, 5}), "4-5");
}

TEST(ArrayOf, ReadsTheObjectOrNothing) {
  const auto a = ArrayOf(Element(130, 123, 7, "pending", 8));
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->id, 123u);
  EXPECT_EQ(a->index, 7);
  EXPECT_EQ(a->size, 100);
  EXPECT_EQ(a->max_running, 8);
  EXPECT_FALSE(ArrayOf(json{{"id", 5}}).has_value());
  EXPECT_FALSE(ArrayOf(json{{"id", 5}, {"array", nullptr}}).has_value());
  EXPECT_FALSE(ArrayOf(json{{"id", 5}, {"array", {{"index", 1}}}}).has_value());
  EXPECT_FALSE(ArrayOf(json{{"id", 5}, {"array", {{"id", -1}, {"index", 1}}}}).has_value());
  // From text, as the server sends it (unsigned numbers).
  EXPECT_TRUE(ArrayOf(json::parse(R"({"id": 9, "array": {"id": 9, "index": 0}})")).has_value());
}

TEST(GroupArrays, CollapsesAnArrayAtItsFirstElement) {
  json jobs = json::array();
  jobs.push_back(json{{"id", 100}, {"state", "running"}});
  for (int i = 0; i < 100; ++i) {
    const std::string state = i < 8 ? "running" : i < 98 ? "pending" : "succeeded";
    jobs.push_back(Element(123 + static_cast<uint64_t>(i), 123, i, state, 8));
  }
  jobs.push_back(json{{"id", 300}, {"state", "pending"}});
  const auto all = GroupArrays(jobs, [](const json&) { return true; });
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(GroupId(all[0]), "100");
  EXPECT_EQ(GroupId(all[1]), "123_[0-99]");
  EXPECT_EQ(GroupId(all[1], /*with_limit=*/true), "123_[0-99%8]");
  EXPECT_EQ(StateCounts(all[1]), "8 running, 90 pending, 2 succeeded");
  EXPECT_EQ(GroupId(all[2]), "300");

  // Only the pending ones collapse (squeue): the others are one row each, "123_7".
  const auto pending = GroupArrays(jobs, [](const json& j) { return j["state"] == "pending"; });
  ASSERT_EQ(pending.size(), 1u + 8 + 1 + 2 + 1);
  EXPECT_EQ(GroupId(pending[1]), "123_0");
  EXPECT_EQ(GroupId(pending[8]), "123_7");
  EXPECT_EQ(GroupId(pending[9], true), "123_[8-97%8]");
  EXPECT_EQ(StateCounts(pending[9]), "90 pending");
  EXPECT_EQ(GroupId(pending[10]), "123_98");

  // Nothing collapses: every element on its own row.
  EXPECT_EQ(GroupArrays(jobs, [](const json&) { return false; }).size(), 102u);
}

TEST(GroupArrays, SeparateArraysStaySeparate) {
  json jobs = json::array({Element(1, 1, 0, "pending"), Element(2, 2, 0, "pending"),
                           Element(3, 1, 1, "pending"), Element(4, 2, 1, "failed")});
  const auto g = GroupArrays(jobs, [](const json&) { return true; });
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(GroupId(g[0]), "1_[0-1]");
  EXPECT_EQ(GroupId(g[1]), "2_[0-1]");
  EXPECT_EQ(StateCounts(g[1]), "1 pending, 1 failed");
  EXPECT_EQ(GroupId(g[0], true), "1_[0-1]");  // no limit: no %
}

}  // namespace
}  // namespace arbiter::cli
