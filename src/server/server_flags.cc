#include "server/server_flags.h"

#include <CLI/CLI.hpp>
#include <cstdio>

#include "server/migrate_store_command.h"
#include "server/server_command.h"

namespace arbiter::server {

void RegisterServerCommand(CLI::App& app, int* exit_code) {
  static arbiter::server::ServerOptions server;
  auto* srv = app.add_subcommand("server",
                                 "Run the control plane: REST API, scheduler and store\n"
                                 "Example: arbiter server --data-dir /var/lib/arbiter --listen "
                                 "0.0.0.0:8080 --config cluster.yaml");
  srv->add_option("--data-dir", server.data_dir, "Folder of the store and admin.token");
  srv->add_option("--store", server.store_url,
                  "Where the state is kept: sqlite:DIR (default: SQLite in --data-dir) or "
                  "postgres://USER@HOST[:PORT]/DB (a libpq URI; docs/store.md)");
  srv->add_option("--store-url-file", server.store_url_file,
                  "A file holding the --store URL (for a URL with a password; mode 0600)")
      ->excludes("--store")
      ->check(CLI::ExistingFile);
  srv->add_option("--secret-key-file", server.secret_key_file,
                  "The 32-byte key secrets at rest (registry passwords) are sealed with; made "
                  "with mode 0600 when missing (default: DATA_DIR/secret.key; servers sharing a "
                  "store share it)");
  srv->add_option("--listen", server.listen, "HOST:PORT to serve the API on (port 0: any free)");
  srv->add_option("--leader-election", server.leader_election,
                  "Several servers on one store: one leads, the others follow (auto: on for "
                  "PostgreSQL, off for SQLite; docs/operations.md)")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  srv->add_option("--lease-ms", server.lease_ms,
                  "The leader's lease: a follower takes over this long after the leader's last "
                  "renewal")
      ->check(CLI::Range(int64_t{500}, int64_t{600000}));
  srv->add_option("--lease-renew-ms", server.lease_renew_ms,
                  "How often the leader renews its lease (and followers try to take it)")
      ->check(CLI::Range(int64_t{50}, int64_t{300000}));
  srv->add_option("--advertise-url", server.advertise_url,
                  "The URL other servers, agents and clients reach this server at (default: "
                  "http://HOST:PORT of --listen)");
  srv->add_option("--follower-refresh-ms", server.follower_refresh_ms,
                  "How often a follower loads the state afresh from the store")
      ->check(CLI::Range(int64_t{50}, int64_t{600000}));
  srv->add_option("--config", server.config_file,
                  "YAML configuration applied at every start (deletions of objects with live "
                  "jobs are refused)");
  srv->add_option("--initial-config", server.initial_config_file,
                  "YAML configuration applied only when the data dir holds none yet (a first "
                  "start); later starts keep what admins changed")
      ->excludes("--config");
  srv->add_option("--log-format", server.log_format, "text or json")
      ->check(CLI::IsMember({"text", "json"}));
  srv->add_option("--cycle-interval-ms", server.cycle_interval_ms, "Time between scheduling cycles")
      ->check(CLI::Range(1, 600000));
  srv->add_option("--rate-limit", server.rate_limit, "Requests per second per token (0: unlimited)")
      ->check(CLI::Range(0.0, 1e9));
  srv->add_option("--http-threads", server.http_threads,
                  "The most HTTP threads: one per open connection (clients, agents' watches), "
                  "started as connections arrive")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  srv->add_option("--http-header-timeout-ms", server.http_header_timeout_ms,
                  "A request's line and headers must arrive within this long (else 408)")
      ->check(CLI::Range(int64_t{100}, int64_t{3600000}))
      ->capture_default_str();
  srv->add_option("--http-body-timeout-ms", server.http_body_timeout_ms,
                  "A request's body must arrive within this long after its headers (else 408)")
      ->check(CLI::Range(int64_t{100}, int64_t{86400000}))
      ->capture_default_str();
  srv->add_option("--http-max-headers", server.http_max_headers,
                  "The most headers a request may have (else 431)")
      ->check(CLI::Range(8, 10000))
      ->capture_default_str();
  srv->add_option("--http-max-header-bytes", server.http_max_header_bytes,
                  "The most bytes of request line and headers (else 431)")
      ->check(CLI::Range(1024, 16 * 1024 * 1024))
      ->capture_default_str();
  srv->add_option("--http-connections-per-address", server.http_connections_per_address,
                  "The most open connections from one client address, beyond which a connection "
                  "is answered 429 (default: a quarter of --http-threads; 0: no limit; behind a "
                  "proxy every client has the proxy's address)")
      ->check(CLI::Range(0, 1 << 20));
  srv->add_option("--http-idle-thread-ms", server.http_idle_thread_ms,
                  "HTTP threads beyond the first 8 exit after idling this long (0: never)")
      ->check(CLI::Range(int64_t{0}, int64_t{86400000}))
      ->capture_default_str();
  srv->add_option("--task-min-cpu-milli", server.task_min_cpu_milli,
                  "Every task counts at least this much CPU (milli-cores) against quotas and "
                  "node capacity, whatever its job asks")
      ->check(CLI::Range(int64_t{0}, int64_t{1024000}))
      ->capture_default_str();
  srv->add_option("--task-min-memory-mib", server.task_min_memory_mib,
                  "Every task counts at least this much memory (MiB), whatever its job asks")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30))
      ->capture_default_str();
  srv->add_option("--tenant-max-tasks", server.tenant_max_tasks,
                  "Live tasks a tenant may have where its configuration sets no max.tasks (0: no "
                  "ceiling)")
      ->check(CLI::Range(int64_t{0}, int64_t{1000000000}))
      ->capture_default_str();
  srv->add_option("--local-node", server.local_node,
                  "Run the tasks placed on this node as local processes (the built-in node)");
  srv->add_option("--fake-gpus", server.fake_gpus,
                  "Fake GPUs of the built-in node when it is not in the configuration (default: "
                  "the GPUs NVML finds, else 8 fake ones)")
      ->check(CLI::Range(0, 64));
  srv->add_option("--local-work-dir", server.local_work_dir,
                  "The built-in node's task folders (default: DATA_DIR-node, beside the data dir)");
  srv->add_option("--local-address", server.local_address,
                  "The built-in node's address for gangs (MASTER_ADDR; default: the --listen host, "
                  "or this machine's name)");
  srv->add_flag("!--no-cgroups", server.local_cgroups,
                "Do not put the built-in node's tasks in cgroups");
  srv->add_option("--max-task-processes", server.max_task_processes,
                  "Processes and threads one task of the built-in node may have at once")
      ->check(CLI::Range(int64_t{16}, int64_t{1} << 22))
      ->capture_default_str();
  srv->add_option("--orphan-timeout-ms", server.local_orphan_timeout_ms,
                  "The built-in node's tasks stop when the server is away this long (0: never)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40))
      ->capture_default_str();
  srv->add_option("--run-as-default", server.run_as_default,
                  "User of the built-in node's tasks whose assignment names none (as root)")
      ->capture_default_str();
  srv->add_option("--shim", server.shim, "The arbiter-shim binary (default: beside this one)");
  srv->add_option("--fake-gpu-device-major", server.fake_gpu_device_major,
                  "Fake GPU i of the built-in node is the character device MAJOR:i (drills)")
      ->check(CLI::Range(0, 4095));
  srv->add_flag("--kill-tasks-on-exit", server.kill_tasks_on_exit,
                "At SIGTERM, kill the built-in node's tasks (default: they keep running and the "
                "next start adopts them)");
  srv->add_flag("!--no-containers", server.local_containers,
                "The built-in node runs no containers (tasks with container_image fail)");
  srv->add_option("--insecure-registry", server.insecure_registries,
                  "A registry (HOST:PORT) the built-in node pulls from over plain HTTP or "
                  "without certificate checks (repeatable)");
  srv->add_option("--tenant-uid-base", server.tenant_uid_base,
                  "Tenants whose configuration names no run_as get their own uid from this + 1 on")
      ->check(CLI::Range(int64_t{1000}, int64_t{4000000000}))
      ->capture_default_str();
  srv->add_option("--node-timeout-ms", server.node_timeout_ms,
                  "A node whose agent sends no heartbeat for this long is down; its tasks are lost")
      ->check(CLI::Range(100, 86400000))
      ->capture_default_str();
  srv->add_option("--reconnect-window-ms", server.reconnect_window_ms,
                  "After a start, known nodes have this long to reconnect before they can be "
                  "declared down (default: 5 node timeouts, at least 30 s)")
      ->check(CLI::Range(0, 86400000));
  srv->add_flag("--metrics-public", server.metrics_public,
                "Serve GET /metrics without a token (else: an admin token or the metrics token)");
  srv->add_option(
      "--metrics-token-file", server.metrics_token_file,
      "File whose first line is a secret that may read GET /metrics (and nothing else)");
  srv->add_option("--audit-file", server.audit_file,
                  "Append every audit record, once committed, as one JSON line to this file (in "
                  "seq order; reopened when moved away or on SIGHUP; docs/governance.md)");
  srv->add_option("--audit-syslog", server.audit_syslog,
                  "Send every audit record as an RFC 5424 message (facility authpriv) to "
                  "udp://HOST:PORT or unix:PATH (e.g. unix:/dev/log)");
  srv->add_option("--sample-interval-ms", server.sample_interval_ms,
                  "Time between metering samples of the cluster and its GPUs (docs/reports.md)")
      ->check(CLI::Range(1000, 3600000))
      ->capture_default_str();
  srv->add_option("--retention-days", server.retention_days,
                  "Archive job events and usage records older than this many days to "
                  "DATA_DIR/archive/YYYY-MM-DD.jsonl.gz and delete them from the store; reports "
                  "keep reading their aggregates (docs/store.md); the built-in node archives "
                  "task output idle this long (docs/security.md). 0: keep them forever")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  srv->add_option("--service-ports", server.service_ports,
                  "Ports the replicas of services without a fixed port get, LO-HI (each replica "
                  "one no other live replica uses; apart from MASTER_PORT's 20000-25999, srun's "
                  "step ports 26000-31999 and the kernel's ephemeral ports)")
      ->capture_default_str();
  srv->add_option("--gateway-listen", server.gateway_listen,
                  "Also run the gateway of services on HOST:PORT (http://HOST:PORT/s/NAME/; "
                  "docs/services.md); default: none");
  srv->add_option("--webhook-retry-base-ms", server.webhook_retry_base_ms,
                  "Webhooks: the wait after a delivery's first failed attempt; each next wait "
                  "doubles (jittered to 50-100%) up to --webhook-retry-max-ms")
      ->check(CLI::Range(int64_t{1}, int64_t{86400000}))
      ->capture_default_str();
  srv->add_option("--webhook-retry-max-ms", server.webhook_retry_max_ms,
                  "Webhooks: the longest wait between two attempts of a delivery")
      ->check(CLI::Range(int64_t{1}, int64_t{86400000}))
      ->capture_default_str();
  srv->add_option("--webhook-max-attempts", server.webhook_max_attempts,
                  "Webhooks: a delivery fails after this many attempts")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  srv->add_option("--webhook-max-age-ms", server.webhook_max_age_ms,
                  "Webhooks: no attempt starts later than this after the event")
      ->check(CLI::Range(int64_t{1000}, int64_t{7} * 86400000))
      ->capture_default_str();
  srv->add_option("--webhook-timeout-ms", server.webhook_timeout_ms,
                  "Webhooks: how long an attempt waits to connect, and then for the answer")
      ->check(CLI::Range(int64_t{100}, int64_t{120000}))
      ->capture_default_str();
  srv->add_option("--finished-jobs-in-memory", server.finished_jobs_in_memory,
                  "Finished jobs kept in memory (the latest); older ones are read from the store")
      ->check(CLI::Range(int64_t{0}, int64_t{100000000}))
      ->capture_default_str();
  srv->add_option_function<std::string>(
         "--finished-jobs-max-age",
         [](const std::string& s) { server.finished_jobs_max_age_ms = *ParseAgeMs(s); },
         "Finished jobs leave memory this long after they finished (90s, 30m, 24h, 7d; "
         "default 24h)")
      ->check(CLI::Validator(
          [](std::string& s) {
            return ParseAgeMs(s) ? std::string() : "expected a duration such as 90s, 30m, 24h, 7d";
          },
          "DURATION"));
  srv->callback([=] { *exit_code = arbiter::server::RunServer(server); });
}

