#include "api/config_codec.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cctype>
#include <ostream>
#include <string>

namespace arbiter::api {
namespace {

constexpr const char* kExample = R"(
gpu_models:
  - {name: A100-80G, memory_mib: 81920, price_per_hour: 2.5}
  - {name: L4, memory_mib: 24Gi, price_per_hour: "0.35"}
priority_classes:
  - {name: critical, value: 1000, preemptible: false}
  - {name: normal, value: 100, preemptible: true}
  - {name: best-effort, value: 0, preemptible: true, min_runtime_seconds: 0}
tenants:
  - name: vision
    budget: {gpu_hours: 5000, period: month, on_exhausted: best-effort}
    guaranteed: {gpu: 16}              # optional tenant-level limits
    queues:
      - name: vision-train
        guaranteed: {gpu: 8}
        max: {gpu: 16, cpu: 64, memory: 512Gi}
        lending_limit: {gpu: 8}
        weight: 1
        default_walltime_seconds: 86400
        allowed_types: [training, fine-tuning, experiment]
        fair_share: {half_life_seconds: 86400}
        queues:
          - {name: vision-train-small, guaranteed: {gpu: 0.5}}
      - name: vision-infer
        guaranteed: {gpu: {A100-80G: 4, L4: 2}}
        weight: 2.5
  - name: nlp
users:
  - {name: alice, tenant: vision, role: member}
  - {name: root, role: admin}
nodes:
  - {name: gpu-01, cpu_milli: 128000, memory_mib: 1048576, rack: r1, block: b1, labels: {zone: a},
     taints: [{key: dedicated, value: inference}], gpus: {count: 8, model: A100-80G, nvlink_domains: 2}}
  - {name: cpu-01, cpu_milli: 64000, memory_mib: 256Gi, state: cordoned}
)";

TEST(ParseConfigYaml, ReadsTheExample) {
  Result<ClusterConfig> r = ParseConfigYaml(kExample);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const ClusterConfig& c = *r;

  ASSERT_EQ(c.gpu_models.size(), 2u);
  EXPECT_EQ(c.gpu_models[0].name, "A100-80G");
  EXPECT_EQ(c.gpu_models[0].memory_mib, 81920);
  EXPECT_EQ(c.gpu_models[0].price_milli_per_hour, 2500);
  EXPECT_EQ(c.gpu_models[1].memory_mib, 24576);
  EXPECT_EQ(c.gpu_models[1].price_milli_per_hour, 350);

  ASSERT_EQ(c.priority_classes.size(), 3u);
  EXPECT_EQ(c.priority_classes[0].value, 1000);
  EXPECT_FALSE(c.priority_classes[0].preemptible);
  EXPECT_EQ(c.priority_classes[0].min_runtime_seconds, 300);  // default
  EXPECT_EQ(c.priority_classes[2].min_runtime_seconds, 0);

  ASSERT_EQ(c.tenants.size(), 2u);
  const TenantConfig& v = c.tenants[0];
  EXPECT_EQ(v.name, "vision");
  ASSERT_TRUE(v.budget.has_value());
  EXPECT_EQ(*v.budget, (BudgetConfig{5000, "month", "best-effort"}));
  ASSERT_EQ(v.queues.size(), 4u);
  EXPECT_TRUE(v.queues[0].is_tenant);
  EXPECT_EQ(v.queues[0].name, "vision");
  EXPECT_EQ(v.queues[0].parent, "");
  EXPECT_EQ(v.queues[0].quota.at("gpu").guaranteed, 16000);

  const QueueSpec& train = v.queues[1];
  EXPECT_EQ(train.name, "vision-train");
  EXPECT_EQ(train.parent, "vision");
  EXPECT_FALSE(train.is_tenant);
  EXPECT_EQ(train.quota.at("gpu"), (QuotaLimits{8000, 16000, 8000}));
  EXPECT_EQ(train.quota.at("cpu").max, 64000);
  EXPECT_EQ(train.quota.at("memory").max, 512 * 1024);
  EXPECT_EQ(train.weight_milli, 1000);
  EXPECT_EQ(train.default_walltime_seconds, 86400);
  EXPECT_EQ(train.allowed_types,
            (std::vector<std::string>{"training", "fine-tuning", "experiment"}));
  EXPECT_EQ(train.decay.half_life_seconds, 86400);

  EXPECT_EQ(v.queues[2].name, "vision-train-small");
  EXPECT_EQ(v.queues[2].parent, "vision-train");
  EXPECT_EQ(v.queues[2].quota.at("gpu").guaranteed, 500);

  const QueueSpec& infer = v.queues[3];
  EXPECT_EQ(infer.parent, "vision");
  EXPECT_EQ(infer.quota.at("gpu:A100-80G").guaranteed, 4000);
  EXPECT_EQ(infer.quota.at("gpu:L4").guaranteed, 2000);
  EXPECT_EQ(infer.quota.count("gpu"), 0u);
  EXPECT_EQ(infer.weight_milli, 2500);

  EXPECT_FALSE(c.tenants[1].budget.has_value());
  ASSERT_EQ(c.tenants[1].queues.size(), 1u);

  ASSERT_EQ(c.users.size(), 2u);
  EXPECT_EQ(c.users[0], (UserConfig{"alice", "vision", "member", std::nullopt}));
  EXPECT_EQ(c.users[1], (UserConfig{"root", "", "admin", std::nullopt}));

  ASSERT_EQ(c.nodes.size(), 2u);
  const Node& n = c.nodes[0];
  EXPECT_EQ(n.name, "gpu-01");
  EXPECT_EQ(n.cpu_milli, 128000);
  EXPECT_EQ(n.memory_mib, 1048576);
  EXPECT_EQ(n.rack, "r1");
  EXPECT_EQ(n.block, "b1");
  EXPECT_EQ(n.labels.at("zone"), "a");
  EXPECT_EQ(n.taints, (std::vector<Taint>{{"dedicated", "inference"}}));
  ASSERT_EQ(n.gpus.size(), 8u);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(n.gpus[static_cast<size_t>(i)].index, i);
    EXPECT_EQ(n.gpus[static_cast<size_t>(i)].model, "A100-80G");
    EXPECT_EQ(n.gpus[static_cast<size_t>(i)].memory_mib, 81920);
    EXPECT_EQ(n.gpus[static_cast<size_t>(i)].nvlink_domain, i / 4);
  }
  EXPECT_EQ(c.nodes[1].state, NodeState::kCordoned);
  EXPECT_EQ(c.nodes[1].memory_mib, 256 * 1024);
  EXPECT_TRUE(c.nodes[1].gpus.empty());
}

TEST(ParseConfigYaml, AcceptsJson) {
  Result<ClusterConfig> r = ParseConfigYaml(R"({
    "gpu_models": [{"name": "A100-80G", "memory_mib": 81920, "price_per_hour": 2.5}],
    "tenants": [{"name": "vision", "queues": [{"name": "train", "guaranteed": {"gpu": 0.5}}]}],
    "users": [{"name": "alice", "tenant": "vision", "role": "viewer"}]})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->gpu_models[0].price_milli_per_hour, 2500);
  EXPECT_EQ(r->tenants[0].queues[1].quota.at("gpu").guaranteed, 500);
  EXPECT_EQ(r->users[0].role, "viewer");
}

struct Amount {
  std::string yaml;  // the value of guaranteed.gpu / cpu / memory
  std::string key;   // quota key
  int64_t expected;
};

