#include "core/snapshot.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/rng.h"
#include "testing/builders.h"
#include "testing/snapshot_state.h"

namespace arbiter::core {
namespace {

using ::arbiter::testing::CaptureSnapshot;
using ::arbiter::testing::ClusterBuilder;
using ::arbiter::testing::DiffSnapshots;
using ::arbiter::testing::Members;
using ::arbiter::testing::QueueNamed;
using ::arbiter::testing::SnapshotState;
using ::arbiter::testing::TreeBuilder;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

// n0: 8 A100 in two NVLink domains; n1: cordoned; n2: 4 A100 and 4 H100; n3: 2 A100, one
// unhealthy; n4: no GPUs.
ClusterBuilder MixedCluster() {
  ClusterBuilder b;
  b.Node("n0")
      .Gpus(4, "A100")
      .Domain(0)
      .Gpus(4, "A100")
      .Domain(1)
      .Node("n1")
      .Gpus(8, "A100")
      .Cordoned()
      .Node("n2")
      .Gpus(4, "A100")
      .Gpus(4, "H100")
      .Node("n3")
      .Gpus(2, "A100")
      .Unhealthy(1)
      .Node("n4")
      .Cpus(16);
  return b;
}

TreeBuilder SmallTree() {
  return TreeBuilder()
      .Tenant("t")
      .Guaranteed("gpu", 8000)
      .Queue("a", "t")
      .Guaranteed("gpu", 4000)
      .LendingLimit("gpu", 1000)
      .Queue("b", "t")
      .Guaranteed("gpu", 4000)
      .Max("gpu", 10000);
}

struct Bed {
  Bed()
      : cluster(MixedCluster().Build()),
        tree(SmallTree().Build(cluster.models())),
        snap(cluster, tree) {}
  Bed(const Bed&) = delete;
  Bed& operator=(const Bed&) = delete;

  GpuModelId a100() const { return cluster.FindModel("A100"); }
  GpuModelId h100() const { return cluster.FindModel("H100"); }
  QueueId queue(const std::string& name) const { return QueueNamed(tree, name); }

