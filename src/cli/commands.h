// The client commands of `arbiter` (submit, jobs, show, why, logs, cancel, ..., top, apply,
// completion): registered on the binary's CLI11 app by RegisterUserCommands.
//
// One command runs per process: the flags every command shares live in one CommandContext that
// the command callbacks capture. Each command sets *exit_code (docs/cli.md).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "cli/client.h"
#include "cli/output.h"

namespace arbiter::cli {

struct CommandContext {
  CLI::App* root = nullptr;
  int* exit_code = nullptr;
  std::vector<std::string> argv;  // the command line as given (submit looks for "--")
  ClientFlags client;
  std::string output = "table";
  std::string version;

  // The connection from the flags, environment and configuration file.
  Result<Connection> Resolve() const { return ResolveConnection(client); }
  // The output format; a bad -o was refused by the flag's check.
  OutputFormat format() const {
    auto f = ParseOutputFormat(output);
    return f.ok() ? *f : OutputFormat::kTable;
  }
  // Runs a command body and records its exit code.
  template <typename F>
  void Run(F&& body) {
    *exit_code = body();
  }
};

using ContextPtr = std::shared_ptr<CommandContext>;

// Adds --server and --token (group "Connection") to `cmd`.
void AddClientFlags(CLI::App* cmd, const ContextPtr& ctx);
// Adds -o/--output with the allowed formats (`wide`: whether -o wide means more columns).
void AddOutputFlag(CLI::App* cmd, const ContextPtr& ctx, bool wide = true);
// "Examples:\n  arbiter ...\n" as the command's help footer.
void SetExamples(CLI::App* cmd, const std::vector<std::string>& examples);

// Registers every client command on `app`. `argv` is the whole command line; `version` is
// printed by `arbiter version`.
void RegisterUserCommands(CLI::App& app, int argc, char** argv, int* exit_code,
                          std::string version);

// One per command group (each in its own file).
void RegisterLoginCommands(CLI::App& app, const ContextPtr& ctx);      // client.cc
void RegisterSubmitCommand(CLI::App& app, const ContextPtr& ctx);      // submit.cc
void RegisterJobCommands(CLI::App& app, const ContextPtr& ctx);        // jobs.cc
void RegisterAdminCommands(CLI::App& app, const ContextPtr& ctx);      // admin.cc
void RegisterTopCommand(CLI::App& app, const ContextPtr& ctx);         // top.cc
void RegisterCompletionCommand(CLI::App& app, const ContextPtr& ctx);  // completion.cc
void RegisterReportCommand(CLI::App& app, const ContextPtr& ctx);      // report.cc
// `plan replay`, `plan capacity` (plan.cc).
void RegisterPlanCommands(CLI::App& app, const ContextPtr& ctx);
void RegisterScancelCommand(CLI::App& app, const ContextPtr& ctx);  // scancel.cc
void RegisterArrayCommands(CLI::App& app, const ContextPtr& ctx);   // arrays.cc
// approvals, approve, reject, request quota, quota-requests (approvals.cc).
void RegisterApprovalCommands(CLI::App& app, const ContextPtr& ctx);
// Slurm's views, with Slurm's flags, columns and formats.
void RegisterSqueueCommand(CLI::App& app, const ContextPtr& ctx);  // squeue.cc
void RegisterSinfoCommand(CLI::App& app, const ContextPtr& ctx);   // sinfo.cc
void RegisterSacctCommand(CLI::App& app, const ContextPtr& ctx);   // sacct.cc
// Online services: `services`, `service show|scale|traffic|rollback|delete` (services.cc).
void RegisterServiceCommands(CLI::App& app, const ContextPtr& ctx);
// Webhooks: `webhook create|list|delete|deliveries|test` (webhooks.cc).
void RegisterWebhookCommands(CLI::App& app, const ContextPtr& ctx);
// Registry credentials: `registry-credentials set|list|delete` (registry_credentials.cc).
void RegisterRegistryCredentialCommands(CLI::App& app, const ContextPtr& ctx);
// Creates or replaces the `kind: Service` documents of an `apply -f` file (services.cc); `lines`:
// each document's first line in `file`, for messages.
int ApplyServices(const ContextPtr& ctx, ApiClient& api,
                  const std::vector<nlohmann::json>& services, const std::vector<int>& lines,
                  const std::string& file, bool dry_run);

// `arbiter login --ldap --user NAME` (login_ldap.cc): a directory user's password, from the
// terminal without echo or from stdin, for a token that is saved as `arbiter login` saves one.
int LoginLdap(const ContextPtr& ctx, const std::string& user, bool password_stdin,
              const std::string& queue);

// The Slurm commands `arbiter` answers to under their own names (a link named squeue runs
// `arbiter squeue`; `make install` makes the links): squeue, sbatch, scancel, sinfo, sacct.
const std::vector<std::string>& SlurmCommandNames();
// The command line `argv` means: a link named after a Slurm command (argv[0]'s basename) runs
// that subcommand, `squeue ARGS` as `arbiter squeue ARGS`; and a Slurm sort key that starts with
// '-' (`squeue -S -t`) is kept as the flag's value. Other command lines are returned as given.
std::vector<std::string> SlurmCommandLine(const std::vector<std::string>& argv);

}  // namespace arbiter::cli
