#include "sim/convert.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

namespace arbiter::sim {
namespace {

using ::testing::HasSubstr;

const std::string kFixtures = ARBITER_FIXTURES_DIR "/openb";

std::vector<TraceJob> Convert(const std::string& file, const ConvertOptions& o = {}) {
  auto pods = LoadOpenbPods(kFixtures + "/" + file);
  EXPECT_TRUE(pods.ok()) << pods.status().ToString();
  auto jobs = ConvertOpenbPods(*pods, o);
  EXPECT_TRUE(jobs.ok()) << jobs.status().ToString();
  return jobs.ok() ? *jobs : std::vector<TraceJob>{};
}

TEST(ConvertOpenbPods, TimesQosAndTenantsOfTheDefaultFixture) {
  const std::vector<TraceJob> jobs = Convert("pods.csv");
  ASSERT_EQ(jobs.size(), 255u);
  // openb-pod-0000,12000,16384,1,1000,,LS,Running,0,12537496,0
  const TraceJob& a = jobs[0];
  EXPECT_EQ(a.name, "openb-pod-0000");
  EXPECT_EQ(a.submit_time, 0);
  EXPECT_EQ(a.duration, 12537496);
  EXPECT_EQ(a.priority_class, "critical");
  EXPECT_EQ(a.type, JobType::kService);
  EXPECT_EQ(a.tenant, "tenant-0");  // FNV-1a("openb-pod-0000") mod 4
  EXPECT_EQ(a.queue, "tenant-0-online");
  EXPECT_EQ(a.tasks, 1);
  EXPECT_EQ(a.resources.gpus, 1);
  EXPECT_EQ(a.resources.gpu_milli, 1000);
  EXPECT_EQ(a.resources.cpu_milli, 12000);
  EXPECT_EQ(a.resources.memory_mib, 16384);
  EXPECT_EQ(a.walltime, 0);
  // openb-pod-0032,6000,12288,1,460,,LS,Running,9963454,9978153,9963454
  EXPECT_EQ(jobs[1].submit_time, 9963454);
  EXPECT_EQ(jobs[1].duration, 9978153 - 9963454);
  EXPECT_EQ(jobs[1].resources.gpu_milli, 460);
  EXPECT_EQ(jobs[1].tenant, "tenant-1");
  EXPECT_EQ(jobs[2].tenant, "tenant-2");
  std::map<std::string, int> per_tenant;
  std::map<std::string, std::set<std::string>> classes_by_queue_kind;
  for (const TraceJob& j : jobs) {
    ++per_tenant[j.tenant];
    const std::string kind = j.queue.substr(j.queue.rfind('-') + 1);
    classes_by_queue_kind[kind].insert(j.priority_class);
    EXPECT_EQ(j.queue.rfind(j.tenant + "-", 0), 0u) << j.queue;
  }
  EXPECT_EQ(per_tenant,
            (std::map<std::string, int>{
                {"tenant-0", 61}, {"tenant-1", 68}, {"tenant-2", 67}, {"tenant-3", 59}}));
  EXPECT_EQ(classes_by_queue_kind["online"], (std::set<std::string>{"critical"}));
  EXPECT_EQ(classes_by_queue_kind["batch"], (std::set<std::string>{"best-effort", "normal"}));
}

TEST(ConvertOpenbPods, QosMapping) {
  EXPECT_EQ(PriorityClassForQos("LS"), "critical");
  EXPECT_EQ(PriorityClassForQos("Guaranteed"), "high");
  EXPECT_EQ(PriorityClassForQos("Burstable"), "normal");
  EXPECT_EQ(PriorityClassForQos("BE"), "best-effort");
  EXPECT_EQ(PriorityClassForQos(""), "normal");
  EXPECT_EQ(JobTypeForQos("LS"), JobType::kService);
  EXPECT_EQ(JobTypeForQos("Guaranteed"), JobType::kTraining);
  EXPECT_EQ(JobTypeForQos("Burstable"), JobType::kBatchInference);
  EXPECT_EQ(JobTypeForQos("BE"), JobType::kExperiment);
}

TEST(ConvertOpenbPods, DeterministicAndTheOutputParses) {
  ConvertOptions o;
  o.tenants = 3;
  const std::vector<TraceJob> a = Convert("pods.csv", o);
  const std::vector<TraceJob> b = Convert("pods.csv", o);
  EXPECT_EQ(FormatTrace(a), FormatTrace(b));
  auto t = ParseTrace(FormatTrace(a), "converted.csv");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->jobs.size(), a.size());
  o.tenants = 1;
  for (const TraceJob& j : Convert("pods.csv", o)) EXPECT_EQ(j.tenant, "tenant-0");
}

TEST(ConvertOpenbPods, TimeScaleCompressesArrivalsOnly) {
  ConvertOptions o;
  o.time_scale = 0.5;
  const std::vector<TraceJob> jobs = Convert("pods.csv", o);
  ASSERT_GE(jobs.size(), 2u);
  EXPECT_EQ(jobs[1].submit_time, 9963454 / 2);
  EXPECT_EQ(jobs[1].duration, 9978153 - 9963454);
}

TEST(ConvertOpenbPods, SyntheticArrivalsForPodListsWithoutTimes) {
  ConvertOptions o;
  o.interarrival = 30;
  o.mean_duration = 600;
  const std::vector<TraceJob> a = Convert("pods_multigpu.csv", o);
  ASSERT_EQ(a.size(), 53u);
  double sum_gap = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_GE(a[i].duration, 1);
    EXPECT_EQ(a[i].priority_class, "normal");
    EXPECT_EQ(a[i].type, JobType::kTraining);
    EXPECT_EQ(a[i].queue, a[i].tenant + "-batch");
    if (i > 0) {
      EXPECT_GE(a[i].submit_time, a[i - 1].submit_time);
      sum_gap += static_cast<double>(a[i].submit_time - a[i - 1].submit_time);
    }
  }
  // Exponential gaps with mean 30 s (rounded down): the sample mean of 52 gaps is near it.
  EXPECT_GT(sum_gap / 52, 15.0);
  EXPECT_LT(sum_gap / 52, 45.0);
  EXPECT_EQ(FormatTrace(Convert("pods_multigpu.csv", o)), FormatTrace(a));  // same seed
  o.seed = 7;
  EXPECT_NE(FormatTrace(Convert("pods_multigpu.csv", o)), FormatTrace(a));
}

TEST(ConvertOpenbPods, RefusesMixedTimesAndBadOptions) {
  std::vector<TraceTask> pods(2);
  pods[0].name = "a";
  pods[0].creation_time = 5;
  pods[0].deletion_time = 9;
  pods[1].name = "b";
  auto r = ConvertOpenbPods(pods, {});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("pod 'b' has no creation_time"));
  ConvertOptions o;
  o.tenants = 0;
  EXPECT_FALSE(ConvertOpenbPods(pods, o).ok());
  o = {};
  o.time_scale = 0;
  EXPECT_FALSE(ConvertOpenbPods(pods, o).ok());
}

TEST(ConvertOpenbPods, APodWithoutDeletionLivesToTheEndOfTheFile) {
  std::vector<TraceTask> pods(2);
  pods[0].name = "a";
  pods[0].creation_time = 100;
  pods[0].deletion_time = 500;
  pods[1].name = "b";
  pods[1].creation_time = 200;
  auto r = ConvertOpenbPods(pods, {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)[0].submit_time, 0);
  EXPECT_EQ((*r)[1].submit_time, 100);
  EXPECT_EQ((*r)[1].duration, 300);
}

}  // namespace
}  // namespace arbiter::sim
