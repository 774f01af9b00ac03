#include "model/resources.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace arbiter {
namespace {

using ::testing::HasSubstr;

TaskResources Res(int32_t gpus, int32_t milli = 1000, int64_t gpu_mem = 0, int64_t cpu = 0,
                  int64_t mem = 0) {
  TaskResources r;
  r.gpus = gpus;
  r.gpu_milli = milli;
  r.gpu_memory_mib = gpu_mem;
  r.cpu_milli = cpu;
  r.memory_mib = mem;
  return r;
}

struct ResourcesCase {
  std::string name;
  TaskResources r;
  std::string field;    // "" when valid
  std::string message;  // a part of the message
};

void PrintTo(const ResourcesCase& c, std::ostream* os) { *os << c.name; }

std::vector<ResourcesCase> ResourcesCases() {
  const int64_t big = int64_t{1} << 41;
  return {
      {"WholeGpus", Res(8, 1000, 0, 96000, 786432), "", ""},
      {"ShareWithMemory", Res(1, 250, 20480, 4000, 16384), "", ""},
      {"CpuOnly", Res(0, 1000, 0, 16000, 1024), "", ""},
      {"NegativeGpus", Res(-2), "resources.gpus", "must be between 0 and 1024, got -2"},
      {"TooManyGpus", Res(1025), "resources.gpus", "must be between 0 and 1024, got 1025"},
      {"ZeroShare", Res(1, 0), "resources.gpu_milli", "must be between 1 and 1000, got 0"},
      {"ShareAboveOne", Res(1, 1001), "resources.gpu_milli",
       "must be between 1 and 1000, got 1001"},
      {"ShareOfSeveralGpus", Res(2, 500), "resources.gpu_milli",
       "a fraction of a GPU (500) needs gpus = 1, got gpus = 2"},
      {"NegativeGpuMemory", Res(1, 1000, -1), "resources.gpu_memory_mib", "got -1"},
      {"GpuMemoryWithoutGpu", Res(0, 1000, 1024), "resources.gpu_memory_mib",
       "GPU memory needs gpus >= 1"},
      {"NegativeCpu", Res(1, 1000, 0, -1000), "resources.cpu_milli", "got -1000"},
      {"HugeCpu", Res(1, 1000, 0, big), "resources.cpu_milli", "must be between 0 and"},
      {"NegativeMemory", Res(1, 1000, 0, 0, -5), "resources.memory_mib", "got -5"},
      {"HugeMemory", Res(1, 1000, 0, 0, big), "resources.memory_mib", "must be between 0 and"},
  };
}

class ValidateTaskResourcesTest : public ::testing::TestWithParam<ResourcesCase> {};

TEST_P(ValidateTaskResourcesTest, NamesTheField) {
  const ResourcesCase& c = GetParam();
  const Status s = ValidateTaskResources(c.r, "resources");
  if (c.field.empty()) {
    EXPECT_TRUE(s.ok()) << s.ToString();
    return;
  }
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.field(), c.field);
  EXPECT_THAT(s.message(), HasSubstr(c.message));
  EXPECT_EQ(s.ToString(), c.field + ": " + s.message());
}

INSTANTIATE_TEST_SUITE_P(Cases, ValidateTaskResourcesTest, ::testing::ValuesIn(ResourcesCases()),
                         [](const auto& p) { return p.param.name; });

TEST(ValidateTaskResourcesTest, WithoutAPrefixTheFieldIsBare) {
  const Status s = ValidateTaskResources(Res(-1), "");
  EXPECT_EQ(s.field(), "gpus");
  EXPECT_EQ(ValidateTaskResources(Res(-1), "jobs[3].resources").field(), "jobs[3].resources.gpus");
}

TEST(TaskResourcesTest, WholeOrFraction) {
  EXPECT_FALSE(Res(8).fractional());
  EXPECT_TRUE(Res(1, 250).fractional());
  EXPECT_FALSE(Res(0).fractional());
  EXPECT_EQ(Res(8).total_gpu_milli(), 8000);
  EXPECT_EQ(Res(1, 250).total_gpu_milli(), 250);
  EXPECT_EQ(Res(0, 250).total_gpu_milli(), 0);
}

TEST(FormatMilliTest, WritesDecimals) {
  const std::vector<std::pair<int64_t, std::string>> cases = {
      {0, "0"},        {1000, "1"},   {8000, "8"},        {2500, "2.5"},
      {250, "0.25"},   {1, "0.001"},  {1010, "1.01"},     {-500, "-0.5"},
      {-1500, "-1.5"}, {-2000, "-2"}, {123456, "123.456"}};
  for (const auto& [milli, want] : cases) EXPECT_EQ(FormatMilli(milli), want) << milli;
}

TEST(DescribeTaskResourcesTest, SaysWhatATaskAsksFor) {
  EXPECT_EQ(DescribeTaskResources(Res(2, 1000, 0, 16000, 65536)), "2 GPU, 16 CPU, 65536 MiB RAM");
  EXPECT_EQ(DescribeTaskResources(Res(1, 500, 20480, 4000, 16384)),
            "0.5 GPU (20480 MiB GPU memory each), 4 CPU, 16384 MiB RAM");
  EXPECT_EQ(DescribeTaskResources(Res(0, 1000, 0, 8500, 1024)), "0 GPU, 8.5 CPU, 1024 MiB RAM");
}

}  // namespace
}  // namespace arbiter