TEST(ParseConfigYaml, ExactAmounts) {
  const Amount cases[] = {
      {"{gpu: 0.5}", "gpu", 500},
      {"{gpu: \"0.5\"}", "gpu", 500},
      {"{gpu: 8}", "gpu", 8000},
      {"{gpu: 0.001}", "gpu", 1},
      {"{gpu: 2.500}", "gpu", 2500},
      {"{cpu: 0.1}", "cpu", 100},
      {"{cpu: 12.345}", "cpu", 12345},
      {"{memory: 65536}", "memory", 65536},
      {"{memory: 64Gi}", "memory", 65536},
      {"{memory: \"512Mi\"}", "memory", 512},
      {"{memory: 1.5Ti}", "memory", 1536 * 1024},
      {"{gpu: {any: 3, A100-80G: 1.25}}", "gpu", 3000},
      {"{gpu: {any: 3, A100-80G: 1.25}}", "gpu:A100-80G", 1250},
  };
  for (const Amount& c : cases) {
    SCOPED_TRACE(c.yaml);
    Result<ClusterConfig> r = ParseConfigYaml(fmt::format(
        "gpu_models: [{{name: A100-80G}}]\ntenants:\n  - name: t\n    guaranteed: {}\n", c.yaml));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->tenants[0].queues[0].quota.at(c.key).guaranteed, c.expected);
  }
}

struct Rejection {
  std::string yaml;
  std::string field;
  std::string message;  // a part of the message
};

class ConfigRejection : public testing::TestWithParam<Rejection> {};

// Shown in test names: the field, in characters test names allow.
void PrintTo(const Rejection& r, std::ostream* os) {
  std::string name = r.field.empty() ? "body" : r.field;
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '[' && c != ']') c = '_';
  }
  *os << name;
}

TEST_P(ConfigRejection, NamesTheField) {
  const Rejection& c = GetParam();
  Result<ClusterConfig> r = ParseConfigYaml(c.yaml);
  ASSERT_FALSE(r.ok()) << c.yaml;
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().field(), c.field) << r.status().ToString();
  EXPECT_NE(r.status().message().find(c.message), std::string::npos) << r.status().ToString();
}

// A configuration with two GPU models and one tenant whose body is `tenant`.
std::string WithTenant(const std::string& tenant) {
  return fmt::format(
      "gpu_models: [{{name: A100-80G, memory_mib: 81920}}, {{name: L4}}]\ntenants:\n  - {}\n",
      tenant);
}

