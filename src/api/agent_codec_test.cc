#include "api/agent_codec.h"

#include <gtest/gtest.h>

#include <tuple>

namespace arbiter::api {
namespace {

using nlohmann::json;

TEST(AgentCodec, RegistrationRoundTrips) {
  AgentRegistration r;
  r.node.name = "gpu-07";
  r.node.cpu_milli = 64000;
  r.node.memory_mib = 515000;
  r.node.labels = {{"rack", "r1"}};
  r.node.rack = "r1";
  r.node.gpus = {{0, "H100-80G", 81559, true, 0}, {1, "H100-80G", 81559, false, 0}};
  r.instance = "abc";
  r.version = "0.1.0";
  r.log_host = "127.0.0.1";
  r.log_port = 40123;
  r.log_token = "secret";
  r.status = {{"cgroups", "unavailable: v1"}};
  auto back = ParseAgentRegistration(AgentRegistrationToJson(r));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->node.name, "gpu-07");
  EXPECT_EQ(back->node.gpus.size(), 2u);
  EXPECT_FALSE(back->node.gpus[1].healthy);
  EXPECT_EQ(back->node.labels.at("rack"), "r1");
  EXPECT_EQ(back->log_port, 40123);
  EXPECT_EQ(back->status.at("cgroups"), "unavailable: v1");
}

TEST(AgentCodec, HeartbeatRoundTrips) {
  AgentHeartbeat hb;
  hb.node = "gpu-07";
  hb.instance = "abc";
  hb.gpus = {{0, "GPU-1", 97, 60211, 81559, true, ""}};
  hb.reports = {{1, 41, 0, 2, TaskEvent::kStarted, 0, false},
                {2, 41, 0, 2, TaskEvent::kExited, 3, true},
                {3, 42, 1, 1, TaskEvent::kLost, 0, false}};
  auto back = ParseAgentHeartbeat(AgentHeartbeatToJson(hb));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->reports.size(), 3u);
  EXPECT_EQ(back->reports[1].event, TaskEvent::kExited);
  EXPECT_EQ(back->reports[1].exit_code, 3);
  EXPECT_TRUE(back->reports[1].timed_out);
  EXPECT_EQ(back->reports[2].event, TaskEvent::kLost);
  EXPECT_EQ(back->gpus[0].utilization_pct, 97);
}

TEST(AgentCodec, AssignmentRoundTrips) {
  TaskAssignment a;
  a.job = 41;
  a.task = 1;
  a.attempt = 2;
  a.run = false;
  a.grace_ms = 5000;
  a.gpus = {4, 5};
  a.master_node = "gpu-06";
  a.master_addr = "10.0.0.6";
  a.nodes = {"gpu-06", "gpu-07"};
  a.spec.tasks = 2;
  a.spec.command = {"python", "train.py"};
  a.spec.env = {{"A", "1"}};
  a.spec.resources.cpu_milli = 16000;
  auto back = ParseTaskAssignment(TaskAssignmentToJson(a), "a");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->attempt, 2u);
  EXPECT_FALSE(back->run);
  EXPECT_EQ(back->gpus, (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(back->spec.command[1], "train.py");
  EXPECT_EQ(back->spec.resources.cpu_milli, 16000);
  EXPECT_EQ(back->master_addr, "10.0.0.6");
  EXPECT_EQ(back->nodes, (std::vector<std::string>{"gpu-06", "gpu-07"}));
  EXPECT_FALSE(back->spec.service);
  // A service's replica carries its link (the executor sets PORT from it).
  a.spec.service = ServiceLink{"chat", 3, 20001};
  back = ParseTaskAssignment(TaskAssignmentToJson(a), "a");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_TRUE(back->spec.service);
  EXPECT_EQ(*back->spec.service, (ServiceLink{"chat", 3, 20001}));
}

TEST(AgentCodec, MountsTravelWithTheirTargetFilledIn) {
  TaskAssignment a;
  a.job = 7;
  a.spec.command = {"python"};
  a.spec.container_image = "registry.example.com/vision/train:1";
  a.spec.mounts = {{"/data/imagenet", "/data", true}, {"/checkpoints/vision", "", false}};
  const nlohmann::json j = TaskAssignmentToJson(a);
  EXPECT_EQ(j["mounts"][1]["target"], "/checkpoints/vision");
  EXPECT_EQ(j["mounts"][1]["read_only"], false);
  auto back = ParseTaskAssignment(j, "a");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->spec.mounts,
            (std::vector<Mount>{{"/data/imagenet", "/data", true},
                                {"/checkpoints/vision", "/checkpoints/vision", false}}));
  nlohmann::json bad = j;
  bad["mounts"][0]["path"] = "/data/../etc";
  auto refused = ParseTaskAssignment(bad, "a");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().field(), "a.mounts[0].path");
}