  Cluster cluster;
  QuotaTree tree;
  Snapshot snap;
};

TaskPlacement Task(uint32_t node, std::vector<GpuShare> gpus, int64_t cpu = 1000,
                   int64_t mem = 1024) {
  TaskPlacement t;
  t.node = NodeId(node);
  t.gpus = std::move(gpus);
  t.cpu_milli = cpu;
  t.memory_mib = mem;
  return t;
}

GpuShare Whole(uint16_t slot) { return {slot, 1000, 80 * 1024}; }

QuotaVec Gpu(int64_t milli, GpuModelId model) {
  QuotaVec q;
  q[kDimGpu] = milli;
  q[ModelDim(model)] = milli;
  return q;
}

TEST(SnapshotTest, IndexesNodesByFullyFreeGpus) {
  Bed bed;
  const Snapshot& s = bed.snap;
  EXPECT_THAT(Members(s.schedulable_nodes()), ElementsAre(0, 2, 3, 4));
  EXPECT_THAT(Members(s.nodes_with_free(bed.a100(), 8)), ElementsAre(0));
  EXPECT_THAT(Members(s.nodes_with_free(bed.a100(), 4)), ElementsAre(2));
  EXPECT_THAT(Members(s.nodes_with_free(bed.a100(), 1)), ElementsAre(3));  // one GPU is unhealthy
  EXPECT_THAT(Members(s.nodes_with_free(bed.h100(), 4)), ElementsAre(2));
  for (int k = 0; k <= 8; ++k) {
    // The cordoned node is in no bucket; the CPU-only node has no model.
    for (GpuModelId m : {bed.a100(), bed.h100()}) {
      EXPECT_FALSE(s.nodes_with_free(m, k).Contains(1));
      EXPECT_FALSE(s.nodes_with_free(m, k).Contains(4));
    }
  }
  EXPECT_EQ(s.max_free_bucket(bed.a100()), 8);
  EXPECT_EQ(s.max_free_bucket(bed.h100()), 4);
  EXPECT_EQ(s.full_free_gpus(NodeId(1), bed.a100()), 0);
  EXPECT_EQ(s.full_free_gpus(NodeId(2), bed.h100()), 4);
  EXPECT_EQ(s.full_free_gpus(NodeId(4), bed.a100()), 0);
  const uint32_t n3 = bed.cluster.node(NodeId(3)).gpu_begin;
  EXPECT_TRUE(s.gpu_usable(n3));
  EXPECT_FALSE(s.gpu_usable(n3 + 1));
  EXPECT_FALSE(s.gpu_usable(bed.cluster.node(NodeId(1)).gpu_begin));
  EXPECT_EQ(s.free_cpu(NodeId(4)), 16000);
}

TEST(SnapshotTest, AllocateAndReleaseMoveNodesBetweenBuckets) {
  Bed bed;
  Snapshot& s = bed.snap;
  const TaskPlacement two = Task(0, {Whole(0), Whole(1)});
  const TaskPlacement half = Task(0, {{2, 500, 1024}});
  s.Allocate(two);
  EXPECT_THAT(Members(s.nodes_with_free(bed.a100(), 6)), ElementsAre(0));
  EXPECT_THAT(Members(s.nodes_with_free(bed.a100(), 8)), IsEmpty());
  EXPECT_THAT(Members(s.nodes_with_partial(bed.a100())), IsEmpty());
  s.Allocate(half);
  EXPECT_THAT(Members(s.nodes_with_free(bed.a100(), 5)), ElementsAre(0));
  EXPECT_THAT(Members(s.nodes_with_partial(bed.a100())), ElementsAre(0));
  EXPECT_EQ(s.gpu_free_milli(2), 500);
  EXPECT_EQ(s.gpu_free_memory(2), 80 * 1024 - 1024);
  EXPECT_EQ(s.free_cpu(NodeId(0)), 64000 - 2000);
  EXPECT_EQ(s.max_free_bucket(bed.a100()), 5);  // n2 has 4, n3 has 1
  // A second half fills the GPU: no longer partial.
  s.Allocate(half);
  EXPECT_EQ(s.gpu_free_milli(2), 0);
  EXPECT_THAT(Members(s.nodes_with_partial(bed.a100())), IsEmpty());
  s.Release(half);
  s.Release(half);
  s.Release(two);
  EXPECT_THAT(Members(s.nodes_with_free(bed.a100(), 8)), ElementsAre(0));
  EXPECT_EQ(s.free_cpu(NodeId(0)), 64000);
  // H100 on the mixed node is indexed apart from its A100s.
  s.Allocate(Task(2, {Whole(4)}));
  EXPECT_EQ(s.full_free_gpus(NodeId(2), bed.h100()), 3);
  EXPECT_EQ(s.full_free_gpus(NodeId(2), bed.a100()), 4);
}

// A mix of every kind of change: whole and fractional GPUs, a CPU-only task, the release of an
// allocation made before the Txn, charges and a refund.
void MutateEverything(Bed& bed, const TaskPlacement& existing, const QuotaVec& existing_charge) {
  Snapshot& s = bed.snap;
  s.Allocate(Task(0, {Whole(4), Whole(5), Whole(6), Whole(7)}, 8000, 65536));
  s.Allocate(Task(2, {{5, 250, 10240}}));
  s.Allocate(Task(4, {}, 4000, 2048));
  s.Allocate(Task(3, {Whole(0)}));
  s.Release(existing);
  s.ChargeQuota(bed.queue("a"), Gpu(5000, bed.a100()));
  s.ChargeQuota(bed.queue("b"), Gpu(1000, bed.h100()));
  s.RefundQuota(bed.queue("b"), existing_charge);
}

TEST(SnapshotTxnTest, UncommittedTxnRestoresEverything) {
  Bed bed;
  Snapshot& s = bed.snap;
  const TaskPlacement existing = Task(2, {Whole(0), Whole(1)}, 2000, 4096);
  const QuotaVec existing_charge = Gpu(2000, bed.a100());
  s.Allocate(existing);
  s.ChargeQuota(bed.queue("b"), existing_charge);
  const SnapshotState before = CaptureSnapshot(s);
  const uint64_t release_before = s.release_version();
  uint64_t release_inside = 0;
  {
    Snapshot::Txn txn(s);
    MutateEverything(bed, existing, existing_charge);
    const SnapshotState inside = CaptureSnapshot(s);
    // Every field the test compares did change, so the comparison below means something.
    EXPECT_NE(inside.free_cpu, before.free_cpu);
    EXPECT_NE(inside.free_memory, before.free_memory);
    EXPECT_NE(inside.gpu_free_milli, before.gpu_free_milli);
    EXPECT_NE(inside.gpu_free_memory, before.gpu_free_memory);
    EXPECT_NE(inside.buckets, before.buckets);
    EXPECT_NE(inside.partial, before.partial);
    EXPECT_NE(inside.usage, before.usage);
    EXPECT_NE(inside.available, before.available);
    release_inside = s.release_version();
    EXPECT_GT(release_inside, release_before);  // the Release and the refund freed capacity
  }
  const SnapshotState after = CaptureSnapshot(s);
  EXPECT_TRUE(after == before) << DiffSnapshots(before, after);
  // The state is back to what it was at the Txn's start, and so is release_version: failures
  // cached before the Txn stay valid.
  EXPECT_EQ(s.release_version(), release_before);
}

TEST(SnapshotTxnTest, CommitKeepsTheChanges) {
  Bed bed;
  Snapshot& s = bed.snap;
  const TaskPlacement existing = Task(2, {Whole(0), Whole(1)}, 2000, 4096);
  const QuotaVec existing_charge = Gpu(2000, bed.a100());
  s.Allocate(existing);
  s.ChargeQuota(bed.queue("b"), existing_charge);

  Bed reference;
  reference.snap.Allocate(existing);
  reference.snap.ChargeQuota(reference.queue("b"), existing_charge);
  MutateEverything(reference, existing, existing_charge);
  {
    Snapshot::Txn txn(s);
    MutateEverything(bed, existing, existing_charge);
    txn.Commit();
  }
  SnapshotState want = CaptureSnapshot(reference.snap);
  SnapshotState got = CaptureSnapshot(s);
  EXPECT_TRUE(got == want) << DiffSnapshots(want, got);
  // A later Txn that is not committed undoes only its own changes.
  {
    Snapshot::Txn txn(s);
    s.Allocate(Task(0, {Whole(0)}));
    s.ChargeQuota(bed.queue("a"), Gpu(1000, bed.a100()));
  }
  got = CaptureSnapshot(s);
  EXPECT_TRUE(got == want) << DiffSnapshots(want, got);
}

TEST(SnapshotTxnTest, NestedTxns) {
  const TaskPlacement outer_task = Task(0, {Whole(0), Whole(1)});
  const TaskPlacement inner_task = Task(0, {Whole(4)});
  const TaskPlacement dropped_task = Task(2, {{0, 300, 0}});
  Bed bed;
  Snapshot& s = bed.snap;
  const SnapshotState empty = CaptureSnapshot(s);

  // The outer Txn is not committed: what an inner Txn committed goes too.
  {
    Snapshot::Txn outer(s);
    s.Allocate(outer_task);
    {
      Snapshot::Txn inner(s);
      s.Allocate(inner_task);
      s.ChargeQuota(bed.queue("a"), Gpu(1000, bed.a100()));
      inner.Commit();
    }
    EXPECT_EQ(s.gpu_free_milli(4), 0);
  }
  SnapshotState got = CaptureSnapshot(s);
  EXPECT_TRUE(got == empty) << DiffSnapshots(empty, got);

  // The outer Txn commits: the committed inner Txn stays, the other inner Txn is undone.
  {
    Snapshot::Txn outer(s);
    s.Allocate(outer_task);
    {
      Snapshot::Txn inner(s);
      s.Allocate(inner_task);
      inner.Commit();
    }
    {
      Snapshot::Txn dropped(s);
      s.Allocate(dropped_task);
      s.ChargeQuota(bed.queue("b"), Gpu(1000, bed.a100()));
    }
    outer.Commit();
  }
  Bed reference;
  reference.snap.Allocate(outer_task);
  reference.snap.Allocate(inner_task);
  const SnapshotState want = CaptureSnapshot(reference.snap);
  got = CaptureSnapshot(s);
  EXPECT_TRUE(got == want) << DiffSnapshots(want, got);
}

// Random nested Txns with random commits: the snapshot always equals one rebuilt from the changes
// that survived.
class RandomTxnRun {
 public:
  explicit RandomTxnRun(uint64_t seed) : rng_(seed) {}

