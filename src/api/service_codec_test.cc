#include "api/service_codec.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "api/job_codec.h"

namespace arbiter::api {
namespace {

using nlohmann::json;

json Minimal() {
  return {{"name", "chat"}, {"queue", "serving"}, {"template", {{"command", {"python3", "s.py"}}}}};
}

TEST(ServiceCodecTest, DefaultsOfAMinimalService) {
  auto s = ParseServiceJson(Minimal().dump());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->name, "chat");
  EXPECT_EQ(s->replicas, 1);
  EXPECT_EQ(s->port, 0);
  EXPECT_EQ(s->readiness.path, "/healthz");
  EXPECT_EQ(s->readiness.period_ms, 1000);
  EXPECT_FALSE(s->liveness);
  EXPECT_EQ(s->rollout.max_surge, 1);
  EXPECT_EQ(s->rollout.max_unavailable, 0);
  EXPECT_EQ(s->drain_seconds, 30);
  EXPECT_TRUE(s->traffic.empty());
  EXPECT_EQ(s->tmpl.command[0], "python3");
}

TEST(ServiceCodecTest, EveryFieldRoundTrips) {
  json j = Minimal();
  j["tenant"] = "lab";
  j["priority_class"] = "serving";
  j["template"]["env"] = {{"MODEL", "llama"}};
  j["template"]["secret_env"] = {{"HF_TOKEN", "s3cr3t"}};
  j["template"]["resources"] = {{"gpus", 1}, {"gpu_milli", 500}};
  j["template"]["gpu_models"] = {"A100-80G"};
  j["replicas"] = 3;
  j["port"] = 8080;
  j["hosts"] = {"Chat.Example.com"};
  j["readiness"] = {{"path", "/ready"},        {"period_seconds", 0.5},
                    {"timeout_seconds", 0.25}, {"failure_threshold", 2},
                    {"success_threshold", 2},  {"initial_delay_seconds", 1.5}};
  j["liveness"] = {{"path", "/live"}, {"period_seconds", 10}};
  j["max_concurrency"] = 8;
  j["request_queue"] = {{"max", 100}, {"timeout_ms", 5000}};
  j["rollout"] = {{"max_surge", 0}, {"max_unavailable", 1}};
  j["slo"] = {{"latency_ms", 200}, {"percentile", 99.5}, {"availability", 99.9}};
  j["drain_seconds"] = 5;
  j["traffic"] = {{{"revision", 1}, {"percent", 90}}, {{"revision", 2}, {"percent", 10}}};
  auto s = ParseServiceJson(j.dump());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->hosts[0], "chat.example.com");
  EXPECT_EQ(s->readiness.period_ms, 500);
  EXPECT_EQ(s->readiness.timeout_ms, 250);
  EXPECT_EQ(s->readiness.initial_delay_ms, 1500);
  EXPECT_EQ(s->liveness->period_ms, 10000);
  EXPECT_DOUBLE_EQ(s->slo->percentile, 99.5);
  EXPECT_EQ(s->tmpl.resources.gpu_milli, 500);
  EXPECT_EQ(s->tmpl.secret_env.at("HF_TOKEN"), "s3cr3t");
  // The spec's JSON (no secret values) parses back to the same spec, secrets aside.
  const json back = ServiceSpecToJson(*s);
  EXPECT_EQ(back["template"].count("secret_env"), 0u);
  auto again = ParseServiceJson(back.dump());
  ASSERT_TRUE(again.ok()) << again.status().ToString() << back.dump();
  EXPECT_EQ(ServiceSpecToJson(*again), back);
}

