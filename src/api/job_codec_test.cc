#include "api/job_codec.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cctype>
#include <optional>
#include <ostream>
#include <string>

namespace arbiter::api {
namespace {

constexpr const char* kExample = R"({
  "name": "llama-ft", "queue": "vision-train", "type": "fine-tuning", "priority_class": "normal",
  "command": ["python", "train.py", "--epochs", "3"], "env": {"HF_HOME": "/data/hf"},
  "workdir": "/home/alice/llama", "tasks": 2, "distinct_nodes": true,
  "resources": {"gpus": 4, "gpu_milli": 1000, "gpu_memory_mib": 0, "cpu_milli": 16000,
                "memory_mib": 65536},
  "gpu_models": ["A100-80G"], "node_selector": {"rack": "r1"}, "walltime_seconds": 86400,
  "retry": {"max_retries": 3, "backoff_seconds": 30, "backoff_cap_seconds": 3600,
            "on_exit_codes": []},
  "preemptible": true, "grace_period_seconds": 60,
  "tolerations": [{"key": "dedicated", "value": "inference"}],
  "container_image": "registry.example.com/vision/train:1.2"
})";

// A minimal valid body with `extra` members appended ("\"tasks\": 2").
std::string Body(const std::string& extra) {
  if (extra.empty()) return R"({"queue": "q", "command": ["run"]})";
  return fmt::format(R"({{"queue": "q", "command": ["run"], {}}})", extra);
}

TEST(ParseJobSubmission, ReadsEveryField) {
  Result<JobSpec> r = ParseJobSubmission(kExample);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const JobSpec& j = *r;
  EXPECT_EQ(j.name, "llama-ft");
  EXPECT_EQ(j.queue, "vision-train");
  EXPECT_EQ(j.type, JobType::kFineTuning);
  EXPECT_EQ(j.priority_class, "normal");
  EXPECT_EQ(j.command, (std::vector<std::string>{"python", "train.py", "--epochs", "3"}));
  EXPECT_EQ(j.env.at("HF_HOME"), "/data/hf");
  EXPECT_EQ(j.workdir, "/home/alice/llama");
  EXPECT_EQ(j.tasks, 2);
  EXPECT_TRUE(j.distinct_nodes);
  EXPECT_EQ(j.resources, (TaskResources{4, 1000, 0, 16000, 65536}));
  EXPECT_EQ(j.gpu_models, std::vector<std::string>{"A100-80G"});
  EXPECT_EQ(j.node_selector.at("rack"), "r1");
  EXPECT_EQ(j.walltime_seconds, 86400);
  EXPECT_EQ(j.retry, (RetryPolicy{3, 30, 3600, {}}));
  EXPECT_EQ(j.preemptible, true);
  EXPECT_EQ(j.grace_period_seconds, 60);
  EXPECT_EQ(j.tolerations, (std::vector<Toleration>{{"dedicated", "inference"}}));
  EXPECT_EQ(j.container_image, "registry.example.com/vision/train:1.2");
  EXPECT_TRUE(j.tenant.empty());
  EXPECT_TRUE(j.user.empty());
}

