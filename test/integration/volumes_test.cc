// Integration tests of a tenant's named volumes with host processes on the built-in node: the
// storage of one tenant's jobs on a node, kept across its jobs and apart from every other
// tenant's volume of the same name (docs/containers.md, "Volumes"). Volumes in containers are in
// containers_test.cc.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "server_process.h"

namespace arbiter::testing {
namespace {

using nlohmann::json;

constexpr const char* kConfig = R"(
gpu_models:
  - {name: A100-80G, memory_mib: 81920}
tenants:
  - name: vision
    volumes: [{name: ckpt, mode: rw, size_gib: 100}, {name: datasets, mode: ro}]
    queues:
      - {name: vision-q, guaranteed: {gpu: 4}}
  - name: speech
    volumes: [{name: ckpt}]
    queues:
      - {name: speech-q, guaranteed: {gpu: 2}}
  - name: nlp
    queues:
      - {name: nlp-q, guaranteed: {gpu: 2}}
nodes:
  - {name: box, cpu_milli: 32000, memory_mib: 65536, gpus: {count: 8, model: A100-80G}}
)";

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

class VolumesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir_.path() + "/cluster.yaml") << kConfig;
    ASSERT_TRUE(server_.Start(dir_.path(),
                              {"--config", dir_.path() + "/cluster.yaml", "--local-node", "box"}))
        << server_.output();
    admin_ = server_.Client(server_.admin_token());
  }

  httplib::Result Post(const std::string& queue, const std::string& script, const json& mounts,
                       const std::string& image = "") {
    json body = {{"queue", queue},
                 {"command", {"sh", "-c", script}},
                 {"mounts", mounts},
                 {"retry", {{"max_retries", 0}}}};
    if (!image.empty()) body["container_image"] = image;
    return admin_->Post("/api/v1/jobs", body.dump(), "application/json");
  }

  uint64_t Submit(const std::string& queue, const std::string& script, const json& mounts) {
    auto r = Post(queue, script, mounts);
    EXPECT_TRUE(r && r->status == 201) << (r ? r->body : "no response");
    return r && r->status == 201 ? json::parse(r->body)["id"].get<uint64_t>() : 0;
  }

  // Polls (bounded) until the job is final; returns it.
  json WaitDone(uint64_t id) {
    json j;
    for (int i = 0; i < 600; ++i) {
      auto r = admin_->Get(fmt::format("/api/v1/jobs/{}", id));
      if (r) j = json::parse(r->body);
      const std::string state = j.value("state", "");
      if (state == "succeeded" || state == "failed" || state == "cancelled") return j;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ADD_FAILURE() << "job " << id << " did not end: " << j.dump();
    return j;
  }

  std::string Out(uint64_t id) {
    return ReadFile(fmt::format("{}/jobs/{}/task-0.out", server_.node_dir(), id));
  }
  std::string Err(uint64_t id) {
    return ReadFile(fmt::format("{}/jobs/{}/task-0.err", server_.node_dir(), id));
  }

  TempDir dir_;
  ServerProcess server_;
  std::unique_ptr<httplib::Client> admin_;
};