INSTANTIATE_TEST_SUITE_P(
    Fields, ConfigRejection,
    testing::Values(
        // Unknown keys and wrong types.
        Rejection{"version: 2\n", "version", "unknown field"},
        Rejection{"tenants: {name: a}\n", "tenants", "must be a list"},
        Rejection{"gpu_models: [{name: A, memory: 1}]\n", "gpu_models[0].memory",
                  "allowed here: name, memory_mib, price_per_hour"},
        Rejection{"gpu_models: [{name: A, memory_mib: lots}]\n", "gpu_models[0].memory_mib", "MiB"},
        Rejection{"gpu_models: [A100]\n", "gpu_models[0]", "must be a mapping"},
        Rejection{"priority_classes: [{name: p, value: \"100\"}]\n", "priority_classes[0].value",
                  "must be an integer"},
        Rejection{"priority_classes: [{name: p, value: 4.5}]\n", "priority_classes[0].value",
                  "got 4.5"},
        Rejection{"priority_classes: [{name: p, value: 99999999999999999999}]\n",
                  "priority_classes[0].value", "must be an integer"},
        Rejection{"priority_classes: [{name: p}]\n", "priority_classes[0].value", "is required"},
        Rejection{"priority_classes: [{name: p, value: 1, preemptible: maybe}]\n",
                  "priority_classes[0].preemptible", "true or false"},
        Rejection{"gpu_models: [{name: A, price_per_hour: 1e400}]\n",
                  "gpu_models[0].price_per_hour", "exponent"},
        Rejection{"gpu_models: [{name: A, price_per_hour: 99999999999999999999}]\n",
                  "gpu_models[0].price_per_hour", "too large"},
        Rejection{"gpu_models: [{name: A, price_per_hour: -1}]\n", "gpu_models[0].price_per_hour",
                  "out of range"},
        Rejection{"gpu_models: [{name: A, price_per_hour: 0.0001}]\n",
                  "gpu_models[0].price_per_hour", "more than 3 decimals"},
        Rejection{"gpu_models: [{name: any}]\n", "gpu_models[0].name", "reserved"},
        Rejection{"gpu_models: [{name: \"A 100\"}]\n", "gpu_models[0].name", "not a valid name"},
        Rejection{"gpu_models: [{memory_mib: 1}]\n", "gpu_models[0].name", "is required"},
        Rejection{"gpu_models: [{name: a}, {name: b}, {name: c}, {name: d}, {name: e}, {name: f}, "
                  "{name: g}, {name: h}, {name: i}, {name: j}, {name: k}, {name: l}, "
                  "{name: m}, {name: n}, {name: o}, {name: p}, {name: q}]\n",
                  "gpu_models", "at most 16 items"},
        // Duplicates.
        Rejection{"gpu_models: [{name: A}, {name: A}]\n", "gpu_models[1].name",
                  "duplicate name \"A\" (first at gpu_models[0].name)"},
        Rejection{"priority_classes: [{name: p, value: 1}, {name: p, value: 2}]\n",
                  "priority_classes[1].name", "duplicate"},
        Rejection{"tenants: [{name: a}, {name: a}]\n", "tenants[1].name", "duplicate"},
        Rejection{"tenants: [{name: a, queues: [{name: q}]}, {name: b, queues: [{name: q}]}]\n",
                  "tenants[1].queues[0].name", "first at tenants[0].queues[0].name"},
        Rejection{"tenants: [{name: a, queues: [{name: a}]}]\n", "tenants[0].queues[0].name",
                  "duplicate"},
        Rejection{"tenants: [{name: a}]\nusers: [{name: u, tenant: a}, {name: u, tenant: a}]\n",
                  "users[1].name", "duplicate"},
        Rejection{"nodes: [{name: n1}, {name: n1}]\n", "nodes[1].name", "duplicate"},
        Rejection{"tenants: [{name: a, name: b}]\n", "tenants[0].name", "duplicate key"},
        // Queues and their quota.
        Rejection{WithTenant("{name: Vision}"), "tenants[0].name", "not a valid name"},
        Rejection{WithTenant("{name: t, budget: {gpu_hours: 5, period: year}}"),
                  "tenants[0].budget.period", "must be one of day, week, month"},
        Rejection{WithTenant("{name: t, budget: {period: day}}"), "tenants[0].budget.gpu_hours",
                  "is required"},
        Rejection{WithTenant("{name: t, budget: {gpu_hours: 5, on_exhausted: wait}}"),
                  "tenants[0].budget.on_exhausted", "block, best-effort"},
        Rejection{WithTenant("{name: t, queues: [{name: q, budget: {gpu_hours: 1}}]}"),
                  "tenants[0].queues[0].budget", "unknown field"},
        Rejection{WithTenant("{name: t, queues: [{name: q, guaranteed: {gpu: {H100: 8}}}]}"),
                  "tenants[0].queues[0].guaranteed.gpu.H100",
                  "unknown GPU model \"H100\"; gpu_models declares: A100-80G, L4"},
        Rejection{WithTenant("{name: t, queues: [{name: q, guaranteed: {gpus: 8}}]}"),
                  "tenants[0].queues[0].guaranteed.gpus", "allowed here: gpu, cpu, memory"},
        Rejection{WithTenant("{name: t, queues: [{name: a}, {name: q, guaranteed: {gpu: -1}}]}"),
                  "tenants[0].queues[1].guaranteed.gpu", "between 0 and"},
        Rejection{WithTenant("{name: t, queues: [{name: q, guaranteed: {gpu: 1e3}}]}"),
                  "tenants[0].queues[0].guaranteed.gpu", "exponent"},
        Rejection{WithTenant("{name: t, queues: [{name: q, guaranteed: {gpu: 0.0005}}]}"),
                  "tenants[0].queues[0].guaranteed.gpu", "more than 3 decimals"},
        Rejection{WithTenant("{name: t, queues: [{name: q, guaranteed: {gpu: eight}}]}"),
                  "tenants[0].queues[0].guaranteed.gpu", "not a decimal number"},
        Rejection{WithTenant("{name: t, queues: [{name: q, max: {memory: 1Ki}}]}"),
                  "tenants[0].queues[0].max.memory", "whole number of MiB"},
        Rejection{WithTenant("{name: t, queues: [{name: q, guaranteed: {gpu: 8}, max: {gpu: 4}}]}"),
                  "tenants[0].queues[0].max.gpu", "max (4) is below guaranteed (8)"},
        Rejection{WithTenant("{name: t, guaranteed: {gpu: 4}, queues: [{name: a, guaranteed: "
                             "{gpu: 3}}, {name: b, guaranteed: {gpu: 2}}]}"),
                  "tenants[0].guaranteed.gpu",
                  "the queues under \"t\" guarantee 5 in all, more than its own 4"},
        Rejection{WithTenant("{name: t, guaranteed: {gpu: {L4: 1}}, queues: [{name: a, queues: "
                             "[{name: b, guaranteed: {gpu: {L4: 1.5}}}]}]}"),
                  "tenants[0].guaranteed.gpu.L4", "guarantee 1.5 in all"},
        Rejection{WithTenant("{name: t, queues: [{name: q, weight: 0}]}"),
                  "tenants[0].queues[0].weight", "between 0.001 and"},
        Rejection{WithTenant("{name: t, queues: [{name: q, allowed_types: [training, chat]}]}"),
                  "tenants[0].queues[0].allowed_types[1]", "unknown job type \"chat\""},
        Rejection{WithTenant("{name: t, queues: [{name: q, allowed_types: [service, service]}]}"),
                  "tenants[0].queues[0].allowed_types[1]", "duplicate"},
        Rejection{WithTenant("{name: t, queues: [{name: q, fair_share: {half_life: 5}}]}"),
                  "tenants[0].queues[0].fair_share.half_life", "unknown field"},
        Rejection{WithTenant("{name: t, queues: [{name: q, default_walltime_seconds: -1}]}"),
                  "tenants[0].queues[0].default_walltime_seconds", "between 0 and"},
        Rejection{WithTenant("{name: t, queues: [{name: a, queues: [{name: b, queues: [{name: c, "
                             "queues: [{name: d, queues: [{name: e, queues: [{name: f, queues: "
                             "[{name: g, queues: [{name: h, queues: [{name: i}]}]}]}]}]}]}]}]}]}"),
                  "tenants[0].queues[0].queues[0].queues[0].queues[0].queues[0].queues[0]."
                  "queues[0].queues[0].queues",
                  "at most 8 levels"},
        // Users.
        Rejection{"users: [{name: alice, tenant: vision}]\n", "users[0].tenant",
                  "unknown tenant \"vision\""},
        Rejection{"tenants: [{name: a}]\nusers: [{name: alice, tenant: a, role: owner}]\n",
                  "users[0].role", "admin, tenant-admin, member, viewer"},
        Rejection{"users: [{name: alice}]\n", "users[0].tenant", "only admins"},
        Rejection{"tenants: [{name: a}]\nusers: [{name: a, tenant: a, team: x}]\n", "users[0].team",
                  "unknown field"},
        // Nodes.
        Rejection{"nodes: [{name: n, gpus: {count: 8, model: H100}}]\n", "nodes[0].gpus.model",
                  "unknown GPU model"},
        Rejection{"gpu_models: [{name: A}]\nnodes: [{name: n, gpus: {count: 8, model: A, "
                  "nvlink_domains: 3}}]\n",
                  "nodes[0].gpus.nvlink_domains", "must divide the GPU count (8)"},
        Rejection{"gpu_models: [{name: A}]\nnodes: [{name: n, gpus: {count: 65, model: A}}]\n",
                  "nodes[0].gpus.count", "between 0 and 64"},
        Rejection{"nodes: [{name: n, gpus: {count: 2}}]\n", "nodes[0].gpus.model", "is required"},
        Rejection{"gpu_models: [{name: A}]\nnodes: [{name: n, gpus: [{index: 0, model: A}, "
                  "{index: 0, model: A}]}]\n",
                  "nodes[0].gpus[1].index", "duplicate GPU index"},
        Rejection{"nodes: [{name: n, labels: {\"bad key\": a}}]\n", "nodes[0].labels[\"bad key\"]",
                  "not a valid label key"},
        Rejection{"nodes: [{name: n, labels: {zone: \"a b\"}}]\n", "nodes[0].labels.zone",
                  "not a valid value"},
        Rejection{"nodes: [{name: n, taints: [{value: x}]}]\n", "nodes[0].taints[0].key",
                  "is required"},
        Rejection{"nodes: [{name: n, state: broken}]\n", "nodes[0].state",
                  "ready, cordoned, draining, down"},
        Rejection{"nodes: [{name: \"n 1\"}]\n", "nodes[0].name", "not a valid name"},
        Rejection{"nodes: [{name: n, cpu_milli: -1}]\n", "nodes[0].cpu_milli", "between 0 and"},
        Rejection{"nodes: [{name: n, memory_mib: 64GB}]\n", "nodes[0].memory_mib", "unknown unit"},
        // Where in the file: YAML errors carry line and column.
        Rejection{"tenants:\n  - name: a\n    weight: heavy\n", "tenants[0].weight",
                  "(line 3, column 13)"}));

TEST(ParseConfigYaml, WholeDocumentErrors) {
  const Rejection cases[] = {
      {"", "", "is empty"},
      {"# only a comment\n", "", "is empty"},
      {"- a\n- b\n", "", "must be a mapping"},
      {"just text", "", "must be a mapping"},
      {"tenants: [\n", "", "not valid YAML"},
      {"a: 1\n---\nb: 2\n", "", "one YAML document"},
      {"tenants: !!set {a}\n", "tenants", "tag"},
      {"tenants: [{name: !!int 5}]\n", "tenants[0].name", "tag"},
      {"? [a]\n: 1\n", "", "key must be a scalar"},
      {"tenants: &t [{name: a, queues: *t}]\n", "tenants[0].queues", "alias"},
      {"users: [{name: \"\xff\"}]\n", "users[0].name", "UTF-8"},
  };
  for (const Rejection& c : cases) {
    SCOPED_TRACE(c.yaml);
    Result<ClusterConfig> r = ParseConfigYaml(c.yaml);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().field(), c.field) << r.status().ToString();
    EXPECT_NE(r.status().message().find(c.message), std::string::npos) << r.status().ToString();
  }
}

