// A tenant's images, mounts and registry credentials against the real server, and Kubernetes
// manifests submitted through the real CLI (docs/kubernetes.md).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli_process.h"
#include "tenant_server.h"

namespace arbiter::testing {
namespace {

using nlohmann::json;

// kTenantConfig's tenants and users, with vision's images, mounts and volume; `main` (the Kueue
// sample's queue) is an alias of vision-train, vision-train and speech-train the tenants' default
// queues.
constexpr const char* kConfig = R"(
gpu_models:
  - {name: A100-80G, memory_mib: 81920}
priority_classes:
  - {name: normal, value: 100, preemptible: true}
tenants:
  - name: vision
    default_queue: vision-train
    images: {registries: ["registry.example.com/vision/", "docker.io/"]}
    mounts: [{path: /data/imagenet, mode: ro}, {path: /checkpoints/vision, mode: rw}]
    volumes: [{name: mistral-7b}]
    queues:
      - {name: vision-train, aliases: [main], guaranteed: {gpu: 8}}
  - name: speech
    default_queue: speech-train
    queues:
      - {name: speech-train, guaranteed: {gpu: 8}}
users:
  - {name: tina, tenant: vision, role: tenant-admin}
  - {name: alice, tenant: vision, role: member}
  - {name: bob, tenant: vision, role: member}
  - {name: vic, tenant: vision, role: viewer}
  - {name: sam, tenant: speech, role: member}
nodes:
  - {name: gpu-01, cpu_milli: 128000, memory_mib: 1048576, gpus: {count: 8, model: A100-80G}}
)";

const std::string kFixtures = std::string(ARBITER_SOURCE_DIR) + "/test/fixtures/k8s";

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

class TenantImagesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Start());
    url_ = fmt::format("http://127.0.0.1:{}", server_.port());
    auto applied = server_.As("admin")->Put("/api/v1/config", kConfig, "application/yaml");
    ASSERT_TRUE(applied && applied->status == 200) << (applied ? applied->body : "no reply");
  }

  CliResult Cli(const std::string& user, const std::vector<std::string>& args,
                const std::string& stdin_text = "") {
    CliOptions o;
    o.env["HOME"] = home_.path();
    o.env["ARBITER_SERVER"] = url_;
    o.env["ARBITER_TOKEN"] = server_.token(user);
    o.env["NO_COLOR"] = "1";
    o.stdin_text = stdin_text;
    return RunCli(args, o);
  }

  // POST /api/v1/jobs as `user` with `extra` members beside a queue and a command.
  httplib::Result Submit(const std::string& user, const json& extra) {
    json body = {{"queue", "vision-train"}, {"command", {"sleep", "1"}}};
    for (const auto& [k, v] : extra.items()) body[k] = v;
    return server_.As(user)->Post("/api/v1/jobs", body.dump(), "application/json");
  }

  TenantServer server_;
  TempDir home_;
  std::string url_;
};