TEST(ServiceCodecTest, StoredServiceKeepsRevisionsAndSecrets) {
  auto spec = ParseServiceJson(Minimal().dump());
  ASSERT_TRUE(spec.ok());
  Service s;
  s.spec = *spec;
  s.spec.tenant = "lab";
  s.user = "alice";
  s.revision = 2;
  JobSpec t1 = spec->tmpl;
  JobSpec t2 = spec->tmpl;
  t2.env["V"] = "2";
  t2.secret_env["TOKEN"] = "x";
  s.revisions = {{1, 100, t1, 0}, {2, 200, t2, 8080}};
  s.spec.tmpl = t2;
  s.traffic = {{1, 50}, {2, 50}};
  s.created_ms = 100;
  s.updated_ms = 200;
  const std::string stored = ServiceStoredJson(s);
  EXPECT_EQ(stored.find("\"x\""), std::string::npos);  // secret values apart
  auto back = ParseStoredService(stored, ServiceSecretsJson(s));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->user, "alice");
  EXPECT_EQ(back->revision, 2);
  ASSERT_EQ(back->revisions.size(), 2u);
  EXPECT_EQ(back->revisions[1].port, 8080);
  EXPECT_EQ(back->revisions[1].tmpl.secret_env.at("TOKEN"), "x");
  EXPECT_TRUE(SameTemplate(back->spec.tmpl, t2));
  EXPECT_EQ(back->traffic, s.traffic);
  // The API's answer names secret variables without their values.
  const json api = ServiceToJson(*back);
  EXPECT_EQ(api["template"]["secret_env"], json::array({"TOKEN"}));
  EXPECT_EQ(api["revisions"].size(), 2u);
}

// Table: a change to the minimal service and the field the error must name.
TEST(ServiceCodecTest, BadInputNamesTheField) {
  struct Case {
    json patch;
    const char* field;
  };
  const Case cases[] = {
      {{{"bogus", 1}}, "bogus"},
      {{{"name", "Chat"}}, "name"},
      {{{"name", "-chat"}}, "name"},
      {{{"name", std::string(41, 'a')}}, "name"},
      {{{"template", nullptr}}, "template"},
      {{{"template", {{"command", {"x"}}, {"tasks", 2}}}}, "template.tasks"},
      {{{"template", {{"command", {"x"}}, {"resources", {{"gpus", -1}}}}}},
       "template.resources.gpus"},
      {{{"template", {{"command", {"x"}}, {"env", {{"PORT", "1"}}}}}}, "template.env.PORT"},
      {{{"template", {{"command", {"x"}}, {"env", {{"CUDA_VISIBLE_DEVICES", "1"}}}}}},
       "template.env.CUDA_VISIBLE_DEVICES"},
      {{{"replicas", 1001}}, "replicas"},
      {{{"replicas", -1}}, "replicas"},
      {{{"port", 70000}}, "port"},
      {{{"port", "80"}}, "port"},
      {{{"hosts", {"not a host"}}}, "hosts[0]"},
      {{{"readiness", {{"path", "healthz"}}}}, "readiness.path"},
      {{{"readiness", {{"period_seconds", 0.05}}}}, "readiness.period_seconds"},
      {{{"readiness", {{"period_seconds", 3601}}}}, "readiness.period_seconds"},
      {{{"readiness", {{"period_seconds", 1}, {"timeout_seconds", 2}}}},
       "readiness.timeout_seconds"},
      {{{"readiness", {{"failure_threshold", 0}}}}, "readiness.failure_threshold"},
      {{{"readiness", {{"success_threshold", 101}}}}, "readiness.success_threshold"},
      {{{"liveness", {{"initial_delay_seconds", 3601}}}}, "liveness.initial_delay_seconds"},
      {{{"liveness", {{"bogus", 1}}}}, "liveness.bogus"},
      {{{"max_concurrency", 100001}}, "max_concurrency"},
      {{{"request_queue", {{"max", -1}}}}, "request_queue.max"},
      {{{"request_queue", {{"timeout_ms", 0}}}}, "request_queue.timeout_ms"},
      {{{"rollout", {{"max_surge", 0}, {"max_unavailable", 0}}}}, "rollout"},
      {{{"rollout", {{"max_surge", -1}}}}, "rollout.max_surge"},
      {{{"slo", {{"latency_ms", 0}}}}, "slo.latency_ms"},
      {{{"slo", {{"availability", 101}}}}, "slo.availability"},
      {{{"drain_seconds", 3601}}, "drain_seconds"},
      {{{"traffic", {{{"revision", 1}, {"percent", 90}}}}}, "traffic"},
      {{{"traffic", json::array()}}, "traffic"},
      {{{"traffic", {{{"revision", 1}, {"percent", 50}}, {{"revision", 1}, {"percent", 50}}}}},
       "traffic"},
      {{{"traffic", {{{"revision", 1}, {"percent", 101}}}}}, "traffic[0].percent"},
      {{{"traffic", {{{"revision", 0}, {"percent", 100}}}}}, "traffic[0].revision"},
      {{{"queue", "bad queue"}}, "queue"},
  };
  for (const Case& c : cases) {
    json j = Minimal();
    j.update(c.patch);
    auto s = ParseServiceJson(j.dump());
    ASSERT_FALSE(s.ok()) << j.dump();
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.status().field(), c.field) << j.dump() << ": " << s.status().ToString();
  }
}