TEST(ParseConfigYaml, HostileInputs) {
  // Over the size limit.
  std::string big = fmt::format("nodes: []\n#{}", std::string(kMaxConfigBytes, 'x'));
  Result<ClusterConfig> b = ParseConfigYaml(big);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("bytes are allowed"), std::string::npos);

  // 10,000 nested flow sequences and mappings. yaml-cpp reads "[[" as a one-pair mapping whose
  // key is a list, refused as such; nested mappings and block lists reach the depth limit.
  for (const std::string& deep :
       {fmt::format("{:[<10000}", ""), fmt::format("{:[<10000}{:]<10000}", "", ""),
        fmt::format("tenants: {:[<10000}", ""), std::string(10000, '{')}) {
    Result<ClusterConfig> d = ParseConfigYaml(deep);
    ASSERT_FALSE(d.ok());
    EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
  }
  std::vector<std::string> maps(10000, "{a: ");
  std::vector<std::string> lists(10000, "- ");
  for (const std::string& deep :
       {fmt::format("{}1{}", fmt::join(maps, ""), std::string(10000, '}')),
        fmt::format("tenants: {}", fmt::join(maps, "")),
        fmt::format("{}x\n", fmt::join(lists, ""))}) {
    Result<ClusterConfig> d = ParseConfigYaml(deep);
    ASSERT_FALSE(d.ok());
    EXPECT_NE(d.status().message().find("nesting is deeper than 64"), std::string::npos)
        << d.status().ToString();
  }

  // A billion laughs: aliases doubling 40 times.
  std::string bomb = "a0: &a0 [lol, lol]\n";
  for (int i = 1; i <= 40; ++i) bomb += fmt::format("a{0}: &a{0} [*a{1}, *a{1}]\n", i, i - 1);
  Result<ClusterConfig> l = ParseConfigYaml(bomb);
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("more than"), std::string::npos) << l.status().ToString();
}

// Aliases may add only a small multiple of the input's size: a bomb of a few hundred bytes is
// refused after a few thousand values, not after filling kMaxConfigValues (hundreds of MB).
TEST(ParseConfigYaml, AliasExpansionIsBoundedByTheInputSize) {
  std::string bomb = "a0: &a0 [lol, lol]\n";
  for (int i = 1; i <= 40; ++i) bomb += fmt::format("a{0}: &a{0} [*a{1}, *a{1}]\n", i, i - 1);
  Result<ClusterConfig> l = ParseConfigYaml(bomb);
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().code(), StatusCode::kInvalidArgument);
  const size_t budget = 4096 + 2 * bomb.size();
  EXPECT_NE(l.status().message().find(fmt::format("aliases expand to more than {} values", budget)),
            std::string::npos)
      << l.status().ToString();
  EXPECT_FALSE(l.status().field().empty()) << l.status().ToString();  // where it happened
  // One anchor used many times in a large input is within the budget.
  std::string many =
      "tenants:\n  - name: t0\n    queues:\n      - name: q0\n        guaranteed: &g {gpu: 1}\n";
  for (int i = 1; i < 200; ++i) {
    many +=
        fmt::format("  - name: t{0}\n    queues:\n      - name: q{0}\n        guaranteed: *g\n", i);
  }
  Result<ClusterConfig> ok = ParseConfigYaml(many);
  EXPECT_TRUE(ok.ok()) << ok.status().ToString();
}

TEST(ParseConfigYaml, AliasesWithinLimitsWork) {
  Result<ClusterConfig> r = ParseConfigYaml(R"(
tenants:
  - name: a
    queues:
      - {name: a1, max: &m {gpu: 4, cpu: 16}}
      - {name: a2, max: *m}
)");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->tenants[0].queues[2].quota.at("cpu").max, 16000);
}

TEST(DumpConfigYaml, RoundTrips) {
  Result<ClusterConfig> first = ParseConfigYaml(kExample);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  const std::string dumped = DumpConfigYaml(*first);
  Result<ClusterConfig> second = ParseConfigYaml(dumped);
  ASSERT_TRUE(second.ok()) << second.status().ToString() << "\n" << dumped;
  EXPECT_EQ(DumpConfigYaml(*second), dumped);
  EXPECT_TRUE(DiffConfig(*first, *second).empty());
  EXPECT_EQ(second->tenants[0].queues[2].quota.at("gpu").guaranteed, 500);
  EXPECT_EQ(second->gpu_models[1].price_milli_per_hour, 350);
  EXPECT_EQ(second->nodes[0].gpus[7].nvlink_domain, 1);
}

TEST(DumpConfigYaml, CanonicalText) {
  Result<ClusterConfig> r = ParseConfigYaml(R"(
users: [{name: alice, tenant: vision}]
tenants:
  - name: vision
    queues: [{name: train, guaranteed: {gpu: {any: 2, A100-80G: 0.5}, memory: 1Gi}}]
gpu_models: [{name: A100-80G, memory_mib: 80Gi, price_per_hour: 2.50}]
nodes:
  - {name: n1, labels: {zone: "1", on: "true"}, gpus: {count: 2, model: A100-80G}}
)");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(DumpConfigYaml(*r), R"(gpu_models:
  - {name: A100-80G, memory_mib: 81920, price_per_hour: 2.5}
tenants:
  - name: vision
    queues:
      - {name: train, guaranteed: {memory: 1024, gpu: {any: 2, A100-80G: 0.5}}}
users:
  - {name: alice, tenant: vision, role: member}
nodes:
  - {name: n1, labels: {"on": "true", zone: "1"}, gpus: {count: 2, model: A100-80G}}
)");
}

TEST(DumpConfigYaml, GpuListFormForUnevenNodes) {
  const std::string yaml = R"(
gpu_models: [{name: A, memory_mib: 100}, {name: B, memory_mib: 200}]
nodes:
  - name: mixed
    gpus:
      - {index: 0, model: A}
      - {index: 1, model: B, memory_mib: 150, nvlink_domain: 1}
      - {index: 3, model: B, healthy: false}
)";
  Result<ClusterConfig> r = ParseConfigYaml(yaml);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const std::string dumped = DumpConfigYaml(*r);
  Result<ClusterConfig> again = ParseConfigYaml(dumped);
  ASSERT_TRUE(again.ok()) << again.status().ToString() << "\n" << dumped;
  ASSERT_EQ(again->nodes[0].gpus.size(), 3u);
  EXPECT_EQ(again->nodes[0].gpus[1].memory_mib, 150);
  EXPECT_EQ(again->nodes[0].gpus[2].index, 3);
  EXPECT_FALSE(again->nodes[0].gpus[2].healthy);
  EXPECT_EQ(DumpConfigYaml(*again), dumped);
}

TEST(DumpConfigYaml, EmptyConfig) {
  EXPECT_EQ(DumpConfigYaml(ClusterConfig{}), "{}\n");
  Result<ClusterConfig> r = ParseConfigYaml("{}\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->tenants.empty());
}

}  // namespace
}  // namespace arbiter::api

namespace arbiter::api {
namespace {

TEST(SchedulerConfig, ParsesDumpsAndDiffs) {
  const char* yaml = R"(
scheduler:
  policy: fgd
  filters: [node-state, gpu-model, gpu, cpu, memory]
  scores: [{plugin: fgd, weight: 3}, {plugin: topology}]
  gpu_selector: fgd
  nodes_to_score: 200
)";
  auto c = ParseConfigYaml(yaml);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->scheduler.policy, "fgd");
  ASSERT_EQ(c->scheduler.scores.size(), 2u);
  EXPECT_EQ(c->scheduler.scores[0].weight, 3);
  EXPECT_EQ(c->scheduler.scores[1].weight, 1);
  EXPECT_EQ(c->scheduler.filters.size(), 5u);
  EXPECT_EQ(c->scheduler.nodes_to_score, 200);
  auto again = ParseConfigYaml(DumpConfigYaml(*c));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->scheduler, c->scheduler);
  const auto changes = DiffConfig(ClusterConfig{}, *c);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].kind, "scheduler");
  EXPECT_EQ(changes[0].action, "create");
}

