// PlanGroup without a database: which statements a group becomes, in which order (their effect
// is postgres_store_test.cc's).
#include "store/postgres/write_plan.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace arbiter::store::postgres {
namespace {

JobRecord Job(uint64_t id) {
  JobRecord j;
  j.id = id;
  j.state = "pending";
  return j;
}

JobEventRecord Event(uint64_t job_id, uint64_t seq = 0) {
  return {seq, job_id, 1, "", "pending", "submitted", "{}"};
}

AuditRecord Audit() { return {0, 1, "alice", "job.submit", "job/1", "ok", "{}"}; }

// "name" for an op's own statement, "name xN" for a multi-row one with its batch.
std::vector<std::string> Describe(const std::vector<Call>& calls) {
  std::vector<std::string> out;
  for (const Call& c : calls) {
    if (c.op != nullptr) {
      out.push_back(fmt::format("{} b{}", c.stmt, c.batch));
    } else {
      out.push_back(fmt::format("{} x{} b{}", c.stmt, c.rows, c.batch));
    }
  }
  return out;
}

std::vector<Call> Plan(const std::vector<WriteBatch>& batches) {
  std::vector<const WriteBatch*> ptrs;
  for (const WriteBatch& b : batches) ptrs.push_back(&b);
  return PlanGroup(ptrs);
}

TEST(WritePlanTest, SubmissionsBecomeOneStatementPerTable) {
  std::vector<WriteBatch> batches(3);
  for (uint64_t i = 0; i < batches.size(); ++i) {
    batches[i].PutJob(Job(i + 1));
    batches[i].AppendJobEvent(Event(i + 1));
    batches[i].AppendAudit(Audit());
  }
  const auto calls = Plan(batches);
  EXPECT_EQ(Describe(calls), (std::vector<std::string>{"put_jobs x3 b0", "append_events x3 b0",
                                                       "append_audits x3 b0"}));
  EXPECT_EQ(calls[0].params.size(), 14) << "one array per column";
}

TEST(WritePlanTest, ALoneOpIsItsOwnStatement) {
  std::vector<WriteBatch> batches(2);
  batches[0].PutJob(Job(1));
  batches[0].AppendJobEvent(Event(1));
  batches[1].PutKv({"k", "v"});
  EXPECT_EQ(Describe(Plan(batches)),
            (std::vector<std::string>{"put_kv b1", "put_job b0", "append_event b0"}));
}

TEST(WritePlanTest, ARepeatedKeyADeleteOrAnOwnSeqEndsTheTablesRun) {
  std::vector<WriteBatch> batches(6);
  batches[0].PutJob(Job(1));
  batches[0].AppendJobEvent(Event(1));
  batches[0].AppendAudit(Audit());
  batches[1].PutJob(Job(2));
  batches[1].AppendJobEvent(Event(2));
  batches[1].AppendAudit(Audit());
  batches[2].PutJob(Job(1));  // job 1 again: the run of jobs 1 and 2 goes first
  batches[2].AppendJobEvent(Event(1));
  batches[3].DeleteJob(2);  // after the put of job 1 gathered so far
  batches[4].PutKv({"k", "v"});
  batches[5].AppendJobEvent(Event(2, 9));  // its own seq: after the events gathered so far
  EXPECT_EQ(Describe(Plan(batches)), (std::vector<std::string>{
                                         "put_jobs x2 b0",
                                         "put_job b2",
                                         "del_job b3",
                                         "put_kv b4",
                                         "append_events x3 b0",
                                         "append_event b5",
                                         "append_audits x2 b0",
                                     }));
}

TEST(WritePlanTest, EncodeOpsIsOneStatementPerOpInOrder) {
  std::vector<WriteBatch> batches(2);
  batches[0].PutJob(Job(1));
  batches[0].AppendJobEvent(Event(1));
  batches[1].PutJob(Job(2));
  batches[1].CompactSamples({});
  std::vector<const WriteBatch*> ptrs = {&batches[0], &batches[1]};
  EXPECT_EQ(Describe(EncodeOps(ptrs)),
            (std::vector<std::string>{"put_job b0", "append_event b0", "put_job b1",
                                      "roll_up_gpu_samples b1", "del_raw_gpu_samples b1",
                                      "del_hourly_gpu_samples b1", "del_cluster_samples b1",
                                      "del_serving_stats b1"}));
}

}  // namespace
}  // namespace arbiter::store::postgres
