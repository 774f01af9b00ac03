#include "sim/replay_html.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <string_view>
#include <utility>

namespace arbiter::sim {

namespace {

// A unit of time for an axis: seconds up to 10 minutes, minutes up to 10 hours, then hours.
struct TimeUnit {
  double seconds = 1;
  std::string_view name = "s";
};

TimeUnit UnitFor(double max_seconds) {
  if (max_seconds <= 600) return {1, "s"};
  if (max_seconds <= 36000) return {60, "min"};
  return {3600, "h"};
}

std::string Num(double v, int decimals) { return fmt::format("{:.{}f}", v, decimals); }

// One row per metric, one column per policy.
report::Table SummaryTable(const std::vector<ReplayReport>& reports) {
  report::Table t;
  t.columns.emplace_back("");
  for (const ReplayReport& r : reports) t.columns.push_back(r.policy);
  auto row = [&](std::string label, const std::function<std::string(const ReplayReport&)>& f) {
    std::vector<std::string> cells = {std::move(label)};
    for (const ReplayReport& r : reports) cells.push_back(f(r));
    t.rows.push_back(std::move(cells));
  };
  auto count = [&](std::string label, int64_t ReplayReport::*field) {
    row(std::move(label), [field](const ReplayReport& r) { return fmt::format("{}", r.*field); });
  };
  count("jobs", &ReplayReport::jobs);
  count("completed", &ReplayReport::completed);
  count("timed out", &ReplayReport::timed_out);
  count("dropped", &ReplayReport::dropped);
  count("unfinished", &ReplayReport::unfinished);
  count("jobs that waited", &ReplayReport::jobs_waited);
  auto stats = [&](const std::string& what, Stats ReplayReport::*field) {
    for (const auto& [name, value] :
         std::vector<std::pair<std::string, double Stats::*>>{{"p50", &Stats::p50},
                                                              {"p95", &Stats::p95},
                                                              {"p99", &Stats::p99},
                                                              {"max", &Stats::max},
                                                              {"mean", &Stats::mean}}) {
      row(fmt::format("{} {} (s)", what, name),
          [&](const ReplayReport& r) { return Num((r.*field).*value, 1); });
    }
  };
  stats("wait", &ReplayReport::wait);
  stats("JCT", &ReplayReport::jct);
  row("GPU allocation, time-averaged (%)",
      [](const ReplayReport& r) { return Num(r.gpu_alloc_pct, 2); });
  row("GPU-hours allocated", [](const ReplayReport& r) { return Num(r.gpu_hours_allocated, 1); });
  row("idle GPU-hours while jobs waited",
      [](const ReplayReport& r) { return Num(r.gpu_hours_idle_while_waiting, 1); });
  count("preemptions", &ReplayReport::preemptions);
  for (size_t k = 0; k < 3; ++k) {
    constexpr std::string_view kReasons[] = {"priority", "reclaim", "anywhere"};
    row(fmt::format("  of which {}", kReasons[k]),
        [k](const ReplayReport& r) { return fmt::format("{}", r.preemptions_by_reason[k]); });
  }
  count("jobs preempted", &ReplayReport::jobs_preempted);
  row("GPU-hours lost to preemption",
      [](const ReplayReport& r) { return Num(r.gpu_hours_lost_to_preemption, 1); });
  row("Jain's index, makespan", [](const ReplayReport& r) { return Num(r.jain, 3); });
  row("Jain's index, while waiting",
      [](const ReplayReport& r) { return Num(r.jain_while_waiting, 3); });
  row("makespan (h)", [](const ReplayReport& r) { return Num(r.makespan_seconds / 3600.0, 2); });
  count("cycles", &ReplayReport::cycles);
  row("wall time (s)", [](const ReplayReport& r) { return Num(r.wall_seconds, 2); });
  return t;
}

// Allocation per step, held until the next step; the last value is held to the series' end.
report::LineChart AllocationChart(const std::vector<ReplayReport>& reports,
                                  AllocSeries ReplayReport::*field, std::string title) {
  double longest = 0;
  for (const ReplayReport& r : reports) longest = std::max(longest, (r.*field).span_seconds);
  const TimeUnit unit = UnitFor(longest);
  report::LineChart c;
  c.title = std::move(title);
  c.x_label = fmt::format("simulated time since the first submit ({})", unit.name);
  c.y_label = "GPUs allocated (% of all GPUs)";
  c.step = true;
  c.y_from_zero = true;
  c.x_min = 0;
  c.x_max = longest > 0 ? longest / unit.seconds : 1;
  for (const ReplayReport& r : reports) {
    const AllocSeries& a = r.*field;
    report::Series s{r.policy, {}};
    for (size_t i = 0; i < a.alloc_pct.size(); ++i) {
      s.points.emplace_back(static_cast<double>(i) * a.step_seconds / unit.seconds, a.alloc_pct[i]);
    }
    if (!a.alloc_pct.empty())
      s.points.emplace_back(a.span_seconds / unit.seconds, a.alloc_pct.back());
    c.series.push_back(std::move(s));
  }
  return c;
}

// The steps of a group of series: "N s", or "N to M s" when they differ.
std::string StepText(const std::vector<ReplayReport>& reports, AllocSeries ReplayReport::*field) {
  double lo = 0, hi = 0;
  for (const ReplayReport& r : reports) {
    const double step = (r.*field).step_seconds;
    lo = lo == 0 ? step : std::min(lo, step);
    hi = std::max(hi, step);
  }
  return hi > lo ? fmt::format("{} to {} s", Num(lo, 0), Num(hi, 0))
                 : fmt::format("{} s", Num(lo, 0));
}

// Jobs that waited longer than x, per policy: a step line falling to 0 at the longest wait.
report::LineChart WaitSurvivalChart(const std::vector<ReplayReport>& reports) {
  double longest = 0;
  for (const ReplayReport& r : reports) longest = std::max(longest, r.wait.max);
  const TimeUnit unit = UnitFor(longest);
  report::LineChart c;
  c.title = "Jobs that waited longer than a given time";
  c.x_label = fmt::format("wait ({})", unit.name);
  c.y_label = "jobs that waited longer";
  c.step = true;
  c.y_from_zero = true;
  c.x_min = 0;
  c.x_max = longest > 0 ? longest / unit.seconds : 1;
  for (const ReplayReport& r : reports) {
    report::Series s{r.policy, {}};
    for (const auto& [wait, jobs] : r.wait_survival) {
      s.points.emplace_back(wait / unit.seconds, static_cast<double>(jobs));
    }
    c.series.push_back(std::move(s));
  }
  return c;
}

// p99 waits of a breakdown (queues or types): one category per group, one bar per policy.
template <typename Group>
report::BarChart P99Bars(const std::vector<ReplayReport>& reports,
                         const std::vector<Group> ReplayReport::*groups, std::string title,
                         std::string x_label) {
  double longest = 0;
  for (const ReplayReport& r : reports) {
    for (const Group& g : r.*groups) longest = std::max(longest, g.wait.p99);
  }
  const TimeUnit unit = UnitFor(longest);
  report::BarChart c;
  c.title = std::move(title);
  c.x_label = std::move(x_label);
  c.y_label = fmt::format("wait p99 ({})", unit.name);
  if (!reports.empty()) {
    for (const Group& g : reports.front().*groups) c.categories.push_back(g.name);
  }
  for (const ReplayReport& r : reports) {
    report::BarChart::BarSeries s{r.policy, {}};
    for (const Group& g : r.*groups) s.values.push_back(g.wait.p99 / unit.seconds);
    c.series.push_back(std::move(s));
  }
  return c;
}

std::vector<std::string> StatsCells(const Stats& s) {
  return {Num(s.p50, 1), Num(s.p95, 1), Num(s.p99, 1), Num(s.max, 1)};
}

void Append(std::vector<std::string>* row, const std::vector<std::string>& more) {
  row->insert(row->end(), more.begin(), more.end());
}

report::Table QueueWaitTable(const std::vector<ReplayReport>& reports) {
  report::Table t;
  t.columns = {"queue",         "tenant",       "policy",         "jobs",
               "wait p50 (s)",  "wait p95 (s)", "wait p99 (s)",   "wait max (s)",
               "wait mean (s)", "JCT p95 (s)",  "times preempted"};
  if (reports.empty()) return t;
  for (size_t q = 0; q < reports.front().queues.size(); ++q) {
    for (const ReplayReport& r : reports) {
      if (q >= r.queues.size()) continue;
      const QueueReport& g = r.queues[q];
      std::vector<std::string> row = {g.name, g.tenant, r.policy, fmt::format("{}", g.jobs)};
      Append(&row, StatsCells(g.wait));
      Append(&row, {Num(g.wait.mean, 1), Num(g.jct.p95, 1), fmt::format("{}", g.preempted)});
      t.rows.push_back(std::move(row));
    }
  }
  return t;
}

report::Table TypeTable(const std::vector<ReplayReport>& reports) {
  report::Table t;
  t.columns = {"job type",     "policy",       "jobs",         "wait p50 (s)",
               "wait p95 (s)", "wait p99 (s)", "wait max (s)", "JCT p50 (s)",
               "JCT p95 (s)",  "JCT p99 (s)",  "JCT max (s)"};
  if (reports.empty()) return t;
  for (size_t k = 0; k < reports.front().types.size(); ++k) {
    for (const ReplayReport& r : reports) {
      if (k >= r.types.size()) continue;
      const GroupReport& g = r.types[k];
      std::vector<std::string> row = {g.name, r.policy, fmt::format("{}", g.jobs)};
      Append(&row, StatsCells(g.wait));
      Append(&row, StatsCells(g.jct));
      t.rows.push_back(std::move(row));
    }
  }
  return t;
}

// Each policy's share of every queue, and the guaranteed share (the same under every policy).
report::BarChart ShareBars(const std::vector<ReplayReport>& reports, bool while_waiting) {
  report::BarChart c;
  c.title = while_waiting ? "GPU share while the queue had jobs waiting, against the guarantee"
                          : "GPU share over the makespan, against the guarantee";
  c.x_label = "queue";
  c.y_label = "share of the cluster's GPUs (%)";
  if (reports.empty()) return c;
  for (const QueueReport& q : reports.front().queues) c.categories.push_back(q.name);
  for (const ReplayReport& r : reports) {
    report::BarChart::BarSeries s{r.policy, {}};
    for (const QueueReport& q : r.queues) {
      s.values.push_back(while_waiting ? q.share_while_waiting_pct : q.gpu_share_pct);
    }
    c.series.push_back(std::move(s));
  }
  report::BarChart::BarSeries g{"guaranteed", {}};
  for (const QueueReport& q : reports.front().queues) g.values.push_back(q.entitlement_pct);
  c.series.push_back(std::move(g));
  return c;
}

report::Table ShareTable(const std::vector<ReplayReport>& reports) {
  report::Table t;
  t.columns = {"queue",
               "policy",
               "guaranteed (%)",
               "share over the makespan (%)",
               "share while waiting (%)",
               "time with jobs waiting (% of makespan)"};
  if (reports.empty()) return t;
  for (size_t q = 0; q < reports.front().queues.size(); ++q) {
    for (const ReplayReport& r : reports) {
      if (q >= r.queues.size()) continue;
      const QueueReport& g = r.queues[q];
      t.rows.push_back({g.name, r.policy, Num(g.entitlement_pct, 2), Num(g.gpu_share_pct, 2),
                        Num(g.share_while_waiting_pct, 2), Num(g.waiting_time_pct, 2)});
    }
  }
  return t;
}

// Reasons with their counts, per policy and outcome; no rows when every job ended.
report::Table EndedTable(const std::vector<ReplayReport>& reports) {
  report::Table t;
  t.columns = {"policy", "outcome", "reason", "jobs"};
  for (const ReplayReport& r : reports) {
    for (const auto& [outcome, jobs] :
         {std::pair<std::string_view, const std::vector<EndedJob>*>{"dropped", &r.dropped_jobs},
          {"unfinished", &r.unfinished_jobs}}) {
      std::map<std::string, int64_t> reasons;
      for (const EndedJob& j : *jobs) ++reasons[j.reason];
      for (const auto& [reason, n] : reasons) {
        t.rows.push_back({r.policy, std::string(outcome), reason, fmt::format("{}", n)});
      }
    }
  }
  return t;
}

// Allocation over time: the whole run, and while jobs arrive.
void AddAllocationSections(const std::vector<ReplayReport>& reports, report::Report* r) {
  // 2. and 3. Allocation over time: the whole run, and while jobs arrive.
  {
    report::Section& s = r->sections.emplace_back();
    s.title = "GPU allocation over time";
    s.paragraphs.push_back(fmt::format(
        "The share of the cluster's GPUs allocated to running jobs, averaged over steps of {} of "
        "simulated time (the smallest power of two seconds that keeps a series within its bound "
        "of points). The time-averaged allocation over the whole makespan is in the summary.",
        StepText(reports, &ReplayReport::alloc_series)));
    s.charts.emplace_back(
        AllocationChart(reports, &ReplayReport::alloc_series, "GPUs allocated over time"));
  }
  {
    report::Section& s = r->sections.emplace_back();
    s.title = "GPU allocation while jobs arrive";
    bool any = false;
    for (const ReplayReport& rep : reports)
      any = any || !rep.arrival_alloc_series.alloc_pct.empty();
    s.paragraphs.push_back(
        any ? fmt::format("The same from the first to the last submit time, in steps of {}: where "
                          "the policies fill the cluster while work keeps coming.",
                          StepText(reports, &ReplayReport::arrival_alloc_series))
            : std::string("Every job is submitted at the same time: nothing to show."));
    s.charts.emplace_back(AllocationChart(reports, &ReplayReport::arrival_alloc_series,
                                          "GPUs allocated from the first to the last submit"));
  }
}

// Shares against the guarantees: over the makespan, and while waiting.
void AddShareSections(const std::vector<ReplayReport>& reports, report::Report* r) {
  // 7. and 8. Shares against the guarantees.
  {
    report::Section& s = r->sections.emplace_back();
    s.title = "GPU share by queue";
    s.paragraphs.push_back(
        "Each queue's time-averaged share of the cluster's GPUs over the makespan, per policy, "
        "next to its guaranteed share (the last bar of each group).");
    s.charts.emplace_back(ShareBars(reports, false));
    s.tables.push_back(ShareTable(reports));
  }
  {
    report::Section& s = r->sections.emplace_back();
    s.title = "GPU share while waiting";
    s.paragraphs.push_back(
        "The same share averaged only over the time the queue had jobs waiting: how close a queue "
        "with work to do came to its guarantee (Jain's index while waiting, in the summary, "
        "measures this over the queues). A queue that never waited shows 0.");
    s.charts.emplace_back(ShareBars(reports, true));
  }
}

// 10. and 11. Services: a table of their figures per policy, and ready replicas over time.
void AddServiceSections(const std::vector<ReplayReport>& reports, report::Report* r) {
  if (reports.empty() || reports.front().services.empty()) return;
  {
    report::Section& s = r->sections.emplace_back();
    s.title = "Services";
    s.paragraphs.push_back(
        "Online services replayed beside the trace: requests from their request trace wait in "
        "one queue per service for a slot of a ready replica (max_concurrency per replica); a "
        "request is within the SLO when its wait and prefill (its first token) are within the "
        "service's slo.latency_ms. Scale-up time runs from the decision that submitted a replica "
        "to its readiness; reclaim time from the reclaim decision to the replica's placement.");
    report::Table t;
    t.columns = {"policy",
                 "service",
                 "replicas",
                 "requests",
                 "within SLO %",
                 "latency p50 (s)",
                 "latency p99 (s)",
                 "ready min / avg / max",
                 "scale-up p50 / p99 (s)",
                 "reclaims (victims)",
                 "GPU-hours held",
                 "GPU-hours of the trace's jobs"};
    for (const ReplayReport& rep : reports) {
      for (const ServiceReport& sv : rep.services) {
        t.rows.push_back({rep.policy, sv.name, sv.scaling, fmt::format("{}", sv.requests),
                          Num(sv.within_slo_pct, 2), Num(sv.latency.p50, 2), Num(sv.latency.p99, 2),
                          fmt::format("{} / {:.2f} / {}", sv.ready_min, sv.ready_avg, sv.ready_max),
                          fmt::format("{:.0f} / {:.0f}", sv.scale_up.p50, sv.scale_up.p99),
                          fmt::format("{} ({})", sv.reclaim.count, sv.reclaim_victims),
                          Num(sv.gpu_hours, 1), Num(rep.gpu_hours_jobs, 1)});
      }
    }
    s.tables.push_back(std::move(t));
  }
  {
    report::Section& s = r->sections.emplace_back();
    s.title = "Ready replicas over time";
    s.paragraphs.push_back("Each service's ready replicas per policy, averaged over steps.");
    report::LineChart c;
    c.title = "Ready replicas";
    c.x_label = "time from the start (h)";
    c.y_label = "ready replicas";
    c.step = true;
    c.y_from_zero = true;
    for (const ReplayReport& rep : reports) {
      for (const ServiceReport& sv : rep.services) {
        report::Series series{fmt::format("{}: {}", rep.policy, sv.name), {}};
        for (size_t i = 0; i < sv.ready_series.size(); ++i) {
          series.points.emplace_back(static_cast<double>(i) * sv.series_step_seconds / 3600.0,
                                     sv.ready_series[i]);
        }
        c.series.push_back(std::move(series));
      }
    }
    s.charts.emplace_back(std::move(c));
  }
}

}  // namespace

report::Report ReplayHtmlReport(const std::vector<ReplayReport>& reports, const std::string& trace,
                                const std::string& nodes, const std::string& command) {
  report::Report r;
  r.title = fmt::format("Trace replay: {} on {}", trace, nodes);
  r.subtitle = command;
  r.notes.push_back(
      "Every policy replays the same trace through Arbiter's scheduling cycle in virtual time: "
      "jobs arrive at their submit time, run for their duration (or until their walltime) and "
      "may be preempted; quotas, fair share, gangs, backfill and preemption are the core's. Waits "
      "count every interval a job spent pending, over the jobs that started; percentiles are by "
      "nearest rank.");

  // 1. Summary.
  {
    report::Section& s = r.sections.emplace_back();
    s.title = "Summary";
    s.tables.push_back(SummaryTable(reports));
  }
  AddAllocationSections(reports, &r);
  // 4. Wait distribution.
  {
    report::Section& s = r.sections.emplace_back();
    s.title = "Wait time distribution";
    s.paragraphs.push_back(
        "For each wait on the horizontal axis, how many of the started jobs waited longer (the "
        "complementary distribution, in jobs; at 0, the jobs that waited at all). A curve that "
        "falls sooner is better.");
    s.charts.emplace_back(WaitSurvivalChart(reports));
  }
  // 5. and 6. Waits by queue and by type.
  {
    report::Section& s = r.sections.emplace_back();
    s.title = "Waits by queue";
    s.paragraphs.push_back(
        "The 99th percentile of each queue's waits per policy (0 when fewer than 1% of its jobs "
        "waited); the table has the other percentiles and the maximum.");
    s.charts.emplace_back(
        P99Bars(reports, &ReplayReport::queues, "99th percentile of the wait, by queue", "queue"));
    s.tables.push_back(QueueWaitTable(reports));
  }
  {
    report::Section& s = r.sections.emplace_back();
    s.title = "Waits and completion times by job type";
    s.charts.emplace_back(P99Bars(reports, &ReplayReport::types,
                                  "99th percentile of the wait, by job type", "job type"));
    s.tables.push_back(TypeTable(reports));
  }
  AddShareSections(reports, &r);
  // 9. Jobs that did not end.
  {
    report::Section& s = r.sections.emplace_back();
    s.title = "Dropped and unfinished jobs";
    report::Table t = EndedTable(reports);
    if (t.rows.empty()) {
      s.paragraphs.push_back("Every job ended (completed or timed out) under every policy.");
    } else {
      s.paragraphs.push_back(
          "Dropped jobs cannot run even alone on the empty cluster; unfinished ones were still "
          "pending or running at the end.");
      s.tables.push_back(std::move(t));
    }
  }
  AddServiceSections(reports, &r);
  return r;
}

}  // namespace arbiter::sim