TEST(SchedulerConfig, ErrorsNameTheField) {
  struct Case {
    const char* yaml;
    const char* field;
  };
  const Case cases[] = {
      {"scheduler: {speed: 1}", "scheduler.speed"},
      {"scheduler: {scores: [{weight: 2}]}", "scheduler.scores[0].plugin"},
      {"scheduler: {scores: [{plugin: binpack, weight: 0}]}", "scheduler.scores[0].weight"},
      {"scheduler: {nodes_to_score: -1}", "scheduler.nodes_to_score"},
      {"scheduler: {filters: [{a: 1}]}", "scheduler.filters[0]"},
      {"scheduler: {policy: Fast!}", "scheduler.policy"},
  };
  for (const Case& c : cases) {
    auto r = ParseConfigYaml(c.yaml);
    ASSERT_FALSE(r.ok()) << c.yaml;
    EXPECT_EQ(r.status().field(), c.field) << c.yaml << ": " << r.status().ToString();
  }
}

// Who tasks run as: a tenant's and a user's run_as, root only where the tenant allows it; the
// canonical form keeps them (the store reloads it).
TEST(RunAsConfig, ParsesDumpsAndRefusesRootUnlessAllowed) {
  Result<ClusterConfig> r = ParseConfigYaml(R"(
tenants:
  - {name: vision, run_as: {uid: 5001, gid: 5002}}
  - {name: ops, allow_root: true, run_as: {uid: 0}}
  - {name: nlp, run_as: {user: nlp-jobs}}
  - {name: plain}
users:
  - {name: alice, tenant: vision, run_as: {uid: 1001}}
  - {name: bob, tenant: vision}
)");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->tenants[0].run_as->uid, 5001);
  EXPECT_EQ(r->tenants[0].run_as->gid, 5002);
  EXPECT_FALSE(r->tenants[0].allow_root);
  EXPECT_TRUE(r->tenants[1].allow_root);
  EXPECT_EQ(r->tenants[1].run_as->uid, 0);
  EXPECT_EQ(r->tenants[2].run_as->user, "nlp-jobs");
  EXPECT_FALSE(r->tenants[3].run_as.has_value());
  EXPECT_EQ(r->users[0].run_as->uid, 1001);
  EXPECT_FALSE(r->users[1].run_as.has_value());
  const std::string dumped = DumpConfigYaml(*r);
  Result<ClusterConfig> back = ParseConfigYaml(dumped);
  ASSERT_TRUE(back.ok()) << back.status().ToString() << dumped;
  EXPECT_TRUE(DiffConfig(*r, *back).empty()) << dumped;
  EXPECT_EQ(DumpConfigYaml(*back), dumped);

  struct Bad {
    const char* yaml;
    const char* field;
    const char* message;
  };
  for (const Bad& b : std::vector<Bad>{
           {"tenants: [{name: t, run_as: {uid: 0}}]", "tenants[0].run_as.uid", "allow_root"},
           {"tenants: [{name: t, run_as: {uid: 7, gid: 0}}]", "tenants[0].run_as.gid", "root"},
           {"tenants: [{name: t}]\nusers: [{name: u, tenant: t, run_as: {uid: 0}}]",
            "users[0].run_as.uid", "allow_root"},
           {"tenants: [{name: t, run_as: {}}]", "tenants[0].run_as", "either user"},
           {"tenants: [{name: t, run_as: {user: a, uid: 3}}]", "tenants[0].run_as", "either user"},
           {"tenants: [{name: t, run_as: {user: a, gid: 3}}]", "tenants[0].run_as.gid",
            "own groups"},
           {"tenants: [{name: t, run_as: {user: \"a b\"}}]", "tenants[0].run_as.user",
            "not a valid user name"},
           {"tenants: [{name: t, run_as: {uid: -1}}]", "tenants[0].run_as.uid", ""},
           {"tenants: [{name: t, run_as: {uid: 4294967295}}]", "tenants[0].run_as.uid", ""},
           {"tenants: [{name: t, run_as: {home: /x, uid: 1}}]", "tenants[0].run_as.home",
            "unknown field"},
       }) {
    Result<ClusterConfig> bad = ParseConfigYaml(b.yaml);
    ASSERT_FALSE(bad.ok()) << b.yaml;
    EXPECT_EQ(bad.status().field(), b.field) << b.yaml << ": " << bad.status().ToString();
    EXPECT_NE(bad.status().message().find(b.message), std::string::npos)
        << b.yaml << ": " << bad.status().ToString();
  }
}

TEST(TenantBoundariesConfig, ImagesAndMountsParseDumpAndDiff) {
  Result<ClusterConfig> r = ParseConfigYaml(R"(
tenants:
  - name: vision
    images: {registries: ["registry.example.com/vision/"], insecure: ["localhost:5000"]}
    mounts: [{path: /data/imagenet, mode: ro}, {path: /checkpoints/vision, mode: rw}, {path: /x}]
  - name: nlp
    images: {registries: []}
  - name: open
)");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const TenantConfig& vision = r->tenants[0];
  ASSERT_TRUE(vision.images.registries.has_value());
  EXPECT_EQ(*vision.images.registries, std::vector<std::string>{"registry.example.com/vision/"});
  EXPECT_EQ(vision.images.insecure, std::vector<std::string>{"localhost:5000"});
  EXPECT_EQ(vision.mounts,
            (std::vector<MountRule>{
                {"/data/imagenet", true}, {"/checkpoints/vision", false}, {"/x", true}}));
  ASSERT_TRUE(r->tenants[1].images.registries.has_value());  // no registry at all
  EXPECT_TRUE(r->tenants[1].images.registries->empty());
  EXPECT_FALSE(r->tenants[2].images.registries.has_value());  // any registry
  EXPECT_TRUE(r->tenants[2].mounts.empty());

  const std::string dumped = DumpConfigYaml(*r);
  EXPECT_NE(dumped.find("/checkpoints/vision"), std::string::npos) << dumped;
  Result<ClusterConfig> back = ParseConfigYaml(dumped);
  ASSERT_TRUE(back.ok()) << back.status().ToString() << dumped;
  EXPECT_TRUE(DiffConfig(*r, *back).empty()) << dumped;
  EXPECT_EQ(DumpConfigYaml(*back), dumped);

  ClusterConfig changed = *r;
  changed.tenants[0].mounts[0].read_only = false;
  changed.tenants[2].images.registries = std::vector<std::string>{"docker.io/library/"};
  const std::vector<ConfigChange> changes = DiffConfig(*r, changed);
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[0].name, "open");
  EXPECT_NE(changes[0].detail.find("images.registries: (none) -> [docker.io/library/]"),
            std::string::npos)
      << changes[0].detail;
  EXPECT_EQ(changes[1].name, "vision");
  EXPECT_NE(changes[1].detail.find("mounts"), std::string::npos) << changes[1].detail;

  struct Bad {
    const char* yaml;
    const char* field;
    const char* message;
  };
  for (const Bad& b : std::vector<Bad>{
           {"tenants: [{name: t, mounts: [{path: data}]}]", "tenants[0].mounts[0].path",
            "absolute"},
           {"tenants: [{name: t, mounts: [{path: /data/../etc}]}]", "tenants[0].mounts[0].path",
            "'..'"},
           {"tenants: [{name: t, mounts: [{path: /d, mode: rx}]}]", "tenants[0].mounts[0].mode",
            "must be one of ro, rw"},
           {"tenants: [{name: t, mounts: [{path: /d}, {path: /d, mode: rw}]}]",
            "tenants[0].mounts[1].path", "duplicate path"},
           {"tenants: [{name: t, mounts: [{mode: ro}]}]", "tenants[0].mounts[0].path", "required"},
           {"tenants: [{name: t, images: {registries: [\"a b\"]}}]",
            "tenants[0].images.registries[0]", "not a registry prefix"},
           {"tenants: [{name: t, images: {insecure: [reg.io/x]}}]", "tenants[0].images.insecure[0]",
            "without a path"},
           {"tenants: [{name: t, images: {mirrors: []}}]", "tenants[0].images.mirrors",
            "unknown field"},
           {"tenants: [{name: t, queues: [{name: q, mounts: []}]}]", "tenants[0].queues[0].mounts",
            "unknown field"},
       }) {
    Result<ClusterConfig> c = ParseConfigYaml(b.yaml);
    ASSERT_FALSE(c.ok()) << b.yaml;
    EXPECT_EQ(c.status().field(), b.field) << c.status().ToString();
    EXPECT_NE(c.status().message().find(b.message), std::string::npos) << c.status().ToString();
  }
}

