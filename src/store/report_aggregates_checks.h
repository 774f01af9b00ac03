// Checks of the report aggregates that every store must pass (usage rollups, job facts, the
// retention's reads and PruneHistory), run by sqlite_store_test.cc and postgres_store_test.cc.
// Test-only; gtest assertions.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "store/store.h"
#include "store/usage_rollup.h"

namespace arbiter::store::checks {

inline constexpr int64_t kT0 = 1'767'225'600'000;  // 2026-01-01T00:00:00Z

// Usage records over forty days, some crossing hour, day and sixteen-day boundaries, in several
// groups.
inline std::vector<UsageRecord> RandomUsage(uint32_t seed, int n) {
  std::mt19937 rng(seed);
  std::vector<UsageRecord> out;
  for (int i = 0; i < n; ++i) {
    UsageRecord u;
    u.job_id = static_cast<uint64_t>(i + 1);
    u.tenant = fmt::format("tenant-{}", rng() % 3);
    u.queue = fmt::format("{}-q{}", u.tenant, rng() % 2);
    u.user = fmt::format("user-{}", rng() % 4);
    u.job_type = rng() % 2 ? "training" : "inference";
    u.gpu_model = rng() % 2 ? "H100" : "A100";
    u.gpu_milli = 250 * static_cast<int64_t>(1 + rng() % 32);
    u.start_ms = kT0 + static_cast<int64_t>(rng() % (40 * kRollupDayMs));
    // Mostly short, some of hours, some of more than a day.
    const int64_t scale =
        rng() % 5 == 0 ? 2 * kRollupDayMs : (rng() % 2 ? 4 * kRollupHourMs : 60'000);
    u.end_ms = u.start_ms + static_cast<int64_t>(rng() % static_cast<uint64_t>(scale));
    u.cost_micro = static_cast<int64_t>(rng() % 50'000'000);
    out.push_back(u);
  }
  return out;
}

using GroupKey = std::tuple<std::string, std::string, std::string, std::string, std::string>;

// What the rollup of [a, b) must hold: each record's part inside it.
inline std::map<GroupKey, std::pair<int64_t, double>> ExpectedRollup(
    const std::vector<UsageRecord>& records, int64_t a, int64_t b) {
  std::map<GroupKey, std::pair<int64_t, double>> out;
  for (const UsageRecord& u : records) {
    const int64_t ov = std::max<int64_t>(0, std::min(u.end_ms, b) - std::max(u.start_ms, a));
    if (ov <= 0) continue;
    auto& x = out[{u.tenant, u.queue, u.user, u.job_type, u.gpu_model}];
    x.first += u.gpu_milli * ov;
    x.second += static_cast<double>(u.cost_micro) * static_cast<double>(ov) /
                static_cast<double>(u.end_ms - u.start_ms);
  }
  return out;
}

// Every period of whole hours reads back exactly the records' GPU time inside it (and their cost
// to a billionth), whether it holds whole days or not; a bound that is not a whole hour is refused.
inline void UsageRollupsEqualTheRecords(Store& store) {
  const std::vector<UsageRecord> records = RandomUsage(7, 300);
  for (size_t i = 0; i < records.size(); i += 50) {
    WriteBatch b;
    for (size_t k = i; k < i + 50 && k < records.size(); ++k) b.AppendUsage(records[k]);
    ASSERT_TRUE(store.Write(std::move(b)).ok());
  }
  std::mt19937 rng(11);
  std::vector<std::pair<int64_t, int64_t>> periods = {
      {kT0, kT0 + 6 * kRollupDayMs},
      {kT0 - kRollupDayMs, kT0 + kRollupHourMs},
      {kT0 + 5 * kRollupHourMs, kT0 + 2 * kRollupDayMs + 7 * kRollupHourMs},
      {kT0 + kRollupDayMs, kT0 + 2 * kRollupDayMs},
      {kT0 - 20 * kRollupDayMs, kT0 + 60 * kRollupDayMs},
      {kT0 + 5 * kRollupHourMs, kT0 + 35 * kRollupDayMs + 7 * kRollupHourMs}};
  for (int i = 0; i < 40; ++i) {
    const int64_t a = kT0 + static_cast<int64_t>(rng() % 100) * kRollupHourMs;
    periods.emplace_back(a, a + static_cast<int64_t>(1 + rng() % 60) * kRollupHourMs);
    const int64_t b = kT0 + static_cast<int64_t>(rng() % 500) * kRollupHourMs;
    periods.emplace_back(b, b + static_cast<int64_t>(1 + rng() % 900) * kRollupHourMs);
  }
  for (const auto& [a, b] : periods) {
    auto got = store.UsageRollup(a, b, kAllAttributionColumns);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    const auto want = ExpectedRollup(records, a, b);
    ASSERT_EQ(got->size(), want.size()) << "period " << a << ".." << b;
    for (const UsageRollupRecord& r : *got) {
      EXPECT_EQ(r.from_ms, a);
      EXPECT_EQ(r.to_ms, b);
      auto w = want.find({r.tenant, r.queue, r.user, r.job_type, r.gpu_model});
      ASSERT_NE(w, want.end()) << r.tenant << "/" << r.queue;
      EXPECT_EQ(r.gpu_milli_ms, w->second.first) << "period " << a << ".." << b;
      EXPECT_NEAR(r.cost_micro, w->second.second, 1e-3);
    }
  }
  // Summed by the tenant and the queue alone: the same totals per (tenant, queue), the other
  // columns empty.
  for (const auto& [a, b] : periods) {
    auto by_queue = store.UsageRollup(a, b, kAttributionQueue);
    ASSERT_TRUE(by_queue.ok()) << by_queue.status().ToString();
    std::map<std::pair<std::string, std::string>, int64_t> want;
    for (const auto& [key, sums] : ExpectedRollup(records, a, b)) {
      want[{std::get<0>(key), std::get<1>(key)}] += sums.first;
    }
    ASSERT_EQ(by_queue->size(), want.size()) << "period " << a << ".." << b;
    for (const UsageRollupRecord& r : *by_queue) {
      EXPECT_EQ(r.user, "");
      EXPECT_EQ(r.job_type, "");
      EXPECT_EQ(r.gpu_model, "");
      EXPECT_EQ(r.gpu_milli_ms, (want[{r.tenant, r.queue}])) << "period " << a << ".." << b;
    }
  }
  EXPECT_EQ(
      store.UsageRollup(kT0 + 1, kT0 + kRollupHourMs, kAllAttributionColumns).status().field(),
      "from_ms");
  EXPECT_EQ(store.UsageRollup(kT0, kT0 + 5, kAllAttributionColumns).status().field(), "to_ms");
}

inline JobFactRecord Fact(uint64_t job, int64_t at, const char* kind, int64_t since) {
  return {0, job, at, kind, "t", "t-q", "u", "training", "H100", since, 0, ""};
}

// JobFacts(from, to): at_ms >= from and since_ms < to, in (at_ms, seq) order; PruneHistory deletes
// old events and usage records up to the given seqs, and the facts and rollups stay.
inline void JobFactsAndPruneHistory(Store& store) {
  WriteBatch b;
  b.AppendJobFact(Fact(1, 100, "admitted", 10));   // wait [10, 100)
  b.AppendJobFact(Fact(2, 300, "unqueued", 150));  // wait [150, 300)
  b.AppendJobFact(Fact(3, 200, "succeeded", 200));
  b.AppendJobFact(Fact(4, 50, "failed", 50));
  JobFactRecord p = Fact(5, 250, "preempted", 220);
  p.lost_milli_ms = 8000 * 30;
  p.reason = "preempted by job 9 (priority)";
  b.AppendJobFact(p);
  for (int i = 1; i <= 6; ++i) {
    b.AppendJobEvent({0, 1, i * 100, "pending", "admitted", "r", "{}"});
    UsageRecord u;
    u.job_id = 1;
    u.tenant = "t";
    u.gpu_milli = 1000;
    u.start_ms = (i - 1) * 100;
    u.end_ms = i * 100;
    b.AppendUsage(u);
  }
  ASSERT_TRUE(store.Write(std::move(b)).ok());

  auto facts = store.JobFacts(100, 250);
  ASSERT_TRUE(facts.ok()) << facts.status().ToString();
  std::vector<uint64_t> jobs;
  for (const JobFactRecord& f : *facts) jobs.push_back(f.job_id);
  // Job 4 (at 50) is before; job 5's run began at 220 < 250, so it comes with its at 250.
  EXPECT_EQ(jobs, (std::vector<uint64_t>{1, 3, 5, 2}));
  ASSERT_EQ(facts->size(), 4u);
  EXPECT_EQ(facts->at(2), (JobFactRecord{5, 5, 250, "preempted", "t", "t-q", "u", "training",
                                         "H100", 220, 8000 * 30, "preempted by job 9 (priority)"}));

  // The waits alone, compact: job 1's wait [10, 100) and job 2's [150, 300), both overlapping.
  auto waits = store.WaitFacts(100, 250, kAllAttributionColumns);
  ASSERT_TRUE(waits.ok()) << waits.status().ToString();
  ASSERT_EQ(waits->attributions.size(), 1u);
  EXPECT_EQ(waits->attributions[0], (WaitAttribution{"t", "t-q", "u", "training", "H100"}));
  EXPECT_EQ(waits->waits, (std::vector<JobWait>{{100, 10, 0, 0, true}, {300, 150, 0, 0, false}}));
  // Bounds as JobFacts's: a wait that ends before from, or begins at to, is not read.
  EXPECT_TRUE(store.WaitFacts(101, 1'000, kAllAttributionColumns).value().waits.size() == 1u);
  EXPECT_TRUE(store.WaitFacts(0, 10, kAllAttributionColumns).value().waits.empty());
  {
    // Attributions are interned: one per distinct five names, in order of first use.
    WriteBatch more;
    JobFactRecord other = Fact(6, 400, "admitted", 390);
    other.queue = "t-q2";
    other.gpu_milli = 4000;
    more.AppendJobFact(other);
    more.AppendJobFact(Fact(7, 410, "admitted", 395));
    ASSERT_TRUE(store.Write(std::move(more)).ok());
    // Only the columns asked for (and the tenant): fewer distinct attributions.
    auto by_type = store.WaitFacts(350, 1'000, kAttributionJobType);
    ASSERT_TRUE(by_type.ok()) << by_type.status().ToString();
    ASSERT_EQ(by_type->attributions.size(), 1u);
    EXPECT_EQ(by_type->attributions[0], (WaitAttribution{"t", "", "", "training", ""}));
    EXPECT_EQ(by_type->waits,
              (std::vector<JobWait>{{400, 390, 4000, 0, true}, {410, 395, 0, 0, true}}));
    auto later = store.WaitFacts(350, 1'000, kAllAttributionColumns);
    ASSERT_TRUE(later.ok());
    ASSERT_EQ(later->attributions.size(), 2u);
    EXPECT_EQ(later->attributions[0].queue, "t-q2");
    EXPECT_EQ(later->waits,
              (std::vector<JobWait>{{400, 390, 4000, 0, true}, {410, 395, 0, 1, true}}));
  }

  // The retention's reads, paged.
  auto events = store.EventsBefore(400, 0, 2);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ(events->back().seq, 2u);
  events = store.EventsBefore(400, 2, 100);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 1u);  // at 300; 400 is not before 400
  auto usage = store.UsageBefore(350, 0, 100);
  ASSERT_TRUE(usage.ok());
  ASSERT_EQ(usage->size(), 3u);  // ending at 100, 200, 300

  auto rollup_before = store.UsageRollup(0, kRollupHourMs, kAllAttributionColumns);
  ASSERT_TRUE(rollup_before.ok());
  WriteBatch prune;
  prune.PruneHistory({400, 2, 2});  // up to the seqs archived: events 1-2, usage 1-2
  ASSERT_TRUE(store.Write(std::move(prune)).ok());
  auto left = store.EventsBefore(1'000, 0, 100);
  ASSERT_TRUE(left.ok());
  ASSERT_EQ(left->size(), 4u);
  EXPECT_EQ(left->front().seq, 3u);
  auto left_usage = store.Usage(0, 1'000);
  ASSERT_TRUE(left_usage.ok());
  ASSERT_EQ(left_usage->size(), 4u);
  EXPECT_EQ(left_usage->front().seq, 3u);
  // The aggregates stay.
  EXPECT_EQ(store.UsageRollup(0, kRollupHourMs, kAllAttributionColumns).value(),
            rollup_before.value());
  EXPECT_EQ(store.JobFacts(0, 1'000).value().size(), 7u);
}

}  // namespace arbiter::store::checks