TEST(ParseJobSubmission, MountsParseAndRoundTrip) {
  auto job = ParseJobSubmission(Body(
      R"("container_image": "busybox", "mounts": [{"path": "/data/imagenet", "target": "/data",
      "mode": "ro"}, {"path": "/checkpoints/vision", "mode": "rw"}, {"path": "/x"}])"));
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->mounts, (std::vector<Mount>{{"/data/imagenet", "/data", true},
                                             {"/checkpoints/vision", "", false},
                                             {"/x", "", true}}));
  const std::string text = JobSpecJsonText(*job);
  EXPECT_NE(text.find(R"("mounts":[{"mode":"ro","path":"/data/imagenet","target":"/data"},)"),
            std::string::npos)
      << text;
  EXPECT_EQ(nlohmann::json::parse(text), JobSpecToJson(*job));
  auto back = ParseStoredJob(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->mounts, job->mounts);

  struct Bad {
    const char* extra;
    const char* field;
  };
  for (const Bad& b : std::vector<Bad>{
           {R"("mounts": [{"path": "/d"}])", "mounts"},  // no image
           {R"("container_image": "x", "mounts": [{"path": "/d", "mode": "rx"}])",
            "mounts[0].mode"},
           {R"("container_image": "x", "mounts": [{"target": "/d"}])", "mounts[0].path"},
           {R"("container_image": "x", "mounts": [{"path": "/d", "size": 1}])", "mounts[0].size"},
           {R"("container_image": "x", "mounts": [{"path": "/a/../b"}])", "mounts[0].path"},
           {R"("container_image": "x", "mounts": {"path": "/d"})", "mounts"},
       }) {
    auto r = ParseJobSubmission(Body(b.extra));
    ASSERT_FALSE(r.ok()) << b.extra;
    EXPECT_EQ(r.status().field(), b.field) << r.status().ToString();
  }
}

// A volume mount: the tenant's volume by name (rw unless said), with or without an image.
TEST(ParseJobSubmission, VolumeMountsParseAndRoundTrip) {
  auto job = ParseJobSubmission(Body(
      R"("container_image": "busybox", "mounts": [{"volume": "ckpt", "target": "/ckpt"},
      {"volume": "datasets", "target": "/data", "mode": "ro"}, {"path": "/x"}])"));
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->mounts,
            (std::vector<Mount>{
                {"", "/ckpt", false, "ckpt"}, {"", "/data", true, "datasets"}, {"/x", "", true}}));
  const std::string text = JobSpecJsonText(*job);
  EXPECT_NE(text.find(R"({"mode":"rw","target":"/ckpt","volume":"ckpt"})"), std::string::npos)
      << text;
  auto back = ParseStoredJob(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->mounts, job->mounts);

  auto host = ParseJobSubmission(Body(R"("mounts": [{"volume": "ckpt"}])"));
  ASSERT_TRUE(host.ok()) << host.status().ToString();
  EXPECT_EQ(host->mounts, (std::vector<Mount>{{"", "", false, "ckpt"}}));

  struct Bad {
    const char* extra;
    const char* field;
  };
  for (const Bad& b : std::vector<Bad>{
           {R"("mounts": [{"volume": "ckpt", "path": "/d"}])", "mounts[0].volume"},
           {R"("mounts": [{"volume": ""}])", "mounts[0].volume"},
           {R"("mounts": [{"volume": "Ckpt"}])", "mounts[0].volume"},
           {R"("mounts": [{"volume": 3}])", "mounts[0].volume"},
           {R"("mounts": [{"volume": "ckpt", "mode": "ro"}])", "mounts[0].mode"},
           {R"("mounts": [{"volume": "ckpt", "target": "/ckpt"}])", "mounts[0].target"},
           {R"("container_image": "x", "mounts": [{"volume": "ckpt"}])", "mounts[0].target"},
       }) {
    auto r = ParseJobSubmission(Body(b.extra));
    ASSERT_FALSE(r.ok()) << b.extra;
    EXPECT_EQ(r.status().field(), b.field) << r.status().ToString();
  }
}

TEST(ParseJobSubmission, Defaults) {
  Result<JobSpec> r = ParseJobSubmission(Body(""));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->type, JobType::kTraining);
  EXPECT_EQ(r->tasks, 1);
  EXPECT_EQ(r->resources.gpu_milli, 1000);
  EXPECT_EQ(r->resources.gpus, 0);
  EXPECT_FALSE(r->preemptible.has_value());
  EXPECT_FALSE(r->grace_period_seconds.has_value());

  // null is absent.
  Result<JobSpec> n = ParseJobSubmission(Body(R"("tasks": null, "preemptible": null)"));
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(n->tasks, 1);
  EXPECT_FALSE(n->preemptible.has_value());

  // No queue (or an empty one): the server uses the tenant's default_queue. A Slurm partition
  // name (capitals, '_', '.') passes here; the server resolves it as an alias.
  for (const char* body : {R"({"command": ["x"]})", R"({"queue": "", "command": ["x"]})"}) {
    Result<JobSpec> d = ParseJobSubmission(body);
    ASSERT_TRUE(d.ok()) << body << ": " << d.status().ToString();
    EXPECT_EQ(d->queue, "");
  }
  Result<JobSpec> a = ParseJobSubmission(R"({"queue": "gpu_H100.x-1", "command": ["x"]})");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->queue, "gpu_H100.x-1");
}

