// Slurm's vocabulary: the state mapping both ways, node states, durations, the times sacct reads,
// host lists.
#include "cli/slurm.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>

namespace arbiter::cli {
namespace {

using nlohmann::json;

// Times here are read and written in UTC.
class SlurmTimes : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("TZ", "UTC", 1);
    tzset();
  }
};

TEST(SlurmState, EveryArbiterStateHasOne) {
  struct Case {
    const char* arbiter;
    const char* code;
    const char* name;
  };
  for (const Case& c :
       {Case{"pending", "PD", "PENDING"}, Case{"retry-wait", "PD", "PENDING"},
        Case{"admitted", "CF", "CONFIGURING"}, Case{"starting", "CF", "CONFIGURING"},
        Case{"running", "R", "RUNNING"}, Case{"suspended", "S", "SUSPENDED"},
        Case{"preempting", "PR", "PREEMPTED"}, Case{"preempted", "PR", "PREEMPTED"},
        Case{"lost", "NF", "NODE_FAIL"}, Case{"succeeded", "CD", "COMPLETED"},
        Case{"failed", "F", "FAILED"}, Case{"cancelled", "CA", "CANCELLED"},
        Case{"timed-out", "TO", "TIMEOUT"}, Case{"awaiting_approval", "PD", "PENDING"},
        Case{"rejected", "CA", "CANCELLED"}}) {
    const SlurmState s = SlurmStateFor(c.arbiter, false);
    EXPECT_EQ(s.code, c.code) << c.arbiter;
    EXPECT_EQ(s.name, c.name) << c.arbiter;
  }
  // An ended job still stopping its processes is completing; a running one is running.
  EXPECT_EQ(SlurmStateFor("cancelled", true).code, "CG");
  EXPECT_EQ(SlurmStateFor("running", true).code, "R");
  EXPECT_EQ(SlurmStateOf(json{{"state", "timed-out"}, {"stopping", "walltime"}}).name,
            "COMPLETING");
  EXPECT_EQ(SlurmStateOf(json{{"state", "succeeded"}}).code, "CD");
}

TEST(SlurmState, ListsByCodeOrNameAndBack) {
  auto r = ParseSlurmJobStates("PD,r,Completed", "states");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, (std::set<std::string>{"PD", "R", "CD"}));
  EXPECT_EQ(ArbiterStatesFor(*r), (std::vector<std::string>{"pending", "retry-wait", "running",
                                                            "succeeded", "awaiting_approval"}));
  auto all = ParseSlurmJobStates("all", "states");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 24u);
  EXPECT_EQ(ArbiterStatesFor(*all).size(), 15u);
  // CG: the ended jobs (those still stopping are told apart by their "stopping").
  EXPECT_EQ(ArbiterStatesFor({"CG"}), (std::vector<std::string>{"succeeded", "failed", "cancelled",
                                                                "timed-out", "rejected"}));
  // Slurm states Arbiter never has select nothing; unknown ones are refused with a hint.
  EXPECT_TRUE(ArbiterStatesFor({"OOM", "BF"}).empty());
  auto bad = ParseSlurmJobStates("PD,RUNING", "states");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().field(), "states");
  EXPECT_NE(bad.status().message().find("unknown job state 'RUNING'; did you mean \"RUNNING\"?"),
            std::string::npos)
      << bad.status().message();
  EXPECT_FALSE(ParseSlurmJobStates("", "states").ok());
}

TEST(SlurmNodeState, FromStateAndAllocation) {
  NodeUse n{"ready", 8, 0, 32000, 0, 0};
  EXPECT_EQ(SlurmNodeState(n).code, "idle");
  n.gpu_milli_used = 500;
  n.jobs = 1;
  EXPECT_EQ(SlurmNodeState(n).code, "mix");
  n.gpu_milli_used = 8000;
  EXPECT_EQ(SlurmNodeState(n).name, "ALLOCATED");
  NodeUse cpu_only{"ready", 0, 0, 4000, 4000, 2};
  EXPECT_EQ(SlurmNodeState(cpu_only).code, "alloc");
  EXPECT_EQ(SlurmNodeState({"cordoned", 8, 1000, 32000, 0, 1}).name, "DRAINING");
  EXPECT_EQ(SlurmNodeState({"draining", 8, 0, 32000, 0, 0}).name, "DRAINED");
  EXPECT_EQ(SlurmNodeState({"down", 8, 0, 32000, 0, 0}).code, "down");

  auto drain = ParseSlurmNodeStates("drain,IDLE", "states");
  ASSERT_TRUE(drain.ok());
  EXPECT_EQ(*drain, (std::set<std::string>{"DRAINED", "DRAINING", "IDLE"}));
  auto never = ParseSlurmNodeStates("maint", "states");
  ASSERT_TRUE(never.ok());
  EXPECT_TRUE(never->empty());
  auto bad = ParseSlurmNodeStates("idel", "states");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("did you mean \"idle\"?"), std::string::npos)
      << bad.status().message();
}

