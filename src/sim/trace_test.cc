#include "sim/trace.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace arbiter::sim {
namespace {

using ::testing::HasSubstr;

constexpr const char* kHeader =
    "submit_time,duration,tenant,queue,type,priority_class,tasks,gpus_per_task,gpu_milli,"
    "gpu_models,walltime\n";

TEST(ParseTrace, ReadsEveryColumn) {
  auto t = ParseTrace(std::string(kHeader) +
                          "0,3600,vision,vision-train,training,normal,2,8,1000,A100|H100,7200\n"
                          "# a comment\n"
                          "\n"
                          "30,60,speech,speech-infer,service,critical,1,1,250,,0\r\n",
                      "trace.csv");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->jobs.size(), 2u);
  const TraceJob& a = t->jobs[0];
  EXPECT_EQ(a.submit_time, 0);
  EXPECT_EQ(a.duration, 3600);
  EXPECT_EQ(a.tenant, "vision");
  EXPECT_EQ(a.queue, "vision-train");
  EXPECT_EQ(a.type, JobType::kTraining);
  EXPECT_EQ(a.priority_class, "normal");
  EXPECT_EQ(a.tasks, 2);
  EXPECT_EQ(a.resources.gpus, 8);
  EXPECT_EQ(a.resources.gpu_milli, 1000);
  EXPECT_EQ(a.gpu_models, (std::vector<std::string>{"A100", "H100"}));
  EXPECT_EQ(a.walltime, 7200);
  EXPECT_EQ(a.resources.cpu_milli, 0);
  EXPECT_EQ(a.name, "job-1");
  EXPECT_EQ(a.line, 2u);
  const TraceJob& b = t->jobs[1];
  EXPECT_EQ(b.type, JobType::kService);
  EXPECT_EQ(b.resources.gpu_milli, 250);
  EXPECT_TRUE(b.gpu_models.empty());
  EXPECT_EQ(b.name, "job-2");
  EXPECT_EQ(b.line, 5u);
  EXPECT_EQ(t->Where(b, "priority_class"), "trace.csv:5:6");
}

TEST(ParseTrace, ColumnsInAnyOrderAndOptionalOnes) {
  auto t = ParseTrace(
      "name,memory_mib,cpu_milli,walltime,gpu_models,gpu_milli,gpus_per_task,tasks,"
      "priority_class,type,queue,tenant,duration,submit_time\n"
      "eval-7,65536,8000,,,0,0,1,best-effort,evaluation,q,t,5,100\n",
      "trace.csv");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const TraceJob& j = t->jobs.at(0);
  EXPECT_EQ(j.name, "eval-7");
  EXPECT_EQ(j.resources.memory_mib, 65536);
  EXPECT_EQ(j.resources.cpu_milli, 8000);
  EXPECT_EQ(j.walltime, 0);
  EXPECT_EQ(j.resources.gpus, 0);
  EXPECT_EQ(j.submit_time, 100);
  EXPECT_EQ(j.duration, 5);
  EXPECT_EQ(j.tenant, "t");
}

TEST(FormatTrace, RoundTrips) {
  TraceJob a;
  a.name = "train-1";
  a.submit_time = 12;
  a.duration = 3600;
  a.tenant = "vision";
  a.queue = "vision-train";
  a.type = JobType::kFineTuning;
  a.priority_class = "high";
  a.tasks = 4;
  a.resources.gpus = 8;
  a.resources.cpu_milli = 64000;
  a.resources.memory_mib = 524288;
  a.gpu_models = {"A100", "H100"};
  a.walltime = 7200;
  TraceJob b = a;
  b.name = "share";
  b.tasks = 1;
  b.resources.gpus = 1;
  b.resources.gpu_milli = 300;
  b.gpu_models.clear();
  b.walltime = 0;
  auto t = ParseTrace(FormatTrace({a, b}), "x.csv");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->jobs.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const TraceJob& want = i == 0 ? a : b;
    const TraceJob& got = t->jobs[i];
    EXPECT_EQ(got.name, want.name);
    EXPECT_EQ(got.submit_time, want.submit_time);
    EXPECT_EQ(got.duration, want.duration);
    EXPECT_EQ(got.tenant, want.tenant);
    EXPECT_EQ(got.queue, want.queue);
    EXPECT_EQ(got.type, want.type);
    EXPECT_EQ(got.priority_class, want.priority_class);
    EXPECT_EQ(got.tasks, want.tasks);
    EXPECT_EQ(got.resources, want.resources);
    EXPECT_EQ(got.gpu_models, want.gpu_models);
    EXPECT_EQ(got.walltime, want.walltime);
  }
  EXPECT_EQ(FormatTrace({}),
            "submit_time,duration,tenant,queue,type,priority_class,tasks,gpus_per_task,gpu_milli,"
            "gpu_models,walltime,cpu_milli,memory_mib,name\n");
}

