#include "plan/whatif.h"

#include <gtest/gtest.h>

namespace arbiter::plan {
namespace {

constexpr int64_t kS = 1000;

Node GpuNode(std::string name, int gpus) {
  Node n;
  n.name = std::move(name);
  n.cpu_milli = 64000;
  n.memory_mib = 512 * 1024;
  for (int i = 0; i < gpus; ++i) n.gpus.push_back(Gpu{i, "H100-80G", 81920, true, 0});
  return n;
}

// One 8-GPU node, one queue; `jobs` jobs of 8 GPUs, all submitted at 0, each running 1000 s, so
// they ran one after another: job k waited k x 1000 s.
History SerialHistory(int jobs) {
  History h;
  h.since_ms = 0;
  h.until_ms = 100000 * kS;
  h.models = {GpuModel{"H100-80G", 81920, 2500}};
  h.nodes = {GpuNode("gpu-01", 8)};
  QueueSpec tenant;
  tenant.name = "research";
  tenant.is_tenant = true;
  QueueSpec queue;
  queue.name = "train";
  queue.parent = "research";
  h.queues = {tenant, queue};
  PriorityClass normal;
  normal.name = "normal";
  normal.value = 100;
  h.classes = {normal};
  for (int k = 0; k < jobs; ++k) {
    RecordedJob j;
    j.id = static_cast<uint64_t>(k + 1);
    j.tenant = "research";
    j.queue = "train";
    j.priority_class = "normal";
    j.resources.gpus = 8;
    j.submit_ms = 0;
    j.admitted_ms = k * 1000 * kS;
    j.ended_ms = (k + 1) * 1000 * kS;
    j.recorded_wait_ms = k * 1000 * kS;
    h.jobs.push_back(j);
  }
  return h;
}

TEST(ParseChanges, AddNodes) {
  auto c = ParseAddNodes("4xH100-80G", "add_nodes");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->count, 4);
  EXPECT_EQ(c->model, "H100-80G");
  EXPECT_EQ(c->gpus_per_node, 0);
  auto shaped = ParseAddNodes("2xA100:4", "add_nodes");
  ASSERT_TRUE(shaped.ok());
  EXPECT_EQ(shaped->gpus_per_node, 4);
  for (const char* bad : {"", "x", "4x", "H100", "0xH100", "-1xH100", "4xH100:", "4xH100:0"}) {
    auto r = ParseAddNodes(bad, "add_nodes[0]");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().field(), "add_nodes[0]") << bad;
  }
}

TEST(ParseChanges, Quota) {
  auto c = ParseQuota("vision.guaranteed.gpu=32", "quota");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->name, "vision");
  EXPECT_EQ(c->limit, "guaranteed");
  EXPECT_EQ(c->resource, "gpu");
  EXPECT_EQ(c->value, 32000);  // milli-GPU
  auto m = ParseQuota("a.max.gpu:H100-80G=1.5", "quota");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->resource, "gpu:H100-80G");
  EXPECT_EQ(m->value, 1500);
  EXPECT_EQ(ParseQuota("a.max.memory=4096", "quota")->value, 4096);
  for (const char* bad : {"a.guaranteed.gpu", "a.most.gpu=1", "a.max.disk=1", "a.max.gpu=-1",
                          "a.max.gpu=lots", ".max.gpu=1"}) {
    auto r = ParseQuota(bad, "quota[1]");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().field(), "quota[1]") << bad;
  }
}

TEST(VariantsOf, EachChangeAndAllTogether) {
  std::vector<Change> changes = {*ParseAddNodes("1xH100-80G", "a"), RemoveNode("gpu-01")};
  auto v = VariantsOf(changes);
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0].label, "add 1xH100-80G");
  EXPECT_EQ(v[1].label, "remove gpu-01");
  EXPECT_EQ(v[2].label, "all changes");
  EXPECT_EQ(v[2].changes.size(), 2u);
  EXPECT_EQ(VariantsOf({changes[0]}).size(), 1u);
}