TEST_F(TenantImagesTest, SubmissionsAreRefusedNamingTheRuleTheyBreak) {
  struct Case {
    json extra;
    const char* field;
    const char* message;
  };
  const Case cases[] = {
      {{{"container_image", "quay.io/evil/miner:1"}},
       "container_image",
       "quay.io/evil/miner:1 is not from a registry tenant vision may use "
       "(registry.example.com/vision/, docker.io/)"},
      {{{"container_image", "registry.example.com/vision/train:1"},
        {"mounts", {{{"path", "/etc"}}}}},
       "mounts[0].path",
       "/etc is not under an allowed path of tenant vision (/data/imagenet ro, "
       "/checkpoints/vision rw)"},
      {{{"container_image", "registry.example.com/vision/train:1"},
        {"mounts", {{{"path", "/data/imagenet/train"}, {"mode", "rw"}}}}},
       "mounts[0].mode",
       "/data/imagenet/train may only be mounted read-only by tenant vision"},
      {{{"container_image", "registry.example.com/vision/train:1"},
        {"mounts", {{{"path", "/data/imagenet/../../etc"}}}}},
       "mounts[0].path",
       "must not contain '..'"},
      {{{"mounts", {{{"path", "/data/imagenet"}}}}}, "mounts", "set container_image"},
  };
  for (const Case& c : cases) {
    auto r = Submit("bob", c.extra);
    ASSERT_TRUE(r) << c.extra.dump();
    EXPECT_EQ(r->status, 400) << r->body;
    const json err = BodyJson(r)["error"];
    EXPECT_EQ(err.value("field", ""), c.field) << r->body;
    EXPECT_NE(err.value("message", "").find(c.message), std::string::npos) << r->body;
  }
  // Within the rules: accepted, and the mounts are part of the job.
  auto ok = Submit("bob", {{"container_image", "registry.example.com/vision/train:1"},
                           {"mounts",
                            {{{"path", "/data/imagenet"}, {"target", "/data"}},
                             {{"path", "/checkpoints/vision/run-1"}, {"mode", "rw"}}}}});
  ASSERT_TRUE(ok);
  ASSERT_EQ(ok->status, 201) << ok->body;
  const uint64_t id = BodyJson(ok)["id"].get<uint64_t>();
  auto job = BodyJson(server_.As("bob")->Get(fmt::format("/api/v1/jobs/{}", id)));
  const json mounts = job.contains("spec") ? job["spec"]["mounts"] : job["mounts"];
  EXPECT_EQ(mounts, json::parse(R"([{"mode":"ro","path":"/data/imagenet","target":"/data"},
                                    {"mode":"rw","path":"/checkpoints/vision/run-1"}])"))
      << job.dump();
  // Speech has no mounts and any registry: the same mount is refused there.
  auto speech = server_.As("sam")->Post("/api/v1/jobs",
                                        json{{"queue", "speech-train"},
                                             {"command", {"true"}},
                                             {"container_image", "quay.io/evil/miner:1"},
                                             {"mounts", {{{"path", "/data/imagenet"}}}}}
                                            .dump(),
                                        "application/json");
  ASSERT_TRUE(speech);
  EXPECT_EQ(speech->status, 400) << speech->body;
  EXPECT_NE(speech->body.find("tenant speech (none)"), std::string::npos) << speech->body;
  // A service's template is held to the same rules.
  auto svc = server_.As("bob")->Post(
      "/api/v1/services",
      json{{"name", "evil"},
           {"template", {{"command", {"serve"}}, {"container_image", "quay.io/evil/x"}}}}
          .dump(),
      "application/json");
  ASSERT_TRUE(svc);
  EXPECT_EQ(svc->status, 400) << svc->body;
  EXPECT_EQ(BodyJson(svc)["error"].value("field", ""), "template.container_image") << svc->body;
}

