#include "cli/service_args.h"

#include <gtest/gtest.h>

namespace arbiter::cli {
namespace {

using nlohmann::json;

TEST(ParseTrafficArgsTest, ASplitThatAddsUpToAHundredBecomesTheApiList) {
  auto t = ParseTrafficArgs({"3=90", "4=10"});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(*t, json::parse(R"([{"revision":3,"percent":90},{"revision":4,"percent":10}])"));
  EXPECT_TRUE(ParseTrafficArgs({"7=100"}).ok());
  EXPECT_TRUE(ParseTrafficArgs({"1=0", "2=100"}).ok());
}

TEST(ParseTrafficArgsTest, RefusesWhatIsNotASplit) {
  for (const auto& args : std::vector<std::vector<std::string>>{{},
                                                                {"3=90"},
                                                                {"3=90", "4=20"},
                                                                {"3:90", "4=10"},
                                                                {"x=100"},
                                                                {"3=ninety"},
                                                                {"0=100"},
                                                                {"3=101"},
                                                                {"3=-1", "4=101"},
                                                                {"3=50", "3=50"},
                                                                {"3=", "4=100"}}) {
    auto t = ParseTrafficArgs(args);
    EXPECT_FALSE(t.ok()) << testing::PrintToString(args);
    if (!t.ok()) {
      EXPECT_EQ(t.status().field(), "traffic");
    }
  }
}

TEST(SplitYamlDocumentsTest, SplitsAtMarkersKeepingLineNumbers) {
  const std::string text =
      "# cluster\n"
      "tenants: []\n"
      "---\n"
      "kind: Service\n"
      "name: a\n"
      "...\n"
      "--- # b\n"
      "\n"
      "kind: Service\n"
      "name: b\n"
      "---\n"
      "# only a comment\n";
  auto docs = SplitYamlDocuments(text);
  ASSERT_EQ(docs.size(), 3u);
  EXPECT_EQ(docs[0].first_line, 1);
  EXPECT_EQ(docs[1].first_line, 4);
  EXPECT_EQ(docs[1].text, "kind: Service\nname: a\n");
  EXPECT_EQ(docs[2].first_line, 7);  // the text starts on the marker's line, after it
}

TEST(SplitYamlDocumentsTest, AMarkerInsideABlockScalarIsIndentedAndDoesNotSplit) {
  auto docs = SplitYamlDocuments("a: |\n  ---\n  text\nb: 1\n");
  ASSERT_EQ(docs.size(), 1u);
}

TEST(SplitApplyFileTest, ServicesBecomeJsonAndTheConfigurationStaysYaml) {
  const std::string text =
      "kind: Cluster\n"
      "tenants: [{name: t, queues: [{name: q}]}]\n"
      "---\n"
      "kind: Service\n"
      "name: chat\n"
      "queue: serving\n"
      "replicas: 3\n"
      "template: {command: [python3, server.py], resources: {gpus: 0.5}, env: {MODE: '1'}}\n"
      "readiness: {path: /healthz, period_seconds: 1}\n";
  auto f = SplitApplyFile(text);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_EQ(f->services.size(), 1u);
  const json& s = f->services[0];
  EXPECT_FALSE(s.contains("kind"));
  EXPECT_EQ(s["name"], "chat");
  EXPECT_EQ(s["replicas"], 3);
  EXPECT_EQ(s["template"]["resources"]["gpus"], 0.5);
  EXPECT_EQ(s["template"]["env"]["MODE"], "1");  // quoted: stays a string
  EXPECT_EQ(f->service_lines, std::vector<int>{4});
  EXPECT_EQ(f->config_line, 1);
  EXPECT_EQ(f->config_yaml.find("kind"), std::string::npos);
  EXPECT_NE(f->config_yaml.find("tenants:"), std::string::npos);
}

TEST(SplitApplyFileTest, AFileOfServicesOnlyHasNoConfiguration) {
  auto f = SplitApplyFile("kind: Service\nname: a\n---\nkind: Service\nname: b\n");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->services.size(), 2u);
  EXPECT_TRUE(f->config_yaml.empty());
}

TEST(SplitApplyFileTest, RefusesUnknownKindsAndTwoConfigurations) {
  auto unknown = SplitApplyFile("kind: Deployment\nname: a\n");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().field(), "kind");
  EXPECT_NE(unknown.status().message().find("Deployment"), std::string::npos);
  auto two = SplitApplyFile("tenants: []\n---\nusers: []\n");
  ASSERT_FALSE(two.ok());
  EXPECT_NE(two.status().message().find("line 3"), std::string::npos);
  auto bad = SplitApplyFile("kind: Service\nname: [\n");
  EXPECT_FALSE(bad.ok());
}

TEST(SplitApplyFileTest, KubernetesManifestsAreTranslated) {
  const std::string text =
      "apiVersion: apps/v1\n"
      "kind: Deployment\n"
      "metadata: {name: chat, namespace: default}\n"
      "spec:\n"
      "  replicas: 2\n"
      "  template: {spec: {containers: [{name: c, image: vllm/vllm-openai:latest,"
      " command: [vllm, serve], ports: [{containerPort: 8000}]}]}}\n"
      "---\n"
      "apiVersion: v1\n"
      "kind: Service\n"
      "metadata: {name: chat}\n"
      "spec: {ports: [{port: 80}]}\n"
      "---\n"
      "apiVersion: batch/v1\n"
      "kind: Job\n"
      "metadata: {name: pi, labels: {kueue.x-k8s.io/queue-name: batch}}\n"
      "spec: {template: {spec: {containers: [{name: pi, image: perl, command: [perl]}]}}}\n";
  auto f = SplitApplyFile(text);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_EQ(f->services.size(), 1u);
  EXPECT_EQ(f->services[0]["name"], "chat");
  EXPECT_EQ(f->services[0]["replicas"], 2);
  EXPECT_EQ(f->services[0]["port"], 8000);
  EXPECT_EQ(f->service_lines, std::vector<int>{1});
  ASSERT_EQ(f->jobs.size(), 1u);
  EXPECT_EQ(f->jobs[0]["queue"], "batch");
  EXPECT_EQ(f->job_lines, std::vector<int>{13});
  EXPECT_TRUE(f->config_yaml.empty());
  ASSERT_EQ(f->warnings.size(), 2u);
  EXPECT_EQ(f->warnings[0],
            "line 1: apps/v1 Deployment chat: ignored (no meaning in Arbiter): "
            "metadata.namespace");
  EXPECT_NE(f->warnings[1].find("v1 Service at line 8 is skipped"), std::string::npos);

  auto bad = SplitApplyFile("apiVersion: batch/v1\nkind: CronJob\nspec: {}\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().field(), "kind");
  EXPECT_NE(bad.status().message().find("the document at line 1"), std::string::npos);
}

TEST(ServiceTextTest, TrafficAndReadiness) {
  EXPECT_EQ(
      TrafficText(json::parse(R"([{"revision":3,"percent":90},{"revision":4,"percent":10}])")),
      "3=90 4=10");
  EXPECT_EQ(TrafficText(json::array()), "-");
  EXPECT_EQ(ReadyText(json::parse(R"({"replicas":3,"status":{"ready":2,"desired":3}})")), "2/3");
}

}  // namespace
}  // namespace arbiter::cli