TEST(ParseJobSubmission, FractionalGpu) {
  Result<JobSpec> r = ParseJobSubmission(
      Body(R"("resources": {"gpus": 1, "gpu_milli": 250, "gpu_memory_mib": 8192})"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->resources.fractional());
  EXPECT_EQ(r->resources.gpu_milli, 250);
}

struct Rejection {
  std::string body;
  std::string field;
  std::string message;  // a part of the message
};

class JobRejection : public testing::TestWithParam<Rejection> {};

// Shown in test names: the field, in characters test names allow.
void PrintTo(const Rejection& r, std::ostream* os) {
  std::string name = r.field.empty() ? "body" : r.field;
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '[' && c != ']') c = '_';
  }
  *os << name;
}

TEST_P(JobRejection, NamesTheField) {
  const Rejection& c = GetParam();
  Result<JobSpec> r = ParseJobSubmission(c.body);
  ASSERT_FALSE(r.ok()) << c.body;
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().field(), c.field) << r.status().ToString();
  EXPECT_NE(r.status().message().find(c.message), std::string::npos) << r.status().ToString();
}

std::string Repeated(const std::string& item, int n) {
  std::vector<std::string> items(static_cast<size_t>(n), item);
  return fmt::format("{}", fmt::join(items, ","));
}

std::string ManyEnv(int n) {
  std::vector<std::string> vars;
  for (int i = 0; i < n; ++i) vars.push_back(fmt::format(R"("V{}": "x")", i));
  return fmt::format(R"("env": {{{}}})", fmt::join(vars, ","));
}

