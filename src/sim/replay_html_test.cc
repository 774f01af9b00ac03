#include "sim/replay_html.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <variant>
#include <vector>

namespace arbiter::sim {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

ReplayReport MakeReport(const std::string& policy, double scale) {
  ReplayReport r;
  r.policy = policy;
  r.jobs = 4;
  r.completed = 4;
  r.wait = Stats::Of({0, 0, 40 * scale, 80 * scale});
  r.wait_survival = SurvivalCurve({0, 0, 40 * scale, 80 * scale});
  r.jct = Stats::Of({50, 70, 100, 100});
  r.makespan_seconds = 120;
  r.gpu_alloc_pct = 91.67;
  r.alloc_series.step_seconds = 32;
  r.alloc_series.span_seconds = 120;
  r.alloc_series.alloc_pct = {100, 100, 75, 91.67};
  r.arrival_alloc_series.step_seconds = 1;
  r.arrival_alloc_series.span_seconds = 20;
  r.arrival_alloc_series.alloc_pct = std::vector<double>(20, 100.0);
  for (const char* name : {"q-a", "q-b"}) {
    QueueReport q;
    q.name = name;
    q.tenant = "t";
    q.jobs = 2;
    q.wait = Stats::Of({0, 40 * scale});
    q.gpu_share_pct = 40 * scale;
    q.entitlement_pct = 50;
    q.share_while_waiting_pct = 30;
    r.queues.push_back(q);
  }
  GroupReport g;
  g.name = "training";
  g.jobs = 4;
  g.wait = r.wait;
  g.jct = r.jct;
  r.types.push_back(g);
  return r;
}

TEST(ReplayHtmlReport, SectionsChartsAndSeriesPerPolicy) {
  const std::vector<ReplayReport> reports = {MakeReport("fgd", 1), MakeReport("bestfit", 2)};
  const report::Report r = ReplayHtmlReport(reports, "trace", "nodes", "arbiter simulate replay");
  EXPECT_EQ(r.title, "Trace replay: trace on nodes");
  std::vector<std::string> titles;
  std::vector<size_t> charts;
  for (const report::Section& s : r.sections) {
    titles.push_back(s.title);
    charts.push_back(s.charts.size());
  }
  EXPECT_THAT(titles,
              ElementsAre("Summary", "GPU allocation over time", "GPU allocation while jobs arrive",
                          "Wait time distribution", "Waits by queue",
                          "Waits and completion times by job type", "GPU share by queue",
                          "GPU share while waiting", "Dropped and unfinished jobs"));
  EXPECT_THAT(charts, ElementsAre(0, 1, 1, 1, 1, 1, 1, 1, 0));

  // Summary: one column per policy.
  const report::Table& summary = r.sections[0].tables.at(0);
  EXPECT_THAT(summary.columns, ElementsAre("", "fgd", "bestfit"));
  bool found = false;
  for (const auto& row : summary.rows) {
    if (row[0] != "wait p95 (s)") continue;
    found = true;
    EXPECT_THAT(row, ElementsAre("wait p95 (s)", "80.0", "160.0"));
  }
  EXPECT_TRUE(found);

  // Allocation: a step line per policy, its steps at 0, 32, 64, 96 s and held to the end.
  const auto& alloc = std::get<report::LineChart>(r.sections[1].charts[0]);
  ASSERT_EQ(alloc.series.size(), 2u);
  EXPECT_TRUE(alloc.step);
  EXPECT_EQ(alloc.series[0].name, "fgd");
  EXPECT_EQ(alloc.series[0].points.size(), 5u);
  EXPECT_EQ(alloc.series[0].points[2], (std::pair<double, double>{64, 75}));
  EXPECT_EQ(alloc.series[0].points.back(), (std::pair<double, double>{120, 91.67}));

  // While jobs arrive: 20 one-second steps, held to 20 s.
  const auto& arrivals = std::get<report::LineChart>(r.sections[2].charts[0]);
  EXPECT_EQ(arrivals.series[1].points.size(), 21u);
  EXPECT_EQ(arrivals.series[1].points.back(), (std::pair<double, double>{20, 100}));

  // Waits: 2 jobs waited longer than 0, falling to none at the longest wait, in seconds (at most
  // 10 minutes).
  const auto& waits = std::get<report::LineChart>(r.sections[3].charts[0]);
  ASSERT_EQ(waits.series.size(), 2u);
  EXPECT_EQ(waits.series[1].points.front(), (std::pair<double, double>{0, 2}));
  EXPECT_EQ(waits.series[1].points.back(), (std::pair<double, double>{160, 0}));
  EXPECT_THAT(waits.x_label, HasSubstr("(s)"));

  // p99 waits by queue: nearest rank of {0, 40 x scale} is the larger.
  const auto& by_queue = std::get<report::BarChart>(r.sections[4].charts[0]);
  EXPECT_THAT(by_queue.series[1].values, ElementsAre(80, 80));

  // Shares: one bar per policy and the guarantee, per queue.
  const auto& shares = std::get<report::BarChart>(r.sections[6].charts[0]);
  EXPECT_THAT(shares.categories, ElementsAre("q-a", "q-b"));
  ASSERT_EQ(shares.series.size(), 3u);
  EXPECT_EQ(shares.series[2].name, "guaranteed");
  EXPECT_THAT(shares.series[1].values, ElementsAre(80, 80));
  EXPECT_THAT(shares.series[2].values, ElementsAre(50, 50));
  const auto& waiting = std::get<report::BarChart>(r.sections[7].charts[0]);
  EXPECT_THAT(waiting.series[0].values, ElementsAre(30, 30));

  // Every job ended: no table, a line that says so.
  EXPECT_TRUE(r.sections[8].tables.empty());
  EXPECT_THAT(r.sections[8].paragraphs.at(0), HasSubstr("Every job ended"));
}

TEST(ReplayHtmlReport, LongTimesInHoursAndDropReasonsCounted) {
  ReplayReport a = MakeReport("fgd", 1000);  // waits up to 80,000 s
  a.makespan_seconds = 200000;
  a.alloc_series.span_seconds = 200000;
  a.dropped = 2;
  a.dropped_jobs = {{"j1", "q-a", "NoFeasibleNode: too big"},
                    {"j2", "q-a", "NoFeasibleNode: too big"}};
  a.unfinished_jobs = {{"j3", "q-b", "running at the time limit"}};
  const report::Report r = ReplayHtmlReport({a}, "t", "n", "cmd");
  EXPECT_THAT(std::get<report::LineChart>(r.sections[1].charts[0]).x_label, HasSubstr("(h)"));
  EXPECT_THAT(std::get<report::LineChart>(r.sections[2].charts[0]).x_label, HasSubstr("(s)"));
  EXPECT_THAT(std::get<report::LineChart>(r.sections[3].charts[0]).x_label, HasSubstr("(h)"));
  const report::Table& ended = r.sections[8].tables.at(0);
  ASSERT_EQ(ended.rows.size(), 2u);
  EXPECT_THAT(ended.rows[0], ElementsAre("fgd", "dropped", "NoFeasibleNode: too big", "2"));
  EXPECT_THAT(ended.rows[1], ElementsAre("fgd", "unfinished", "running at the time limit", "1"));
  // The page renders: one <svg> per chart.
  const std::string html = report::RenderHtml(r);
  size_t svgs = 0;
  for (size_t at = html.find("<svg"); at != std::string::npos; at = html.find("<svg", at + 1)) {
    ++svgs;
  }
  EXPECT_EQ(svgs, 7u);
}

}  // namespace
}  // namespace arbiter::sim
