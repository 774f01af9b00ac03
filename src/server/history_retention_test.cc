// The history retention: old job events and usage records go to the day files of the archive,
// exactly those and nothing else, then leave the store; the reports over the archived period read
// the same tables from the aggregates as before.
#include "server/history_retention.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "server/report_inputs.h"
#include "server/reports.h"
#include "store/sqlite/sqlite_store.h"
#include "testing/temp_dir.h"

namespace arbiter::server {
namespace {

using nlohmann::json;
constexpr int64_t kHour = 3'600'000;
constexpr int64_t kDay = 24 * kHour;
constexpr int64_t kT0 = 1'794'268'800'000;  // 2026-11-10T00:00:00Z

// Every line of every file of the archive, by file name.
std::map<std::string, std::vector<json>> ReadArchive(const std::string& dir) {
  std::map<std::string, std::vector<json>> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    gzFile f = gzopen(e.path().c_str(), "rb");
    EXPECT_NE(f, nullptr) << e.path();
    std::string text;
    char buf[4096];
    for (int n = 0; (n = gzread(f, buf, sizeof(buf))) > 0;)
      text.append(buf, static_cast<size_t>(n));
    gzclose(f);
    for (size_t at = 0; at < text.size();) {
      const size_t end = text.find('\n', at);
      out[e.path().filename().string()].push_back(json::parse(text.substr(at, end - at)));
      at = end + 1;
    }
  }
  return out;
}

class HistoryRetentionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto opened = store::OpenSqliteStore(dir_.File("arbiter.db"), {});
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    store_ = std::move(opened).value();
    // Jobs over three days from kT0 (each: submitted, admitted, running, then succeeded, failed
    // or preempted), and a few twenty days later.
    std::map<uint64_t, reports::FactState> states;
    std::vector<store::JobFactRecord> facts;
    store::WriteBatch b;
    uint64_t seq = 0;
    for (uint64_t id = 1; id <= 40; ++id) {
      reports::JobInfo j{fmt::format("team-{}", id % 2),
                         fmt::format("q-{}", id % 3),
                         fmt::format("u-{}", id % 5),
                         id % 2 ? "training" : "inference",
                         "H100",
                         static_cast<int64_t>(1000 * (1 + id % 4)),
                         "",
                         0};
      const int64_t t = kT0 + static_cast<int64_t>(id) * 7 * kHour / 3 + (id > 35 ? 20 * kDay : 0);
      const int64_t admitted = t + static_cast<int64_t>(id) * 60'000;
      const int64_t end = admitted + static_cast<int64_t>(id % 7 + 1) * 5 * kHour / 2;
      const char* outcome = id % 3 == 0 ? "succeeded" : id % 3 == 1 ? "failed" : "preempting";
      const std::vector<store::JobEventRecord> events = {
          {++seq, id, t, "", "pending", "submitted", "{}"},
          {++seq, id, admitted, "pending", "admitted", "admitted", R"({"attempt":1})"},
          {++seq, id, admitted + 1000, "admitted", "running", "running", "{}"},
          {++seq, id, end, "running", outcome,
           id % 3 == 1 ? "a task exited with code 2" : "preempted by job 1 (priority)", "{}"}};
      for (const auto& e : events) {
        reports::FactsOfEvent(e, j, states[id], facts);
        b.AppendJobEvent(e);
        events_.push_back(e);
      }
      store::UsageRecord u{0,
                           id,
                           0,
                           j.tenant,
                           j.queue,
                           j.user,
                           j.type,
                           j.gpu_model,
                           j.gpu_milli,
                           0,
                           admitted,
                           end,
                           j.gpu_milli * (end - admitted) / 3600};
      b.AppendUsage(u);
      u.seq = id;
      usage_.push_back(u);
    }
    for (auto& f : facts) b.AppendJobFact(std::move(f));
    ASSERT_TRUE(store_->Write(std::move(b)).ok());
  }

  Result<reports::Table> Report(const char* name, int64_t step) {
    reports::Query q;
    q.from_ms = kT0;
    q.to_ms = kT0 + 6 * kDay;
    q.step_ms = step;
    reports::Inputs in;
    in.now_ms = kT0 + 40 * kDay;
    Status st = reports::ReadReportRecords(*store_, name, q, in);
    if (!st.ok()) return st;
    return reports::Compute(name, q, in);
  }

  testing::TempDir dir_;
  std::unique_ptr<store::Store> store_;
  std::vector<store::JobEventRecord> events_;
  std::vector<store::UsageRecord> usage_;
};