INSTANTIATE_TEST_SUITE_P(
    Fields, JobRejection,
    testing::Values(
        // Required and unknown fields.
        Rejection{R"({"queue": "q"})", "command", "is required"},
        Rejection{Body(R"("tenant": "vision")"), "tenant", "from the token"},
        Rejection{Body(R"("user": "alice")"), "user", "from the token"},
        Rejection{Body(R"("id": 7)"), "id", "not part of the submission"},
        Rejection{Body(R"("gpus": 4)"), "gpus", "unknown field"},
        Rejection{Body(R"("resources": {"gpu": 4})"), "resources.gpu", "unknown field"},
        Rejection{Body(R"("retry": {"max": 1})"), "retry.max", "allowed here"},
        // Wrong types.
        Rejection{Body(R"("resources": {"gpus": "4"})"), "resources.gpus", "must be an integer"},
        Rejection{Body(R"("resources": {"gpus": 4.5})"), "resources.gpus", "got 4.5"},
        Rejection{Body(R"("resources": {"gpus": 4.0})"), "resources.gpus", "must be an integer"},
        Rejection{Body(R"("resources": {"gpus": true})"), "resources.gpus", "got true"},
        Rejection{Body(R"("resources": {"gpus": [4]})"), "resources.gpus", "got a list"},
        Rejection{Body(R"("resources": [])"), "resources", "must be a mapping"},
        Rejection{Body(R"("distinct_nodes": "true")"), "distinct_nodes", "true or false"},
        Rejection{Body(R"("preemptible": 1)"), "preemptible", "true or false"},
        Rejection{Body(R"("name": 5)"), "name", "must be a string"},
        Rejection{R"({"queue": 5, "command": ["x"]})", "queue", "must be a string"},
        Rejection{R"({"queue": "q", "command": "python"})", "command", "must be a list"},
        // Ranges and huge numbers.
        Rejection{Body(R"("resources": {"gpus": -1})"), "resources.gpus", "between 0 and 1024"},
        Rejection{Body(R"("resources": {"gpus": 2000})"), "resources.gpus", "between 0 and 1024"},
        Rejection{Body(R"("resources": {"gpus": 99999999999999999999})"), "resources.gpus",
                  "99999999999999999999"},
        Rejection{Body(R"("resources": {"gpus": 1e400})"), "resources.gpus", "out of range"},
        Rejection{Body(R"("resources": {"cpu_milli": -1e400})"), "resources.cpu_milli",
                  "out of range"},
        Rejection{Body(R"("resources": {"memory_mib": 9223372036854775808})"),
                  "resources.memory_mib", "must be an integer"},
        Rejection{Body(R"("resources": {"gpu_milli": 0})"), "resources.gpu_milli",
                  "between 1 and 1000"},
        Rejection{Body(R"("resources": {"gpus": 2, "gpu_milli": 500})"), "resources.gpu_milli",
                  "needs gpus = 1"},
        Rejection{Body(R"("tasks": 2147483648)"), "tasks", "between 1 and 100000"},
        Rejection{Body(R"("tasks": 0)"), "tasks", "between 1 and 100000"},
        Rejection{Body(R"("walltime_seconds": -5)"), "walltime_seconds", "between 0 and"},
        Rejection{Body(R"("grace_period_seconds": 100000)"), "grace_period_seconds",
                  "between 0 and 86400"},
        Rejection{Body(R"("retry": {"max_retries": -1})"), "retry.max_retries", "between 0"},
        Rejection{Body(R"("retry": {"backoff_seconds": 60, "backoff_cap_seconds": 30})"),
                  "retry.backoff_cap_seconds", ">= backoff_seconds"},
        Rejection{Body(R"("retry": {"on_exit_codes": [1, 300]})"), "retry.on_exit_codes[1]",
                  "between 0 and 255"},
        Rejection{Body(R"("retry": {"on_exit_codes": [1, 1]})"), "retry.on_exit_codes[1]",
                  "duplicate"},
        // Names and strings.
        Rejection{R"({"queue": "gpu h100", "command": ["x"]})", "queue", "not a valid queue name"},
        Rejection{R"({"queue": "-a", "command": ["x"]})", "queue", "not a valid queue name"},
        Rejection{R"({"queue": "_a", "command": ["x"]})", "queue", "not a valid queue name"},
        Rejection{Body(R"("type": "inference")"), "type", "unknown job type"},
        Rejection{Body(R"("priority_class": "High")"), "priority_class", "not a valid"},
        Rejection{Body(R"("workdir": "relative/dir")"), "workdir", "absolute path"},
        Rejection{Body(R"("name": "a\u0001b")"), "name", "control characters"},
        Rejection{Body(R"("container_image": "a b")"), "container_image", "spaces"},
        Rejection{R"({"queue": "q", "command": []})", "command", "must not be empty"},
        Rejection{R"({"queue": "q", "command": [""]})", "command[0]", "empty"},
        Rejection{R"({"queue": "q", "command": ["x", 5]})", "command[1]", "must be a string"},
        Rejection{R"({"queue": "q", "command": ["a\u0000b"]})", "command[0]", "NUL"},
        Rejection{Body(R"("env": {"1BAD": "x"})"), "env.1BAD", "not a valid variable name"},
        Rejection{Body(R"("env": {"A B": "x"})"), "env[\"A B\"]", "not a valid variable name"},
        Rejection{Body(R"("env": {"A": 5})"), "env.A", "must be a string"},
        Rejection{Body(R"("env": ["A=1"])"), "env", "must be a mapping"},
        Rejection{Body(R"("gpu_models": ["A100-80G"])"), "gpu_models", "asks for no GPU"},
        Rejection{Body(R"("resources": {"gpus": 1}, "gpu_models": ["A100", "A100"])"),
                  "gpu_models[1]", "duplicate"},
        Rejection{Body(R"("resources": {"gpus": 1}, "gpu_models": ["A 100"])"), "gpu_models[0]",
                  "not a valid GPU model"},
        Rejection{Body(R"("node_selector": {"rack": 1})"), "node_selector.rack",
                  "must be a string"},
        Rejection{Body(R"("node_selector": {"rack": "r 1"})"), "node_selector.rack",
                  "not a valid label value"},
        Rejection{Body(R"("tolerations": [{"value": "x"}])"), "tolerations[0].key", "required"},
        Rejection{Body(R"("tolerations": [{"key": "k", "effect": "x"}])"), "tolerations[0].effect",
                  "unknown field"},
        Rejection{Body(R"("tolerations": {"key": "k"})"), "tolerations", "must be a list"},
        // Nodes and mail (Slurm's --nodelist, --exclude, --mail-*).
        Rejection{Body(R"("nodes": ["gpu 1"])"), "nodes[0]", "not a valid node name"},
        Rejection{Body(R"("nodes": ["a", "a"])"), "nodes[1]", "duplicate node"},
        Rejection{Body(R"("exclude_nodes": "a")"), "exclude_nodes", "must be a list"},
        Rejection{Body(R"("nodes": ["a"], "exclude_nodes": ["b", "a"])"), "nodes[0]",
                  "both listed and excluded"},
        Rejection{Body(R"("exclusive": "yes")"), "exclusive", "must be true or false"},
        Rejection{Body(R"("mail": {"types": ["END"]})"), "mail.user", "required"},
        Rejection{Body(R"("mail": {"user": "a b"})"), "mail.user", "spaces"},
        Rejection{Body(R"("mail": {"user": "a@b", "types": ["END", "LUNCH"]})"), "mail.types[1]",
                  "unknown mail type 'LUNCH'"},
        Rejection{Body(R"("mail": {"user": "a@b", "to": "c"})"), "mail.to", "unknown field"},
        // Bounded lists and maps.
        Rejection{Body(ManyEnv(1025)), "env", "at most 1024"},
        Rejection{fmt::format(R"({{"queue": "q", "command": [{}]}})", Repeated("\"a\"", 4097)),
                  "command", "at most 4096"},
        Rejection{Body(fmt::format(R"("tolerations": [{}])", Repeated(R"({"key": "k"})", 65))),
                  "tolerations", "at most 64"},
        // Duplicate keys.
        Rejection{R"({"queue": "a", "queue": "b", "command": ["x"]})", "queue", "duplicate key"},
        Rejection{Body(R"("env": {"A": "1", "A": "2"})"), "env.A", "duplicate key"}));

