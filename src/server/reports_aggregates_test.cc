// The reports computed from the report aggregates (usage rollups and job facts in a real store,
// read by ReadReportRecords) are the very tables the raw history gives (every usage record, every
// job event and the job map), on a scripted history: three tenants, several queues, users, types
// and models, runs that cross hour and day boundaries, preemptions, failures of every kind, lost
// runs, cancels while pending, jobs still pending and still running at the end; over periods
// aligned to hours and not, with and without steps, for admins and for one tenant.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "server/report_inputs.h"
#include "server/reports.h"
#include "store/sqlite/sqlite_store.h"
#include "testing/temp_dir.h"

namespace arbiter::server::reports {
namespace {

constexpr int64_t kMinute = 60'000;
constexpr int64_t kHour = 60 * kMinute;
constexpr int64_t kDay = 24 * kHour;
constexpr int64_t kT0 = 1'794'268'800'000;  // 2026-11-10T00:00:00Z
constexpr int64_t kNow = kT0 + 3 * kDay + 5 * kHour + 17 * kMinute + 3'000;

// The scripted history: jobs, their events in seq order, their usage records, and what memory
// holds at kNow (open usage intervals, open waits).
struct History {
  std::map<uint64_t, JobInfo> jobs;
  std::vector<store::JobEventRecord> events;
  std::vector<store::UsageRecord> usage;
  std::vector<store::UsageRecord> open_usage;
  std::map<uint64_t, int64_t> pending_since;  // jobs pending at kNow
};

History Script(uint32_t seed) {
  std::mt19937 rng(seed);
  auto pick = [&](int64_t lo, int64_t hi) { return lo + static_cast<int64_t>(rng() % (hi - lo)); };
  History h;
  struct Ev {
    int64_t at;
    uint64_t job;
    std::string from, to, reason;
  };
  std::vector<Ev> evs;
  for (uint64_t id = 1; id <= 80; ++id) {
    const int tenant = static_cast<int>(rng() % 3);
    JobInfo j;
    j.tenant = fmt::format("team-{}", tenant);
    j.queue = fmt::format("team-{}-{}", tenant, rng() % 2 ? "train" : "dev");
    j.user = fmt::format("user-{}", rng() % 4);
    j.type = rng() % 3 == 0 ? "inference" : "training";
    j.gpu_model = rng() % 2 ? "H100" : "A100";
    j.gpu_milli = 500 * pick(1, 17);
    h.jobs[id] = j;
    int64_t t = kT0 - kDay + pick(0, 4 * kDay);
    std::string state = "pending";
    evs.push_back({t, id, "", "pending", "submitted"});
    for (int run = 0; run < 4; ++run) {
      auto go = [&](int64_t dt, const std::string& to, const std::string& reason) {
        t += dt;
        evs.push_back({t, id, state, to, reason});
        state = to;
      };
      if (rng() % 10 == 0) {  // cancelled while pending
        go(pick(1, 3 * kHour), "cancelled", "cancelled by its owner");
        break;
      }
      if (t + 2 * kHour > kNow && rng() % 2) break;  // still pending at the end
      go(pick(1, 7 * kHour), "admitted", "admitted");
      const int64_t admitted = t;
      go(pick(1, 5 * kMinute), "starting", "starting");
      go(pick(1, 3 * kMinute), "running", "running");
      if (rng() % 4 == 0) go(pick(1, kHour), "running", "pulled the image");  // a message event
      const int64_t length = rng() % 4 == 0 ? pick(kDay, 2 * kDay) : pick(kMinute, 9 * kHour);
      if (t + length >= kNow) {  // still running at the end
        store::UsageRecord u{0,           id,          0, j.tenant, j.queue, j.user, j.type,
                             j.gpu_model, j.gpu_milli, 0, admitted, kNow,    0};
        h.open_usage.push_back(u);
        break;
      }
      const int kind = static_cast<int>(rng() % 6);
      bool again = false;
      if (kind == 0) {
        go(length, "succeeded", "all tasks exited 0");
      } else if (kind == 1) {
        go(length, "failed", fmt::format("a task exited with code {}", 1 + rng() % 3));
      } else if (kind == 2) {
        go(length, "timed-out", "walltime exceeded");
      } else if (kind == 3) {
        go(length, "lost", "node down");
        if (rng() % 2) go(0, "failed", "lost, and no retries left");
      } else {
        go(length, "preempting",
           fmt::format("preempted by job {} ({})", pick(1, 80),
                       rng() % 2 ? "priority" : "reclaim"));
        go(pick(1, 2 * kMinute), "pending", "requeued after preemption");
        again = true;
      }
      // The run's usage: from its admission to the release of its GPUs.
      store::UsageRecord u{0,           id,          0, j.tenant, j.queue, j.user, j.type,
                           j.gpu_model, j.gpu_milli, 0, admitted, t,       0};
      u.cost_micro = j.gpu_milli * (t - admitted) / 1800;  // some price
      h.usage.push_back(u);
      if (!again) break;
    }
  }
  std::stable_sort(evs.begin(), evs.end(), [](const Ev& a, const Ev& b) { return a.at < b.at; });
  uint64_t seq = 0;
  for (const Ev& e : evs) {
    if (e.at >= kNow) continue;
    h.events.push_back({++seq, e.job, e.at, e.from, e.to, e.reason, "{}"});
  }
  // Waits still open at kNow.
  std::map<uint64_t, FactState> states;
  std::vector<store::JobFactRecord> unused;
  for (const store::JobEventRecord& e : h.events) {
    FactsOfEvent(e, h.jobs.at(e.job_id), states[e.job_id], unused);
  }
  for (const auto& [id, s] : states) {
    if (s.pending_since) h.pending_since[id] = *s.pending_since;
  }
  std::erase_if(h.usage, [](const store::UsageRecord& u) { return u.end_ms > kNow; });
  return h;
}

class ReportsFromAggregatesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    h_ = Script(20261207);
    auto opened = store::OpenSqliteStore(dir_.File("arbiter.db"), {});
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    store_ = std::move(opened).value();
    // What the server writes: the usage records (the store keeps the rollups) and, with each
    // event, its facts.
    store::WriteBatch b;
    for (const store::UsageRecord& u : h_.usage) b.AppendUsage(u);
    std::map<uint64_t, FactState> states;
    std::vector<store::JobFactRecord> facts;
    for (const store::JobEventRecord& e : h_.events) {
      FactsOfEvent(e, h_.jobs.at(e.job_id), states[e.job_id], facts);
      b.AppendJobEvent(e);
    }
    for (store::JobFactRecord& f : facts) b.AppendJobFact(std::move(f));
    ASSERT_TRUE(store_->Write(std::move(b)).ok());
  }