TEST(SlurmDurations, SqueueAndSacctForms) {
  EXPECT_EQ(SqueueDuration(0), "0:00");
  EXPECT_EQ(SqueueDuration(5 * 60 + 3), "5:03");
  EXPECT_EQ(SqueueDuration(3723), "1:02:03");
  EXPECT_EQ(SqueueDuration(2 * 86400 + 3 * 3600 + 4 * 60 + 5), "2-03:04:05");
  EXPECT_EQ(SqueueDuration(-5), "0:00");
  EXPECT_EQ(SacctDuration(5), "00:00:05");
  EXPECT_EQ(SacctDuration(3723), "01:02:03");
  EXPECT_EQ(SacctDuration(86400 + 1), "1-00:00:01");
}

TEST_F(SlurmTimes, TimestampsAndTheTimesSacctReads) {
  const int64_t now = 1714521600 + 13 * 3600 + 30 * 60;  // 2024-05-01T13:30:00Z
  EXPECT_EQ(SlurmTimestamp(now), "2024-05-01T13:30:00");
  const int64_t midnight = 1714521600;  // 2024-05-01T00:00:00Z
  struct Case {
    const char* text;
    int64_t want;
  };
  for (const Case& c : {Case{"now", now},
                        Case{"now-1days", now - 86400},
                        Case{"now-3hours", now - 3 * 3600},
                        Case{"now+30minutes", now + 1800},
                        Case{"now-60", now - 60},
                        Case{"NOW-2w", now - 14 * 86400},
                        Case{"today", midnight},
                        Case{"midnight", midnight},
                        Case{"noon", midnight + 12 * 3600},
                        Case{"teatime", midnight + 16 * 3600},
                        Case{"tomorrow", midnight + 86400},
                        Case{"2024-05-01", midnight},
                        Case{"2024-04-30T22:15", midnight - 3600 - 45 * 60},
                        Case{"2024-04-30T22:15:10", midnight - 3600 - 45 * 60 + 10},
                        Case{"04/30", midnight - 86400},
                        Case{"04/30/24", midnight - 86400},
                        Case{"0430", midnight - 86400},
                        Case{"043024", midnight - 86400},
                        Case{"04/30-12:00", midnight - 12 * 3600},
                        Case{"08:15", midnight + 8 * 3600 + 900},
                        Case{"08:15:30", midnight + 8 * 3600 + 930},
                        Case{" today ", midnight}}) {
    auto r = ParseSlurmDateTime(c.text, now, "starttime");
    ASSERT_TRUE(r.ok()) << c.text << ": " << r.status().ToString();
    EXPECT_EQ(*r, c.want) << c.text;
  }
  for (const char* bad : {"", "yesterday-ish", "2024-13-01", "25:00", "now-", "now-1fortnight",
                          "2024-05-01T", "05/32", "12:3"}) {
    auto r = ParseSlurmDateTime(bad, now, "starttime");
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.status().field(), "starttime");
    }
  }
}

TEST(Hostlist, CompressesAsSlurmWritesIt) {
  EXPECT_EQ(CompressHostlist({}), "");
  EXPECT_EQ(CompressHostlist({"box"}), "box");
  EXPECT_EQ(CompressHostlist({"gpu-01"}), "gpu-01");
  EXPECT_EQ(CompressHostlist({"gpu-03", "gpu-01", "gpu-02", "gpu-05", "box", "gpu-02"}),
            "box,gpu-[01-03,05]");
  EXPECT_EQ(CompressHostlist({"n9", "n10", "n11", "n1"}), "n[1,9-11]");
  EXPECT_EQ(CompressHostlist({"n01", "n09", "n10", "n11"}), "n[01,09-11]");
  EXPECT_EQ(CompressHostlist({"a1", "b1", "b2"}), "a1,b[1-2]");
}

TEST(Hostlist, ExpandsRangesAndRefusesBadOnes) {
  auto r = ExpandHostlist("gpu-[01-03,05],box,n[9-10]", "nodelist");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r,
            (std::vector<std::string>{"gpu-01", "gpu-02", "gpu-03", "gpu-05", "box", "n9", "n10"}));
  auto back = ExpandHostlist(CompressHostlist(*r), "nodelist");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->size(), r->size());
  for (const char* bad : {"gpu-[01-03", "gpu-]01[", "gpu-[3-1]", "gpu-[a-b]", "n[[1]]"}) {
    auto b = ExpandHostlist(bad, "nodelist");
    EXPECT_FALSE(b.ok()) << bad;
  }
  EXPECT_FALSE(ExpandHostlist("n[0-999999]", "nodelist").ok());  // too many names
}

TEST(SplitCommas, DropsEmptyItemsAndSpaces) {
  EXPECT_EQ(SplitCommas("a, b,,c ,"), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(SplitCommas("").empty());
}

}  // namespace
}  // namespace arbiter::cli