TEST(TenantBoundariesConfig, VolumesParseDumpAndDiff) {
  Result<ClusterConfig> r = ParseConfigYaml(R"(
tenants:
  - name: vision
    volumes: [{name: ckpt, mode: rw, size_gib: 500}, {name: datasets, mode: ro}, {name: scratch}]
  - name: nlp
    volumes:
      - name: ckpt
  - name: open
)");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->tenants[0].volumes,
            (std::vector<VolumeRule>{
                {"ckpt", false, 500}, {"datasets", true, 0}, {"scratch", false, 0}}));
  EXPECT_EQ(r->tenants[1].volumes, (std::vector<VolumeRule>{{"ckpt", false, 0}}));
  EXPECT_TRUE(r->tenants[2].volumes.empty());

  const std::string dumped = DumpConfigYaml(*r);
  EXPECT_NE(dumped.find("    volumes:\n      - {name: ckpt, mode: rw, size_gib: 500}\n      - "
                        "{name: datasets, mode: ro}\n      - {name: scratch, mode: rw}\n"),
            std::string::npos)
      << dumped;
  EXPECT_NE(dumped.find("{name: nlp, volumes: [{name: ckpt, mode: rw}]}"), std::string::npos)
      << dumped;
  Result<ClusterConfig> back = ParseConfigYaml(dumped);
  ASSERT_TRUE(back.ok()) << back.status().ToString() << dumped;
  EXPECT_TRUE(DiffConfig(*r, *back).empty()) << dumped;
  EXPECT_EQ(DumpConfigYaml(*back), dumped);

  ClusterConfig changed = *r;
  changed.tenants[0].volumes[1].read_only = false;
  changed.tenants[2].volumes = {{"ckpt", false, 10}};
  const std::vector<ConfigChange> changes = DiffConfig(*r, changed);
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[0].name, "open");
  EXPECT_EQ(changes[0].detail, "volumes: (none) -> [{name: ckpt, mode: rw, size_gib: 10}]");
  EXPECT_EQ(changes[1].name, "vision");
  EXPECT_NE(changes[1].detail.find("{name: datasets, mode: ro}"), std::string::npos)
      << changes[1].detail;
  EXPECT_NE(changes[1].detail.find("-> [{name: ckpt, mode: rw, size_gib: 500}, {name: datasets, "
                                   "mode: rw}"),
            std::string::npos)
      << changes[1].detail;

  struct Bad {
    const char* yaml;
    const char* field;
    const char* message;
  };
  for (const Bad& b : std::vector<Bad>{
           {"tenants: [{name: t, volumes: [{name: ckpt}, {name: Ckpt}]}]",
            "tenants[0].volumes[1].name", "is not a volume name"},
           {"tenants: [{name: t, volumes: [{name: ckpt-}]}]", "tenants[0].volumes[0].name",
            "is not a volume name"},
           {"tenants: [{name: t, volumes: [{name: ckpt}, {name: ckpt, mode: ro}]}]",
            "tenants[0].volumes[1].name", "duplicate volume"},
           {"tenants: [{name: t, volumes: [{mode: ro}]}]", "tenants[0].volumes[0].name",
            "required"},
           {"tenants: [{name: t, volumes: [{name: a, mode: rx}]}]", "tenants[0].volumes[0].mode",
            "must be one of ro, rw"},
           {"tenants: [{name: t, volumes: [{name: a, size_gib: 0}]}]",
            "tenants[0].volumes[0].size_gib", ""},
           {"tenants: [{name: t, volumes: [{name: a, size_gib: big}]}]",
            "tenants[0].volumes[0].size_gib", ""},
           {"tenants: [{name: t, volumes: [{name: a, path: /x}]}]", "tenants[0].volumes[0].path",
            "unknown field"},
           {"tenants: [{name: t, volumes: {name: a}}]", "tenants[0].volumes", ""},
           {"tenants: [{name: t, queues: [{name: q, volumes: []}]}]",
            "tenants[0].queues[0].volumes", "unknown field"},
       }) {
    Result<ClusterConfig> c = ParseConfigYaml(b.yaml);
    ASSERT_FALSE(c.ok()) << b.yaml;
    EXPECT_EQ(c.status().field(), b.field) << c.status().ToString();
    EXPECT_NE(c.status().message().find(b.message), std::string::npos) << c.status().ToString();
  }
}

TEST(QueueNamesConfig, DefaultQueueAndAliasesParseDumpAndDiff) {
  Result<ClusterConfig> r = ParseConfigYaml(R"(
tenants:
  - name: hpc
    default_queue: hpc-a100
    queues:
      - {name: hpc-a100, aliases: [gpu_a100, GPU-A100]}
      - name: hpc-h100
        aliases: [gpu_h100]
        queues: [{name: hpc-h100-long}]
)");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->tenants[0].default_queue, "hpc-a100");
  EXPECT_EQ(r->tenants[0].queues[1].aliases, (std::vector<std::string>{"gpu_a100", "GPU-A100"}));
  const std::string dumped = DumpConfigYaml(*r);
  EXPECT_NE(dumped.find("default_queue: hpc-a100"), std::string::npos) << dumped;
  Result<ClusterConfig> back = ParseConfigYaml(dumped);
  ASSERT_TRUE(back.ok()) << back.status().ToString() << dumped;
  EXPECT_TRUE(DiffConfig(*r, *back).empty()) << dumped;
  // Another default, or one alias more, is an update of the tenant or the queue.
  ClusterConfig changed = *r;
  changed.tenants[0].default_queue = "hpc-h100-long";
  changed.tenants[0].queues[2].aliases.push_back("h100");
  const std::vector<ConfigChange> changes = DiffConfig(*r, changed);
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_NE(changes[0].detail.find("default_queue"), std::string::npos) << changes[0].detail;
  EXPECT_NE(changes[1].detail.find("aliases"), std::string::npos) << changes[1].detail;

  struct Bad {
    const char* yaml;
    const char* field;
    const char* message;
  };
  for (const Bad& b : std::vector<Bad>{
           {"tenants: [{name: t, default_queue: nope, queues: [{name: q}]}]",
            "tenants[0].default_queue", "\"nope\" is not a queue of tenant \"t\"; its queues: q"},
           {"tenants: [{name: t, queues: [{name: q}]}, {name: u, default_queue: q}]",
            "tenants[1].default_queue", "not a queue of tenant \"u\"; its queues: none"},
           {"tenants: [{name: t, default_queue: p, queues: [{name: p, queues: [{name: c}]}]}]",
            "tenants[0].default_queue", "has child queues"},
           {"tenants: [{name: t, queues: [{name: q, aliases: [gpu_a100]}, {name: r, aliases: "
            "[GPU_A100]}]}]",
            "tenants[0].queues[1].aliases[0]", "duplicate alias \"GPU_A100\""},
           {"tenants: [{name: t, queues: [{name: q, aliases: [R]}, {name: r}]}]",
            "tenants[0].queues[0].aliases[0]", "must not be another queue's name"},
           {"tenants: [{name: t, queues: [{name: q, aliases: [\"gpu a100\"]}]}]",
            "tenants[0].queues[0].aliases[0]", "not a valid alias"},
           {"tenants: [{name: t, queues: [{name: q, aliases: [_x]}]}]",
            "tenants[0].queues[0].aliases[0]", "not a valid alias"},
           {"tenants: [{name: t, aliases: [x]}]", "tenants[0].aliases", "unknown field"},
       }) {
    Result<ClusterConfig> c = ParseConfigYaml(b.yaml);
    ASSERT_FALSE(c.ok()) << b.yaml;
    EXPECT_EQ(c.status().field(), b.field) << c.status().ToString();
    EXPECT_NE(c.status().message().find(b.message), std::string::npos) << c.status().ToString();
  }
}