TEST(ServiceCodecTest, YamlIsTheSameObject) {
  auto s = ParseServiceYaml(R"(
name: chat
queue: serving
replicas: 2
template:
  command: [python3, s.py]
  resources: {gpus: 1}
readiness: {path: /ready, period_seconds: 0.5}
)");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->replicas, 2);
  EXPECT_EQ(s->readiness.period_ms, 500);
}

TEST(ServiceCodecTest, ScaleAndTrafficBodies) {
  EXPECT_EQ(ParseScaleBody(R"({"replicas": 5})")->replicas, 5);
  EXPECT_EQ(ParseScaleBody(R"({"replicas": -1})").status().field(), "replicas");
  EXPECT_EQ(ParseScaleBody(R"({"n": 1})").status().field(), "n");
  auto range = ParseScaleBody(R"({"min": 0, "max": 8})");
  ASSERT_TRUE(range.ok()) << range.status().ToString();
  EXPECT_EQ(range->replicas, -1);
  EXPECT_EQ(range->min, 0);
  EXPECT_EQ(range->max, 8);
  EXPECT_EQ(ParseScaleBody(R"({"min": 3, "max": 2})").status().field(), "min");
  EXPECT_EQ(ParseScaleBody(R"({"min": 1})").status().field(), "max");
  EXPECT_EQ(ParseScaleBody(R"({"replicas": 1, "max": 2})").status().field(), "replicas");
  EXPECT_EQ(ParseScaleBody("{}").status().field(), "replicas");
  auto t = ParseTrafficBody(R"({"traffic": [{"revision": 3, "percent": 90},
                                            {"revision": 4, "percent": 10}]})");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->size(), 2u);
  EXPECT_EQ(ParseTrafficBody(R"({"traffic": [{"revision": 3, "percent": 90}]})").status().field(),
            "traffic");
}

// A submission may not make a replica; the stored form keeps the link.
TEST(ServiceCodecTest, TheJobsServiceLinkIsTheServersOnly) {
  const std::string body =
      R"({"command": ["x"], "type": "service", "service": {"name": "chat", "revision": 1, "port": 20001}})";
  auto submitted = ParseJobSubmission(body);
  ASSERT_FALSE(submitted.ok());
  EXPECT_EQ(submitted.status().field(), "service");
  auto stored = ParseStoredJob(body);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  ASSERT_TRUE(stored->service);
  EXPECT_EQ(stored->service->port, 20001);
  EXPECT_EQ(JobSpecJsonText(*stored).find(R"("service":{"name":"chat","port":20001,"revision":1})"),
            JobSpecJsonText(*stored).find("\"service\""));
  EXPECT_EQ(nlohmann::json::parse(JobSpecJsonText(*stored)), JobSpecToJson(*stored));
}

