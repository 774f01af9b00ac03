#include "agent/agent_flags.h"

#include <CLI/CLI.hpp>

#include "agent/agent_command.h"

namespace arbiter::agent {

void RegisterAgentCommand(CLI::App& app, int* exit_code) {
  static arbiter::agent::AgentOptions agent;
  auto* agt = app.add_subcommand(
      "agent",
      "Run the node agent: register this node, heartbeat, run the tasks placed on it\n"
      "Example: arbiter agent --server http://head:8080 --token-file node.token --name gpu-07 "
      "--gpu-model H100-80G --labels rack=r1");
  agt->add_option("--server", agent.server,
                  "URL of the server (http://HOST:PORT); several servers on one store: their URLs "
                  "separated by commas (the agent follows the leader)")
      ->required();
  agt->add_option("--token", agent.token, "A node token (admins: POST /api/v1/tokens role node)");
  agt->add_option("--token-file", agent.token_file, "A file whose first line is the node token");
  agt->add_option("--name", agent.name, "The node's name")->required();
  agt->add_option("--work-dir", agent.work_dir,
                  "Folder of task logs, pid files, checkpoints and volumes")
      ->capture_default_str();
  agt->add_option("--listen", agent.listen,
                  "HOST:PORT of the log port the server reads task logs from (port 0: any)")
      ->capture_default_str();
  agt->add_option("--address", agent.address,
                  "Address of this node for gangs (MASTER_ADDR); default: as the server sees it");
  agt->add_option("--labels", agent.labels, "Node labels KEY=VALUE,...; rack= and block= too");
  agt->add_option("--fake-gpus", agent.fake_gpus, "Fake GPUs instead of NVML (tests, demos)")
      ->check(CLI::Range(0, 1024));
  agt->add_option("--gpu-model", agent.gpu_model,
                  "The configured GPU model of this node's GPUs (default: NVML's name; fake: the "
                  "server's first model)");
  agt->add_option("--gpu-memory-mib", agent.gpu_memory_mib,
                  "Memory of each fake GPU (0: the model's)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  agt->add_option("--heartbeat-ms", agent.heartbeat_ms, "Time between heartbeats")
      ->check(CLI::Range(50, 600000))
      ->capture_default_str();
  agt->add_option("--backoff-max-ms", agent.backoff_max_ms,
                  "Longest wait between retries while the server does not answer")
      ->check(CLI::Range(100, 600000))
      ->capture_default_str();
  agt->add_option("--log-format", agent.log_format, "text or json")
      ->check(CLI::IsMember({"text", "json"}));
  agt->add_option("--nvml-library", agent.nvml_library, "The NVML library to load")
      ->capture_default_str();
  agt->add_flag("!--no-cgroups", agent.cgroups,
                "Do not put tasks in cgroups (no CPU, memory, process or device limits)");
  agt->add_option("--max-task-processes", agent.max_task_processes,
                  "Processes and threads one task may have at once")
      ->check(CLI::Range(int64_t{16}, int64_t{1} << 22))
      ->capture_default_str();
  agt->add_option("--output-retention-days", agent.output_retention_days,
                  "Archive the output of jobs idle on this node for this many days to "
                  "WORK_DIR/archive/output-YYYY-MM-DD.jsonl.gz and remove their folders "
                  "(docs/security.md). 0: keep them forever")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  agt->add_option("--orphan-timeout-ms", agent.orphan_timeout_ms,
                  "Tasks stop when the agent is away this long (default: the server's node "
                  "timeout; 0: never)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  agt->add_option("--run-as-default", agent.run_as_default,
                  "User of tasks whose assignment names none (when the agent runs as root)")
      ->capture_default_str();
  agt->add_option("--shim", agent.shim, "The arbiter-shim binary (default: beside this one)");
  agt->add_option("--fake-gpu-device-major", agent.fake_gpu_device_major,
                  "Fake GPU i is the character device MAJOR:i (device isolation drills)")
      ->check(CLI::Range(0, 4095));
  agt->add_flag("!--no-containers", agent.containers,
                "Run no containers (tasks with container_image fail)");
  agt->add_option("--insecure-registry", agent.insecure_registries,
                  "A registry (HOST:PORT) pulled from over plain HTTP or without certificate "
                  "checks (repeatable)");
  agt->add_flag("--kill-tasks-on-exit", agent.kill_tasks_on_exit,
                "At SIGTERM, kill the tasks (default: leave them for the next agent to adopt)");
  agt->callback([=] { *exit_code = arbiter::agent::RunAgent(agent); });
}

}  // namespace arbiter::agent