TEST(ParseJobSubmission, WholeBodyErrors) {
  const Rejection cases[] = {
      {"", "", "empty"},
      {"  \n", "", "empty"},
      {"[1]", "", "must be a JSON object"},
      {"\"queue\"", "", "must be a JSON object"},
      {"{\"queue\": ", "", "not valid JSON"},
      {fmt::format("{} x", Body("")), "", "not valid JSON"},
      {"{'queue': 'q'}", "", "not valid JSON"},
      {"{\"queue\": \"\xff\"}", "", "not valid JSON"},
      {fmt::format("{}/* comment */", Body("")), "", "not valid JSON"},
  };
  for (const Rejection& c : cases) {
    SCOPED_TRACE(c.body);
    Result<JobSpec> r = ParseJobSubmission(c.body);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().field(), c.field);
    EXPECT_NE(r.status().message().find(c.message), std::string::npos) << r.status().ToString();
  }
}

TEST(ParseJobSubmission, LimitsOnSizeDepthAndValues) {
  // Body size: one byte over.
  std::string big = Body(fmt::format(R"("name": "{}")", std::string(kMaxBodyBytes, 'x')));
  Result<JobSpec> r = ParseJobSubmission(big);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("at most 1048576 bytes"), std::string::npos);

  // 10,000 nested arrays, closed or not, at the top or inside a field.
  for (const std::string& deep :
       {fmt::format("{:[<10000}{:]<10000}", "", ""), fmt::format("{:[<10000}", ""),
        Body(fmt::format(R"("env": {:[<10000}{:]<10000})", "", ""))}) {
    Result<JobSpec> d = ParseJobSubmission(deep);
    ASSERT_FALSE(d.ok());
    EXPECT_NE(d.status().message().find("nesting is deeper than 64"), std::string::npos)
        << d.status().ToString();
  }
  std::vector<std::string> opens(10000, R"({"a":)");
  Result<JobSpec> o =
      ParseJobSubmission(fmt::format("{}1{}", fmt::join(opens, ""), std::string(10000, '}')));
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("nesting"), std::string::npos);

  // Many small values within the byte limit.
  Result<JobSpec> m = ParseJobSubmission(Body(fmt::format(R"("x": [{}])", Repeated("0", 70000))));
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("more than 65536 values"), std::string::npos)
      << m.status().ToString();
}

