// The `arbiter` command: one binary for every part. This file only dispatches: each subcommand
// registers its own flags next to its code (server/server_flags.h, agent/agent_flags.h,
// bench/bench_flags.h, sim/sim_flags.h, plan/plan_flags.h, gateway/gateway_flags.h,
// cli/commands.h). Called through a
// link named after a Slurm command (squeue, sbatch, scancel, sinfo, sacct: `make install` makes
// them), it runs `arbiter NAME` with the same arguments.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "agent/agent_flags.h"
#include "bench/bench_flags.h"
#include "cli/commands.h"
#include "cli/suggest.h"
#include "gateway/gateway_flags.h"
#include "plan/plan_flags.h"
#include "server/server_flags.h"
#include "sim/sim_flags.h"

#ifndef ARBITER_VERSION
#define ARBITER_VERSION "dev"
#endif

int main(int argc, char** argv) {
  std::vector<std::string> args =
      arbiter::cli::SlurmCommandLine(std::vector<std::string>(argv, argv + argc));
  std::vector<char*> argp;
  for (std::string& a : args) argp.push_back(a.data());
  argp.push_back(nullptr);
  const int n = static_cast<int>(args.size());

  CLI::App app{"Arbiter: AI compute scheduling for shared GPU clusters"};
  app.require_subcommand(1);
  int exit_code = 0;
  arbiter::bench::RegisterBenchCommand(app, &exit_code);
  arbiter::sim::RegisterSimulateCommand(app, &exit_code);
  arbiter::plan::RegisterCalibrateCommand(app, &exit_code);  // simulate calibrate
  arbiter::server::RegisterServerCommand(app, &exit_code);
  arbiter::server::RegisterAdminCommand(app, &exit_code);
  arbiter::agent::RegisterAgentCommand(app, &exit_code);
  arbiter::gateway::RegisterGatewayCommand(app, &exit_code);
  // The client commands: submit, jobs, show, why, logs, ..., top, apply, completion, version.
  arbiter::cli::RegisterUserCommands(app, n, argp.data(), &exit_code, ARBITER_VERSION);

  // A link named after a Slurm command this build does not have.
  const std::string self = argc > 0 ? argv[0] : "";
  const std::string base = self.substr(self.find_last_of('/') + 1);  // npos + 1: all of it
  const auto& slurm = arbiter::cli::SlurmCommandNames();
  if (std::find(slurm.begin(), slurm.end(), base) != slurm.end() &&
      app.get_subcommands([&](const CLI::App* s) { return s->get_name() == base; }).empty()) {
    std::fprintf(stderr,
                 "error: %s is not available in this arbiter (%s): it has no \"arbiter %s\" "
                 "command; see arbiter --help\n",
                 base.c_str(), ARBITER_VERSION, base.c_str());
    return 2;
  }
  try {
    app.parse(n, argp.data());
  } catch (const CLI::ParseError& e) {
    // Help is success; a usage error exits 2, an unknown command or flag with its nearest match
    // (docs/cli.md).
    return arbiter::cli::ReportParseError(app, e);
  }
  return exit_code;
}
