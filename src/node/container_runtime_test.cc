#include "node/container_runtime.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace arbiter::node {
namespace {

TEST(ContainerRuntime, PullFailureReasonIsTheRegistrysMessage) {
  const std::string out =
      "Trying to pull 127.0.0.1:5000/lab/missing:1...\n"
      "Error: initializing source docker://127.0.0.1:5000/lab/missing:1: reading manifest 1 in "
      "127.0.0.1:5000/lab/missing: manifest unknown: manifest unknown\n";
  EXPECT_EQ(PullFailureReason(out),
            "ImagePullFailed: initializing source docker://127.0.0.1:5000/lab/missing:1: reading "
            "manifest 1 in 127.0.0.1:5000/lab/missing: manifest unknown: manifest unknown");
  EXPECT_EQ(PullFailureReason("no route to host\n"), "ImagePullFailed: no route to host");
  EXPECT_EQ(PullFailureReason(""), "ImagePullFailed: the pull failed without a message");
}

TEST(ContainerRuntime, RegistryOfAnImage) {
  EXPECT_EQ(RegistryOf("127.0.0.1:5000/lab/busybox:1"), "127.0.0.1:5000");
  EXPECT_EQ(RegistryOf("registry.example.com/vision/trainer@sha256:ab"), "registry.example.com");
  EXPECT_EQ(RegistryOf("localhost/x"), "localhost");
  EXPECT_EQ(RegistryOf("library/busybox"), "docker.io");
  EXPECT_EQ(RegistryOf("busybox"), "docker.io");
}

TEST(ContainerRuntime, RunToolGivesOutputAndExitCode) {
  std::vector<std::string> lines;
  const ToolResult r =
      RunTool({"sh", "-c", "echo one; echo two >&2; exit 3"}, {"PATH=/usr/bin:/bin"}, 10000,
              [&](const std::string& l) { lines.push_back(l); });
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(lines, (std::vector<std::string>{"one", "two"}));
  EXPECT_EQ(RunTool({"/no/such/program"}, {}, 10000).exit_code, 127);
  EXPECT_EQ(RunTool({"sleep", "5"}, {"PATH=/usr/bin:/bin"}, 100).exit_code, 124);
}

// The container's command line: the task's user, GPUs, folders and limits; its environment in a
// file only root reads (no value on a command line, and nothing of the job's steers podman).
TEST(ContainerRuntime, RunCommandKeepsTheEnvironmentOffTheCommandLine) {
  const std::string dir = ::testing::TempDir() + "/container-runtime-test";
  std::filesystem::create_directories(dir);
  ContainerOptions o;
  o.cdi_dirs = {};
  ContainerRuntime rt(dir, o, nullptr);
  TaskContainer c;
  c.name = "arbiter-task-7-0";
  c.image = "127.0.0.1:5000/lab/busybox:1";
  c.command = {"sh", "-c", "echo hi"};
  c.env = {"HF_TOKEN=very-secret",           "PATH=/usr/bin:/bin", "CUDA_VISIBLE_DEVICES=2,3",
           "CONTAINER_HOST=tcp://elsewhere", "NOTE=two\nlines",    "XDG_RUNTIME_DIR=x\ny"};
  c.uid = 200001;
  c.gid = 200001;
  c.mounts = {"/w/work/7"};
  c.gpus = {2, 3};
  c.cpu_milli = 1500;
  c.memory_mib = 512;
  c.pids_max = 4096;
  std::vector<std::string> argv;
  std::vector<std::string> env;
  std::string why;
  const std::string file = dir + "/task-0.env";
  ASSERT_TRUE(rt.RunCommand(c, file, &argv, &env, &why)) << why;
  auto has = [&](const std::string& a) {
    return std::find(argv.begin(), argv.end(), a) != argv.end();
  };
  EXPECT_TRUE(has("--user=200001:200001"));
  EXPECT_TRUE(has("--volume=/w/work/7:/w/work/7"));
  EXPECT_TRUE(has("--cpus=1.500"));
  EXPECT_TRUE(has("--memory=512m"));
  EXPECT_TRUE(has("--pids-limit=4096"));
  EXPECT_TRUE(has("--env-file=" + file));
  EXPECT_TRUE(has("--env=NOTE"));              // a line break: by name, from podman's environment
  EXPECT_FALSE(has("--env=XDG_RUNTIME_DIR"));  // podman reads it: never from a job
  EXPECT_TRUE(has("--rm"));
  EXPECT_TRUE(has("arbiter-task-7-0"));
  EXPECT_FALSE(has("--device=nvidia.com/gpu=2"));  // no CDI spec here: GPUs by environment
  for (const std::string& a : argv) EXPECT_EQ(a.find("very-secret"), std::string::npos) << a;
  for (const std::string& e : env) {
    EXPECT_EQ(e.rfind("CONTAINER_HOST=", 0), std::string::npos) << e;
    EXPECT_EQ(e.rfind("HF_TOKEN=", 0), std::string::npos) << e;
  }
  EXPECT_NE(std::find(env.begin(), env.end(), "NOTE=two\nlines"), env.end());
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("HF_TOKEN=very-secret\n"), std::string::npos);
  struct stat st {};
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // The image, then the task's command, last.
  ASSERT_GE(argv.size(), 4u);
  EXPECT_EQ(argv[argv.size() - 4], c.image);
  EXPECT_EQ(argv.back(), "echo hi");
}

