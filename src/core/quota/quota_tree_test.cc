#include "core/quota/quota_tree.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/rng.h"
#include "testing/builders.h"

namespace arbiter::core {
namespace {

using ::arbiter::testing::QueueNamed;
using ::arbiter::testing::TreeBuilder;
using ::testing::HasSubstr;

const std::vector<GpuModel> kModels = {{"A100", 80 * 1024, 0}, {"H100", 80 * 1024, 0}};

// The cluster behind every case: 8 A100 and 8 H100, 256 cores, 2 TiB.
QuotaVec Capacity() {
  QuotaVec c;
  c[kDimCpu] = 256000;
  c[kDimMemory] = 2 * 1024 * 1024;
  c[kDimGpu] = 16000;
  c[kFirstModelDim + 0] = 8000;
  c[kFirstModelDim + 1] = 8000;
  return c;
}

int DimOf(const QuotaTree& t, const std::string& key) {
  for (int d = 0; d < t.num_dims(); ++d) {
    if (t.DimName(d) == key) return d;
  }
  ADD_FAILURE() << "no dimension " << key;
  return kDimGpu;
}

// A request as a job charges it: "gpu:A100" counts on both "gpu" and "gpu:A100".
QuotaVec Request(const QuotaTree& t, const std::string& key, int64_t amount) {
  QuotaVec r;
  r[DimOf(t, key)] = amount;
  if (key.rfind("gpu:", 0) == 0) r[kDimGpu] = amount;
  return r;
}

struct Use {
  std::string leaf;
  std::string key;
  int64_t amount;
};
struct AvailableIs {
  std::string node;
  std::string key;
  int64_t available;
};
struct BorrowedIs {
  std::string node;
  std::string key;
  int64_t borrowed;
};
struct CheckIs {
  std::string leaf;
  std::string key;
  int64_t request;
  QuotaFailure::Kind kind;
  std::string binding;  // the node whose limit binds (failures only)
  int64_t used = 0;
  int64_t limit = 0;
};

struct QuotaCase {
  std::string name;
  TreeBuilder tree;
  std::vector<Use> uses;
  std::vector<AvailableIs> available;
  std::vector<BorrowedIs> borrowed;
  std::vector<CheckIs> checks;
};

std::string CaseName(const ::testing::TestParamInfo<QuotaCase>& info) { return info.param.name; }
void PrintTo(const QuotaCase& c, std::ostream* os) { *os << c.name; }

constexpr auto kNone = QuotaFailure::Kind::kNone;
constexpr auto kMax = QuotaFailure::Kind::kMax;
constexpr auto kBorrow = QuotaFailure::Kind::kBorrow;
constexpr auto kCapacity = QuotaFailure::Kind::kCapacity;
const std::string kCluster = "(cluster)";

std::vector<QuotaCase> QuotaCases() {
  std::vector<QuotaCase> cases;
  cases.push_back({
      "SiblingIdleGuaranteeIsBorrowableUpToMax",
      TreeBuilder()
          .Tenant("t")
          .Guaranteed("gpu", 16000)
          .Queue("a", "t")
          .Guaranteed("gpu", 8000)
          .Max("gpu", 12000)
          .Queue("b", "t")
          .Guaranteed("gpu", 8000),
      {{"b", "gpu", 2000}},
      // a: its 8 plus b's idle 6, cut to its max of 12. b: all that is not used.
      {{"a", "gpu", 12000}, {"b", "gpu", 14000}, {"t", "gpu", 14000}},
      {{"a", "gpu", 0}, {"b", "gpu", 0}},
      {{"a", "gpu", 12000, kNone, ""},
       {"a", "gpu", 12001, kMax, "a", 0, 12000},
       // More than the cluster has free: the cluster binds (used and limit are the cluster's).
       {"b", "gpu", 14001, kCapacity, kCluster, 2000, 16000}},
  });
  cases.push_back({
      "BorrowingIsRecordedAboveTheGuarantee",
      TreeBuilder()
          .Tenant("t")
          .Guaranteed("gpu", 16000)
          .Queue("a", "t")
          .Guaranteed("gpu", 8000)
          .Queue("b", "t")
          .Guaranteed("gpu", 8000),
      {{"a", "gpu", 14000}},
      // a runs 6 GPUs of b's idle guarantee: b can start only 2 without preemption.
      {{"a", "gpu", 2000}, {"b", "gpu", 2000}},
      {{"a", "gpu", 6000}, {"b", "gpu", 0}, {"t", "gpu", 0}},
      {{"b", "gpu", 2000, kNone, ""}, {"b", "gpu", 3000, kCapacity, kCluster, 14000, 16000}},
  });
  cases.push_back({
      "GuaranteeInUseIsNotBorrowable",
      TreeBuilder()
          .Tenant("t")
          .Guaranteed("gpu", 16000)
          .Queue("a", "t")
          .Guaranteed("gpu", 8000)
          .Queue("b", "t")
          .Guaranteed("gpu", 8000),
      {{"a", "gpu", 8000}},
      {{"b", "gpu", 8000}, {"a", "gpu", 8000}},
      {{"a", "gpu", 0}},
      {{"b", "gpu", 8001, kCapacity, kCluster, 8000, 16000}},
  });
  cases.push_back({
      "MaxBindsAtTheTenant",
      TreeBuilder()
          .Tenant("t1")
          .Guaranteed("gpu", 8000)
          .Max("gpu", 10000)
          .Queue("a", "t1")
          .Tenant("t2")
          .Guaranteed("gpu", 8000)
          .Queue("b", "t2"),
      {{"b", "gpu", 4000}},
      {{"a", "gpu", 10000}, {"t1", "gpu", 10000}, {"b", "gpu", 16000 - 4000}},
      {{"t2", "gpu", 0}},
      {{"a", "gpu", 10000, kNone, ""}, {"a", "gpu", 10001, kMax, "t1", 0, 10000}},
  });
  cases.push_back({
      "MaxBindsAtAnInnerQueueWithUsageOfASibling",
      TreeBuilder().Tenant("t").Queue("p", "t").Max("gpu", 10000).Queue("x", "p").Queue("y", "p"),
      {{"y", "gpu", 6000}},
      {{"x", "gpu", 4000}, {"p", "gpu", 4000}},
      {},
      {{"x", "gpu", 5000, kMax, "p", 6000, 10000}},
  });
  cases.push_back({
      "LendingLimitHoldsBackPartOfTheIdleGuarantee",
      TreeBuilder()
          .Tenant("t")
          .Guaranteed("gpu", 16000)
          .Queue("a", "t")
          .Guaranteed("gpu", 8000)
          .LendingLimit("gpu", 2000)
          .Queue("b", "t")
          .Guaranteed("gpu", 8000),
      {},
      // b: its 8 plus the 2 a may lend; a: everything (its 6 kept back plus the pool of 10).
      {{"b", "gpu", 10000}, {"a", "gpu", 16000}},
      {},
      {{"b", "gpu", 10000, kNone, ""}, {"b", "gpu", 10001, kBorrow, "b", 0, 10000}},
  });
  cases.push_back({
      "LentCapacityInUseLeavesTheLenderItsLocalPart",
      TreeBuilder()
          .Tenant("t")
          .Guaranteed("gpu", 16000)
          .Queue("a", "t")
          .Guaranteed("gpu", 8000)
          .LendingLimit("gpu", 2000)
          .Queue("b", "t")
          .Guaranteed("gpu", 8000),
      {{"b", "gpu", 10000}},
      {{"a", "gpu", 6000}, {"b", "gpu", 0}},
      {{"b", "gpu", 2000}, {"a", "gpu", 0}},
      {{"a", "gpu", 6000, kNone, ""}, {"a", "gpu", 7000, kCapacity, kCluster, 10000, 16000}},
  });
  cases.push_back({
      "LendingLimitOnAModelKey",
      TreeBuilder()
          .Tenant("t")
          .Queue("a", "t")
          .Guaranteed("gpu:H100", 6000)
          .LendingLimit("gpu:H100", 1000)
          .Queue("b", "t"),
      {{"b", "gpu:H100", 2000}},
      // Of the 8 H100, a keeps 5 back: b may use 3, and uses 2.
      {{"b", "gpu:H100", 1000}, {"a", "gpu:H100", 6000}, {"b", "gpu:A100", 8000}},
      {{"b", "gpu:H100", 0}},
      {{"b", "gpu:H100", 2000, kBorrow, "b", 2000, 1000},
       {"b", "gpu:A100", 8000, kNone, ""},
       {"a", "gpu:H100", 6000, kNone, ""},
       {"a", "gpu:H100", 6001, kCapacity, kCluster, 2000, 8000}},
  });
  cases.push_back({
      "LocalQuotaDoesNotBypassAnAncestorsMax",
      TreeBuilder()
          .Tenant("t")
          .Guaranteed("gpu", 10000)
          .Max("gpu", 10000)
          .Queue("a", "t")
          .Guaranteed("gpu", 6000)
          .LendingLimit("gpu", 0)
          .Queue("b", "t")
          .Guaranteed("gpu", 4000),
      {{"b", "gpu", 4000}},
      // a keeps its 6 to itself, but t may not go above 10: 6 more in all, not 6 plus t's pool.
      // (b may borrow those 6 from the cluster too: t's max is the tighter promise.)
      {{"a", "gpu", 6000}, {"b", "gpu", 6000}, {"t", "gpu", 6000}},
      {},
      {{"a", "gpu", 6000, kNone, ""}, {"a", "gpu", 7000, kMax, "t", 4000, 10000}},
  });
  cases.push_back({
      "LendingLimitZeroLendsNothing",
      TreeBuilder()
          .Tenant("t")
          .Guaranteed("gpu", 16000)
          .Queue("a", "t")
          .Guaranteed("gpu", 8000)
          .LendingLimit("gpu", 0)
          .Queue("b", "t")
          .Guaranteed("gpu", 8000),
      {},
      {{"b", "gpu", 8000}, {"a", "gpu", 16000}},
      {},
      {{"b", "gpu", 8001, kBorrow, "b", 0, 8000}},
  });
  cases.push_back({
      "TenantLendingLimitHoldsBackItsWholeSubtree",
      TreeBuilder()
          .Tenant("t1")
          .Guaranteed("gpu", 8000)
          .LendingLimit("gpu", 1000)
          .Queue("a", "t1")
          .Tenant("t2")
          .Guaranteed("gpu", 8000)
          .Queue("b", "t2"),
      {{"a", "gpu", 1000}},
      // t1 keeps 7 for itself; b gets its 8 and the 1 t1 lends.
      {{"b", "gpu", 9000}, {"a", "gpu", 15000}},
      {{"t1", "gpu", 0}},
      {{"b", "gpu", 9001, kBorrow, "b", 0, 9000}},
  });
  cases.push_back({
      "PerModelKeys",
      TreeBuilder()
          .Tenant("t")
          .Queue("a", "t")
          .Guaranteed("gpu:A100", 4000)
          .Max("gpu:A100", 6000)
          .Queue("b", "t")
          .Guaranteed("gpu:A100", 4000),
      {{"b", "gpu:A100", 2000}},
      {{"a", "gpu:A100", 6000}, {"a", "gpu:H100", 8000}, {"a", "gpu", 14000}},
      {{"b", "gpu:A100", 0}, {"b", "gpu", 0}},
      {{"a", "gpu:A100", 6000, kNone, ""},
       {"a", "gpu:A100", 7000, kMax, "a", 0, 6000},
       {"a", "gpu:H100", 8000, kNone, ""},
       {"b", "gpu:A100", 6000, kNone, ""},
       {"b", "gpu:A100", 6001, kCapacity, kCluster, 2000, 8000}},
  });
  cases.push_back({
      "PerModelBorrowing",
      TreeBuilder()
          .Tenant("t")
          .Queue("a", "t")
          .Guaranteed("gpu:A100", 4000)
          .Queue("b", "t")
          .Guaranteed("gpu:A100", 4000),
      {{"a", "gpu:A100", 6000}},
      {{"b", "gpu:A100", 2000}},
      // Borrowing is counted on the dimension a queue configures, not on "gpu".
      {{"a", "gpu:A100", 2000}, {"a", "gpu", 0}, {"a", "gpu:H100", 0}},
      {{"b", "gpu:A100", 3000, kCapacity, kCluster, 6000, 8000},
       {"b", "gpu:H100", 8000, kNone, ""}},
  });
  cases.push_back({
      "MoreThanTheClusterHasFree",
      TreeBuilder().Tenant("t").Queue("a", "t"),
      {},
      {{"a", "gpu:A100", 8000}},
      {},
      {{"a", "gpu:A100", 9000, kCapacity, kCluster, 0, 8000}},
  });
  cases.push_back({
      "UnconfiguredDimensionsAreTransparent",
      TreeBuilder().Tenant("t").Guaranteed("gpu", 8000).Queue("a", "t"),
      {{"a", "cpu", 200000}, {"a", "gpu", 10000}},
      {{"a", "cpu", 56000}, {"a", "memory", 2 * 1024 * 1024}, {"a", "gpu", 6000}},
      // a configures nothing, so it borrows nothing; t configures gpu only.
      {{"a", "gpu", 0}, {"a", "cpu", 0}, {"t", "gpu", 2000}, {"t", "cpu", 0}},
      {{"a", "cpu", 56000, kNone, ""}, {"a", "cpu", 56001, kCapacity, kCluster, 200000, 256000}},
  });
  return cases;
}

class QuotaArithmeticTest : public ::testing::TestWithParam<QuotaCase> {};

TEST_P(QuotaArithmeticTest, AvailableBorrowedAndCheck) {
  const QuotaCase& c = GetParam();
  const QuotaTree tree = c.tree.Build(kModels);
  QuotaState state(tree, Capacity());
  for (const Use& u : c.uses) state.Add(QueueNamed(tree, u.leaf), Request(tree, u.key, u.amount));

  for (const AvailableIs& e : c.available) {
    EXPECT_EQ(state.Available(QueueNamed(tree, e.node), DimOf(tree, e.key)), e.available)
        << "Available(" << e.node << ", " << e.key << ")";
  }
  for (const BorrowedIs& e : c.borrowed) {
    EXPECT_EQ(state.Borrowed(QueueNamed(tree, e.node), DimOf(tree, e.key)), e.borrowed)
        << "Borrowed(" << e.node << ", " << e.key << ")";
  }
  for (const CheckIs& e : c.checks) {
    SCOPED_TRACE("Check(" + e.leaf + ", " + e.key + " " + std::to_string(e.request) + ")");
    const QuotaFailure f = state.Check(QueueNamed(tree, e.leaf), Request(tree, e.key, e.request));
    EXPECT_EQ(f.kind, e.kind);
    if (e.kind == kNone) continue;
    EXPECT_EQ(tree.node(f.node).name, e.binding);
    EXPECT_EQ(tree.DimName(f.dim), e.key);
    EXPECT_EQ(f.used, e.used);
    EXPECT_EQ(f.limit, e.limit);
    EXPECT_EQ(f.requested, e.request);
  }
}

TEST_P(QuotaArithmeticTest, RemovingEveryUseRestoresTheEmptyState) {
  const QuotaCase& c = GetParam();
  const QuotaTree tree = c.tree.Build(kModels);
  const QuotaState empty(tree, Capacity());
  QuotaState state(tree, Capacity());
  for (const Use& u : c.uses) state.Add(QueueNamed(tree, u.leaf), Request(tree, u.key, u.amount));
  for (auto it = c.uses.rbegin(); it != c.uses.rend(); ++it) {
    state.Remove(QueueNamed(tree, it->leaf), Request(tree, it->key, it->amount));
  }
  for (uint32_t n = 0; n < tree.size(); ++n) {
    EXPECT_EQ(state.usage(QueueId(n)), QuotaVec()) << tree.node(QueueId(n)).name;
    for (int d = 0; d < tree.num_dims(); ++d) {
      EXPECT_EQ(state.Available(QueueId(n), d), empty.Available(QueueId(n), d))
          << tree.node(QueueId(n)).name << " " << tree.DimName(d);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, QuotaArithmeticTest, ::testing::ValuesIn(QuotaCases()), CaseName);

// Check() and Available() agree: a request fits exactly when it is within avail on every
// dimension, and admitting what fits never takes an ancestor past its max.
TEST(QuotaStateTest, CheckAgreesWithAvailableAndKeepsEveryMax) {
  const QuotaTree tree = TreeBuilder()
                             .Tenant("t1")
                             .Guaranteed("gpu", 6000)
                             .Max("gpu", 9000)
                             .Queue("a", "t1")
                             .Guaranteed("gpu", 4000)
                             .LendingLimit("gpu", 1000)
                             .Queue("b", "t1")
                             .Guaranteed("gpu", 2000)
                             .Max("gpu", 5000)
                             .Tenant("t2")
                             .Guaranteed("gpu:H100", 6000)
                             .Queue("c", "t2")
                             .Max("gpu:H100", 7000)
                             .Build(kModels);
  const std::vector<QueueId> leaves = {QueueNamed(tree, "a"), QueueNamed(tree, "b"),
                                       QueueNamed(tree, "c")};
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Rng rng(seed);
    QuotaState state(tree, Capacity());
    for (int step = 0; step < 40; ++step) {
      const QueueId leaf = leaves[rng.Uniform(leaves.size())];
      const int model = static_cast<int>(rng.Uniform(2));
      QuotaVec r;
      r[kDimGpu] = 1000 * static_cast<int64_t>(1 + rng.Uniform(4));
      r[kFirstModelDim + model] = r[kDimGpu];
      bool within = true;
      for (int d = 0; d < tree.num_dims(); ++d) {
        if (r[d] > 0) within = within && r[d] <= state.Available(leaf, d);
      }
      const QuotaFailure f = state.Check(leaf, r);
      ASSERT_EQ(f.ok(), within) << "step " << step;
      if (!f.ok()) continue;
      state.Add(leaf, r);
      for (uint32_t n = 0; n < tree.size(); ++n) {
        for (int d = 0; d < tree.num_dims(); ++d) {
          ASSERT_LE(state.usage(QueueId(n))[d], tree.node(QueueId(n)).max[d]);
          ASSERT_GE(state.Available(QuotaTree::kRoot, d), 0) << tree.DimName(d);
        }
      }
    }
  }
}

// The incremental pool accounting of Add/Remove matches a state built from the net usage.
TEST(QuotaStateTest, IncrementalAccountingMatchesAFreshState) {
  const QuotaTree tree = TreeBuilder()
                             .Tenant("t1")
                             .Guaranteed("gpu", 8000)
                             .LendingLimit("gpu", 3000)
                             .Queue("p", "t1")
                             .Guaranteed("gpu", 6000)
                             .LendingLimit("gpu", 2000)
                             .Queue("x", "p")
                             .Guaranteed("gpu", 4000)
                             .LendingLimit("gpu", 1000)
                             .Queue("y", "p")
                             .Queue("z", "t1")
                             .Guaranteed("gpu", 2000)
                             .Tenant("t2")
                             .Guaranteed("gpu", 4000)
                             .Queue("w", "t2")
                             .Max("gpu", 12000)
                             .Build(kModels);
  const std::vector<QueueId> leaves = {QueueNamed(tree, "x"), QueueNamed(tree, "y"),
                                       QueueNamed(tree, "z"), QueueNamed(tree, "w")};
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Rng rng(seed);
    QuotaState state(tree, Capacity());
    std::vector<std::pair<QueueId, QuotaVec>> live;
    for (int step = 0; step < 60; ++step) {
      if (!live.empty() && rng.Uniform(3) == 0) {
        const size_t i = rng.Uniform(live.size());
        state.Remove(live[i].first, live[i].second);
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        const QueueId leaf = leaves[rng.Uniform(leaves.size())];
        QuotaVec r;
        r[kDimGpu] = 500 * static_cast<int64_t>(1 + rng.Uniform(6));
        r[kFirstModelDim] = r[kDimGpu];
        r[kDimCpu] = 1000 * static_cast<int64_t>(rng.Uniform(8));
        state.Add(leaf, r);
        live.emplace_back(leaf, r);
      }
      QuotaState fresh(tree, Capacity());
      for (const auto& [leaf, r] : live) fresh.Add(leaf, r);
      for (uint32_t n = 0; n < tree.size(); ++n) {
        ASSERT_EQ(state.usage(QueueId(n)), fresh.usage(QueueId(n)));
        for (int d = 0; d < tree.num_dims(); ++d) {
          ASSERT_EQ(state.Available(QueueId(n), d), fresh.Available(QueueId(n), d))
              << "step " << step << " " << tree.node(QueueId(n)).name << " " << tree.DimName(d);
          ASSERT_EQ(state.Borrowed(QueueId(n), d), fresh.Borrowed(QueueId(n), d));
        }
      }
    }
  }
}

TEST(QuotaTreeTest, BuildsParentsFirstWithTransparentGuarantees) {
  // The queue is listed before its tenant: Build places parents first regardless.
  const QuotaTree tree = TreeBuilder()
                             .Queue("train", "vision")
                             .Guaranteed("gpu", 6000)
                             .Max("gpu", 12000)
                             .AllowedTypes({"training", "fine-tuning"})
                             .Queue("eval", "vision")
                             .Guaranteed("gpu", 2000)
                             .Weight(2500)
                             .Tenant("vision")
                             .Build(kModels);
  ASSERT_EQ(tree.size(), 4u);
  const QueueId vision = QueueNamed(tree, "vision");
  const QueueId train = QueueNamed(tree, "train");
  const QueueId eval = QueueNamed(tree, "eval");
  EXPECT_LT(vision, train);
  EXPECT_LT(vision, eval);
  const QuotaNode& v = tree.node(vision);
  EXPECT_TRUE(v.is_tenant);
  EXPECT_EQ(v.depth, 1);
  EXPECT_EQ(v.parent, QuotaTree::kRoot);
  EXPECT_EQ(v.tenant, vision);
  EXPECT_THAT(v.children, ::testing::UnorderedElementsAre(train, eval));
  // vision configures nothing: its guarantee is its children's, with no max.
  EXPECT_FALSE(v.configured[kDimGpu]);
  EXPECT_EQ(v.guaranteed[kDimGpu], 8000);
  EXPECT_EQ(v.max[kDimGpu], kUnlimited);
  EXPECT_EQ(v.own[kDimGpu], 0);
  const QuotaNode& t = tree.node(train);
  EXPECT_EQ(t.depth, 2);
  EXPECT_EQ(t.tenant, vision);
  EXPECT_TRUE(t.is_leaf());
  EXPECT_TRUE(t.configured[kDimGpu]);
  EXPECT_FALSE(t.configured[kDimCpu]);
  EXPECT_EQ(t.max[kDimGpu], 12000);
  EXPECT_EQ(t.allowed_types_mask, (1u << static_cast<unsigned>(JobType::kTraining)) |
                                      (1u << static_cast<unsigned>(JobType::kFineTuning)));
  EXPECT_EQ(tree.node(eval).allowed_types_mask, 0u);
  EXPECT_DOUBLE_EQ(tree.node(eval).weight, 2.5);
  EXPECT_EQ(tree.num_dims(), kFirstModelDim + 2);
  EXPECT_EQ(tree.DimName(kDimGpu), "gpu");
  EXPECT_EQ(tree.DimName(kFirstModelDim + 1), "gpu:H100");
  EXPECT_EQ(tree.FormatAmount(kDimGpu, 2500), "2.5");
  EXPECT_EQ(tree.FormatAmount(kDimMemory, 2048), "2048 MiB");
  EXPECT_EQ(tree.FormatAmount(kDimGpu, kUnlimited), "unlimited");
  QueueId missing;
  EXPECT_FALSE(tree.Find("nope", &missing));
}

struct BuildErrorCase {
  std::string name;
  TreeBuilder tree;
  std::string field;
  std::string message;  // a part of the message
};

void PrintTo(const BuildErrorCase& c, std::ostream* os) { *os << c.name; }

std::vector<BuildErrorCase> BuildErrorCases() {
  std::vector<BuildErrorCase> cases;
  cases.push_back({"ChildrenGuaranteeMoreThanTheParent",
                   TreeBuilder()
                       .Tenant("t")
                       .Guaranteed("gpu", 8000)
                       .Queue("a", "t")
                       .Guaranteed("gpu", 6000)
                       .Queue("b", "t")
                       .Guaranteed("gpu", 4000),
                   "queues[0].quota.gpu.guaranteed",
                   "the children of 't' guarantee 10 in all, more than its own 8"});
  cases.push_back({"GrandchildrenGuaranteeMoreThanAnInnerQueue",
                   TreeBuilder()
                       .Tenant("t")
                       .Queue("p", "t")
                       .Guaranteed("gpu:A100", 4000)
                       .Queue("x", "p")
                       .Guaranteed("gpu:A100", 3000)
                       .Queue("y", "p")
                       .Guaranteed("gpu:A100", 2000),
                   "queues[1].quota.gpu:A100.guaranteed",
                   "the children of 'p' guarantee 5 in all, more than its own 4"});
  cases.push_back(
      {"MaxBelowGuaranteed",
       TreeBuilder().Tenant("t").Queue("a", "t").Guaranteed("gpu", 8000).Max("gpu", 4000),
       "queues[1].quota.gpu.max", "max (4) is below guaranteed (8)"});
  cases.push_back(
      {"MaxBelowGuaranteedMemory",
       TreeBuilder().Tenant("t").Guaranteed("memory", 2048).Max("memory", 1024).Queue("a", "t"),
       "queues[0].quota.memory.max", "max (1024 MiB) is below guaranteed (2048 MiB)"});
  cases.push_back({"UnknownResourceKey", TreeBuilder().Tenant("t").Queue("a", "t").Max("tpu", 1),
                   "queues[1].quota.tpu", "unknown resource 'tpu'"});
  cases.push_back({"UnknownGpuModelKey",
                   TreeBuilder().Tenant("t").Queue("a", "t").Guaranteed("gpu:V100", 1000),
                   "queues[1].quota.gpu:V100", "unknown resource 'gpu:V100'"});
  cases.push_back({"NegativeGuarantee",
                   TreeBuilder().Tenant("t").Queue("a", "t").Guaranteed("gpu", -1),
                   "queues[1].quota.gpu.guaranteed", "must be >= 0, got -1"});
  cases.push_back({"NegativeLendingLimit",
                   TreeBuilder().Tenant("t").Queue("a", "t").LendingLimit("cpu", -5),
                   "queues[1].quota.cpu.lending_limit", "must be >= 0, got -5"});
  cases.push_back({"UnknownParent", TreeBuilder().Tenant("t").Queue("a", "nope"),
                   "queues[1].parent", "parent 'nope' of 'a' does not exist"});
  cases.push_back({"ParentCycle", TreeBuilder().Tenant("t").Queue("a", "b").Queue("b", "a"),
                   "queues[1].parent", "forms a cycle"});
  cases.push_back({"DuplicateName", TreeBuilder().Tenant("t").Queue("a", "t").Queue("a", "t"),
                   "queues[2].name", "duplicate name 'a'"});
  cases.push_back({"BadName", TreeBuilder().Tenant("t").Queue("Vision_Train", "t"),
                   "queues[1].name", "'Vision_Train' is not a valid name"});
  cases.push_back({"EmptyName", TreeBuilder().Tenant(""), "queues[0].name", "is not a valid name"});
  cases.push_back({"UnknownJobTypeInAllowedTypes",
                   TreeBuilder().Tenant("t").Queue("a", "t").AllowedTypes({"training", "traning"}),
                   "queues[1].allowed_types[1]", "unknown job type 'traning'"});
  cases.push_back({"ZeroWeight", TreeBuilder().Tenant("t").Queue("a", "t").Weight(0),
                   "queues[1].weight", "must be > 0, got 0"});
  cases.push_back({"NegativeHalfLife", TreeBuilder().Tenant("t").Queue("a", "t").HalfLife(-1),
                   "queues[1].fair_share.half_life_seconds", "must be >= 0"});
  cases.push_back({"NegativeDefaultWalltime",
                   TreeBuilder().Tenant("t").Queue("a", "t").DefaultWalltime(-60),
                   "queues[1].default_walltime_seconds", "must be >= 0"});
  cases.push_back({"QueueWithoutParent", TreeBuilder().Tenant("t").Queue("a", ""),
                   "queues[1].parent", "a queue needs a parent"});
  {
    TreeBuilder b;
    b.Tenant("t");
    b.Last().parent = "x";
    cases.push_back({"TenantWithParent", b, "queues[0].parent", "a tenant has no parent"});
  }
  return cases;
}

class QuotaTreeBuildErrorTest : public ::testing::TestWithParam<BuildErrorCase> {};

TEST_P(QuotaTreeBuildErrorTest, NamesTheField) {
  const BuildErrorCase& c = GetParam();
  const Result<QuotaTree> t = c.tree.TryBuild(kModels);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(t.status().field(), c.field);
  EXPECT_THAT(t.status().message(), HasSubstr(c.message));
}

INSTANTIATE_TEST_SUITE_P(Cases, QuotaTreeBuildErrorTest, ::testing::ValuesIn(BuildErrorCases()),
                         [](const auto& p) { return p.param.name; });

// A queue that lends within a reclaim deadline: its idle guarantee goes only to jobs whose grace
// period is within it; its own jobs and everything else in the pools are unaffected.
TEST(QuotaStateTest, ALendingDeadlineKeepsSlowToStopJobsOffTheIdleGuarantee) {
  const QuotaTree tree = TreeBuilder()
                             .Tenant("ml")
                             .Queue("serving", "ml")
                             .Guaranteed("gpu", 12000)
                             .Queue("training", "ml")
                             .Guaranteed("gpu", 2000)
                             .Build(kModels);
  const QueueId serving = QueueNamed(tree, "serving");
  const QueueId training = QueueNamed(tree, "training");
  QuotaState state(tree, Capacity());  // 16 GPUs: 12 serving's, 2 training's, 2 nobody's
  state.SetLendGraceLimit(serving, SecondsToMs(10));
  EXPECT_EQ(state.LendGraceLimit(serving), SecondsToMs(10));
  QuotaVec r;
  r[kDimGpu] = 8000;
  // Within the deadline: it borrows serving's idle GPUs as any job would.
  EXPECT_TRUE(state.Check(training, r, SecondsToMs(5)).ok());
  // A 30 s grace: only its own 2 and the 2 nobody guarantees.
  QuotaFailure f = state.Check(training, r, SecondsToMs(30));
  EXPECT_EQ(f.kind, QuotaFailure::Kind::kLendDeadline);
  EXPECT_EQ(f.node, serving);
  EXPECT_EQ(f.limit, SecondsToMs(10));
  r[kDimGpu] = 4000;
  EXPECT_TRUE(state.Check(training, r, SecondsToMs(30)).ok());
  // The service's own queue is not limited by its own deadline.
  r[kDimGpu] = 12000;
  EXPECT_TRUE(state.Check(serving, r, SecondsToMs(300)).ok());
  // Once serving uses its guarantee there is nothing of it to hold back.
  state.Add(serving, r);
  r[kDimGpu] = 4000;
  EXPECT_TRUE(state.Check(training, r, SecondsToMs(30)).ok());
  // The limit lifted: as before.
  state.SetLendGraceLimit(serving, 0);
  EXPECT_EQ(state.LendGraceLimit(serving), 0);
}

}  // namespace
}  // namespace arbiter::core