TEST(JobSpecToJson, RoundTrips) {
  for (const std::string& body :
       {std::string(kExample), Body(""), Body(R"("resources": {"gpus": 1, "gpu_milli": 500},
                                          "retry": {"on_exit_codes": [1, 137]},
                                          "preemptible": false, "grace_period_seconds": 0,
                                          "tolerations": [{"key": "gpu-only"}],
                                          "env": {"A": "x\ny", "B": "é"})")}) {
    SCOPED_TRACE(body);
    Result<JobSpec> first = ParseJobSubmission(body);
    ASSERT_TRUE(first.ok()) << first.status().ToString();
    const nlohmann::json j = JobSpecToJson(*first);
    Result<JobSpec> second = ParseJobSubmission(j.dump());
    ASSERT_TRUE(second.ok()) << second.status().ToString() << "\n" << j.dump();
    EXPECT_EQ(JobSpecToJson(*second), j);
    EXPECT_EQ(second->resources, first->resources);
    EXPECT_EQ(second->retry, first->retry);
    EXPECT_EQ(second->tolerations, first->tolerations);
    EXPECT_EQ(second->env, first->env);
    EXPECT_EQ(second->command, first->command);
    EXPECT_EQ(second->preemptible, first->preemptible);
    EXPECT_EQ(second->grace_period_seconds, first->grace_period_seconds);
  }
}

// The text written without a tree is what nlohmann::json would write for the same body: the same
// keys, values and escapes, keys in sorted order.
TEST(JobSpecJsonText, IsTheCanonicalDumpOfTheBody) {
  for (const std::string& body :
       {std::string(kExample), Body(""),
        Body(R"("name": "q\"uote\\back", "workdir": "/tmp/a b", "container_image": "img:1",
                "priority_class": "normal", "tasks": 2, "distinct_nodes": true,
                "node_selector": {"rack": "r1", "zone": "z_1.a"},
                "resources": {"gpus": 1, "gpu_milli": 500, "gpu_memory_mib": 1024},
                "retry": {"max_retries": 3, "on_exit_codes": [1, 137]},
                "walltime_seconds": 3600, "preemptible": true, "grace_period_seconds": 5,
                "tolerations": [{"key": "gpu-only"}, {"key": "k", "value": "v"}],
                "env": {"A": "x\ny\t\r\b\f", "B": "é 漢字", "C": "\u001f\u007f"})"),
        Body(R"("exclusive": true, "nodes": ["gpu-07", "gpu-01"], "exclude_nodes": ["gpu-02"],
                "mail": {"user": "alice@example.com", "types": ["END", "FAIL"]})")}) {
    SCOPED_TRACE(body);
    Result<JobSpec> spec = ParseJobSubmission(body);
    ASSERT_TRUE(spec.ok()) << spec.status().ToString();
    const std::string text = JobSpecJsonText(*spec);
    const nlohmann::json tree = nlohmann::json::parse(text);
    EXPECT_EQ(tree.dump(), text);
    Result<JobSpec> again = ParseJobSubmission(text);
    ASSERT_TRUE(again.ok()) << again.status().ToString() << "\n" << text;
    EXPECT_EQ(JobSpecJsonText(*again), text);
    EXPECT_EQ(again->env, spec->env);
    EXPECT_EQ(again->name, spec->name);
    EXPECT_EQ(again->node_selector, spec->node_selector);
    EXPECT_EQ(again->exclusive, spec->exclusive);
    EXPECT_EQ(again->nodes, spec->nodes);
    EXPECT_EQ(again->exclude_nodes, spec->exclude_nodes);
    EXPECT_EQ(again->mail, spec->mail);
  }
}

// Secret values travel in the submission body (JobSpecToJson) and apart from the stored and
// returned spec (JobSpecJsonText never holds them); env values can be left out as nulls.
TEST(JobSpecJsonText, KeepsSecretValuesApart) {
  Result<JobSpec> spec = ParseJobSubmission(
      Body(R"("env": {"A": "1"}, "secret_env": {"HF_TOKEN": "hf_x", "WANDB_KEY": "w"})"));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->secret_env.at("HF_TOKEN"), "hf_x");
  const std::string text = JobSpecJsonText(*spec);
  EXPECT_EQ(text.find("hf_x"), std::string::npos) << text;
  EXPECT_EQ(text.find("secret_env"), std::string::npos) << text;
  EXPECT_EQ(JobSpecToJson(*spec)["secret_env"]["WANDB_KEY"], "w");
  const std::string stored = SecretEnvJsonText(*spec);
  JobSpec back;
  ASSERT_TRUE(ParseSecretEnv(stored, &back).ok());
  EXPECT_EQ(back.secret_env, spec->secret_env);
  ASSERT_TRUE(ParseSecretEnv("", &back).ok());
  EXPECT_TRUE(back.secret_env.empty());
  EXPECT_EQ(SecretEnvJsonText(back), "");
  const nlohmann::json names = nlohmann::json::parse(JobSpecJsonText(*spec, false));
  EXPECT_TRUE(names["env"]["A"].is_null()) << names;
  Result<JobSpec> bad = ParseJobSubmission(Body(R"("secret_env": {"1X": "v"})"));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().field(), "secret_env.1X");
}

