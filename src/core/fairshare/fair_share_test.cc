#include "core/fairshare/fair_share.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace arbiter::core {
namespace {

constexpr int kDims = kFirstModelDim + 1;  // one GPU model

QuotaVec Vec(int64_t cpu, int64_t gpu, int64_t model = 0) {
  QuotaVec v;
  v[kDimCpu] = cpu;
  v[kDimGpu] = gpu;
  v[kFirstModelDim] = model;
  return v;
}

QuotaNode Node(QuotaVec guaranteed, double weight = 1.0, int64_t half_life = 0) {
  QuotaNode n;
  n.guaranteed = guaranteed;
  n.weight = weight;
  n.half_life_seconds = half_life;
  return n;
}

struct ShareCase {
  std::string name;
  QuotaNode node;
  QuotaVec usage;
  QuotaVec history;
  bool with_history;
  double want;
};

void PrintTo(const ShareCase& c, std::ostream* os) { *os << c.name; }

std::vector<ShareCase> ShareCases() {
  // The cluster: 100 cores, 16 GPUs, all of one model.
  return {
      {"UsageOverGuarantee", Node(Vec(0, 8000)), Vec(0, 4000, 4000), {}, false, 0.5},
      {"NoGuaranteeMeansTheCluster", Node(Vec(0, 0)), Vec(0, 4000, 4000), {}, false, 0.25},
      {"DominantResourceWins", Node(Vec(10000, 8000)), Vec(9000, 2000, 2000), {}, false, 0.9},
      {"WeightDivides", Node(Vec(0, 8000), 2.0), Vec(0, 4000, 4000), {}, false, 0.25},
      {"NothingUsed", Node(Vec(0, 8000)), Vec(0, 0), {}, false, 0.0},
      {"HistoryAveragesIn", Node(Vec(0, 8000), 1.0, 3600), Vec(0, 2000, 2000), Vec(0, 6000, 6000),
       true, 0.5},
      {"HistoryIgnoredWithoutHalfLife", Node(Vec(0, 8000)), Vec(0, 2000, 2000), Vec(0, 6000, 6000),
       true, 0.25},
      {"AboveTheGuarantee", Node(Vec(0, 4000)), Vec(0, 12000, 12000), {}, false, 3.0},
  };
}

class ShareTest : public ::testing::TestWithParam<ShareCase> {};

TEST_P(ShareTest, IsTheWeightedDominantShare) {
  const ShareCase& c = GetParam();
  const QuotaVec capacity = Vec(100000, 16000, 16000);
  EXPECT_DOUBLE_EQ(Share(c.node, c.usage, c.with_history ? &c.history : nullptr, capacity, kDims),
                   c.want);
}

INSTANTIATE_TEST_SUITE_P(Cases, ShareTest, ::testing::ValuesIn(ShareCases()),
                         [](const auto& p) { return p.param.name; });

TEST(DecayUsageTest, HalvesEveryHalfLifeOnceUsageStops) {
  const QuotaVec h = Vec(0, 8000);
  EXPECT_EQ(DecayUsage(h, QuotaVec(), SecondsToMs(3600), 3600, kDims)[kDimGpu], 4000);
  EXPECT_EQ(DecayUsage(h, QuotaVec(), SecondsToMs(7200), 3600, kDims)[kDimGpu], 2000);
  EXPECT_EQ(DecayUsage(h, QuotaVec(), 0, 3600, kDims)[kDimGpu], 8000);
}

TEST(DecayUsageTest, ApproachesAConstantUsage) {
  QuotaVec h;
  const QuotaVec u = Vec(0, 8000);
  // After one half-life of constant use, H is halfway there; after many, it is the usage.
  EXPECT_EQ(DecayUsage(h, u, SecondsToMs(3600), 3600, kDims)[kDimGpu], 4000);
  for (int i = 0; i < 200; ++i) h = DecayUsage(h, u, SecondsToMs(600), 3600, kDims);
  EXPECT_EQ(h[kDimGpu], 8000);
  // Splitting an interval gives the same decay as one step (up to rounding).
  const QuotaVec once = DecayUsage(Vec(0, 1000), u, SecondsToMs(1200), 3600, kDims);
  const QuotaVec twice = DecayUsage(DecayUsage(Vec(0, 1000), u, SecondsToMs(600), 3600, kDims), u,
                                    SecondsToMs(600), 3600, kDims);
  EXPECT_NEAR(static_cast<double>(once[kDimGpu]), static_cast<double>(twice[kDimGpu]), 1.0);
}

TEST(DecayUsageTest, ShortIntervalsDoNotStall) {
  // One call a second against a one-hour half-life: (1 - a) x 2000 is 0.39, which rounds away.
  QuotaVec h = Vec(0, 2000);
  int steps = 0;
  while (h[kDimGpu] > 0 && steps < 100000) {
    h = DecayUsage(h, QuotaVec(), SecondsToMs(1), 3600, kDims);
    ++steps;
  }
  EXPECT_EQ(h[kDimGpu], 0) << "stalled after " << steps << " steps";
  QuotaVec up;
  for (int i = 0; i < 20000; ++i) up = DecayUsage(up, Vec(0, 8000), SecondsToMs(1), 3600, kDims);
  EXPECT_EQ(up[kDimGpu], 8000);
  // While the exact step is a unit or more, the decay is exponential as written.
  const QuotaVec big = DecayUsage(Vec(0, 8000000), QuotaVec(), SecondsToMs(1), 3600, kDims);
  EXPECT_EQ(big[kDimGpu], std::llround(8000000.0 * std::exp2(-1.0 / 3600)));
}

TEST(DecayUsageTest, NoHalfLifeMeansCurrentUsage) {
  const QuotaVec u = Vec(3000, 2000);
  EXPECT_EQ(DecayUsage(Vec(0, 9000), u, SecondsToMs(60), 0, kDims), u);
}

}  // namespace
}  // namespace arbiter::core
