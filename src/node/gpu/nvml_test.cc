#include "node/gpu/nvml.h"

#include <gtest/gtest.h>

namespace arbiter::node {
namespace {

// Without the driver's library the loader says so, and the agent runs without GPUs.
TEST(Nvml, MissingLibraryIsUnavailableWithTheReason) {
  auto nvml = NvmlGpus::Load("libnvidia-ml-not-installed.so.1");
  ASSERT_FALSE(nvml.ok());
  EXPECT_EQ(nvml.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(nvml.status().message().find("NVML not found"), std::string::npos)
      << nvml.status().message();
  EXPECT_NE(nvml.status().message().find("libnvidia-ml-not-installed.so.1"), std::string::npos);
}

// A library that loads but is not NVML: the missing functions are named.
TEST(Nvml, LibraryWithoutTheFunctionsIsRefused) {
  auto nvml = NvmlGpus::Load("libc.so.6");
  ASSERT_FALSE(nvml.ok());
  EXPECT_EQ(nvml.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(nvml.status().message().find("lacks nvmlInit_v2"), std::string::npos)
      << nvml.status().message();
}

// On a machine with the driver, the real library loads and lists GPUs; elsewhere this checks
// only that the default name fails cleanly.
TEST(Nvml, DefaultLibraryLoadsOrFailsCleanly) {
  auto nvml = NvmlGpus::Load();
  if (!nvml.ok()) {
    EXPECT_EQ(nvml.status().code(), StatusCode::kUnavailable);
    GTEST_SKIP() << nvml.status().message();
  }
  const auto gpus = (*nvml)->Discover();
  for (const DiscoveredGpu& g : gpus) {
    EXPECT_FALSE(g.model.empty());
    EXPECT_GT(g.memory_mib, 0);
  }
  EXPECT_EQ((*nvml)->Sample({}).size(), gpus.size());
}

}  // namespace
}  // namespace arbiter::node