  void Run(Bed& bed) {
    Frame(bed, 0);
    Bed reference;
    for (const TaskPlacement& t : live_tasks_) reference.snap.Allocate(t);
    for (const auto& [q, r] : live_charges_) reference.snap.ChargeQuota(q, r);
    const SnapshotState want = CaptureSnapshot(reference.snap);
    const SnapshotState got = CaptureSnapshot(bed.snap);
    EXPECT_TRUE(got == want) << DiffSnapshots(want, got);
  }

 private:
  void Frame(Bed& bed, int depth) {
    Snapshot::Txn txn(bed.snap);
    const auto saved_tasks = live_tasks_;
    const auto saved_charges = live_charges_;
    const int ops = 1 + static_cast<int>(rng_.Uniform(6));
    for (int i = 0; i < ops; ++i) {
      const uint64_t op = rng_.Uniform(10);
      if (op < 4) {
        Allocate(bed);
      } else if (op < 6 && !live_tasks_.empty()) {
        const size_t k = rng_.Uniform(live_tasks_.size());
        bed.snap.Release(live_tasks_[k]);
        live_tasks_.erase(live_tasks_.begin() + static_cast<std::ptrdiff_t>(k));
      } else if (op < 8) {
        const QueueId q = rng_.Uniform(2) == 0 ? bed.queue("a") : bed.queue("b");
        const QuotaVec r = Gpu(500 * static_cast<int64_t>(1 + rng_.Uniform(4)),
                               rng_.Uniform(2) == 0 ? bed.a100() : bed.h100());
        bed.snap.ChargeQuota(q, r);
        live_charges_.emplace_back(q, r);
      } else if (!live_charges_.empty()) {
        const size_t k = rng_.Uniform(live_charges_.size());
        bed.snap.RefundQuota(live_charges_[k].first, live_charges_[k].second);
        live_charges_.erase(live_charges_.begin() + static_cast<std::ptrdiff_t>(k));
      }
      if (depth < 4 && rng_.Uniform(4) == 0) Frame(bed, depth + 1);
    }
    if (depth == 0 || rng_.Uniform(2) == 0) {
      txn.Commit();
    } else {
      live_tasks_ = saved_tasks;
      live_charges_ = saved_charges;
    }
  }