struct BadTrace {
  std::string name;
  std::string text;     // after the standard header unless it starts with "!"
  std::string where;    // "file:line:column"
  std::string message;  // part of the message
};
void PrintTo(const BadTrace& b, std::ostream* os) { *os << b.name; }

class TraceErrors : public ::testing::TestWithParam<BadTrace> {};

TEST_P(TraceErrors, NameFileLineAndColumn) {
  const BadTrace& b = GetParam();
  const std::string text = b.text.starts_with("!") ? b.text.substr(1) : kHeader + b.text;
  auto t = ParseTrace(text, "trace.csv");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().field(), b.where) << t.status().ToString();
  EXPECT_THAT(t.status().message(), HasSubstr(b.message));
}

constexpr const char* kGood = "0,60,t,q,training,normal,1,1,1000,,0\n";

INSTANTIATE_TEST_SUITE_P(
    Cases, TraceErrors,
    ::testing::Values(
        BadTrace{"Empty", "!", "trace.csv:1:1", "empty file"},
        BadTrace{"UnknownColumn", "!submit_time,duration,gpus\n", "trace.csv:1:3",
                 "unknown column 'gpus'"},
        BadTrace{"DuplicateColumn", "!submit_time,submit_time\n", "trace.csv:1:2",
                 "column 'submit_time' appears twice"},
        BadTrace{"MissingColumn", "!submit_time,duration,tenant,queue\n", "trace.csv:1:1",
                 "lacks the required column 'type'"},
        BadTrace{"FieldCount", "0,60,t,q\n", "trace.csv:2:1",
                 "expected 11 comma-separated columns, got 4"},
        BadTrace{"SubmitTime", std::string(kGood) + "-5,60,t,q,training,normal,1,1,1000,,0\n",
                 "trace.csv:3:1", "submit_time: expected a whole number from 0"},
        BadTrace{"Duration", "0,1.5,t,q,training,normal,1,1,1000,,0\n", "trace.csv:2:2",
                 "duration: expected a whole number"},
        BadTrace{"TenantName", "0,60,Vision,q,training,normal,1,1,1000,,0\n", "trace.csv:2:3",
                 "tenant: 'Vision' is not a name"},
        BadTrace{"EmptyQueue", "0,60,t,,training,normal,1,1,1000,,0\n", "trace.csv:2:4",
                 "queue: must not be empty"},
        BadTrace{"Type", "0,60,t,q,train,normal,1,1,1000,,0\n", "trace.csv:2:5",
                 "type: expected training, fine-tuning"},
        BadTrace{"Tasks", "0,60,t,q,training,normal,0,1,1000,,0\n", "trace.csv:2:7",
                 "tasks: expected a whole number from 1 to 100000, got '0'"},
        BadTrace{"Gpus", "0,60,t,q,training,normal,1,x,1000,,0\n", "trace.csv:2:8",
                 "gpus_per_task: expected a whole number"},
        BadTrace{"MilliWithoutGpus", "0,60,t,q,training,normal,1,0,500,,0\n", "trace.csv:2:9",
                 "gpu_milli: must be 0 without GPUs, got 500"},
        BadTrace{"SharedGang", "0,60,t,q,training,normal,1,2,500,,0\n", "trace.csv:2:9",
                 "below 1000 only for one GPU per task, got 500 with gpus_per_task 2"},
        BadTrace{"ZeroMilli", "0,60,t,q,training,normal,1,1,0,,0\n", "trace.csv:2:9",
                 "must be 1 to 1000 with GPUs"},
        BadTrace{"ModelName", "0,60,t,q,training,normal,1,1,1000,A100||H100,0\n", "trace.csv:2:10",
                 "'' is not a GPU model name"},
        BadTrace{"ModelTwice", "0,60,t,q,training,normal,1,1,1000,A100|A100,0\n", "trace.csv:2:10",
                 "'A100' is listed twice"},
        BadTrace{"ModelsWithoutGpus", "0,60,t,q,training,normal,1,0,0,A100,0\n", "trace.csv:2:10",
                 "only for jobs with GPUs"},
        BadTrace{"Walltime", "0,60,t,q,training,normal,1,1,1000,,40000000\n", "trace.csv:2:11",
                 "walltime: expected a whole number from 0 to 31622400"},
        BadTrace{"Quoted", "0,60,t,\"q\",training,normal,1,1,1000,,0\n", "trace.csv:2:4",
                 "quoted fields are not supported"},
        BadTrace{"QueueOfTwoTenants", std::string(kGood) + "0,60,u,q,training,normal,1,1,1000,,0\n",
                 "trace.csv:3:4", "queue 'q' belongs to tenant 't' (line 2), not 'u'"},
        BadTrace{"QueueNamedLikeTenant",
                 std::string(kGood) + "0,60,u,t,training,normal,1,1,1000,,0\n", "trace.csv:3:4",
                 "queue 't' has the name of a tenant (line 2)"},
        BadTrace{"TenantNamedLikeQueue",
                 std::string(kGood) + "0,60,q,r,training,normal,1,1,1000,,0\n", "trace.csv:3:3",
                 "tenant 'q' has the name of a queue (line 2)"}),
    [](const ::testing::TestParamInfo<BadTrace>& p) { return p.param.name; });