// With NVIDIA's container toolkit (a CDI spec naming nvidia.com/gpu), exactly the task's GPUs.
TEST(ContainerRuntime, GpusAsCdiDevicesWhereTheToolkitIsPresent) {
  const std::string dir = ::testing::TempDir() + "/container-runtime-cdi";
  std::filesystem::create_directories(dir + "/cdi");
  std::ofstream(dir + "/cdi/nvidia.yaml") << "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\n";
  ContainerOptions o;
  o.cdi_dirs = {dir + "/cdi"};
  ContainerRuntime rt(dir, o, nullptr);
  TaskContainer c;
  c.name = "t";
  c.image = "i";
  c.command = {"true"};
  c.gpus = {1, 3};
  std::vector<std::string> argv;
  std::vector<std::string> env;
  std::string why;
  ASSERT_TRUE(rt.RunCommand(c, "", &argv, &env, &why));
  std::vector<std::string> devices;
  for (const std::string& a : argv) {
    if (a.rfind("--device=", 0) == 0) devices.push_back(a);
  }
  EXPECT_EQ(devices,
            (std::vector<std::string>{"--device=nvidia.com/gpu=1", "--device=nvidia.com/gpu=3"}));
}

TEST(ContainerRuntime, AMountThroughASymbolicLinkIsRefused) {
  // Normalized (no "//", no link on the way), as the paths a job may name are.
  const std::string dir =
      std::filesystem::weakly_canonical(std::filesystem::path(::testing::TempDir()) /
                                        "container-runtime-links")
          .string();
  std::filesystem::create_directories(dir + "/data/real");
  std::error_code ec;
  std::filesystem::remove(dir + "/data/link", ec);
  std::filesystem::create_directory_symlink("/etc", dir + "/data/link");
  ContainerOptions o;
  o.cdi_dirs = {};
  ContainerRuntime rt(dir, o, nullptr);
  TaskContainer c;
  c.name = "arbiter-task-8-0";
  c.image = "127.0.0.1:5000/lab/busybox:1";
  c.command = {"true"};
  std::vector<std::string> argv;
  std::vector<std::string> env;
  std::string why;
  c.binds = {{dir + "/data/real", "/data", true}};
  ASSERT_TRUE(rt.RunCommand(c, dir + "/task.env", &argv, &env, &why)) << why;
  EXPECT_NE(std::find(argv.begin(), argv.end(), "--volume=" + dir + "/data/real:/data:ro"),
            argv.end());
  c.binds = {{dir + "/data/link", "/data", false}};
  EXPECT_FALSE(rt.RunCommand(c, dir + "/task.env", &argv, &env, &why));
  EXPECT_NE(why.find("symbolic link (to /etc)"), std::string::npos) << why;
  c.binds = {{dir + "/data/missing", "/data", true}};
  EXPECT_FALSE(rt.RunCommand(c, dir + "/task.env", &argv, &env, &why));
  EXPECT_NE(why.find("no such folder"), std::string::npos) << why;
}