  // The inputs the raw way (the history in full) and the aggregated way.
  Inputs Raw() const {
    Inputs in;
    in.now_ms = kNow;
    in.usage = h_.usage;
    in.events = h_.events;
    in.jobs = h_.jobs;
    in.open_usage = h_.open_usage;
    in.budgets = budgets_;
    in.entitlements = entitlements_;
    return in;
  }
  Inputs Aggregated(std::string_view name, const Query& q) {
    Inputs in;
    in.now_ms = kNow;
    in.open_usage = h_.open_usage;
    for (const auto& [id, since] : h_.pending_since)
      in.pending.push_back({id, h_.jobs.at(id), since});
    in.budgets = budgets_;
    in.entitlements = entitlements_;
    Status st = ReadReportRecords(*store_, name, q, in);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return in;
  }

  testing::TempDir dir_;
  History h_;
  std::unique_ptr<store::Store> store_;
  std::vector<TenantBudget> budgets_ = {
      {"team-0", 500, "day"}, {"team-1", 9000, "month"}, {"team-2", 2000, "week"}};
  std::vector<Entitlement> entitlements_ = {{"team-0", "team-0", "", true, 8000},
                                            {"team-1", "team-1", "", true, 16000},
                                            {"team-0-train", "team-0", "team-0", false, 4000},
                                            {"team-1-dev", "team-1", "team-1", false, 2000},
                                            {"team-2-train", "team-2", "team-2", false, 6000}};
};