TEST(JobSpecToJson, LeavesOutUnsetOptionals) {
  Result<JobSpec> r = ParseJobSubmission(Body(""));
  ASSERT_TRUE(r.ok());
  const nlohmann::json j = JobSpecToJson(*r);
  EXPECT_FALSE(j.contains("preemptible"));
  EXPECT_FALSE(j.contains("grace_period_seconds"));
  EXPECT_FALSE(j.contains("name"));
  EXPECT_FALSE(j.contains("tenant"));
  EXPECT_EQ(j["type"], "training");
  EXPECT_EQ(j["resources"]["gpu_milli"], 1000);
}

TEST(ParseJobBatch, EveryJobParsedAndErrorsNameTheJob) {
  const std::string job = R"({"queue": "q", "command": ["x"], "resources": {"gpus": 1}})";
  auto ok = ParseJobBatch(fmt::format(R"({{"jobs": [{}, {}]}})", job, job));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  ASSERT_EQ(ok->size(), 2u);
  EXPECT_EQ((*ok)[1].queue, "q");
  const std::vector<std::pair<std::string, std::string>> bad = {
      {fmt::format(R"({{"jobs": [{}, {{"queue": "q", "command": []}}]}})", job), "jobs[1].command"},
      {fmt::format(R"({{"jobs": [{}, 3]}})", job), "jobs[1]"},
      {R"({"jobs": []})", "jobs"},
      {R"({"jobs": {}})", "jobs"},
      {R"({})", "jobs"},
      {fmt::format(R"({{"jobs": [{}], "extra": 1}})", job), "extra"},
      // A job array is submitted on its own (POST /api/v1/jobs).
      {R"({"jobs": [{"command": ["x"], "array": {"indices": "0-3"}}]})", "jobs[0].array"},
  };
  for (const auto& [body, field] : bad) {
    auto r = ParseJobBatch(body);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << body;
    EXPECT_EQ(r.status().field(), field) << body << ": " << r.status().ToString();
  }
  std::string many = R"({"jobs": [)";
  for (size_t i = 0; i <= kMaxBatchJobs; ++i) many += (i ? "," : "") + job;
  many += "]}";
  EXPECT_EQ(ParseJobBatch(many).status().field(), "jobs");
}

