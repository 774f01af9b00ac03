// `arbiter server`: the control plane a platform team runs on its head node.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace arbiter::server {

struct ServerOptions {
  std::string data_dir = "data";
  // The store (docs/store.md): a URL, or a file holding it (for a URL with a password); empty:
  // SQLite in data_dir.
  std::string store_url;
  std::string store_url_file;
  // The key secrets at rest are sealed with (secret_box.h); empty: DATA_DIR/secret.key, made at
  // the first start. Servers sharing a store must share it.
  std::string secret_key_file;
  std::string listen = "127.0.0.1:8080";
  // Several servers on one store (docs/operations.md, "Several servers"): "auto" (on for
  // PostgreSQL, off for SQLite), "on" or "off"; the lease's length and renewal interval; the URL
  // other servers, agents and clients reach this one at ("": from --listen); how often a follower
  // loads the state afresh.
  std::string leader_election = "auto";
  int64_t lease_ms = 10000;
  int64_t lease_renew_ms = 2000;
  std::string advertise_url;
  int64_t follower_refresh_ms = 1000;
  std::string config_file;          // applied at every start when given
  std::string initial_config_file;  // applied only when the store holds no configuration yet
  std::string log_format = "text";  // or "json"
  int cycle_interval_ms = 200;
  double rate_limit = 2000;  // requests per second per token; 0: unlimited
  int http_threads = 2048;
  // Slow and greedy clients (docs/security.md): header and body deadlines, header limits, open
  // connections per client address (-1: a quarter of --http-threads; 0: no limit), and how long
  // a thread beyond the first few idles before it exits.
  int64_t http_header_timeout_ms = 10000;
  int64_t http_body_timeout_ms = 120000;
  int http_max_headers = 100;
  int http_max_header_bytes = 64 * 1024;
  int http_connections_per_address = -1;
  int64_t http_idle_thread_ms = 60000;
  // The built-in node: run the tasks placed on this node as local processes. A node of that name
  // in the configuration is used as it is; otherwise one is registered with this machine's CPUs
  // and memory and its GPUs: NVML's when it finds any, else `fake_gpus` fake ones, counted as
  // the first configured model when the configuration does not know theirs.
  std::string local_node;
  int fake_gpus = -1;  // -1: NVML's GPUs when it finds any, else 8 fake ones
  // The built-in node's folder of task logs, working directories and checkpoints ("": the data
  // dir's sibling DATA-node; never inside the data dir, which tasks must not reach).
  std::string local_work_dir;
  // The built-in node's address for gangs led from it (MASTER_ADDR): "" is the --listen host, or
  // this machine's name when the server listens on every address.
  std::string local_address;
  // Task confinement on the built-in node (as the agent's: docs/security.md).
  bool local_cgroups = true;
  int64_t max_task_processes = 4096;
  int64_t local_orphan_timeout_ms = 0;  // its tasks stop when the server is away this long
  std::string run_as_default = "arbiter-job";
  std::string shim;
  int fake_gpu_device_major = -1;
  bool kill_tasks_on_exit = false;  // SIGTERM kills the built-in node's tasks (default: kept)
  // The built-in node's containers (docs/containers.md): whether it runs them, and the
  // registries ("host:port") it reaches over plain HTTP.
  bool local_containers = true;
  std::vector<std::string> insecure_registries;
  // Tenants that name no run_as get uids from base + 1 on (one each, never reused).
  int64_t tenant_uid_base = 200000;
  // Nodes run by agents whose heartbeats stop for this long are down (their tasks are lost).
  int node_timeout_ms = 6000;
  // Every task counts at least this much CPU (milli-cores) and memory (MiB), whatever its job
  // asks; a tenant whose configuration sets no `max: {tasks: N}` has at most this many live
  // tasks (0: no ceiling).
  int64_t task_min_cpu_milli = 100;
  int64_t task_min_memory_mib = 128;
  int64_t tenant_max_tasks = 10000;
  // After a start, nodes known from before have this long to come back before they can be
  // declared down (0: 5 node timeouts, at least 30 s): agents reconnect after a restart.
  int reconnect_window_ms = 0;
  // GET /metrics without a token; or with the secret in this file (its first line), besides admin
  // tokens.
  bool metrics_public = false;
  std::string metrics_token_file;
  // The audit log for a SIEM (docs/governance.md): each committed record as a JSON line appended
  // to this file, and/or as an RFC 5424 message (authpriv) to udp://HOST:PORT or unix:PATH.
  std::string audit_file;
  std::string audit_syslog;
  // Metering: a cluster sample and the GPUs' telemetry samples every this long (reports).
  int sample_interval_ms = 60000;
  // Raw history (job events, usage records) older than this many days is archived under
  // data_dir/archive and deleted; 0 keeps it forever (docs/store.md).
  int retention_days = 0;
  // Services (docs/services.md): the ports replicas without a fixed port get, "LO-HI".
  std::string service_ports = "10000-19999";
  // The built-in gateway's address ("": none); it routes /s/NAME/ to services' replicas.
  std::string gateway_listen;
  // Webhook deliveries (docs/webhooks.md): retries, their backoff and how long they go on.
  int64_t webhook_retry_base_ms = 10000;
  int64_t webhook_retry_max_ms = 3600000;
  int webhook_max_attempts = 20;
  int64_t webhook_max_age_ms = 86400000;
  int64_t webhook_timeout_ms = 10000;
  // Jobs in memory (docs/architecture.md, "What memory holds"): every live job, and of the
  // finished ones at most this many, none finished longer ago than the age; older ones are read
  // from the store when asked for.
  int64_t finished_jobs_in_memory = 10000;
  int64_t finished_jobs_max_age_ms = 24 * 3600 * 1000;
};

// "90s", "30m", "24h", "7d" (or a plain number of seconds) in milliseconds; nullopt when it is
// none of those.
std::optional<int64_t> ParseAgeMs(std::string_view text);

// "LO-HI" with 1 <= LO <= HI <= 65535; false (and a message in `why`) otherwise.
bool ParsePortRange(const std::string& text, int32_t* lo, int32_t* hi, std::string* why);

// Runs until SIGTERM or SIGINT; returns the process exit code.
int RunServer(const ServerOptions& options);

}  // namespace arbiter::server
