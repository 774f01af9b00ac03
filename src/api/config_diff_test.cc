#include <gtest/gtest.h>

#include "api/config.h"
#include "api/config_codec.h"

namespace arbiter::api {
namespace {

ClusterConfig Parse(const std::string& yaml) {
  Result<ClusterConfig> r = ParseConfigYaml(yaml);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : ClusterConfig{};
}

constexpr const char* kCurrent = R"(
gpu_models:
  - {name: A100-80G, memory_mib: 81920, price_per_hour: 2.5}
  - {name: V100, memory_mib: 16384}
priority_classes:
  - {name: normal, value: 100, preemptible: true}
tenants:
  - name: vision
    guaranteed: {gpu: 16}
    queues:
      - {name: train, guaranteed: {gpu: 8}, max: {gpu: 16}}
      - {name: infer, guaranteed: {gpu: 4}}
  - name: old-team
users:
  - {name: alice, tenant: vision, role: member}
  - {name: bob, tenant: old-team}
nodes:
  - {name: gpu-01, cpu_milli: 128000, gpus: {count: 8, model: A100-80G}}
  - {name: gpu-02, gpus: {count: 4, model: V100}}
)";

constexpr const char* kDesired = R"(
gpu_models:
  - {name: A100-80G, memory_mib: 81920, price_per_hour: 3}
  - {name: H100, memory_mib: 81920}
priority_classes:
  - {name: normal, value: 100, preemptible: true}
tenants:
  - name: vision
    guaranteed: {gpu: 16}
    budget: {gpu_hours: 100}
    queues:
      - name: train
        guaranteed: {gpu: 12}
        queues: [{name: train-small}]
      - {name: infer, guaranteed: {gpu: 4}}
users:
  - {name: alice, tenant: vision, role: tenant-admin}
nodes:
  - {name: gpu-01, cpu_milli: 128000, labels: {zone: a}, gpus: {count: 8, model: A100-80G}}
)";

TEST(DiffConfig, CreateUpdateDeleteInOrder) {
  const std::vector<ConfigChange> changes = DiffConfig(Parse(kCurrent), Parse(kDesired));
  const std::vector<ConfigChange> expected = {
      {"gpu_model", "A100-80G", "update", "price_per_hour: 2.5 -> 3"},
      {"gpu_model", "H100", "create", "memory_mib: 81920"},
      {"gpu_model", "V100", "delete", ""},
      {"tenant", "old-team", "delete", ""},
      {"tenant", "vision", "update",
       "budget.gpu_hours: (none) -> 100; budget.period: (none) -> month; "
       "budget.on_exhausted: (none) -> block"},
      {"queue", "train", "update", "guaranteed.gpu: 8 -> 12; max.gpu: 16 -> (none)"},
      {"queue", "train-small", "create", "parent: train"},
      {"user", "alice", "update", "role: member -> tenant-admin"},
      {"user", "bob", "delete", ""},
      {"node", "gpu-01", "update", "labels.zone: (none) -> a"},
      {"node", "gpu-02", "delete", ""},
  };
  ASSERT_EQ(changes.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(changes[i], expected[i]) << i << ": " << changes[i].kind << " " << changes[i].name
                                       << " " << changes[i].action << " " << changes[i].detail;
  }
}

TEST(DiffConfig, NothingToDo) {
  EXPECT_TRUE(DiffConfig(Parse(kCurrent), Parse(kCurrent)).empty());
  EXPECT_TRUE(DiffConfig(ClusterConfig{}, ClusterConfig{}).empty());
  // Spelling does not matter, meaning does: 0.5 == "0.5" == 0.500; 1Gi == 1024.
  EXPECT_TRUE(DiffConfig(Parse("tenants: [{name: t, max: {gpu: 0.5, memory: 1Gi}}]"),
                         Parse("tenants: [{name: t, max: {memory: 1024, gpu: \"0.500\"}}]"))
                  .empty());
}

TEST(DiffConfig, MovingAQueueIsAnUpdateOfItsParent) {
  const std::vector<ConfigChange> changes =
      DiffConfig(Parse("tenants: [{name: a, queues: [{name: q}]}, {name: b}]"),
                 Parse("tenants: [{name: a}, {name: b, queues: [{name: q}]}]"));
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0], (ConfigChange{"queue", "q", "update", "parent: a -> b"}));
}

TEST(DiffConfig, FromEmptyCreatesEverything) {
  const std::vector<ConfigChange> changes = DiffConfig(ClusterConfig{}, Parse(kCurrent));
  ASSERT_EQ(changes.size(), 11u);
  for (const ConfigChange& c : changes) EXPECT_EQ(c.action, "create") << c.name;
  EXPECT_EQ(changes.front().kind, "gpu_model");
  EXPECT_EQ(changes.back().kind, "node");
  EXPECT_EQ(changes.back().detail, "gpus.count: 4; gpus.model: V100");
}

}  // namespace
}  // namespace arbiter::api
