// The job history reads (Store::Load(LoadOptions), GetJob, ListJobs, JobByIdempotencyKey) as
// both stores' tests check them: the same cases over sqlite/ and postgres/.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "store/store.h"

namespace arbiter::store::testing {

// Job `id`: tenant t{id % 2}, user u{id % 3}, queue q{id % 4}; ids 1..6 finished (succeeded,
// failed alternately), 7 cancelled but still stopping, 8..10 pending; updated at 1000 x id.
inline JobRecord HistoryJob(uint64_t id) {
  JobRecord j;
  j.id = id;
  j.tenant = fmt::format("t{}", id % 2);
  j.user = fmt::format("u{}", id % 3);
  j.queue = fmt::format("q{}", id % 4);
  j.name = fmt::format("job-{}", id);
  j.type = id % 2 == 0 ? "training" : "evaluation";
  j.state = id <= 6 ? (id % 2 == 0 ? "succeeded" : "failed") : id == 7 ? "cancelled" : "pending";
  j.spec_json = fmt::format(R"({{"name":"job-{}"}})", id);
  j.status_json = id == 7 ? R"({"state":"cancelled","stopping":true})"
                          : fmt::format(R"({{"state":"{}"}})", j.state);
  j.idempotency_key = fmt::format("key-{}", id);
  j.submitted_at_ms = static_cast<int64_t>(id) * 100;
  j.updated_at_ms = static_cast<int64_t>(id) * 1000;
  return j;
}

inline std::vector<uint64_t> Ids(const std::vector<JobRecord>& jobs) {
  std::vector<uint64_t> out;
  for (const JobRecord& j : jobs) out.push_back(j.id);
  return out;
}

inline void CheckJobHistoryReads(Store& store) {
  WriteBatch b;
  for (uint64_t id = 1; id <= 10; ++id) b.PutJob(HistoryJob(id));
  ASSERT_TRUE(store.Write(std::move(b)).ok());

  // Load: every job by default; with a window, the live ones, the stopping one and the latest
  // finished within it (7, stopping, is also the latest finished).
  auto all = store.Load();
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(Ids(all->jobs), (std::vector<uint64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
  auto window = store.Load(LoadOptions{.finished_max = 2, .finished_since_ms = 0});
  ASSERT_TRUE(window.ok()) << window.status().ToString();
  EXPECT_EQ(Ids(window->jobs), (std::vector<uint64_t>{6, 7, 8, 9, 10}));
  EXPECT_EQ(window->jobs[0], HistoryJob(6));
  EXPECT_EQ(window->max_job_id, 10u);
  auto by_age = store.Load(LoadOptions{.finished_max = 100, .finished_since_ms = 4000});
  ASSERT_TRUE(by_age.ok());
  EXPECT_EQ(Ids(by_age->jobs), (std::vector<uint64_t>{4, 5, 6, 7, 8, 9, 10}));
  auto none = store.Load(LoadOptions{.finished_max = 0, .finished_since_ms = 0});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(Ids(none->jobs), (std::vector<uint64_t>{7, 8, 9, 10}));

  // GetJob and JobByIdempotencyKey: the record as written; kNotFound for none.
  auto three = store.GetJob(3);
  ASSERT_TRUE(three.ok()) << three.status().ToString();
  EXPECT_EQ(*three, HistoryJob(3));
  EXPECT_EQ(store.GetJob(99).status().code(), StatusCode::kNotFound);
  auto keyed = store.JobByIdempotencyKey("t0", "u1", "key-4");
  ASSERT_TRUE(keyed.ok()) << keyed.status().ToString();
  EXPECT_EQ(keyed->id, 4u);
  EXPECT_EQ(store.JobByIdempotencyKey("t1", "u1", "key-4").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store.JobByIdempotencyKey("t0", "u1", "").status().code(), StatusCode::kNotFound);

  // ListJobs: filters, finished only, keyset pages both ways.
  auto list = [&store](const JobQuery& q) {
    auto r = store.ListJobs(q);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? Ids(*r) : std::vector<uint64_t>{};
  };
  EXPECT_EQ(list({}), (std::vector<uint64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
  EXPECT_EQ(list({.finished_only = true}), (std::vector<uint64_t>{1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(list({.users = {"u1"}, .finished_only = true}), (std::vector<uint64_t>{1, 4, 7}));
  EXPECT_EQ(list({.tenants = {"t0"}, .users = {"u1", "u2"}, .finished_only = true}),
            (std::vector<uint64_t>{2, 4}));
  EXPECT_EQ(list({.queues = {"q1"}}), (std::vector<uint64_t>{1, 5, 9}));
  EXPECT_EQ(list({.states = {"failed"}}), (std::vector<uint64_t>{1, 3, 5}));
  EXPECT_EQ(list({.types = {"training"}, .finished_only = true}), (std::vector<uint64_t>{2, 4, 6}));
  EXPECT_EQ(list({.finished_only = true, .after_id = 2, .limit = 3}),
            (std::vector<uint64_t>{3, 4, 5}));
  EXPECT_EQ(list({.finished_only = true, .before_id = 6, .newest_first = true, .limit = 2}),
            (std::vector<uint64_t>{5, 4}));
  EXPECT_EQ(list({.submitted_until_ms = 300}), (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(list({.finished_only = true, .updated_since_ms = 5000}),
            (std::vector<uint64_t>{5, 6, 7}));
  EXPECT_EQ(list({.tenants = {"nobody"}}), (std::vector<uint64_t>{}));
  // A name with a quote is a value, never SQL.
  EXPECT_EQ(list({.users = {"u1' OR '1'='1"}}), (std::vector<uint64_t>{}));
}

}  // namespace arbiter::store::testing