// What a job of vision writes in its volume ckpt, the next job of vision reads; speech's ckpt is
// other storage, empty, which vision's jobs cannot open either.
TEST_F(VolumesTest, AVolumeKeepsItsTenantsDataAcrossJobsAndOnlyForThatTenant) {
  const json ckpt = {{{"volume", "ckpt"}}};
  const uint64_t write = Submit("vision-q",
                                "echo step-7 > \"$ARBITER_VOLUME_CKPT/state\" && "
                                "echo \"dir=$ARBITER_VOLUME_CKPT\"",
                                ckpt);
  json j = WaitDone(write);
  ASSERT_EQ(j.value("state", ""), "succeeded") << j.dump() << Err(write);
  const std::string folder = server_.node_dir() + "/volumes/vision/ckpt";
  EXPECT_EQ(Out(write), "dir=" + folder + "\n");
  struct stat st {};
  ASSERT_EQ(::stat(folder.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  if (geteuid() == 0) {
    EXPECT_NE(st.st_uid, 0u);  // the tenant's own uid, not root's
  }

  // The next job of the tenant, another job id and folder: the same volume.
  const uint64_t read = Submit("vision-q", "cat \"$ARBITER_VOLUME_CKPT/state\"", ckpt);
  j = WaitDone(read);
  EXPECT_EQ(j.value("state", ""), "succeeded") << j.dump() << Err(read);
  EXPECT_EQ(Out(read), "step-7\n");

  // Speech's ckpt: other storage, and vision's is closed to it.
  const uint64_t other =
      Submit("speech-q",
             "echo \"dir=$ARBITER_VOLUME_CKPT\"; ls -A \"$ARBITER_VOLUME_CKPT\"; echo listed; "
             "cat " +
                 folder + "/state && echo READ-VISION",
             ckpt);
  j = WaitDone(other);
  const std::string out = Out(other);
  EXPECT_NE(out.find("dir=" + server_.node_dir() + "/volumes/speech/ckpt\nlisted\n"),
            std::string::npos)
      << out;
  if (geteuid() == 0) {  // tenants run as uids of their own only where the node is root
    EXPECT_EQ(out.find("READ-VISION"), std::string::npos) << out;
    EXPECT_NE(Err(other).find("Permission denied"), std::string::npos) << Err(other);
  }
  // Vision's data is still there, and only there.
  EXPECT_EQ(ReadFile(folder + "/state"), "step-7\n");
  EXPECT_FALSE(std::filesystem::exists(server_.node_dir() + "/volumes/speech/ckpt/state"));
}

// A volume the tenant lacks, or a write to a read-only one, is refused at submission, naming the
// mount and the rule; nothing reaches the node.
TEST_F(VolumesTest, SubmissionsAskingForVolumesBeyondTheRulesAreRefused) {
  struct Case {
    std::string queue;
    json mounts;
    std::string image;
    std::string field;
    std::string message;
  };
  const Case cases[] = {
      {"nlp-q",
       {{{"volume", "ckpt"}}},
       "",
       "mounts[0].volume",
       "tenant nlp has no volume ckpt (volumes: none)"},
      {"vision-q",
       {{{"volume", "ckpt"}}, {{"volume", "scratch"}}},
       "",
       "mounts[1].volume",
       "tenant vision has no volume scratch (volumes: ckpt rw, datasets ro)"},
      {"vision-q",
       {{{"volume", "datasets"}}},
       "",
       "mounts[0].mode",
       "volume datasets may only be mounted read-only by tenant vision"},
      {"vision-q",
       {{{"volume", "datasets"}, {"target", "/data"}, {"mode", "rw"}}},
       "busybox",
       "mounts[0].mode",
       "volume datasets may only be mounted read-only by tenant vision"},
      {"vision-q",
       {{{"volume", "datasets"}, {"mode", "ro"}}},
       "",
       "mounts[0].mode",
       "set container_image"},
      {"vision-q", {{{"volume", "../x"}}}, "", "mounts[0].volume", "is not a volume name"},
      {"vision-q", {{{"volume", "ckpt"}, {"path", "/data"}}}, "", "mounts[0].volume", "not both"},
  };
  for (const Case& c : cases) {
    auto r = Post(c.queue, "true", c.mounts, c.image);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << c.mounts.dump() << ": " << r->body;
    const json err = json::parse(r->body)["error"];
    EXPECT_EQ(err.value("field", ""), c.field) << r->body;
    EXPECT_NE(err.value("message", "").find(c.message), std::string::npos) << r->body;
  }
  // A service's template is held to the same rules.
  auto svc =
      admin_->Post("/api/v1/services",
                   json{{"name", "reader"},
                        {"queue", "nlp-q"},
                        {"template", {{"command", {"serve"}}, {"mounts", {{{"volume", "ckpt"}}}}}}}
                       .dump(),
                   "application/json");
  ASSERT_TRUE(svc);
  EXPECT_EQ(svc->status, 400) << svc->body;
  EXPECT_EQ(json::parse(svc->body)["error"].value("field", ""), "template.mounts[0].volume")
      << svc->body;
  // No volume was made for any of them.
  EXPECT_FALSE(std::filesystem::exists(server_.node_dir() + "/volumes/nlp"));
}

// The configuration shows a tenant's volumes, and a dry run the change of them.
TEST_F(VolumesTest, ConfigurationShowsVolumesAndADryRunTheirChange) {
  auto got = admin_->Get("/api/v1/config");
  ASSERT_TRUE(got && got->status == 200);
  EXPECT_NE(got->body.find("{name: ckpt, mode: rw, size_gib: 100}"), std::string::npos)
      << got->body;
  EXPECT_NE(got->body.find("{name: datasets, mode: ro}"), std::string::npos) << got->body;
  std::string changed = kConfig;
  const std::string from = "volumes: [{name: ckpt}]";
  changed.replace(changed.find(from), from.size(), "volumes: [{name: ckpt, mode: ro}]");
  auto dry = admin_->Put("/api/v1/config?dry_run=true", changed, "application/yaml");
  ASSERT_TRUE(dry);
  ASSERT_EQ(dry->status, 200) << dry->body;
  EXPECT_NE(dry->body.find("volumes: [{name: ckpt, mode: rw}] -> [{name: ckpt, mode: ro}]"),
            std::string::npos)
      << dry->body;
  std::string bad_config = kConfig;
  bad_config.replace(bad_config.find("nodes:"), 6,
                     "  - name: extra\n    volumes: [{name: Bad}]\nnodes:");
  auto bad = admin_->Put("/api/v1/config?dry_run=true", bad_config, "application/yaml");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400) << bad->body;
  EXPECT_EQ(json::parse(bad->body)["error"].value("field", ""), "tenants[3].volumes[0].name")
      << bad->body;
}

}  // namespace
}  // namespace arbiter::testing