// The unchanged replay reproduces the serial history exactly; more nodes cut the waits.
TEST(ReplayHistory, BaselineReproducesAndNodesCutWaits) {
  const History h = SerialHistory(4);
  auto r = ReplayHistory(h, VariantsOf({*ParseAddNodes("3xH100-80G", "add_nodes")}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->jobs, 4);
  ASSERT_EQ(r->recorded.queues.size(), 1u);
  ASSERT_EQ(r->baseline.queues.size(), 1u);
  const Waits& rec = r->recorded.queues[0].wait;
  const Waits& rep = r->baseline.queues[0].wait;
  EXPECT_EQ(rec.count, 4);
  EXPECT_DOUBLE_EQ(rec.p50, 1000);
  EXPECT_DOUBLE_EQ(rec.p90, 3000);
  EXPECT_DOUBLE_EQ(rep.p50, rec.p50);
  EXPECT_DOUBLE_EQ(rep.p90, rec.p90);
  EXPECT_DOUBLE_EQ(rep.max, rec.max);
  ASSERT_EQ(r->variants.size(), 1u);
  EXPECT_EQ(r->variants[0].gpus, 32);
  EXPECT_DOUBLE_EQ(r->variants[0].queues[0].wait.max, 0);
  // Recorded allocation: 8 GPUs busy 4000 s of 100000 s.
  EXPECT_NEAR(r->recorded.gpu_alloc_pct, 4.0, 1e-9);
  EXPECT_NEAR(r->baseline.gpu_alloc_pct, 4.0, 1e-9);
  const nlohmann::json j = PlanReportJson(*r);
  EXPECT_EQ(j["queues"][0]["queue"], "train");
  EXPECT_DOUBLE_EQ(j["queues"][0]["recorded"]["wait_p90_s"].get<double>(), 3000);
  EXPECT_DOUBLE_EQ(j["queues"][0]["replayed"]["wait_p90_s"].get<double>(), 3000);
  EXPECT_DOUBLE_EQ(j["queues"][0]["variants"][0]["wait_p90_s"].get<double>(), 0);
  EXPECT_EQ(j["queues"][0]["variants"][0]["label"], "add 3xH100-80G");
  EXPECT_FALSE(PlanHtml(*r, "arbiter plan replay").empty());
}

// Milliseconds survive the trace's whole seconds.
TEST(ReplayHistory, KeepsMilliseconds) {
  History h = SerialHistory(2);
  h.jobs[0].ended_ms = 1500;  // ran 1.5 s
  h.jobs[1].admitted_ms = 1500;
  h.jobs[1].ended_ms = 3000;
  h.jobs[1].recorded_wait_ms = 1500;
  auto r = ReplayHistory(h, {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_DOUBLE_EQ(r->recorded.queues[0].wait.max, 1.5);
  EXPECT_DOUBLE_EQ(r->baseline.queues[0].wait.max, 1.5);
}

// A job holding the GPUs when the period starts is replayed (it delays the others) but not
// counted; a job still pending at the end counts with its wait so far.
TEST(ReplayHistory, CarriedInAndPendingAtTheEnd) {
  History h = SerialHistory(0);
  h.since_ms = 10000 * kS;
  h.until_ms = 20000 * kS;
  RecordedJob old;
  old.id = 1;
  old.tenant = "research";
  old.queue = "train";
  old.priority_class = "normal";
  old.resources.gpus = 8;
  old.submit_ms = 0;
  old.admitted_ms = 0;
  old.ended_ms = 12000 * kS;  // 2000 s into the period
  RecordedJob waiting = old;
  waiting.id = 2;
  waiting.submit_ms = 10000 * kS;
  waiting.admitted_ms = -1;
  waiting.ended_ms = -1;
  waiting.resources.gpus = 16;  // never fits: pending at the end
  RecordedJob next = old;
  next.id = 3;
  next.submit_ms = 10000 * kS;
  next.admitted_ms = 12000 * kS;
  next.ended_ms = 13000 * kS;
  next.recorded_wait_ms = 2000 * kS;
  h.jobs = {old, waiting, next};
  auto r = ReplayHistory(h, {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->jobs, 2);
  EXPECT_EQ(r->carried_in, 1);
  const GroupFigures& rec = r->recorded.queues[0];
  const GroupFigures& rep = r->baseline.queues[0];
  EXPECT_EQ(rec.waiting_at_end, 1);
  EXPECT_EQ(rep.waiting_at_end, 1);
  EXPECT_DOUBLE_EQ(rec.wait.max, 10000);  // the whole period
  EXPECT_DOUBLE_EQ(rep.wait.max, 10000);
  EXPECT_DOUBLE_EQ(rec.wait.p50, 2000);
  EXPECT_DOUBLE_EQ(rep.wait.p50, 2000);
}

TEST(ReplayHistory, ErrorsNameTheField) {
  History h = SerialHistory(1);
  h.until_ms = h.since_ms;
  EXPECT_EQ(ReplayHistory(h, {}).status().field(), "until");
  h = SerialHistory(1);
  EXPECT_EQ(ReplayHistory(h, VariantsOf({RemoveNode("gpu-99")})).status().field(), "remove_node");
  EXPECT_EQ(ReplayHistory(h, VariantsOf({*ParseQuota("nope.max.gpu=1", "quota")})).status().field(),
            "quota");
  EXPECT_EQ(ReplayHistory(h, VariantsOf({*ParseAddNodes("1xB200", "add_nodes")})).status().field(),
            "add_nodes");
  EXPECT_EQ(ReplayHistory(h, VariantsOf({UsePolicy("nope")})).status().field(), "policy");
}

TEST(ReplayHistory, SkipsJobsOfQueuesThatAreGone) {
  History h = SerialHistory(2);
  h.jobs[1].queue = "gone";
  auto r = ReplayHistory(h, {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->jobs, 1);
  EXPECT_EQ(r->skipped, 1);
  ASSERT_EQ(r->skipped_reasons.size(), 1u);
}

// Four serial jobs: the p90 (nearest rank: the largest of 4) is 3000 s unchanged, 1000 s with one
// or two more nodes, 0 with three.
TEST(FindCapacity, FewestNodes) {
  const History h = SerialHistory(4);
  CapacityQuery q;
  q.model = "H100-80G";
  q.target_wait_p90_ms = 0;
  auto a = FindCapacity(h, q);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_TRUE(a->found);
  EXPECT_EQ(a->nodes, 3);
  EXPECT_EQ(a->gpus_per_node, 8);
  EXPECT_DOUBLE_EQ(a->price_per_gpu_hour, 2.5);
  EXPECT_DOUBLE_EQ(a->cost_per_hour, 3 * 8 * 2.5);
  q.target_wait_p90_ms = 1000 * kS;
  a = FindCapacity(h, q);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->nodes, 1);
  q.target_wait_p90_ms = 5000 * kS;
  a = FindCapacity(h, q);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->nodes, 0);
}

TEST(FindCapacity, SaysWhenMaxNodesIsNotEnough) {
  const History h = SerialHistory(4);
  CapacityQuery q;
  q.model = "H100-80G";
  q.target_wait_p90_ms = 0;
  q.max_nodes = 2;
  auto a = FindCapacity(h, q);
  ASSERT_TRUE(a.ok());
  EXPECT_FALSE(a->found);
  EXPECT_FALSE(CapacityAnswerJson(*a, q)["note"].get<std::string>().empty());
  q.model = "B200";
  EXPECT_EQ(FindCapacity(h, q).status().field(), "model");
  q.model = "H100-80G";
  q.max_nodes = 0;
  EXPECT_EQ(FindCapacity(h, q).status().field(), "max_nodes");
}

}  // namespace
}  // namespace arbiter::plan
