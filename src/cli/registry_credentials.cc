// `arbiter registry-credentials set|list|delete` (docs/config.md, "Registry credentials"): HTTP
// clients of /api/v1/registry-credentials. The password is read from stdin, never from the
// command line (where other users of the machine could see it).
#include <fmt/format.h>

#include <cstdio>
#include <ctime>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>

#include "cli/commands.h"
#include "cli/views.h"

namespace arbiter::cli {

using nlohmann::json;

namespace {

struct CredentialArgs {
  std::string tenant, registry, user;
  bool password_stdin = false;
};

std::string Str(const json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return "";
  return j[key].is_string() ? j[key].get<std::string>() : j[key].dump();
}

// "2026-12-06T20:10:16Z".
std::string TimeText(int64_t ms) {
  const std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// The password: stdin up to its end, without the final line break.
Result<std::string> ReadPassword() {
  std::stringstream s;
  s << std::cin.rdbuf();
  std::string p = s.str();
  while (!p.empty() && (p.back() == '\n' || p.back() == '\r')) p.pop_back();
  if (p.empty()) return InvalidArgument("password", "stdin held no password");
  return p;
}

int SetCredential(const ContextPtr& ctx, const CredentialArgs& a) {
  auto c = ctx->Resolve();
  if (!c.ok()) return Fail(c.status(), kExitUsage);
  if (!a.password_stdin) {
    return Fail(InvalidArgument("password", "give it on stdin with --password-stdin"), kExitUsage);
  }
  auto password = ReadPassword();
  if (!password.ok()) return Fail(password.status(), kExitUsage);
  json body = {{"registry", a.registry}, {"user", a.user}, {"password", *password}};
  if (!a.tenant.empty()) body["tenant"] = a.tenant;
  ApiClient api(*c);
  auto r = api.Put("/api/v1/registry-credentials", body.dump(), "application/json");
  if (!r.ok()) return Fail(r.status());
  if (IsStructured(ctx->format())) {
    PrintStructured(*r, ctx->format());
    return kExitOk;
  }
  std::printf("registry credential of tenant %s for %s set (user %s)\n", Str(*r, "tenant").c_str(),
              Str(*r, "registry").c_str(), Str(*r, "user").c_str());
  return kExitOk;
}

int ListCredentials(const ContextPtr& ctx, const std::string& tenant) {
  auto c = ctx->Resolve();
  if (!c.ok()) return Fail(c.status(), kExitUsage);
  ApiClient api(*c);
  std::string path = "/api/v1/registry-credentials";
  if (!tenant.empty()) path += "?tenant=" + QueryValue(tenant);
  auto r = api.Get(path);
  if (!r.ok()) return Fail(r.status());
  if (IsStructured(ctx->format())) {
    PrintStructured(*r, ctx->format());
    return kExitOk;
  }
  Table t({"TENANT", "REGISTRY", "USER", "CREATED", "BY"});
  for (const json& x : (*r)["items"]) {
    t.AddRow({Str(x, "tenant"), Str(x, "registry"), Str(x, "user"),
              TimeText(x.value("created_ms", int64_t{0})), Str(x, "created_by")});
  }
  t.Print(stdout, StdoutColors());
  return kExitOk;
}

int DeleteCredential(const ContextPtr& ctx, const CredentialArgs& a) {
  auto c = ctx->Resolve();
  if (!c.ok()) return Fail(c.status(), kExitUsage);
  ApiClient api(*c);
  std::string path = "/api/v1/registry-credentials?registry=" + QueryValue(a.registry);
  if (!a.tenant.empty()) path += "&tenant=" + QueryValue(a.tenant);
  auto r = api.Send("DELETE", path, "", "application/json");
  if (!r.ok()) return Fail(r.status());
  if (r->status / 100 != 2) return Fail(api.FromReply(*r));
  std::printf("registry credential for %s deleted\n", a.registry.c_str());
  return kExitOk;
}

}  // namespace

void RegisterRegistryCredentialCommands(CLI::App& app, const ContextPtr& ctx) {
  auto args = std::make_shared<CredentialArgs>();
  auto* cmd = app.add_subcommand(
      "registry-credentials",
      "A tenant's image registry credentials: stored sealed, used by nodes to pull its images");
  cmd->require_subcommand(1);

  auto* set = cmd->add_subcommand(
      "set", "Set the user and password a tenant's images are pulled with from a registry");
  set->add_option("--tenant", args->tenant, "The tenant (default: yours; admins name one)");
  set->add_option("--registry", args->registry,
                  "A registry prefix, as in the tenant's images.registries "
                  "(registry.example.com/vision/)")
      ->required();
  set->add_option("--user", args->user, "The registry user")->required();
  set->add_flag("--password-stdin", args->password_stdin, "Read the password from stdin")
      ->required();
  AddClientFlags(set, ctx);
  AddOutputFlag(set, ctx, false);
  SetExamples(set, {"printf '%s' \"$TOKEN\" | arbiter registry-credentials set --tenant vision "
                    "--registry registry.example.com/vision/ --user robot --password-stdin"});
  set->callback([ctx, args] { ctx->Run([&] { return SetCredential(ctx, *args); }); });

  auto* list = cmd->add_subcommand("list", "A tenant's registry credentials (never passwords)");
  list->add_option("--tenant", args->tenant, "Only this tenant's (admins: all by default)");
  AddClientFlags(list, ctx);
  AddOutputFlag(list, ctx, false);
  SetExamples(list, {"arbiter registry-credentials list",
                     "arbiter registry-credentials list -o "
                     "json"});
  list->callback([ctx, args] { ctx->Run([&] { return ListCredentials(ctx, args->tenant); }); });

  auto* del = cmd->add_subcommand("delete", "Delete a tenant's credential for a registry");
  del->add_option("--tenant", args->tenant, "The tenant (default: yours)");
  del->add_option("--registry", args->registry, "The registry prefix")->required();
  AddClientFlags(del, ctx);
  SetExamples(del, {"arbiter registry-credentials delete --tenant vision --registry "
                    "registry.example.com/vision/"});
  del->callback([ctx, args] { ctx->Run([&] { return DeleteCredential(ctx, *args); }); });
}

}  // namespace arbiter::cli
