// The `arbiter` command: one binary for every part. This file only dispatches: each subcommand
// registers its own flags next to its code (server/server_flags.h, agent/agent_flags.h,
// bench/bench_flags.h, sim/sim_flags.h, cli/commands.h).
#include <CLI/CLI.hpp>

#include "agent/agent_flags.h"
#include "bench/bench_flags.h"
#include "cli/commands.h"
#include "server/server_flags.h"
#include "sim/sim_flags.h"

#ifndef ARBITER_VERSION
#define ARBITER_VERSION "dev"
#endif

int main(int argc, char** argv) {
  CLI::App app{"Arbiter: AI compute scheduling for shared GPU clusters"};
  app.require_subcommand(1);
  int exit_code = 0;
  arbiter::bench::RegisterBenchCommand(app, &exit_code);
  arbiter::sim::RegisterSimulateCommand(app, &exit_code);
  arbiter::server::RegisterServerCommand(app, &exit_code);
  arbiter::agent::RegisterAgentCommand(app, &exit_code);
  // The client commands: submit, jobs, show, why, logs, ..., top, apply, completion, version.
  arbiter::cli::RegisterUserCommands(app, argc, argv, &exit_code, ARBITER_VERSION);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Help is success; a usage error exits 2 (docs/cli.md).
    return app.exit(e) == 0 ? 0 : 2;
  }
  return exit_code;
}
