// A task's runs from its job's history: one per admission, on the node the admission named, with
// why the run before ended as the next separator says it.
#include "server/log_runs.h"

#include <gtest/gtest.h>

namespace arbiter::server {
namespace {

class History {
 public:
  History& To(const std::string& to, const std::string& reason = "",
              const std::string& detail = "{}") {
    events_.push_back({0, 7, 0, from_, to, reason, detail});
    from_ = to;
    return *this;
  }
  History& Admit(uint64_t attempt, std::vector<std::string> nodes) {
    return To("admitted", "admitted", AdmissionDetail(attempt, nodes));
  }
  const std::vector<store::JobEventRecord>& events() const { return events_; }

 private:
  std::string from_;
  std::vector<store::JobEventRecord> events_;
};

TEST(LogRunsTest, EachRunSaysWhyTheOneBeforeEnded) {
  History h;
  h.To("pending", "submitted")
      .Admit(1, {"a", "b"})
      .To("starting", "dispatched")
      .To("running", "all tasks started")
      .To("failed", "a task exited with code 3")
      .To("retry-wait", "retry 1 of 3 in 0 s")
      .To("pending", "retry backoff over")
      .Admit(2, {"b", "c"})
      .To("running")
      .To("preempting", "preempted by job 9 (priority)")
      .To("preempted", "stopped for a preemption")
      .To("pending", "requeued after preemption")
      .Admit(3, {"c", "a"})
      .To("running")
      .To("lost", "its processes are gone (node restarted or down)")
      .To("retry-wait", "retry 2 of 3 in 0 s")
      .To("pending")
      .Admit(4, {"a", "a"})
      .To("running")
      .To("timed-out", "walltime of 60 s reached")
      .To("retry-wait", "retry by alice")
      .To("pending")
      .Admit(5, {"a", "b"})
      .To("suspended", "suspend by alice")
      .To("pending", "resume by alice")
      .Admit(6, {"b", "b"})
      .To("running")
      .To("suspended", "requeue by alice")
      .To("pending", "requeued")
      .Admit(7, {"a", "c"});
  const std::vector<RunHistory> runs = RunsFromEvents(h.events(), 1);
  ASSERT_EQ(runs.size(), 7u);
  const std::vector<std::pair<std::string, std::string>> want = {
      {"b", ""},        {"c", "a retry (exit 3)"}, {"a", "preemption"}, {"a", "the node was lost"},
      {"b", "requeue"}, {"b", "a suspend"},        {"c", "requeue"}};
  for (size_t i = 0; i < runs.size(); ++i) {
    EXPECT_EQ(runs[i].attempt, i + 1);
    EXPECT_EQ(runs[i].node, want[i].first) << i;
    EXPECT_EQ(runs[i].after, want[i].second) << i;
  }
}

// Admissions recorded before they carried their attempt and nodes are counted; their node is not
// known. A task index beyond the recorded nodes has none either.
TEST(LogRunsTest, OlderHistoriesCountAdmissions) {
  History h;
  h.To("pending").To("admitted", "admitted").To("running").To("lost").To("retry-wait", "retry 1");
  h.To("pending").To("admitted", "admitted");
  const std::vector<RunHistory> runs = RunsFromEvents(h.events(), 0);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[1].attempt, 2u);
  EXPECT_EQ(runs[1].node, "");
  EXPECT_EQ(runs[1].after, "the node was lost");
  History one;
  one.Admit(1, {"a"});
  EXPECT_EQ(RunsFromEvents(one.events(), 3)[0].node, "");
}

TEST(LogRunsTest, Separators) {
  EXPECT_EQ(RunSeparator(2, "a retry (exit 3)"), "--- run 2, after a retry (exit 3) ---\n");
  EXPECT_EQ(RunSeparator(3, "preemption"), "--- run 3, after preemption ---\n");
  EXPECT_EQ(RunSeparator(4, ""), "--- run 4 ---\n");
  EXPECT_EQ(AdmissionDetail(2, {"a", "b"}), R"({"attempt":2,"nodes":["a","b"]})");
}

}  // namespace
}  // namespace arbiter::server
