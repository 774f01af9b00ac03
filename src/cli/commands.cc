#include "cli/commands.h"

#include <fmt/format.h>

namespace arbiter::cli {

void AddClientFlags(CLI::App* cmd, const ContextPtr& ctx) {
  cmd->add_option(
         "--server", ctx->client.server,
         fmt::format("Server URL (else ARBITER_SERVER, the saved login, {})", kDefaultServer))
      ->group("Connection");
  cmd->add_option("--token", ctx->client.token,
                  "Bearer token (else ARBITER_TOKEN, the saved login)")
      ->group("Connection");
}

void AddOutputFlag(CLI::App* cmd, const ContextPtr& ctx, bool wide) {
  std::vector<std::string> formats = {"table", "json", "yaml"};
  if (wide) formats.push_back("wide");
  cmd->add_option("-o,--output", ctx->output,
                  wide ? "Output: table (default), wide (more columns), json, yaml"
                       : "Output: table (default), json, yaml")
      ->check(CLI::IsMember(formats))
      ->group("Output");
}

void SetExamples(CLI::App* cmd, const std::vector<std::string>& examples) {
  std::string text = "Examples:";
  for (const std::string& e : examples) text += fmt::format("\n  {}", e);
  cmd->footer(text);
}

void RegisterUserCommands(CLI::App& app, int argc, char** argv, int* exit_code,
                          std::string version) {
  auto ctx = std::make_shared<CommandContext>();
  ctx->root = &app;
  ctx->exit_code = exit_code;
  ctx->version = std::move(version);
  for (int i = 0; i < argc; ++i) ctx->argv.emplace_back(argv[i]);
  app.footer(
      "Getting started:\n"
      "  arbiter login --server http://HOST:8080 --token TOKEN\n"
      "  arbiter submit --queue QUEUE --gpus 1 -- python train.py\n"
      "  arbiter submit train.sh            # a Slurm batch script\n"
      "  arbiter jobs; arbiter why ID; arbiter logs ID -f; arbiter top\n"
      "Each command has --help with examples; docs/cli.md has the exit codes.");
  RegisterSubmitCommand(app, ctx);
  RegisterJobCommands(app, ctx);
  RegisterArrayCommands(app, ctx);
  RegisterScancelCommand(app, ctx);
  RegisterAdminCommands(app, ctx);
  RegisterTopCommand(app, ctx);
  RegisterLoginCommands(app, ctx);
  RegisterCompletionCommand(app, ctx);
}

}  // namespace arbiter::cli
