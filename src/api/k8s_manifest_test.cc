#include "api/k8s_manifest.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "api/job_codec.h"
#include "api/service_codec.h"

namespace arbiter::api {
namespace {

using nlohmann::json;

const std::string kFixtures = ARBITER_FIXTURES_DIR "/k8s";

std::string ReadText(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Real public manifests (each file names its source and license) and what they become.
class PublicManifestTest : public testing::TestWithParam<const char*> {};

TEST_P(PublicManifestTest, TranslatesAsExpected) {
  const std::string name = GetParam();
  const std::string yaml = ReadText(kFixtures + "/" + name + ".yaml");
  ASSERT_FALSE(yaml.empty()) << name;
  const json expected = json::parse(ReadText(kFixtures + "/" + name + ".expected.json"));
  auto t = TranslateK8sManifest(yaml);
  if (expected.contains("error")) {
    ASSERT_FALSE(t.ok()) << name << " translated to " << t->body.dump();
    EXPECT_EQ(t.status().field(), expected["error"]["field"].get<std::string>());
    EXPECT_EQ(t.status().message(), expected["error"]["message"].get<std::string>());
    return;
  }
  ASSERT_TRUE(t.ok()) << name << ": " << t.status().ToString();
  EXPECT_EQ(t->is_service, expected["kind"] == "service");
  EXPECT_EQ(t->body, expected["body"]) << t->body.dump(2);
  EXPECT_EQ(json(t->ignored), expected["ignored"]) << json(t->ignored).dump(2);
  // What comes out is a valid submission as it stands.
  if (t->is_service) {
    auto s = ParseServiceJson(t->body.dump());
    EXPECT_TRUE(s.ok()) << s.status().ToString();
  } else {
    auto j = ParseJobSubmission(t->body.dump());
    EXPECT_TRUE(j.ok()) << j.status().ToString();
  }
  if (t->ignored.empty()) {
    EXPECT_EQ(t->Warning(), "");
  } else {
    EXPECT_NE(t->Warning().find("ignored (no meaning in Arbiter): " + t->ignored.front()),
              std::string::npos)
        << t->Warning();
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, PublicManifestTest,
                         testing::Values("pi-job", "kueue-sample-job", "pytorchjob-simple",
                                         "pytorchjob-mnist-gloo", "vllm-deployment"));

constexpr const char* kJobWithEverything = R"(
apiVersion: batch/v1
kind: Job
metadata:
  name: train
  labels:
    kueue.x-k8s.io/queue-name: vision-train
spec:
  parallelism: 2
  completions: 4
  activeDeadlineSeconds: 3600
  template:
    spec:
      priorityClassName: high
      nodeSelector:
        rack: r1
      tolerations:
      - key: dedicated
        operator: Equal
        value: training
        effect: NoSchedule
      - key: gpu
        operator: Exists
      terminationGracePeriodSeconds: 45
      volumes:
      - name: data
        hostPath:
          path: /data/imagenet
          type: Directory
      - name: ckpt
        hostPath:
          path: /checkpoints/vision
      - name: scratch
        emptyDir: {}
      containers:
      - name: main
        image: registry.example.com/vision/train:1.2
        command: ["python3", "train.py"]
        args: ["--epochs", "3"]
        workingDir: /workspace
        env:
        - name: NCCL_DEBUG
          value: INFO
        resources:
          limits:
            nvidia.com/gpu: 4
            cpu: 1500m
            memory: 64Gi
        volumeMounts:
        - name: data
          mountPath: /data
          readOnly: true
        - name: ckpt
          mountPath: /checkpoints/vision
        - name: scratch
          mountPath: /scratch
)";

TEST(K8sManifestTest, ReadsEveryFieldThatHasAMeaning) {
  auto t = TranslateK8sManifest(kJobWithEverything);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const json expected = {
      {"name", "train"},
      {"queue", "vision-train"},
      {"tasks", 2},
      {"walltime_seconds", 3600},
      {"priority_class", "high"},
      {"node_selector", {{"rack", "r1"}}},
      {"tolerations",
       {{{"key", "dedicated"}, {"value", "training"}}, {{"key", "gpu"}, {"value", ""}}}},
      {"grace_period_seconds", 45},
      {"container_image", "registry.example.com/vision/train:1.2"},
      {"command", {"python3", "train.py", "--epochs", "3"}},
      {"workdir", "/workspace"},
      {"env", {{"NCCL_DEBUG", "INFO"}}},
      {"resources", {{"gpus", 4}, {"cpu_milli", 1500}, {"memory_mib", 65536}}},
      {"mounts",
       {{{"path", "/data/imagenet"}, {"target", "/data"}, {"mode", "ro"}},
        {{"path", "/checkpoints/vision"}, {"mode", "rw"}}}}};
  EXPECT_EQ(t->body, expected) << t->body.dump(2);
  // Completions other than the parallelism, and a volume that is not a host path.
  EXPECT_EQ(json(t->ignored), json({"spec.completions", "spec.template.spec.volumes[2]",
                                    "spec.template.spec.containers[0].volumeMounts[2]"}));
  EXPECT_EQ(t->Warning(),
            "batch/v1 Job train: ignored (no meaning in Arbiter): spec.completions, "
            "spec.template.spec.volumes[2], spec.template.spec.containers[0].volumeMounts[2]");
  auto j = ParseJobSubmission(t->body.dump());
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  ASSERT_EQ(j->mounts.size(), 2u);
  EXPECT_EQ(j->mounts[0], (Mount{"/data/imagenet", "/data", true}));
  EXPECT_EQ(j->mounts[1], (Mount{"/checkpoints/vision", "", false}));
}

// A claim is storage of the workload's own that outlives it: the tenant's volume of its name.
TEST(K8sManifestTest, PersistentVolumeClaimsAreTheTenantsVolumes) {
  auto t = TranslateK8sManifest(R"(
apiVersion: batch/v1
kind: Job
metadata: {name: train}
spec:
  template:
    spec:
      volumes:
      - name: ckpt
        persistentVolumeClaim: {claimName: ckpt}
      - name: datasets
        persistentVolumeClaim: {claimName: shared-data, readOnly: true}
      - name: cache
        emptyDir: {}
      containers:
      - name: main
        image: registry.example.com/vision/train:1.2
        command: ["python3", "train.py"]
        volumeMounts:
        - {name: ckpt, mountPath: /ckpt}
        - {name: datasets, mountPath: /data}
        - {name: ckpt, mountPath: /ckpt-ro, readOnly: true}
        - {name: cache, mountPath: /cache}
)");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->body["mounts"], json::parse(R"([
      {"volume": "ckpt", "target": "/ckpt", "mode": "rw"},
      {"volume": "shared-data", "target": "/data", "mode": "ro"},
      {"volume": "ckpt", "target": "/ckpt-ro", "mode": "ro"}])"))
      << t->body.dump(2);
  EXPECT_EQ(json(t->ignored), json({"spec.template.spec.volumes[2]",
                                    "spec.template.spec.containers[0].volumeMounts[3]"}));
  // Mounting one claim twice is one volume mounted twice: the submission says so.
  auto j = ParseJobSubmission(t->body.dump());
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().field(), "mounts[2].volume") << j.status().ToString();

  auto missing = TranslateK8sManifest(R"(
apiVersion: batch/v1
kind: Job
metadata: {name: train}
spec:
  template:
    spec:
      volumes:
      - name: ckpt
        persistentVolumeClaim: {readOnly: true}
      containers:
      - {name: main, image: x, command: ["true"], volumeMounts: [{name: ckpt, mountPath: /c}]}
)");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().field(),
            "spec.template.spec.volumes[0].persistentVolumeClaim.claimName");
}

TEST(K8sManifestTest, RefusalsNameTheField) {
  struct Case {
    const char* yaml;
    const char* field;
    const char* message_part;
  };
  const Case cases[] = {
      {"apiVersion: v1\nkind: Pod\nspec: {}\n", "kind", "v1 Pod is not one Arbiter takes"},
      {"kind: Job\nspec: {}\n", "apiVersion", "is required"},
      {"apiVersion: batch/v1\nkind: Job\nspec:\n  template:\n    spec:\n      containers:\n"
       "      - {name: a, image: x, command: [a]}\n      - {name: b, image: y, command: [b]}\n",
       "spec.template.spec.containers", "has 2 containers"},
      {"apiVersion: batch/v1\nkind: Job\nspec:\n  template:\n    spec:\n      containers:\n"
       "      - {name: a, image: x}\n",
       "spec.template.spec.containers[0].command", "ENTRYPOINT"},
      {"apiVersion: batch/v1\nkind: Job\nspec:\n  template:\n    spec:\n      containers:\n"
       "      - name: a\n        image: x\n        command: [a]\n        resources:\n"
       "          limits: {memory: lots}\n",
       "spec.template.spec.containers[0].resources.limits.memory", "not a memory quantity"},
      {"apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nspec:\n  pytorchReplicaSpecs:\n"
       "    Master:\n      template: {spec: {containers: [{image: x, command: [a]}]}}\n"
       "    Worker:\n      replicas: 3\n"
       "      template: {spec: {containers: [{image: y, command: [a]}]}}\n",
       "spec.pytorchReplicaSpecs.Worker.template", "differs from Master's"},
      {"apiVersion: apps/v1\nkind: Deployment\nspec:\n  template:\n"
       "    spec: {containers: [{image: x, command: [a]}]}\n",
       "metadata.name", "is required"},
  };
  for (const Case& c : cases) {
    auto t = TranslateK8sManifest(c.yaml);
    ASSERT_FALSE(t.ok()) << c.yaml;
    EXPECT_EQ(t.status().field(), c.field) << c.yaml;
    EXPECT_NE(t.status().message().find(c.message_part), std::string::npos)
        << t.status().ToString();
  }
}

TEST(K8sManifestTest, PyTorchJobIsOneGangOfMasterAndWorkers) {
  auto t = TranslateK8sManifest(
      "apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {name: ddp}\nspec:\n"
      "  runPolicy: {backoffLimit: 2, cleanPodPolicy: None}\n  pytorchReplicaSpecs:\n"
      "    Master:\n      template: {spec: {containers: [{image: x, command: [torchrun],"
      " resources: {limits: {nvidia.com/gpu: 8}}}]}}\n"
      "    Worker:\n      replicas: 3\n"
      "      template: {spec: {containers: [{image: x, command: [torchrun],"
      " resources: {limits: {nvidia.com/gpu: 8}}}]}}\n");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->body["tasks"], 4);
  EXPECT_EQ(t->body["resources"]["gpus"], 8);
  EXPECT_EQ(t->body["retry"]["max_retries"], 2);
  EXPECT_EQ(json(t->ignored), json({"spec.runPolicy.cleanPodPolicy"}));
}