void RegisterAdminCommand(CLI::App& app, int* exit_code) {
  static MigrateStoreOptions migrate;
  auto* admin = app.add_subcommand("admin", "Offline operations on a server's store");
  admin->require_subcommand(1);
  auto* cmd = admin->add_subcommand(
      "migrate-store",
      "Copy a stopped server's whole store (state and history) into another and verify it\n"
      "Example: arbiter admin migrate-store --from sqlite:/var/lib/arbiter --to "
      "postgres://arbiter@db/arbiter");
  cmd->add_option("--from", migrate.from, "The store to copy: sqlite:DIR (or postgres://...)")
      ->required();
  auto* to = cmd->add_option("--to", migrate.to, "The store to fill: postgres://USER@HOST/DB");
  cmd->add_option("--to-file", migrate.to_file, "A file holding the --to URL (with a password)")
      ->excludes(to)
      ->check(CLI::ExistingFile);
  cmd->add_flag("--force", migrate.force,
                "Copy into a target that already holds records (same keys replaced, newer "
                "history appended)");
  cmd->callback([exit_code] {
    if (migrate.to.empty() && migrate.to_file.empty()) {
      std::fprintf(stderr, "arbiter admin migrate-store: --to or --to-file is required\n");
      *exit_code = 2;
      return;
    }
    *exit_code = RunMigrateStore(migrate);
  });
}

}  // namespace arbiter::server