// A tenant's volume is a podman volume of its own: the separator is in no tenant's or volume's
// name, so no two tenants share one.
TEST(ContainerRuntime, VolumesAreNamedPerTenantAndMountedByName) {
  EXPECT_EQ(VolumeName("vision", "ckpt"), "arbiter-vision_ckpt");
  EXPECT_NE(VolumeName("a-b", "c"), VolumeName("a", "b-c"));
  const std::string dir = ::testing::TempDir() + "/container-runtime-volumes";
  std::filesystem::create_directories(dir);
  ContainerOptions o;
  o.cdi_dirs = {};
  ContainerRuntime rt(dir, o, nullptr);
  TaskContainer c;
  c.name = "arbiter-task-9-0";
  c.image = "i";
  c.command = {"true"};
  c.volumes = {{"arbiter-vision_ckpt", "/ckpt", false}, {"arbiter-vision_data", "/data", true}};
  std::vector<std::string> argv;
  std::vector<std::string> env;
  std::string why;
  ASSERT_TRUE(rt.RunCommand(c, "", &argv, &env, &why)) << why;
  for (const char* v :
       {"--volume=arbiter-vision_ckpt:/ckpt:rw", "--volume=arbiter-vision_data:/data:ro"}) {
    EXPECT_NE(std::find(argv.begin(), argv.end(), v), argv.end()) << v;
  }
  c.volumes = {{"arbiter-vision_ckpt", "/a:b", false}};
  EXPECT_FALSE(rt.RunCommand(c, "", &argv, &env, &why));
  EXPECT_NE(why.find("':' or ','"), std::string::npos) << why;
}

// EnsureVolume against a stand-in for podman that keeps volumes as folders: a missing volume is
// created with its labels, once; its folder is the task user's, 0700; one removed meanwhile is
// made again.
TEST(ContainerRuntime, EnsureVolumeCreatesOnceAndGivesItToTheUser) {
  const std::string dir = std::filesystem::weakly_canonical(
                              std::filesystem::path(::testing::TempDir()) / "container-volumes")
                              .string();
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string fake = dir + "/podman";
  {
    std::ofstream f(fake);
    // Global options come in pairs; then "volume inspect --format F NAME" or "volume create
    // --label L --label L NAME". VOLS is where the volumes are kept.
    f << "#!/bin/sh\nVOLS=" << dir << "/vols\nCALLS=" << dir << "/calls\n"
      << R"(echo "$*" >> "$CALLS"
while [ $# -gt 0 ]; do case "$1" in --*) shift 2;; *) break;; esac; done
case "$1 $2" in
  'volume inspect') [ -d "$VOLS/$5" ] || { echo no such volume; exit 125; }
    echo "$VOLS/$5/_data";;
  'volume create') for a; do n=$a; done; mkdir -p "$VOLS/$n/_data"; echo "$n";;
  *) exit 1;;
esac
)";
  }
  std::filesystem::permissions(fake, std::filesystem::perms::owner_all);
  ContainerOptions o;
  o.cdi_dirs = {};
  o.podman = fake;
  ContainerRuntime rt(dir, o, nullptr);
  std::string why;
  auto calls = [&] {
    std::ifstream in(dir + "/calls");
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  };
  ASSERT_TRUE(rt.EnsureVolume("arbiter-vision_ckpt", "vision", "ckpt", getuid(), getgid(), &why))
      << why << calls();
  const std::string folder = dir + "/vols/arbiter-vision_ckpt/_data";
  struct stat st {};
  ASSERT_EQ(::stat(folder.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_EQ(st.st_uid, getuid());
  const std::string first = calls();
  EXPECT_NE(first.find("volume create --label arbiter.tenant=vision --label arbiter.volume=ckpt "
                       "arbiter-vision_ckpt"),
            std::string::npos)
      << first;
  // Known now: no podman.
  ASSERT_TRUE(rt.EnsureVolume("arbiter-vision_ckpt", "vision", "ckpt", getuid(), getgid(), &why));
  EXPECT_EQ(calls(), first);
  // Removed by an operator: made again.
  std::filesystem::remove_all(dir + "/vols/arbiter-vision_ckpt");
  ASSERT_TRUE(rt.EnsureVolume("arbiter-vision_ckpt", "vision", "ckpt", getuid(), getgid(), &why))
      << why;
  EXPECT_TRUE(std::filesystem::exists(folder));
  // podman failing: the reason says so.
  o.podman = dir + "/no-such-podman";
  ContainerRuntime broken(dir + "/b", o, nullptr);
  EXPECT_FALSE(broken.EnsureVolume("arbiter-vision_x", "vision", "x", getuid(), getgid(), &why));
  EXPECT_NE(why.find("cannot create the volume arbiter-vision_x"), std::string::npos) << why;
}

}  // namespace
}  // namespace arbiter::node
