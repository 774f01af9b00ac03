#include <gtest/gtest.h>

#include <string>
#include <variant>

#include "store/records.h"

namespace arbiter::store {
namespace {

TEST(WriteBatch, KeepsOpsInTheOrderTheyWereAdded) {
  WriteBatch b;
  EXPECT_TRUE(b.empty());
  b.PutTenant({.name = "research"});
  b.PutJob({.id = 7});
  b.DeleteJob(7);
  b.AppendAudit({.action = "job.cancel"});
  b.DeleteKv("cursor");
  ASSERT_EQ(b.size(), 5u);
  EXPECT_FALSE(b.empty());
  EXPECT_EQ(WriteOpName(b.ops()[0]), "PutTenant");
  EXPECT_EQ(WriteOpName(b.ops()[1]), "PutJob");
  EXPECT_EQ(WriteOpName(b.ops()[2]), "DeleteJob");
  EXPECT_EQ(WriteOpName(b.ops()[3]), "AppendAudit");
  EXPECT_EQ(WriteOpName(b.ops()[4]), "DeleteKv");
  EXPECT_EQ(std::get<op::DeleteJob>(b.ops()[2]).id, 7u);
}

TEST(WriteBatch, AppendMovesTheOtherBatchToTheEnd) {
  WriteBatch a;
  a.PutNode({.name = "n1"});
  WriteBatch b;
  b.DeleteNode("n2");
  b.AppendJobEvent({.job_id = 3});
  a.Append(std::move(b));
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(WriteOpName(a.ops()[1]), "DeleteNode");
  EXPECT_EQ(WriteOpName(a.ops()[2]), "AppendJobEvent");

  WriteBatch empty;
  empty.Append(std::move(a));
  EXPECT_EQ(empty.size(), 3u);
}

TEST(WriteBatch, DescribesEachOpWithItsKey) {
  struct Case {
    WriteOp op;
    std::string want;
  };
  const Case cases[] = {
      {TenantRecord{.name = "t"}, "PutTenant(name=t)"},
      {op::DeleteQueue{"q"}, "DeleteQueue(name=q)"},
      {TokenRecord{.id = "tok1"}, "PutToken(id=tok1)"},
      {op::DeleteToken{"tok1"}, "DeleteToken(id=tok1)"},
      {JobRecord{.id = 17}, "PutJob(id=17)"},
      {op::DeleteJob{17}, "DeleteJob(id=17)"},
      {KvRecord{.key = "k"}, "PutKv(key=k)"},
      {JobEventRecord{.seq = 4, .job_id = 17}, "AppendJobEvent(job_id=17, seq=4)"},
      {UsageRecord{.job_id = 17, .task = 2}, "AppendUsage(job_id=17, task=2, seq=0)"},
      {AuditRecord{.action = "login"}, "AppendAudit(action=login, seq=0)"},
  };
  for (const Case& c : cases) EXPECT_EQ(DescribeWriteOp(c.op), c.want);
}

}  // namespace
}  // namespace arbiter::store