TEST(K8sManifestTest, Quantities) {
  int64_t v = 0;
  ASSERT_TRUE(ParseK8sMilli("500m", &v));
  EXPECT_EQ(v, 500);
  ASSERT_TRUE(ParseK8sMilli("2", &v));
  EXPECT_EQ(v, 2000);
  ASSERT_TRUE(ParseK8sMilli("1.5", &v));
  EXPECT_EQ(v, 1500);
  ASSERT_TRUE(ParseK8sMib("64Mi", &v));
  EXPECT_EQ(v, 64);
  ASSERT_TRUE(ParseK8sMib("1Gi", &v));
  EXPECT_EQ(v, 1024);
  ASSERT_TRUE(ParseK8sMib("20G", &v));
  EXPECT_EQ(v, 19074);  // 2e10 / 2^20 = 19073.49, rounded up
  ASSERT_TRUE(ParseK8sMib("129e6", &v));
  EXPECT_EQ(v, 124);  // 123.02
  ASSERT_TRUE(ParseK8sMib("134217728", &v));
  EXPECT_EQ(v, 128);
  for (const char* bad : {"", "Gi", "1Xi", "-1", "1.2.3", "1e", "lots"}) {
    EXPECT_FALSE(ParseK8sMib(bad, &v)) << bad;
  }
}

TEST(K8sManifestTest, IsK8sManifestNeedsApiVersionAndKind) {
  EXPECT_TRUE(IsK8sManifest(json{{"apiVersion", "batch/v1"}, {"kind", "Job"}}));
  EXPECT_FALSE(IsK8sManifest(json{{"kind", "Service"}, {"name", "chat"}}));
  EXPECT_FALSE(IsK8sManifest(json{{"command", {"a"}}}));
}

}  // namespace
}  // namespace arbiter::api