TEST(PriorityClassConfig, AllowedTenantsAndQueuesParseDumpAndDiff) {
  Result<ClusterConfig> r = ParseConfigYaml(R"(
priority_classes:
  - {name: prod, value: 1000, preemptible: false, allowed_tenants: [vision], allowed_queues: [nlp-serve]}
  - {name: normal, value: 100}
tenants:
  - {name: vision}
  - {name: nlp, queues: [{name: nlp-serve}, {name: nlp-train}]}
)");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->priority_classes[0].allowed_tenants, std::vector<std::string>{"vision"});
  EXPECT_EQ(r->priority_classes[0].allowed_queues, std::vector<std::string>{"nlp-serve"});
  EXPECT_TRUE(r->priority_classes[1].allowed_tenants.empty());
  EXPECT_TRUE(r->priority_classes[1].allowed_queues.empty());
  const std::string dumped = DumpConfigYaml(*r);
  EXPECT_NE(dumped.find("allowed_tenants"), std::string::npos) << dumped;
  Result<ClusterConfig> back = ParseConfigYaml(dumped);
  ASSERT_TRUE(back.ok()) << back.status().ToString() << dumped;
  EXPECT_TRUE(DiffConfig(*r, *back).empty()) << dumped;
  EXPECT_EQ(back->priority_classes[0].allowed_queues, std::vector<std::string>{"nlp-serve"});
  // Opening the class to another queue is an update of the class.
  ClusterConfig wider = *r;
  wider.priority_classes[0].allowed_queues.push_back("nlp-train");
  const std::vector<ConfigChange> changes = DiffConfig(*r, wider);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].kind, "priority_class");
  EXPECT_NE(changes[0].detail.find("allowed_queues"), std::string::npos) << changes[0].detail;

  struct Bad {
    const char* yaml;
    const char* field;
    const char* message;
  };
  for (const Bad& b : std::vector<Bad>{
           {"priority_classes: [{name: p, value: 1, allowed_tenants: [nope]}]\n"
            "tenants: [{name: t}]",
            "priority_classes[0].allowed_tenants[0]", "unknown tenant \"nope\""},
           {"priority_classes: [{name: p, value: 1, allowed_queues: [nope]}]\n"
            "tenants: [{name: t, queues: [{name: q}]}]",
            "priority_classes[0].allowed_queues[0]", "unknown queue \"nope\""},
           {"priority_classes: [{name: p, value: 1, allowed_tenants: [q]}]\n"
            "tenants: [{name: t, queues: [{name: q}]}]",
            "priority_classes[0].allowed_tenants[0]", "list it under allowed_queues"},
           {"priority_classes: [{name: p, value: 1, allowed_queues: [q, t]}]\n"
            "tenants: [{name: t, queues: [{name: q}]}]",
            "priority_classes[0].allowed_queues[1]", "list it under allowed_tenants"},
           {"priority_classes: [{name: p, value: 1, allowed_tenants: [t, t]}]\n"
            "tenants: [{name: t}]",
            "priority_classes[0].allowed_tenants[1]", "duplicate"},
           {"priority_classes: [{name: p, value: 1, allowed_tenants: t}]\ntenants: [{name: t}]",
            "priority_classes[0].allowed_tenants", "must be a list"},
           {"priority_classes: [{name: p, value: 1, allowed_tenants: [t]}]",
            "priority_classes[0].allowed_tenants[0]", "unknown tenant"},
       }) {
    Result<ClusterConfig> bad = ParseConfigYaml(b.yaml);
    ASSERT_FALSE(bad.ok()) << b.yaml;
    EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(bad.status().field(), b.field) << b.yaml << ": " << bad.status().ToString();
    EXPECT_NE(bad.status().message().find(b.message), std::string::npos)
        << b.yaml << ": " << bad.status().ToString();
  }
}

}  // namespace
}  // namespace arbiter::api

namespace arbiter::api {
namespace {

constexpr const char* kApprovalBase = R"(
priority_classes:
  - {name: normal, value: 100}
tenants:
  - name: vision
    queues:
      - {name: vision-train}
)";

TEST(ApprovalConfig, ParsesDumpsAndDiffs) {
  const std::string yaml = std::string(kApprovalBase) + R"(
approvals:
  - name: big-jobs
    when: {gpus_at_least: 32}
    approvers: {role: tenant-admin}
    expires_after_seconds: 86400
  - name: long-training
    when: {gpu_hours_at_least: 1000, priority_class: normal, queue: vision-train, type: training}
    approvers: {users: [carol, dave]}
)";
  auto c = ParseConfigYaml(yaml);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->approvals.size(), 2u);
  EXPECT_EQ(c->approvals[0].name, "big-jobs");
  EXPECT_EQ(c->approvals[0].when.gpus_at_least, 32);
  EXPECT_EQ(c->approvals[0].approver_role, "tenant-admin");
  EXPECT_EQ(c->approvals[0].expires_after_seconds, 86400);
  EXPECT_EQ(c->approvals[1].when.gpu_hours_at_least, 1000);
  EXPECT_EQ(c->approvals[1].when.queue, "vision-train");
  EXPECT_EQ(c->approvals[1].when.type, "training");
  EXPECT_EQ(c->approvals[1].approver_users, (std::vector<std::string>{"carol", "dave"}));
  EXPECT_EQ(c->approvals[1].expires_after_seconds, 0);
  auto again = ParseConfigYaml(DumpConfigYaml(*c));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->approvals, c->approvals);

  ClusterConfig changed = *c;
  changed.approvals[0].when.gpus_at_least = 64;
  changed.approvals.pop_back();
  const auto changes = DiffConfig(*c, changed);
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[0].kind, "approval");
  EXPECT_EQ(changes[0].name, "big-jobs");
  EXPECT_EQ(changes[0].action, "update");
  EXPECT_EQ(changes[0].detail, "when.gpus_at_least: 32 -> 64");
  EXPECT_EQ(changes[1].name, "long-training");
  EXPECT_EQ(changes[1].action, "delete");
}

