// ContainerRuntime: a node's container images and the command lines of its containers, through
// podman (Debian's `podman`, with the `runc` runtime and the `cgroupfs` cgroup manager).
//
// The node keeps podman's state for itself, under WORK_DIR/containers: its own storage
// (`--root`, `--runroot`), temporary folder and a containers.conf it writes (no default ulimits,
// host networking, cgroupfs, runc, events to a file), named by CONTAINERS_CONF for every podman
// it runs. So two nodes on one machine (or two test servers) never share images or containers.
//
// Images are pulled on a thread of this class, one at a time, in the order asked: Ensure(image)
// answers at once (ready with its digest, pulling, or failed with the registry's message) and
// asks for a pull when the image is missing; progress is told through the progress callback
// ("pulling IMAGE: 40% (2 of 5 layers)"). The images present are listed again after every pull
// and at most every `list_every_ms`.
//
// A task's container (TaskContainer) runs under the task's shim like a host process: `podman run`
// attached (its stdout and stderr are the task's, its exit code the container's), named after
// the task, removed when it ends (`--rm`, `--replace` for a leftover of the same name), with the
// task's user, GPUs, environment (inherited from podman's own, never on a command line), working
// folders mounted at the same paths, its job's host-path mounts and its tenant's named volumes
// (podman volumes "arbiter-<tenant>_<name>", made by EnsureVolume), host networking, and its CPU,
// memory and process limits.
//
// Thread safety: every public call is thread-safe; the progress callback runs on the pull thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "model/execution.h"

namespace arbiter::node {

struct ContainerOptions {
  std::string podman = "podman";  // the program (searched in PATH)
  std::string skopeo = "skopeo";  // for a pull's layer count (progress); missing: no percentage
  std::string runtime = "runc";
  // Registries ("host[:port]") reached over plain HTTP or without certificate checks.
  std::vector<std::string> insecure_registries;
  // Where NVIDIA's container toolkit puts its CDI specs; a spec naming nvidia.com/gpu there means
  // a task's GPUs are given as CDI devices (`--device nvidia.com/gpu=INDEX`).
  std::vector<std::string> cdi_dirs = {"/etc/cdi", "/var/run/cdi"};
  int64_t list_every_ms = 30000;
  int64_t pull_timeout_ms = 30 * 60 * 1000;
};

// What Ensure says of an image.
struct ImageState {
  enum class Kind { kReady, kPulling, kFailed };
  Kind kind = Kind::kPulling;
  std::string digest;   // kReady: "sha256:..." ("" when podman does not know it)
  std::string message;  // kFailed: the registry's (podman's) message
  int64_t at_ms = 0;    // kFailed: when (a failure older than a minute is pulled again)
};

// A named volume of the node's podman mounted into a task's container.
struct VolumeBind {
  std::string name;  // podman's name of it (VolumeName)
  std::string target;
  bool read_only = false;
};

// The podman volume that holds the volume `volume` of tenant `tenant` on a node:
// "arbiter-<tenant>_<volume>". '_' is in neither a tenant's nor a volume's names, so two tenants
// never share one ("a-b"'s "c" and "a"'s "b-c" would, with '-').
std::string VolumeName(const std::string& tenant, const std::string& volume);

// One task's container, as the executor describes it.
struct TaskContainer {
  std::string name;  // the container's name
  std::string image;
  std::vector<std::string> command;
  std::vector<std::string> env;  // "NAME=value": the task's whole environment
  std::string cwd;               // "": the image's
  int64_t uid = -1;              // -1: the image's user
  int64_t gid = -1;
  std::vector<int64_t> groups;
  std::vector<std::string> mounts;  // host folders mounted at the same path, read-write
  // The job's own host-path mounts (checked against its tenant's allowed paths at submission).
  std::vector<Mount> binds;
  // Its tenant's named volumes (made by EnsureVolume).
  std::vector<VolumeBind> volumes;
  std::vector<int32_t> gpus;  // CUDA indices: CDI devices where the toolkit is present
  int64_t cpu_milli = 0;      // 0: no limit
  int64_t memory_mib = 0;     // 0: no limit
  int64_t pids_max = 0;       // 0: podman's default
};

class ContainerRuntime {
 public:
  using ProgressFn = std::function<void(const std::string& image, const std::string& text)>;

