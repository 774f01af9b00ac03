#include "model/job.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace arbiter {
namespace {

using ::testing::HasSubstr;

JobSpec ValidJob() {
  JobSpec j;
  j.name = "train-resnet";
  j.tenant = "vision";
  j.queue = "vision-train";
  j.tasks = 2;
  j.resources.gpus = 8;
  j.resources.cpu_milli = 96000;
  j.resources.memory_mib = 786432;
  j.gpu_models = {"A100", "H100"};
  j.walltime_seconds = 3600;
  j.retry.max_retries = 3;
  return j;
}

struct JobCase {
  std::string name;
  std::function<void(JobSpec&)> edit;
  std::string field;
  std::string message;
};

void PrintTo(const JobCase& c, std::ostream* os) { *os << c.name; }

std::vector<JobCase> JobCases() {
  return {
      {"NameTooLong", [](JobSpec& j) { j.name = std::string(254, 'a'); }, "name",
       "at most 253 characters"},
      {"BadQueue", [](JobSpec& j) { j.queue = "Vision Train"; }, "queue",
       "'Vision Train' is not a valid queue name"},
      {"NoTasks", [](JobSpec& j) { j.tasks = 0; }, "tasks", "must be between 1 and 100000, got 0"},
      {"TooManyTasks", [](JobSpec& j) { j.tasks = 100001; }, "tasks", "got 100001"},
      {"BadResources", [](JobSpec& j) { j.resources.gpus = -1; }, "resources.gpus", "got -1"},
      {"BadShare", [](JobSpec& j) { j.resources.gpu_milli = 500; }, "resources.gpu_milli",
       "needs gpus = 1, got gpus = 8"},
      {"EmptyModel",
       [](JobSpec& j) {
         j.gpu_models = {"A100", ""};
       },
       "gpu_models[1]", "must not be empty"},
      {"ModelsWithoutGpus", [](JobSpec& j) { j.resources.gpus = 0; }, "gpu_models",
       "GPU models given but the job asks for no GPU"},
      {"NegativeWalltime", [](JobSpec& j) { j.walltime_seconds = -1; }, "walltime_seconds",
       "must be >= 0, got -1"},
      {"NegativeRetries", [](JobSpec& j) { j.retry.max_retries = -1; }, "retry.max_retries",
       "must be between 0 and 1000, got -1"},
      {"TooManyRetries", [](JobSpec& j) { j.retry.max_retries = 1001; }, "retry.max_retries",
       "got 1001"},
      {"NegativeBackoff", [](JobSpec& j) { j.retry.backoff_seconds = -1; }, "retry.backoff_seconds",
       "must be between 0 and 604800, got -1"},
      {"CapBelowBackoff",
       [](JobSpec& j) {
         j.retry.backoff_seconds = 60;
         j.retry.backoff_cap_seconds = 30;
       },
       "retry.backoff_cap_seconds", "must be >= backoff_seconds (60), got 30"},
      {"GracePeriodTooLong", [](JobSpec& j) { j.grace_period_seconds = 86401; },
       "grace_period_seconds", "must be between 0 and 86400, got 86401"},
  };
}

class ValidateJobSpecTest : public ::testing::TestWithParam<JobCase> {};

TEST_P(ValidateJobSpecTest, NamesTheField) {
  const JobCase& c = GetParam();
  JobSpec j = ValidJob();
  c.edit(j);
  const Status s = ValidateJobSpec(j);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.field(), c.field);
  EXPECT_THAT(s.message(), HasSubstr(c.message));
}

INSTANTIATE_TEST_SUITE_P(Cases, ValidateJobSpecTest, ::testing::ValuesIn(JobCases()),
                         [](const auto& p) { return p.param.name; });

TEST(ValidateJobSpecTest, AcceptsValidJobs) {
  EXPECT_TRUE(ValidateJobSpec(ValidJob()).ok());
  JobSpec cpu = ValidJob();
  cpu.resources = TaskResources();
  cpu.resources.cpu_milli = 4000;
  cpu.gpu_models.clear();
  EXPECT_TRUE(ValidateJobSpec(cpu).ok());
  JobSpec share = ValidJob();
  share.tasks = 1;
  share.resources.gpus = 1;
  share.resources.gpu_milli = 250;
  share.resources.gpu_memory_mib = 20480;
  EXPECT_TRUE(ValidateJobSpec(share).ok());
  JobSpec unnamed = ValidJob();
  unnamed.name.clear();
  EXPECT_TRUE(ValidateJobSpec(unnamed).ok());
}

TEST(JobTypeTest, NamesRoundTrip) {
  for (JobType t : {JobType::kTraining, JobType::kFineTuning, JobType::kEvaluation,
                    JobType::kBatchInference, JobType::kService, JobType::kExperiment}) {
    JobType parsed = JobType::kService;
    ASSERT_TRUE(ParseJobType(JobTypeName(t), &parsed)) << JobTypeName(t);
    EXPECT_EQ(parsed, t);
  }
  EXPECT_EQ(JobTypeName(JobType::kFineTuning), "fine-tuning");
  EXPECT_EQ(JobTypeName(JobType::kBatchInference), "batch-inference");
  JobType untouched = JobType::kEvaluation;
  EXPECT_FALSE(ParseJobType("Training", &untouched));
  EXPECT_FALSE(ParseJobType("", &untouched));
  EXPECT_EQ(untouched, JobType::kEvaluation);
}

TEST(RetryPolicyTest, BackoffDoublesUpToTheCap) {
  RetryPolicy p;
  p.backoff_seconds = 30;
  p.backoff_cap_seconds = 3600;
  EXPECT_EQ(RetryBackoffSeconds(p, 1), 30);
  EXPECT_EQ(RetryBackoffSeconds(p, 2), 60);
  EXPECT_EQ(RetryBackoffSeconds(p, 3), 120);
  EXPECT_EQ(RetryBackoffSeconds(p, 7), 1920);
  EXPECT_EQ(RetryBackoffSeconds(p, 8), 3600);  // 3840 capped
  EXPECT_EQ(RetryBackoffSeconds(p, 1000), 3600);
  p.backoff_seconds = 0;
  EXPECT_EQ(RetryBackoffSeconds(p, 5), 0);
}

TEST(RetryPolicyTest, BackoffNeverOverflows) {
  // Validation bounds the first backoff, not the cap: a huge cap must still give a sane backoff.
  RetryPolicy p;
  p.backoff_seconds = 30;
  p.backoff_cap_seconds = std::numeric_limits<int64_t>::max();
  int64_t last = 0;
  for (int32_t retry = 1; retry <= 1000; ++retry) {
    const int64_t b = RetryBackoffSeconds(p, retry);
    ASSERT_GE(b, last) << "retry " << retry;
    last = b;
  }
  EXPECT_EQ(last, p.backoff_cap_seconds);
}

TEST(RetryPolicyTest, ShouldRetryCountsAndFiltersExitCodes) {
  RetryPolicy p;
  p.max_retries = 2;
  EXPECT_TRUE(ShouldRetry(p, 0, 1));
  EXPECT_TRUE(ShouldRetry(p, 1, 137));
  EXPECT_FALSE(ShouldRetry(p, 2, 1));
  p.on_exit_codes = {137, 143};
  EXPECT_TRUE(ShouldRetry(p, 0, 137));
  EXPECT_FALSE(ShouldRetry(p, 0, 1));
  p.max_retries = 0;
  EXPECT_FALSE(ShouldRetry(p, 0, 137));
}

}  // namespace
}  // namespace arbiter