// replicas: {min, max} turns autoscaling on with Knative's defaults; every field is checked.
TEST(ServiceCodecTest, AutoscalingRangeAndSettings) {
  auto s = ParseServiceJson(R"({"name": "chat", "template": {"command": ["serve"]},
                                "replicas": {"min": 0, "max": 6},
                                "reclaim_deadline_seconds": 20})");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_TRUE(s->autoscaling);
  EXPECT_EQ(s->min_replicas, 0);
  EXPECT_EQ(s->max_replicas, 6);
  EXPECT_EQ(s->reclaim_deadline_seconds, 20);
  const AutoscalingSpec& a = *s->autoscaling;
  EXPECT_EQ(a.metric, AutoscaleMetric::kConcurrency);
  EXPECT_DOUBLE_EQ(a.EffectiveTarget(), 100);
  EXPECT_DOUBLE_EQ(a.target_utilization, 70);
  EXPECT_EQ(a.stable_window_ms, 60000);
  EXPECT_EQ(a.panic_window_ms, 6000);
  EXPECT_DOUBLE_EQ(a.panic_threshold, 200);
  EXPECT_DOUBLE_EQ(a.max_scale_up_rate, 1000);
  EXPECT_DOUBLE_EQ(a.max_scale_down_rate, 2);
  EXPECT_EQ(a.scale_down_delay_ms, 0);
  EXPECT_EQ(a.scale_to_zero_grace_ms, 30000);

  s = ParseServiceJson(R"({"name": "chat", "template": {"command": ["serve"]},
                           "replicas": {"min": 1, "max": 4},
                           "autoscaling": {"metric": "rps", "target": 12.5,
                                           "stable_window_seconds": 20,
                                           "scale_down_delay_seconds": 30}})");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->autoscaling->metric, AutoscaleMetric::kRps);
  EXPECT_DOUBLE_EQ(s->autoscaling->target, 12.5);
  EXPECT_EQ(s->autoscaling->panic_window_ms, 2000);  // a tenth of the stable window
  EXPECT_EQ(s->autoscaling->scale_down_delay_ms, 30000);
  // The answer carries the range and the settings, and parses back to the same.
  const nlohmann::json back = ServiceSpecToJson(*s);
  EXPECT_EQ(back["replicas"], (nlohmann::json{{"min", 1}, {"max", 4}}));
  EXPECT_EQ(back["autoscaling"]["metric"], "rps");
  auto again = ParseServiceJson(back.dump());
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again->autoscaling, *s->autoscaling);

  const std::pair<const char*, const char*> bad[] = {
      {R"("replicas": 2, "autoscaling": {})", "replicas"},
      {R"("replicas": {"min": 3, "max": 2})", "replicas.min"},
      {R"("replicas": {"min": 1})", "replicas.max"},
      {R"("replicas": {"max": 2, "step": 1})", "replicas.step"},
      {R"("replicas": {"max": 2}, "autoscaling": {"metric": "gpu"})", "autoscaling.metric"},
      {R"("replicas": {"max": 2}, "autoscaling": {"target": 0})", "autoscaling.target"},
      {R"("replicas": {"max": 2}, "autoscaling": {"target_utilization": 120})",
       "autoscaling.target_utilization"},
      {R"("replicas": {"max": 2}, "autoscaling": {"stable_window_seconds": 10,
                                                  "panic_window_seconds": 20})",
       "autoscaling.panic_window_seconds"},
      {R"("replicas": {"max": 2}, "autoscaling": {"max_scale_down_rate": 1})",
       "autoscaling.max_scale_down_rate"},
      {R"("reclaim_deadline_seconds": -1)", "reclaim_deadline_seconds"},
  };
  for (const auto& [fields, field] : bad) {
    const std::string body =
        std::string(R"({"name": "chat", "template": {"command": ["serve"]}, )") + fields + "}";
    EXPECT_EQ(ParseServiceJson(body).status().field(), field) << body;
  }
}

}  // namespace
}  // namespace arbiter::api