// A submission's "array" is the request (indices, max_running); a stored element's is its place in
// the array (id, index, size, max_running), which a submission may not set.
TEST(JobArrays, TheRequestAndTheElementAreApart) {
  std::optional<ArrayRequest> array;
  auto spec =
      ParseJobSubmission(Body(R"("array": {"indices": "0-99:2,200", "max_running": 8})"), &array);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  ASSERT_TRUE(array.has_value());
  EXPECT_EQ(array->indices, "0-99:2,200");
  EXPECT_EQ(array->expanded.size(), 51u);
  EXPECT_EQ(array->max_running, 8);
  EXPECT_EQ(spec->array.id, 0u);  // the server makes the elements
  EXPECT_EQ(ArrayRequestToJson(*array),
            (nlohmann::json{{"indices", "0-99:2,200"}, {"max_running", 8}}));
  ASSERT_TRUE(ParseJobSubmission(Body(""), &array).ok());
  EXPECT_FALSE(array.has_value());
  // Where no array may be: refused, naming the field.
  EXPECT_EQ(ParseJobSubmission(Body(R"("array": {"indices": "0-3"})")).status().field(), "array");
  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"("array": {"max_running": 2})", "array.indices"},
      {R"("array": {"indices": "3-1"})", "array.indices"},
      {R"("array": {"indices": "0-10000"})", "array.indices"},
      {R"("array": {"indices": "0-3", "max_running": -1})", "array.max_running"},
      {R"("array": {"indices": "0-3", "size": 4})", "array.size"},
      {R"("array": {"id": 7, "index": 0, "size": 4})", "array.id"},
      {R"("array": "0-3")", "array"},
  };
  for (const auto& [member, field] : bad) {
    std::optional<ArrayRequest> a;
    auto r = ParseJobSubmission(Body(member), &a);
    ASSERT_FALSE(r.ok()) << member;
    EXPECT_EQ(r.status().field(), field) << member << ": " << r.status().ToString();
  }
}

TEST(JobArrays, AnElementsStoredSpecRoundTrips) {
  auto spec = ParseJobSubmission(Body(R"("name": "sweep")"));
  ASSERT_TRUE(spec.ok());
  const std::string base = JobSpecJsonText(*spec);
  JobSpec element = *spec;
  element.array = {12, 7, 10, 2};
  const std::string text = JobSpecJsonText(element);
  EXPECT_EQ(text.rfind(R"({"array":{"id":12,"index":7,"max_running":2,"size":10},"command":)", 0),
            0u)
      << text;
  EXPECT_EQ(nlohmann::json::parse(text).dump(), text);  // keys in sorted order
  EXPECT_EQ(ElementSpecText(base, element.array), text);
  // Another element's text, or the same one's with a new limit, from an element's text.
  element.array.max_running = 0;
  EXPECT_EQ(ElementSpecText(text, element.array), JobSpecJsonText(element));
  auto stored = ParseStoredJob(text);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(stored->array, (JobArrayElement{12, 7, 10, 2}));
  EXPECT_EQ(stored->name, "sweep");
  // A submission may not claim a place in an array.
  EXPECT_EQ(ParseJobSubmission(text).status().field(), "array");
  auto bad = ParseStoredJob(R"({"command": ["x"], "array": {"id": 12, "index": 7, "size": 0}})");
  EXPECT_EQ(bad.status().field(), "array.size");
}

}  // namespace
}  // namespace arbiter::api