TEST_F(TenantImagesTest, RegistryCredentialsAreSealedAndNeverReturned) {
  const std::string password = "pa55-word-never-shown";
  CliResult set = Cli("tina",
                      {"registry-credentials", "set", "--registry", "registry.example.com/vision/",
                       "--user", "robot", "--password-stdin"},
                      password + "\n");
  ASSERT_EQ(set.code, 0) << set.out << set.err;
  EXPECT_NE(set.out.find("tenant vision"), std::string::npos) << set.out;
  EXPECT_EQ(set.out.find(password), std::string::npos);

  // Members see that there is one; nobody sees the password.
  CliResult list = Cli("bob", {"registry-credentials", "list"});
  ASSERT_EQ(list.code, 0) << list.err;
  EXPECT_NE(list.out.find("registry.example.com/vision/"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("robot"), std::string::npos) << list.out;
  auto api = server_.As("admin")->Get("/api/v1/registry-credentials");
  ASSERT_TRUE(api && api->status == 200);
  EXPECT_EQ(BodyJson(api)["items"].size(), 1u) << api->body;
  EXPECT_EQ(api->body.find(password), std::string::npos) << api->body;
  // Other tenants see none of it; members may not set one.
  EXPECT_EQ(BodyJson(server_.As("sam")->Get("/api/v1/registry-credentials"))["items"].size(), 0u);
  CliResult member = Cli("bob",
                         {"registry-credentials", "set", "--registry", "registry.example.com/x/",
                          "--user", "u", "--password-stdin"},
                         "p\n");
  EXPECT_NE(member.code, 0);

  // The key is the server's own (0600), and the password is nowhere in the store in the clear.
  struct stat st {};
  ASSERT_EQ(::stat((server_.process().data_dir() + "/secret.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  for (const char* f : {"arbiter.db", "arbiter.db-wal"}) {
    const std::string bytes = ReadAll(server_.process().data_dir() + "/" + f);
    EXPECT_EQ(bytes.find(password), std::string::npos) << f;
  }
  // Audited, without the password.
  auto audit = server_.As("admin")->Get("/api/v1/audit?action=registry_credential.set");
  ASSERT_TRUE(audit && audit->status == 200);
  EXPECT_NE(audit->body.find("registry_credential/vision/registry.example.com/vision/"),
            std::string::npos)
      << audit->body;
  EXPECT_EQ(audit->body.find(password), std::string::npos);

  CliResult del =
      Cli("tina", {"registry-credentials", "delete", "--registry", "registry.example.com/vision/"});
  ASSERT_EQ(del.code, 0) << del.err;
  EXPECT_EQ(BodyJson(server_.As("admin")->Get("/api/v1/registry-credentials"))["items"].size(), 0u);
}

TEST_F(TenantImagesTest, KubernetesManifestsThroughTheCli) {
  // batch/v1 Job (the Kubernetes docs' pi): no queue in it, so --queue.
  CliResult pi = Cli(
      "bob", {"submit", "--parsable", "--queue", "vision-train", "-f", kFixtures + "/pi-job.yaml"});
  ASSERT_EQ(pi.code, 0) << pi.out << pi.err;
  EXPECT_EQ(pi.err.find("warning"), std::string::npos) << pi.err;  // nothing ignored
  json job =
      BodyJson(server_.As("bob")->Get("/api/v1/jobs/" + pi.out.substr(0, pi.out.find('\n'))));
  const json spec = job.contains("spec") ? job["spec"] : job;
  EXPECT_EQ(spec.value("container_image", ""), "perl") << job.dump();
  EXPECT_EQ(spec["retry"].value("max_retries", -1), 4) << job.dump();

  // Kueue's sample: its queue-name is an alias of vision-train; one warning names what has no
  // meaning here.
  CliResult kueue =
      Cli("bob", {"submit", "--parsable", "-f", kFixtures + "/kueue-sample-job.yaml"});
  ASSERT_EQ(kueue.code, 0) << kueue.out << kueue.err;
  EXPECT_NE(kueue.err.find("warning: batch/v1 Job sample-job: ignored (no meaning in Arbiter): "
                           "metadata.generateName, spec.suspend"),
            std::string::npos)
      << kueue.err;
  job =
      BodyJson(server_.As("bob")->Get("/api/v1/jobs/" + kueue.out.substr(0, kueue.out.find('\n'))));
  EXPECT_EQ(job.value("queue", ""), "vision-train") << job.dump();

  // Kubeflow's PyTorchJob: Master and Worker, one gang of two tasks.
  CliResult torch =
      Cli("bob", {"submit", "--parsable", "-f", kFixtures + "/pytorchjob-simple.yaml"});
  ASSERT_EQ(torch.code, 0) << torch.out << torch.err;
  job =
      BodyJson(server_.As("bob")->Get("/api/v1/jobs/" + torch.out.substr(0, torch.out.find('\n'))));
  const json tspec = job.contains("spec") ? job["spec"] : job;
  EXPECT_EQ(tspec.value("tasks", 0), 2) << job.dump();

  // A PyTorchJob with args only is refused, naming the field.
  CliResult gloo = Cli("bob", {"submit", "-f", kFixtures + "/pytorchjob-mnist-gloo.yaml"});
  EXPECT_NE(gloo.code, 0);
  EXPECT_NE(gloo.err.find("containers[0].command"), std::string::npos) << gloo.err;

  // apps/v1 Deployment (vLLM's example) as a service, with apply -f. Its claim (the model cache)
  // is the tenant's volume of the claim's name: refused to a tenant without one.
  CliResult no_volume = Cli("sam", {"apply", "-f", kFixtures + "/vllm-deployment.yaml"});
  EXPECT_NE(no_volume.code, 0);
  EXPECT_NE(no_volume.err.find("template.mounts[0].volume: tenant speech has no volume mistral-7b"),
            std::string::npos)
      << no_volume.err;
  CliResult vllm = Cli("bob", {"apply", "-f", kFixtures + "/vllm-deployment.yaml"});
  ASSERT_EQ(vllm.code, 0) << vllm.out << vllm.err;
  EXPECT_NE(vllm.err.find("spec.template.spec.containers[0].env[0]"), std::string::npos)
      << vllm.err;
  auto svc = BodyJson(server_.As("bob")->Get("/api/v1/services/mistral-7b"));
  EXPECT_EQ(svc.value("port", 0), 8000) << svc.dump();
  EXPECT_EQ(svc["template"].value("container_image", ""), "vllm/vllm-openai:latest") << svc.dump();
  EXPECT_EQ(svc["template"]["mounts"],
            json::parse(R"([{"mode":"rw","target":"/root/.cache/huggingface",
                             "volume":"mistral-7b"}])"))
      << svc.dump();
  // submit -f of a Deployment says to apply it.
  CliResult wrong = Cli("bob", {"submit", "-f", kFixtures + "/vllm-deployment.yaml"});
  EXPECT_NE(wrong.code, 0);
  EXPECT_NE(wrong.err.find("arbiter apply -f"), std::string::npos) << wrong.err;
}

}  // namespace
}  // namespace arbiter::testing