// A volume mount travels by name with the job's tenant, whose volume it is; the node makes it.
TEST(AgentCodec, VolumeMountsTravelByNameWithTheTenant) {
  TaskAssignment a;
  a.job = 7;
  a.spec.command = {"python"};
  a.spec.tenant = "vision";
  a.spec.container_image = "registry.example.com/vision/train:1";
  a.spec.mounts = {{"", "/ckpt", false, "ckpt"}, {"/data/imagenet", "/data", true}};
  const nlohmann::json j = TaskAssignmentToJson(a);
  EXPECT_EQ(j["mounts"][0]["volume"], "ckpt");
  EXPECT_EQ(j["mounts"][0]["path"], "");
  EXPECT_EQ(j["mounts"][0]["target"], "/ckpt");
  EXPECT_FALSE(j["mounts"][1].contains("volume"));
  EXPECT_EQ(j["tenant"], "vision");
  auto back = ParseTaskAssignment(j, "a");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->spec.mounts, a.spec.mounts);
  EXPECT_EQ(back->spec.tenant, "vision");

  // A host process's volume: no target.
  a.spec.container_image.clear();
  a.spec.mounts = {{"", "", false, "ckpt"}};
  auto host = ParseTaskAssignment(TaskAssignmentToJson(a), "a");
  ASSERT_TRUE(host.ok()) << host.status().ToString();
  EXPECT_EQ(host->spec.mounts, a.spec.mounts);

  for (const auto& [key, value, field] :
       {std::tuple{"volume", nlohmann::json("../x"), "a.mounts[0].volume"},
        std::tuple{"path", nlohmann::json("/data"), "a.mounts[0].volume"},
        std::tuple{"volume", nlohmann::json(""), "a.mounts[0].path"}}) {
    nlohmann::json bad = TaskAssignmentToJson(a);
    bad["mounts"][0][key] = value;
    auto refused = ParseTaskAssignment(bad, "a");
    ASSERT_FALSE(refused.ok()) << bad.dump();
    EXPECT_EQ(refused.status().field(), field) << refused.status().ToString();
  }
}

// A container task: its image, credentials and TLS flag; the node's images and its reports of a
// pull (notes, the digest, a failure's reason) in heartbeats.
TEST(AgentCodec, ContainerFieldsRoundTrip) {
  TaskAssignment a;
  a.job = 7;
  a.spec.command = {"true"};
  a.spec.container_image = "127.0.0.1:5000/lab/busybox:1";
  a.image_pull_auth = "bot:secret";
  a.image_insecure = true;
  auto back = ParseTaskAssignment(TaskAssignmentToJson(a), "a");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->spec.container_image, a.spec.container_image);
  EXPECT_EQ(back->image_pull_auth, "bot:secret");
  EXPECT_TRUE(back->image_insecure);

  AgentHeartbeat hb;
  hb.node = "gpu-07";
  hb.instance = "abc";
  TaskReport note{1, 7, 0, 1, TaskEvent::kNote, 0, false};
  note.message = "pulling x: 50% (1 of 2 layers)";
  note.image_digest = "sha256:ab";
  TaskReport failed{2, 7, 0, 1, TaskEvent::kExited, 125, false};
  failed.message = "ImagePullFailed: manifest unknown";
  hb.reports = {note, failed};
  hb.images_known = true;
  hb.images = {{"127.0.0.1:5000/lab/busybox:1", "sha256:ab", 2000000}};
  auto beat = ParseAgentHeartbeat(AgentHeartbeatToJson(hb));
  ASSERT_TRUE(beat.ok()) << beat.status().ToString();
  ASSERT_EQ(beat->reports.size(), 2u);
  EXPECT_EQ(beat->reports[0].event, TaskEvent::kNote);
  EXPECT_EQ(beat->reports[0].message, note.message);
  EXPECT_EQ(beat->reports[0].image_digest, "sha256:ab");
  EXPECT_EQ(beat->reports[1].message, failed.message);
  EXPECT_EQ(beat->reports[1].exit_code, 125);
  EXPECT_TRUE(beat->images_known);
  EXPECT_EQ(beat->images, hb.images);
  // An agent that could not list its images says nothing of them.
  hb.images_known = false;
  beat = ParseAgentHeartbeat(AgentHeartbeatToJson(hb));
  ASSERT_TRUE(beat.ok());
  EXPECT_FALSE(beat->images_known);
}

// Errors name the field.
TEST(AgentCodec, ErrorsNameTheField) {
  struct Case {
    json body;
    std::string field;
  };
  const json report = {{"seq", 1}, {"job", 1}, {"task", 0}, {"attempt", 1}, {"event", "started"}};
  json bad_event = {{"name", "n"}, {"instance", "i"}, {"reports", {report, report}}};
  bad_event["reports"][1]["event"] = "finished";
  json bad_gpu = {{"name", "n"}, {"instance", "i"}, {"gpus", {{{"index", -1}}}}};
  json no_code = {{"name", "n"}, {"instance", "i"}, {"reports", {report}}};
  no_code["reports"][0]["event"] = "exited";
  for (const Case& c : std::vector<Case>{{bad_event, "reports[1].event"},
                                         {bad_gpu, "gpus[0].index"},
                                         {no_code, "reports[0].exit_code"},
                                         {json{{"name", "n"}}, "instance"},
                                         {json::array(), ""}}) {
    auto r = ParseAgentHeartbeat(c.body);
    ASSERT_FALSE(r.ok()) << c.body.dump();
    EXPECT_EQ(r.status().field(), c.field) << r.status().ToString();
  }
  auto reg = ParseAgentRegistration({{"name", "n"}, {"cpu_milli", "many"}});
  ASSERT_FALSE(reg.ok());
  EXPECT_EQ(reg.status().field(), "cpu_milli");
  EXPECT_EQ(reg.status().message(), "must be an integer");
}

}  // namespace
}  // namespace arbiter::api