TEST_F(HistoryRetentionTest, ArchivesExactlyTheOldRowsThenDeletesThemAndReportsStayTheSame) {
  std::map<std::string, json> before;
  for (const char* name : {"usage", "wait", "failures", "preemptions", "fairness"}) {
    for (int64_t step : {int64_t{0}, kDay, kHour}) {
      auto t = Report(name, step);
      ASSERT_TRUE(t.ok()) << t.status().ToString();
      before[fmt::format("{}/{}", name, step)] = reports::ToJson(name, {}, *t)["rows"];
    }
  }
  const std::string archive = dir_.File("archive");
  const int64_t now = kT0 + 40 * kDay + 5 * kHour;
  auto done = ApplyHistoryRetention(*store_, archive, 30, now);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(done->before_ms, kT0 + 10 * kDay);

  // What had to go: events before the bound, usage records that ended before it.
  std::set<uint64_t> old_events, old_usage;
  for (const auto& e : events_) {
    if (e.at_ms < done->before_ms) old_events.insert(e.seq);
  }
  for (const auto& u : usage_) {
    if (u.end_ms < done->before_ms) old_usage.insert(u.seq);
  }
  ASSERT_GT(old_events.size(), 100u);
  ASSERT_LT(old_events.size(), events_.size());
  EXPECT_EQ(done->events, old_events.size());
  EXPECT_EQ(done->usage, old_usage.size());

  // The archive holds exactly those rows, each in the file of its day, field for field.
  std::set<uint64_t> got_events, got_usage;
  for (const auto& [file, lines] : ReadArchive(archive)) {
    for (const json& l : lines) {
      const uint64_t seq = l.at("seq").get<uint64_t>();
      if (l.at("table") == "job_events") {
        EXPECT_TRUE(got_events.insert(seq).second) << "twice: event " << seq;
        const store::JobEventRecord& e = events_.at(seq - 1);
        EXPECT_EQ(file, ArchiveDay(e.at_ms) + ".jsonl.gz");
        EXPECT_EQ(l.at("at_ms").get<int64_t>(), e.at_ms);
        EXPECT_EQ(l.at("to_state").get<std::string>(), e.to_state);
        EXPECT_EQ(l.at("reason").get<std::string>(), e.reason);
        EXPECT_EQ(l.at("detail_json").get<std::string>(), e.detail_json);
      } else {
        ASSERT_EQ(l.at("table"), "usage");
        EXPECT_TRUE(got_usage.insert(seq).second) << "twice: usage " << seq;
        const store::UsageRecord& u = usage_.at(seq - 1);
        EXPECT_EQ(file, ArchiveDay(u.end_ms) + ".jsonl.gz");
        EXPECT_EQ(l.at("start_ms").get<int64_t>(), u.start_ms);
        EXPECT_EQ(l.at("gpu_milli").get<int64_t>(), u.gpu_milli);
        EXPECT_EQ(l.at("cost_micro").get<int64_t>(), u.cost_micro);
        EXPECT_EQ(l.at("tenant").get<std::string>(), u.tenant);
      }
    }
  }
  EXPECT_EQ(got_events, old_events);
  EXPECT_EQ(got_usage, old_usage);

  // The store keeps only the newer rows.
  auto left = store_->EventsSince(0, 100'000);
  ASSERT_TRUE(left.ok());
  EXPECT_EQ(left->size(), events_.size() - old_events.size());
  for (const auto& e : *left) EXPECT_GE(e.at_ms, done->before_ms);
  auto left_usage = store_->Usage(0, now);
  ASSERT_TRUE(left_usage.ok());
  EXPECT_EQ(left_usage->size(), usage_.size() - old_usage.size());

  // Reports over the archived period (whole hours) read the same tables.
  for (const char* name : {"usage", "wait", "failures", "preemptions", "fairness"}) {
    for (int64_t step : {int64_t{0}, kDay, kHour}) {
      auto t = Report(name, step);
      ASSERT_TRUE(t.ok()) << t.status().ToString();
      EXPECT_EQ(reports::ToJson(name, {}, *t)["rows"], before[fmt::format("{}/{}", name, step)])
          << name << " step " << step;
    }
  }

  // Run again: nothing left to archive.
  auto again = ApplyHistoryRetention(*store_, archive, 30, now);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->events + again->usage, 0u);
}

}  // namespace
}  // namespace arbiter::server