  // A task that fits: one whole GPU, or a share of a GPU with room, on a usable GPU.
  void Allocate(Bed& bed) {
    const Snapshot& s = bed.snap;
    for (int tries = 0; tries < 20; ++tries) {
      const auto n = static_cast<uint32_t>(rng_.Uniform(bed.cluster.num_nodes()));
      const NodeInfo& info = bed.cluster.node(NodeId(n));
      if (info.gpu_count == 0 || s.free_cpu(NodeId(n)) < 1000) continue;
      const auto slot = static_cast<uint16_t>(rng_.Uniform(info.gpu_count));
      const uint32_t g = info.gpu_begin + slot;
      if (!s.gpu_usable(g)) continue;
      const bool whole = rng_.Uniform(2) == 0;
      if (whole && s.gpu_free_milli(g) != 1000) continue;
      if (!whole && (s.gpu_free_milli(g) < 250 || s.gpu_free_memory(g) < 1024)) continue;
      const GpuShare share{slot, static_cast<int16_t>(whole ? 1000 : 250),
                           whole ? s.gpu_free_memory(g) : 1024};
      const TaskPlacement t = Task(n, {share}, 1000, 512);
      bed.snap.Allocate(t);
      live_tasks_.push_back(t);
      return;
    }
  }

  Rng rng_;
  std::vector<TaskPlacement> live_tasks_;
  std::vector<std::pair<QueueId, QuotaVec>> live_charges_;
};

TEST(SnapshotTxnTest, RandomNestedTxnsMatchTheSurvivingChanges) {
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Bed bed;
    RandomTxnRun(seed).Run(bed);
    if (HasFailure()) break;
  }
}

TEST(NodeSetTest, InsertEraseAndOrderedIteration) {
  NodeSet set(130);
  EXPECT_TRUE(set.empty());
  for (uint32_t i : {129u, 3u, 64u, 3u, 0u}) set.Insert(i);
  EXPECT_EQ(set.size(), 4u);
  EXPECT_THAT(Members(set), ElementsAre(0, 3, 64, 129));
  set.Erase(64);
  set.Erase(64);
  set.Erase(5);
  EXPECT_EQ(set.size(), 3u);
  EXPECT_FALSE(set.Contains(64));
  EXPECT_TRUE(set.Contains(129));
  std::vector<uint32_t> first_two;
  set.ForEach([&](uint32_t n) {
    first_two.push_back(n);
    return first_two.size() < 2;
  });
  EXPECT_THAT(first_two, ElementsAre(0, 3));
}

}  // namespace
}  // namespace arbiter::core