TEST(LoadTrace, NamesAMissingFile) {
  auto t = LoadTrace("/nonexistent/trace.csv");
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("/nonexistent/trace.csv: cannot open"));
}

}  // namespace
}  // namespace arbiter::sim

namespace arbiter::sim {
namespace {

TEST(JitterArrivals, DelaysWithinTheBoundAndEqualSeedsGiveEqualTimes) {
  std::vector<TraceJob> jobs(2000);
  for (size_t i = 0; i < jobs.size(); ++i) jobs[i].submit_time = static_cast<int64_t>(i) * 10;
  std::vector<TraceJob> a = jobs, b = jobs, c = jobs, none = jobs;
  JitterArrivals(&a, 60, 7);
  JitterArrivals(&b, 60, 7);
  JitterArrivals(&c, 60, 8);
  JitterArrivals(&none, 0, 7);
  int64_t total = 0;
  bool reordered = false;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const int64_t d = a[i].submit_time - jobs[i].submit_time;
    EXPECT_GE(d, 0);
    EXPECT_LT(d, 60);
    total += d;
    EXPECT_EQ(a[i].submit_time, b[i].submit_time);
    EXPECT_EQ(none[i].submit_time, jobs[i].submit_time);
    if (i > 0 && a[i].submit_time < a[i - 1].submit_time) reordered = true;
  }
  // Uniform in [0, 60) whole seconds: a mean of 29.5.
  EXPECT_NEAR(static_cast<double>(total) / static_cast<double>(jobs.size()), 29.5, 2.0);
  EXPECT_TRUE(reordered);  // jobs 10 s apart may swap
  size_t differ = 0;
  for (size_t i = 0; i < jobs.size(); ++i) differ += a[i].submit_time != c[i].submit_time;
  EXPECT_GT(differ, jobs.size() / 2);  // another seed, other delays
}

}  // namespace
}  // namespace arbiter::sim