TEST(ApprovalConfig, ErrorsNameTheField) {
  struct Case {
    const char* rules;
    const char* field;
  };
  const Case cases[] = {
      {"[{when: {gpus_at_least: 8}, approvers: {role: tenant-admin}}]", "approvals[0].name"},
      {"[{name: Big, when: {gpus_at_least: 8}, approvers: {role: tenant-admin}}]",
       "approvals[0].name"},
      {"[{name: a, approvers: {role: tenant-admin}}]", "approvals[0].when"},
      {"[{name: a, when: {}, approvers: {role: tenant-admin}}]", "approvals[0].when"},
      {"[{name: a, when: {gpus: 8}, approvers: {role: tenant-admin}}]", "approvals[0].when.gpus"},
      {"[{name: a, when: {gpus_at_least: 0}, approvers: {role: tenant-admin}}]",
       "approvals[0].when.gpus_at_least"},
      {"[{name: a, when: {gpu_hours_at_least: x}, approvers: {role: tenant-admin}}]",
       "approvals[0].when.gpu_hours_at_least"},
      {"[{name: a, when: {priority_class: gold}, approvers: {role: tenant-admin}}]",
       "approvals[0].when.priority_class"},
      {"[{name: a, when: {queue: nowhere}, approvers: {role: tenant-admin}}]",
       "approvals[0].when.queue"},
      {"[{name: a, when: {type: cooking}, approvers: {role: tenant-admin}}]",
       "approvals[0].when.type"},
      {"[{name: a, when: {gpus_at_least: 8}}]", "approvals[0].approvers"},
      {"[{name: a, when: {gpus_at_least: 8}, approvers: {}}]", "approvals[0].approvers"},
      {"[{name: a, when: {gpus_at_least: 8}, approvers: {role: member}}]",
       "approvals[0].approvers.role"},
      {"[{name: a, when: {gpus_at_least: 8}, approvers: {role: tenant-admin, users: [b]}}]",
       "approvals[0].approvers"},
      {"[{name: a, when: {gpus_at_least: 8}, approvers: {users: []}}]",
       "approvals[0].approvers.users"},
      {"[{name: a, when: {gpus_at_least: 8}, approvers: {users: [b, b]}}]",
       "approvals[0].approvers.users[1]"},
      {"[{name: a, when: {gpus_at_least: 8}, approvers: {users: ['no spaces']}}]",
       "approvals[0].approvers.users[0]"},
      {"[{name: a, when: {gpus_at_least: 8}, approvers: {role: tenant-admin}, "
       "expires_after_seconds: -1}]",
       "approvals[0].expires_after_seconds"},
      {"[{name: a, when: {gpus_at_least: 8}, approvers: {role: tenant-admin}, color: red}]",
       "approvals[0].color"},
      {"[{name: a, when: {gpus_at_least: 8}, approvers: {role: tenant-admin}}, "
       "{name: a, when: {gpus_at_least: 9}, approvers: {role: tenant-admin}}]",
       "approvals[1].name"},
  };
  for (const Case& c : cases) {
    const std::string yaml = std::string(kApprovalBase) + "approvals: " + c.rules + "\n";
    auto r = ParseConfigYaml(yaml);
    ASSERT_FALSE(r.ok()) << c.rules;
    EXPECT_EQ(r.status().field(), c.field) << c.rules << ": " << r.status().ToString();
  }
}

TEST(IdentityConfig, ParsesDumpsDiffsAndMaps) {
  const std::string yaml = std::string(kApprovalBase) + R"(
identity:
  oidc:
    issuer: https://idp.example.com
    audience: arbiter
    client_id: arbiter-cli
  ldap:
    url: ldap://ldap.example.com
    user_dn: uid={user},ou=people,dc=example,dc=com
    group_base: ou=groups,dc=example,dc=com
  mappings:
    - {group: vision-team, tenant: vision, role: member}
    - {group: vision-leads, tenant: vision, role: tenant-admin}
    - {user: root-of-all, role: admin}
    - {group: platform, role: admin}
)";
  auto c = ParseConfigYaml(yaml);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE(c->identity.oidc.has_value());
  EXPECT_EQ(c->identity.oidc->issuer, "https://idp.example.com");
  EXPECT_EQ(c->identity.oidc->username_claim, "preferred_username");
  EXPECT_EQ(c->identity.oidc->groups_claim, "groups");
  ASSERT_TRUE(c->identity.ldap.has_value());
  EXPECT_EQ(c->identity.ldap->token_ttl_seconds, 43200);
  ASSERT_EQ(c->identity.mappings.size(), 4u);
  auto again = ParseConfigYaml(DumpConfigYaml(*c));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->identity, c->identity);

  // The first mapping that matches applies; a person none matches gets none.
  const IdentityMapping* m = MapIdentity(c->identity, "ann", {"platform", "vision-leads"});
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->role, "tenant-admin");
  m = MapIdentity(c->identity, "root-of-all", {});
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->role, "admin");
  EXPECT_EQ(MapIdentity(c->identity, "eve", {"visitors"}), nullptr);

  ClusterConfig changed = *c;
  changed.identity.oidc->audience = "arbiter-prod";
  const auto changes = DiffConfig(*c, changed);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].kind, "identity");
  EXPECT_EQ(changes[0].action, "update");
  EXPECT_EQ(changes[0].detail, "oidc.audience: arbiter -> arbiter-prod");
}

TEST(IdentityConfig, ErrorsNameTheField) {
  struct Case {
    const char* identity;
    const char* field;
  };
  const Case cases[] = {
      {"{color: red}", "identity.color"},
      {"{oidc: {audience: a}, mappings: [{group: g, role: admin}]}", "identity.oidc.issuer"},
      {"{oidc: {issuer: ftp://x, audience: a}, mappings: [{group: g, role: admin}]}",
       "identity.oidc.issuer"},
      {"{oidc: {issuer: http://idp.example.com, audience: a}, "
       "mappings: [{group: g, role: admin}]}",
       "identity.oidc.issuer"},
      {"{oidc: {issuer: https://idp/, audience: a}, mappings: [{group: g, role: admin}]}",
       "identity.oidc.issuer"},
      {"{oidc: {issuer: https://idp}, mappings: [{group: g, role: admin}]}",
       "identity.oidc.audience"},
      {"{oidc: {issuer: https://idp, audience: a, clock_skew_seconds: 9999}, "
       "mappings: [{group: g, role: admin}]}",
       "identity.oidc.clock_skew_seconds"},
      {"{oidc: {issuer: https://idp, audience: a}}", "identity.mappings"},
      {"{ldap: {url: http://x, user_dn: 'uid={user}'}, mappings: [{group: g, role: admin}]}",
       "identity.ldap.url"},
      {"{ldap: {url: ldap://x, user_dn: uid=bob}, mappings: [{group: g, role: admin}]}",
       "identity.ldap.user_dn"},
      {"{ldap: {url: ldap://x, user_dn: 'uid={user}', group_filter: memberUid}, "
       "mappings: [{group: g, role: admin}]}",
       "identity.ldap.group_filter"},
      {"{mappings: [{role: admin}]}", "identity.mappings[0]"},
      {"{mappings: [{group: g, user: u, role: admin}]}", "identity.mappings[0]"},
      {"{mappings: [{group: g, role: owner}]}", "identity.mappings[0].role"},
      {"{mappings: [{group: g, role: member}]}", "identity.mappings[0].tenant"},
      {"{mappings: [{group: g, tenant: nowhere, role: member}]}", "identity.mappings[0].tenant"},
      {"{mappings: [{group: g, tenant: vision, role: admin}]}", "identity.mappings[0].tenant"},
  };
  for (const Case& c : cases) {
    const std::string yaml = std::string(kApprovalBase) + "identity: " + c.identity + "\n";
    auto r = ParseConfigYaml(yaml);
    ASSERT_FALSE(r.ok()) << c.identity;
    EXPECT_EQ(r.status().field(), c.field) << c.identity << ": " << r.status().ToString();
  }
}

}  // namespace
}  // namespace arbiter::api