  // `work_dir`: the node's work folder (podman's state goes under WORK_DIR/containers).
  ContainerRuntime(std::string work_dir, ContainerOptions options, ProgressFn progress);
  ~ContainerRuntime();

  // Whether podman can run containers here; *why says why not (the node's status).
  bool Available(std::string* why);
  std::string Describe() const;

  // The image's state; a missing image is pulled (once, whoever asks again meanwhile). A failed
  // state stays until Forget, or for a minute, so that every task waiting for the image learns
  // it; after that the image is pulled again.
  ImageState Ensure(const ImagePull& pull);
  void Forget(const std::string& image);
  // The images present (at most kMaxNodeImages), as last listed; `*version` grows when they
  // change.
  std::vector<NodeImage> Images(uint64_t* version) const;

  // The program and arguments that run `c` in the foreground, and the environment to run them
  // with (podman's own, never the task's: a job's variables must not steer a podman that runs as
  // root). The task's environment goes to the container through `env_file` (written here, 0600;
  // "": none), so that no value, secret or not, is on a command line; a value with a line break
  // (which an env file cannot hold) is passed by name from podman's environment instead, unless
  // its name is one podman reads itself. False (with *why) when `env_file` cannot be written.
  bool RunCommand(const TaskContainer& c, const std::string& env_file,
                  std::vector<std::string>* argv, std::vector<std::string>* env,
                  std::string* why) const;
  // Makes sure the podman volume `name` exists (created with the labels arbiter.tenant=TENANT
  // and arbiter.volume=VOLUME when missing) and that its folder belongs to uid:gid, mode 0700,
  // so that a task of that user may write there. False (with *why) when podman cannot make it.
  // Runs podman (a second or less): once per volume and process, later calls only chown.
  bool EnsureVolume(const std::string& name, const std::string& tenant, const std::string& volume,
                    int64_t uid, int64_t gid, std::string* why);
  // The command that removes the container `name` if it is left (its podman was killed).
  std::vector<std::string> RemoveCommand(const std::string& name) const;
  // Removes the container `name` now (killed if it runs), when there is one.
  void Remove(const std::string& name);
  // Removes the containers whose names start with `prefix` and are not in `keep`: what an earlier
  // run of the node left (a node's leftovers at its start).
  void RemoveLeftovers(const std::string& prefix, const std::set<std::string>& keep);

 private:
  void Loop();
  ImageState Pull(const ImagePull& pull);
  void List();
  std::vector<std::string> Podman() const;  // podman and its global options
  std::vector<std::string> ToolEnv() const;
  bool Insecure(const ImagePull& pull) const;
  // An auth file for `pull` ("": none), written 0600 under the node's folder.
  std::string AuthFile(const ImagePull& pull) const;
  // The folder of the podman volume `name`, made first when missing; "" (with *why) on failure.
  std::string VolumeFolder(const std::string& name, const std::string& tenant,
                           const std::string& volume, std::string* why);

  std::string dir_;  // WORK_DIR/containers
  ContainerOptions options_;
  ProgressFn progress_;
  std::string conf_;
  bool cdi_gpus_ = false;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, ImageState> states_;
  std::deque<ImagePull> queue_;
  std::vector<NodeImage> images_;
  std::map<std::string, std::string> volumes_;  // podman volume -> its folder (made or seen)
  uint64_t images_version_ = 0;
  int64_t listed_ms_ = -1;
  bool stop_ = false;
  std::atomic<bool> cancel_{false};  // the destructor's: a pull in progress is killed
  std::thread thread_;
};

// The output and exit status of a program run to its end (stdout and stderr together), each line
// handed to `line` as it comes; exit 127 when it cannot be started, 124 past `timeout_ms`.
struct ToolResult {
  int exit_code = 0;
  std::string output;
};
// `cancel` (may be null): once true, the program is killed (exit 124) within 200 ms.
ToolResult RunTool(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                   int64_t timeout_ms,
                   const std::function<void(const std::string&)>& line = nullptr,
                   const std::atomic<bool>* cancel = nullptr);

// "ImagePullFailed: <the registry's message>" from podman's output.
std::string PullFailureReason(const std::string& podman_output);
// The registry part of an image reference ("docker.io" when it names none).
std::string RegistryOf(const std::string& image);

}  // namespace arbiter::node
