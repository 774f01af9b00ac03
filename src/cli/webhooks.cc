// `arbiter webhook create|list|delete|deliveries|test` (docs/webhooks.md): HTTP clients of
// /api/v1/webhooks.
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/views.h"

namespace arbiter::cli {

using nlohmann::json;

namespace {

std::string Str(const json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return "";
  return j[key].is_string() ? j[key].get<std::string>() : j[key].dump();
}

std::string Join(const json& list) {
  std::string out;
  for (const json& e : list) out += (out.empty() ? "" : ",") + e.get<std::string>();
  return out;
}

struct WebhookArgs {
  std::string url, format = "json", description, scope, tenant, id;
  std::vector<std::string> events;
  bool tenant_scope = false;
  int limit = 20;
};

int CreateWebhook(const ContextPtr& ctx, const WebhookArgs& a) {
  auto c = ctx->Resolve();
  if (!c.ok()) return Fail(c.status(), kExitUsage);
  std::string scope = a.scope;
  if (scope.empty()) scope = a.tenant_scope || !a.tenant.empty() ? "tenant" : "user";
  json body = {{"url", a.url}, {"events", a.events}, {"scope", scope}, {"format", a.format}};
  if (!a.description.empty()) body["description"] = a.description;
  if (!a.tenant.empty()) body["tenant"] = a.tenant;
  ApiClient api(*c);
  auto r = api.Post("/api/v1/webhooks", body);
  if (!r.ok()) return Fail(r.status());
  if (IsStructured(ctx->format())) {
    PrintStructured(*r, ctx->format());
    return kExitOk;
  }
  std::printf("webhook %s created (%s-scoped, %s) for %s\n", Str(*r, "id").c_str(),
              Str(*r, "scope").c_str(), Join((*r)["events"]).c_str(), Str(*r, "url").c_str());
  std::printf("signing secret: %s\n", Str(*r, "secret").c_str());
  std::fprintf(stderr,
               "the secret is shown only now: keep it to verify the X-Arbiter-Signature header "
               "(docs/webhooks.md)\n");
  return kExitOk;
}

int ListWebhooks(const ContextPtr& ctx) {
  auto c = ctx->Resolve();
  if (!c.ok()) return Fail(c.status(), kExitUsage);
  ApiClient api(*c);
  auto r = api.Get("/api/v1/webhooks");
  if (!r.ok()) return Fail(r.status());
  if (IsStructured(ctx->format())) {
    PrintStructured(*r, ctx->format());
    return kExitOk;
  }
  Table t({"ID", "SCOPE", "OWNER", "FORMAT", "EVENTS", "URL", "DESCRIPTION"});
  for (const json& h : (*r)["items"]) {
    const std::string scope = Str(h, "scope");
    const std::string owner = scope == "user"     ? Str(h, "user")
                              : scope == "tenant" ? Str(h, "tenant")
                                                  : "-";
    t.AddRow({Str(h, "id"), scope, owner, Str(h, "format"), Join(h["events"]), Str(h, "url"),
              Str(h, "description")});
  }
  t.Print(stdout, StdoutColors());
  return kExitOk;
}

int DeleteWebhook(const ContextPtr& ctx, const std::string& id) {
  auto c = ctx->Resolve();
  if (!c.ok()) return Fail(c.status(), kExitUsage);
  ApiClient api(*c);
  auto r = api.Send("DELETE", "/api/v1/webhooks/" + id, "", "application/json");
  if (!r.ok()) return Fail(r.status());
  if (r->status / 100 != 2) return Fail(api.FromReply(*r));
  std::printf("webhook %s deleted\n", id.c_str());
  return kExitOk;
}

int WebhookDeliveries(const ContextPtr& ctx, const std::string& id, int limit) {
  auto c = ctx->Resolve();
  if (!c.ok()) return Fail(c.status(), kExitUsage);
  ApiClient api(*c);
  auto r = api.Get(fmt::format("/api/v1/webhooks/{}/deliveries?limit={}", id, limit));
  if (!r.ok()) return Fail(r.status());
  if (IsStructured(ctx->format())) {
    PrintStructured(*r, ctx->format());
    return kExitOk;
  }
  Table t(
      {"DELIVERY", "EVENT", "STATE", "ATTEMPTS", "LAST", "CREATED", "NEXT ATTEMPT", "DELIVERED"});
  for (const json& d : (*r)["items"]) {
    const std::string state = Str(d, "state");
    std::string last = Str(d, "status");
    if (!Str(d, "error").empty() && state != "delivered") {
      last = last.empty() ? Str(d, "error") : last + " " + Str(d, "error");
    }
    const Color color = state == "delivered" ? Color::kGreen
                        : state == "failed"  ? Color::kRed
                                             : Color::kYellow;
    t.AddRow({Str(d, "id"), Str(d, "event"), Cell(state, color), Str(d, "attempts"),
              last.empty() ? "-" : last, Str(d, "created_at"),
              Str(d, "next_attempt_at").empty() ? "-" : Str(d, "next_attempt_at"),
              Str(d, "delivered_at").empty() ? "-" : Str(d, "delivered_at")});
  }
  t.Print(stdout, StdoutColors());
  return kExitOk;
}

int TestWebhook(const ContextPtr& ctx, const std::string& id) {
  auto c = ctx->Resolve();
  if (!c.ok()) return Fail(c.status(), kExitUsage);
  ApiClient api(*c);
  auto r = api.Post("/api/v1/webhooks/" + id + "/test", json::object());
  if (!r.ok()) return Fail(r.status());
  if (IsStructured(ctx->format())) {
    PrintStructured(*r, ctx->format());
    return kExitOk;
  }
  std::printf("ping %s queued for webhook %s; see arbiter webhook deliveries %s\n",
              Str(*r, "id").c_str(), id.c_str(), id.c_str());
  return kExitOk;
}

}  // namespace

void RegisterWebhookCommands(CLI::App& app, const ContextPtr& ctx) {
  auto args = std::make_shared<WebhookArgs>();
  auto* hook = app.add_subcommand("webhook", "Webhooks: hear about jobs and budgets over HTTP");
  hook->require_subcommand(1);
  SetExamples(hook, {"arbiter webhook create --url https://example.com/hook --event job.failed",
                     "arbiter webhook list", "arbiter webhook deliveries wh_1a2b3c4d5e6f7a8b"});

  auto* create = hook->add_subcommand(
      "create", "Create a webhook and print its signing secret (it is shown only once)");
  create->add_option("--url", args->url, "Where events are POSTed (http:// or https://)")
      ->required();
  create
      ->add_option("--event", args->events,
                   "An event to send (repeat): job.succeeded, job.failed, job.preempted, "
                   "job.awaiting_approval, job.approved, job.rejected, budget.80, budget.100")
      ->required();
  create->add_flag("--tenant-scope", args->tenant_scope,
                   "The tenant's hook (its jobs' and budget's events; tenant admins), not yours");
  create->add_option("--tenant", args->tenant,
                     "Admins: the tenant of a tenant-scoped hook (implies --tenant-scope)");
  create->add_option("--scope", args->scope, "user (default), tenant or cluster (admins)")
      ->check(CLI::IsMember({"user", "tenant", "cluster"}));
  create->add_option("--format", args->format, "json (default) or slack ({\"text\": ...})")
      ->check(CLI::IsMember({"json", "slack"}));
  create->add_option("--description", args->description, "What the hook is for");
  AddClientFlags(create, ctx);
  AddOutputFlag(create, ctx, false);
  SetExamples(create, {"arbiter webhook create --url https://ci.example.com/arbiter --event "
                       "job.failed --event job.succeeded",
                       "arbiter webhook create --url https://hooks.slack.com/services/T/B/X "
                       "--event budget.80 --event budget.100 --tenant-scope --format slack"});
  create->callback([ctx, args] { ctx->Run([&] { return CreateWebhook(ctx, *args); }); });

  auto* list = hook->add_subcommand(
      "list", "Webhooks you may manage (yours; a tenant admin: the tenant's; an admin: all)");
  AddClientFlags(list, ctx);
  AddOutputFlag(list, ctx, false);
  SetExamples(list, {"arbiter webhook list", "arbiter webhook list -o json"});
  list->callback([ctx] { ctx->Run([&] { return ListWebhooks(ctx); }); });

  auto* del = hook->add_subcommand("delete", "Delete a webhook (and its delivery log)");
  del->add_option("id", args->id, "The webhook's id (arbiter webhook list)")->required();
  AddClientFlags(del, ctx);
  SetExamples(del, {"arbiter webhook delete wh_1a2b3c4d5e6f7a8b"});
  del->callback([ctx, args] { ctx->Run([&] { return DeleteWebhook(ctx, args->id); }); });

  auto* deliveries = hook->add_subcommand(
      "deliveries", "A webhook's delivery log, newest first: attempts, last status, next attempt");
  deliveries->add_option("id", args->id, "The webhook's id")->required();
  deliveries->add_option("--limit", args->limit, "At most this many deliveries")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  AddClientFlags(deliveries, ctx);
  AddOutputFlag(deliveries, ctx, false);
  SetExamples(deliveries, {"arbiter webhook deliveries wh_1a2b3c4d5e6f7a8b",
                           "arbiter webhook deliveries wh_1a2b3c4d5e6f7a8b -o json"});
  deliveries->callback(
      [ctx, args] { ctx->Run([&] { return WebhookDeliveries(ctx, args->id, args->limit); }); });

  auto* test = hook->add_subcommand("test", "Send a webhook a ping event");
  test->add_option("id", args->id, "The webhook's id")->required();
  AddClientFlags(test, ctx);
  AddOutputFlag(test, ctx, false);
  SetExamples(test, {"arbiter webhook test wh_1a2b3c4d5e6f7a8b"});
  test->callback([ctx, args] { ctx->Run([&] { return TestWebhook(ctx, args->id); }); });
}

}  // namespace arbiter::cli