TEST_F(ReportsFromAggregatesTest, EveryAffectedReportGivesTheRawHistorysTable) {
  // The history has what the reports must handle.
  int preempted = 0, lost = 0, cancelled = 0, long_runs = 0;
  for (const auto& e : h_.events) {
    preempted += e.to_state == "preempting";
    lost += e.to_state == "lost";
    cancelled += e.to_state == "cancelled";
  }
  for (const auto& u : h_.usage) long_runs += u.end_ms - u.start_ms > kDay;
  ASSERT_GT(preempted, 3);
  ASSERT_GT(lost, 1);
  ASSERT_GT(cancelled, 1);
  ASSERT_GT(long_runs, 1);
  ASSERT_FALSE(h_.pending_since.empty());
  ASSERT_FALSE(h_.open_usage.empty());

  struct Period {
    int64_t from, to, step;
  };
  const std::vector<Period> periods = {
      {kT0, kT0 + 4 * kDay, 0},                                                    // whole days
      {kT0 + 90 * kMinute + 13'000, kT0 + 2 * kDay + 5 * kHour + 7 * kMinute, 0},  // not aligned
      {kT0 + 10 * kHour, kT0 + 20 * kHour, kHour},                                 // hourly steps
      {kT0 - kDay, kNow, kDay},                                             // daily steps, to now
      {kT0 + 17 * kMinute, kT0 + kDay + 3 * kMinute, 90 * kMinute},         // steps not aligned
      {kNow - 7 * kDay, kNow, 0},                                           // the last 7 days
      {kT0 + 5 * kHour + 10 * kMinute, kT0 + 5 * kHour + 50 * kMinute, 0},  // inside one hour
      {kT0 + 23 * kHour, kT0 + 49 * kHour, 0},
      {kT0 - 30 * kDay + 17 * kMinute, kT0 + 30 * kDay,
       0},  // sixteen-day rollups and edges  // one whole day and edges
  };
  const std::vector<std::optional<GroupBy>> groups = {std::nullopt,    GroupBy::kTenant,
                                                      GroupBy::kQueue, GroupBy::kUser,
                                                      GroupBy::kType,  GroupBy::kGpuModel};
  int compared = 0, rows = 0;
  for (const char* name : {"usage", "wait", "failures", "preemptions", "fairness"}) {
    for (const Period& p : periods) {
      for (const auto& group : groups) {
        if (std::string_view(name) == "fairness" && group && *group != GroupBy::kTenant &&
            *group != GroupBy::kQueue) {
          continue;
        }
        for (const char* tenant : {"", "team-1"}) {
          Query q;
          q.from_ms = p.from;
          q.to_ms = p.to;
          q.step_ms = p.step;
          q.group_by = group;
          q.tenant = tenant;
          auto raw = Compute(name, q, Raw());
          auto agg = Compute(name, q, Aggregated(name, q));
          ASSERT_TRUE(raw.ok()) << raw.status().ToString();
          ASSERT_TRUE(agg.ok()) << agg.status().ToString();
          const std::string what =
              fmt::format("{} from {} to {} step {} group {} tenant '{}'", name, p.from - kT0,
                          p.to - kT0, p.step, group ? GroupByName(*group) : "default", tenant);
          EXPECT_EQ(agg->columns, raw->columns) << what;
          ASSERT_EQ(agg->rows.size(), raw->rows.size()) << what;
          for (size_t i = 0; i < raw->rows.size(); ++i) {
            // Equal cell by cell. Costs are floating-point sums (REAL in the store) added in
            // another order (the store sums a group's rollup rows before the report adds the
            // edge hours' records), so a printed cost (6 decimals) may round its last digit the
            // other way: floating cells agree to that digit, everything else exactly.
            const nlohmann::json a = agg->rows[i], r = raw->rows[i];
            ASSERT_EQ(a.size(), r.size()) << what << " row " << i;
            for (size_t k = 0; k < r.size(); ++k) {
              if (a[k].is_number_float() && r[k].is_number_float()) {
                EXPECT_NEAR(a[k].get<double>(), r[k].get<double>(), 1.5e-6)
                    << what << " row " << i << " column " << k;
              } else {
                EXPECT_EQ(a[k].dump(), r[k].dump()) << what << " row " << i << " column " << k;
              }
            }
          }
          ++compared;
          rows += static_cast<int>(raw->rows.size());
        }
      }
    }
  }
  EXPECT_GT(rows, 1000) << compared << " tables";
}

// The aggregated inputs of a year-long usage report are a few rows per group and window, not the
// history: the records read are only those of the partial hours.
TEST_F(ReportsFromAggregatesTest, AggregatedInputsReadOnlyThePartialHoursRecords) {
  Query q;
  q.from_ms = kT0 - 300 * kDay;
  q.to_ms = kT0 + 65 * kDay;
  Inputs in = Aggregated("usage", q);
  EXPECT_TRUE(in.events.empty());
  EXPECT_TRUE(in.jobs.empty());
  // The budgets' current hour [floor_hour(now), now) is the only partial hour.
  for (const store::UsageRecord& u : in.usage) {
    EXPECT_GT(u.end_ms, kNow - kNow % kHour) << u.start_ms;
  }
  EXPECT_LT(in.usage.size(), h_.usage.size() / 4);
}

}  // namespace
}  // namespace arbiter::server::reports
