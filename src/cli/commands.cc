#include "cli/commands.h"

#include <fmt/format.h>

#include <algorithm>

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
  RegisterSqueueCommand(app, ctx);
  RegisterSinfoCommand(app, ctx);
  RegisterSacctCommand(app, ctx);
  RegisterServiceCommands(app, ctx);
  RegisterWebhookCommands(app, ctx);
  RegisterRegistryCredentialCommands(app, ctx);
  RegisterApprovalCommands(app, ctx);
}

const std::vector<std::string>& SlurmCommandNames() {
  static const std::vector<std::string> kNames = {"squeue", "sbatch", "scancel", "sinfo", "sacct"};
  return kNames;
}

std::vector<std::string> SlurmCommandLine(const std::vector<std::string>& argv) {
  if (argv.empty()) return argv;
  std::vector<std::string> out = argv;
  const std::string& self = argv[0];
  const std::string base =
      self.substr(self.rfind('/') == std::string::npos ? 0 : self.rfind('/') + 1);
  const auto& names = SlurmCommandNames();
  if (std::find(names.begin(), names.end(), base) != names.end()) {
    out[0] = self.substr(0, self.size() - base.size()) + "arbiter";
    out.insert(out.begin() + 1, base);
  }
  if (out.size() < 2 || out[1] != "squeue") return out;
  // `-S -t,i`: getopt takes the next word as the value whatever it starts with; CLI11 does not.
  for (size_t i = 2; i + 1 < out.size(); ++i) {
    if ((out[i] == "-S" || out[i] == "--sort") && !out[i + 1].empty() && out[i + 1][0] == '-') {
      out[i] = "--sort=" + out[i + 1];
      out.erase(out.begin() + static_cast<std::ptrdiff_t>(i) + 1);
    }
  }
  return out;
}

}  // namespace arbiter::cli
