#include "gateway/gateway_flags.h"

#include <CLI/CLI.hpp>

#include "gateway/gateway_command.h"

namespace arbiter::gateway {

void RegisterGatewayCommand(CLI::App& app, int* exit_code) {
  static GatewayCommandOptions o;
  o.gateway.listen = "127.0.0.1:8000";
  auto* gw = app.add_subcommand(
      "gateway",
      "Run a gateway of online services: route /s/NAME/... and the services' hosts to their "
      "ready replicas\n"
      "Example: arbiter gateway --server http://head:8080 --token-file gateway.token --listen "
      "0.0.0.0:8000");
  gw->add_option(
      "--server", o.gateway.server_url,
      "URL of the server to learn the routes from and post stats to; several servers on one "
      "store: their URLs separated by commas (the first that answers is used)");
  gw->add_option("--token", o.gateway.token, "A token of an admin or the gateway role");
  gw->add_option("--token-file", o.token_file,
                 "A file whose first line is the token (else --token, else $ARBITER_TOKEN)");
  gw->add_option("--routes-file", o.gateway.routes_file,
                 "A fixed routing table (the JSON of GET /api/v1/gateway/routes), without a "
                 "server or until it answers");
  gw->add_option("--listen", o.gateway.listen, "HOST:PORT to serve on (port 0: any free)")
      ->capture_default_str();
  gw->add_option("--threads", o.gateway.threads, "io threads (0: one per hardware thread)")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  gw->add_option("--id", o.gateway.id, "This gateway's name in the stats (default HOSTNAME:PORT)");
  gw->add_option("--stats-interval-ms", o.gateway.stats_interval_ms,
                 "Time between stats posts to the server")
      ->check(CLI::Range(int64_t{100}, int64_t{3600000}))
      ->capture_default_str();
  gw->add_option("--connect-timeout-ms", o.gateway.connect_timeout_ms,
                 "Time to connect to a replica before trying another")
      ->check(CLI::Range(int64_t{1}, int64_t{600000}))
      ->capture_default_str();
  gw->add_option("--upstream-timeout-ms", o.gateway.upstream_timeout_ms,
                 "Longest silence of a replica while it answers (then 504)")
      ->check(CLI::Range(int64_t{1}, int64_t{86400000}))
      ->capture_default_str();
  gw->add_option("--idle-timeout-ms", o.gateway.client_idle_timeout_ms,
                 "Time a client connection may stay idle between requests")
      ->check(CLI::Range(int64_t{1}, int64_t{86400000}))
      ->capture_default_str();
  gw->add_option("--max-body-bytes", o.gateway.max_body_bytes, "Largest request body (else 413)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40))
      ->capture_default_str();
  gw->add_option("--log-format", o.log_format, "text or json")
      ->check(CLI::IsMember({"text", "json"}));
  gw->callback([=] { *exit_code = RunGateway(o); });
}

}  // namespace arbiter::gateway
