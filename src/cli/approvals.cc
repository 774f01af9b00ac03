// Approvals (docs/approvals.md): `arbiter approvals`, `arbiter approve|reject ID`, and quota
// requests: `arbiter request quota`, `arbiter quota-requests [approve|reject ID]`.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/views.h"

namespace arbiter::cli {

using nlohmann::json;

namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string Text(const json& o, const char* key) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return "-";
  std::string s = it->is_string() ? it->get<std::string>() : it->dump();
  return s.empty() ? "-" : s;
}

// "3h" since a time in ms, "-" when absent.
std::string Since(const json& o, const char* key, int64_t now) {
  auto it = o.find(key);
  if (it == o.end() || !it->is_number_integer()) return "-";
  return ShortDuration(std::max<int64_t>(0, (now - it->get<int64_t>()) / 1000));
}

// "in 5h", "never", "passed".
std::string Expires(const json& o, const char* key, int64_t now) {
  auto it = o.find(key);
  if (it == o.end() || !it->is_number_integer()) return "never";
  const int64_t left = it->get<int64_t>() - now;
  return left <= 0 ? "passed" : "in " + ShortDuration(left / 1000);
}

// A UTC time from ms: "2027-01-31 00:00".
std::string UtcText(int64_t ms) {
  const std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", &tm);
  return buf;
}

// "gpu=16 cpu=64"
std::string AmountsText(const json& m) {
  std::string out;
  if (!m.is_object()) return "-";
  for (const auto& [k, v] : m.items()) {
    AppendTo(&out, " ", fmt::format("{}={}", k, v.is_null() ? "none" : Amount(v)));
  }
  return out.empty() ? "-" : out;
}

// What `arbiter approve|reject` names: a job ("123", "job/123"), a service ("chat",
// "service/chat") or a quota request ("quota/3").
struct Target {
  std::string kind;  // job | service | quota
  std::string id;
};

Result<Target> ParseTarget(const std::string& text) {
  const auto slash = text.find('/');
  std::string kind, id = text;
  if (slash != std::string::npos) {
    kind = text.substr(0, slash);
    id = text.substr(slash + 1);
    if (kind == "quota-request" || kind == "quota_request") kind = "quota";
  } else {
    kind =
        !id.empty() && id.find_first_not_of("0123456789") == std::string::npos ? "job" : "service";
  }
  if (id.empty() || (kind != "job" && kind != "service" && kind != "quota") ||
      ((kind == "job" || kind == "quota") &&
       id.find_first_not_of("0123456789") != std::string::npos)) {
    return InvalidArgument("ID", fmt::format("'{}' is not a job id (123), a service (service/chat "
                                             "or chat) or a quota request (quota/3); see "
                                             "`arbiter approvals`",
                                             text));
  }
  return Target{kind, id};
}

int PrintDecided(const ContextPtr& ctx, const Target& t, const json& out, bool approve) {
  if (IsStructured(ctx->format())) {
    PrintStructured(out, ctx->format());
    return kExitOk;
  }
  const char* verb = approve ? "approved" : "rejected";
  if (t.kind == "job") {
    std::printf("job %s %s: %s\n", t.id.c_str(), verb, Text(out, "reason").c_str());
  } else if (t.kind == "service") {
    const json a = out.value("approval", json::object());
    std::printf("service %s %s: %s\n", t.id.c_str(), verb, Text(a, "reason").c_str());
  } else {
    std::printf("quota request %s %s", t.id.c_str(), verb);
    if (approve && out.contains("diff") && out["diff"].is_object()) {
      std::printf(": queue %s guaranteed %s -> %s until %s UTC", Text(out, "queue").c_str(),
                  AmountsText(out["diff"].value("before", json::object())).c_str(),
                  AmountsText(out["diff"].value("after", json::object())).c_str(),
                  UtcText(out.value("until_ms", int64_t{0})).c_str());
    }
    std::printf("\n");
  }
  return kExitOk;
}

int Decide(const ContextPtr& ctx, const std::string& id_text, const std::string& comment,
           bool approve) {
  auto t = ParseTarget(id_text);
  if (!t.ok()) return Fail(t.status(), kExitUsage);
  auto c = ctx->Resolve();
  if (!c.ok()) return Fail(c.status(), kExitUsage);
  ApiClient api(*c);
  const char* action = approve ? "approve" : "reject";
  std::string path;
  if (t->kind == "job") path = fmt::format("/api/v1/jobs/{}/{}", t->id, action);
  if (t->kind == "service") path = fmt::format("/api/v1/services/{}/{}", t->id, action);
  if (t->kind == "quota") path = fmt::format("/api/v1/quota-requests/{}/{}", t->id, action);
  json body = json::object();
  if (!comment.empty()) body["comment"] = comment;
  auto r = api.Post(path, body);
  if (!r.ok()) return Fail(r.status());
  return PrintDecided(ctx, *t, *r, approve);
}

int ListApprovals(const ContextPtr& ctx) {
  auto c = ctx->Resolve();
  if (!c.ok()) return Fail(c.status(), kExitUsage);
  ApiClient api(*c);
  auto r = api.Get("/api/v1/approvals");
  if (!r.ok()) return Fail(r.status());
  json items = r->value("items", json::array());
  // Quota requests the caller may decide (admins) are approvals too.
  auto q = api.Get("/api/v1/quota-requests");
  if (q.ok()) {
    for (const json& x : q->value("items", json::array())) {
      if (!x.value("may_decide", false)) continue;
      items.push_back({{"kind", "quota"},
                       {"id", "quota/" + x.value("id", "")},
                       {"name", fmt::format("{} {}", x.value("queue", ""),
                                            AmountsText(x.value("guaranteed", json::object())))},
                       {"tenant", x.value("tenant", "")},
                       {"queue", x.value("queue", "")},
                       {"user", x.value("user", "")},
                       {"rule", "quota request"},
                       {"gpus", nullptr},
                       {"requested_at_ms", x.value("created_ms", int64_t{0})},
                       {"expires_at_ms", x.value("until_ms", int64_t{0})},
                       {"reason", x.value("reason", "")},
                       {"quota_request", x}});
    }
  }
  if (IsStructured(ctx->format())) {
    PrintStructured(json{{"items", items}}, ctx->format());
    return kExitOk;
  }
  const int64_t now = NowMs();
  Table t({"ID", "KIND", "NAME", "TENANT", "USER", "RULE", "GPUS", "WAITING", "EXPIRES"});
  for (const json& i : items) {
    std::string id = Text(i, "id");
    if (id == "-" && i.contains("job")) id = Text(i, "job");
    const std::string kind = i.value("kind", std::string("job"));
    if (kind == "service") id = "service/" + id;
    t.AddRow({id, kind, Text(i, "name"), Text(i, "tenant"), Text(i, "user"), Text(i, "rule"),
              i.contains("gpus") && i["gpus"].is_number() ? Amount(i["gpus"]) : "-",
              Since(i, "requested_at_ms", now), Expires(i, "expires_at_ms", now)});
  }
  if (t.rows() == 0) {
    std::printf("nothing awaits your approval\n");
    return kExitOk;
  }
  t.Print(stdout, StdoutColors());
  return kExitOk;
}

int RequestQuota(const ContextPtr& ctx, const std::string& queue,
                 const std::vector<std::string>& guaranteed, const std::string& until,
                 const std::string& reason) {
  json amounts = json::object();
  for (const std::string& g : guaranteed) {
    const auto eq = g.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == g.size()) {
      return Fail(InvalidArgument("--guaranteed",
                                  fmt::format("'{}' is not RESOURCE=AMOUNT (gpu=16, cpu=64, "
                                              "memory=512Gi, gpu:H100=8)",
                                              g)),
                  kExitUsage);
    }
    const std::string key = g.substr(0, eq), value = g.substr(eq + 1);
    if (key == "memory" && value.find_first_not_of("0123456789") != std::string::npos) {
      amounts[key] = value;  // "512Gi"
      continue;
    }
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    if (end == value.c_str() || *end != '\0') {
      return Fail(
          InvalidArgument("--guaranteed", fmt::format("'{}': {} is not a number", g, value)),
          kExitUsage);
    }
    if (v == static_cast<double>(static_cast<int64_t>(v))) {
      amounts[key] = static_cast<int64_t>(v);
    } else {
      amounts[key] = v;
    }
  }
  json body = {{"queue", queue}, {"guaranteed", amounts}, {"reason", reason}};
  if (!until.empty() && until.find_first_not_of("0123456789") == std::string::npos &&
      until.size() > 10) {
    body["until"] = std::stoll(until);
  } else {
    body["until"] = until;
  }
  auto c = ctx->Resolve();
  if (!c.ok()) return Fail(c.status(), kExitUsage);
  ApiClient api(*c);
  auto r = api.Post("/api/v1/quota-requests", body);
  if (!r.ok()) return Fail(r.status());
  if (IsStructured(ctx->format())) {
    PrintStructured(*r, ctx->format());
    return kExitOk;
  }
  std::printf(
      "quota request %s made: queue %s guaranteed %s until %s UTC; an admin decides "
      "(arbiter quota-requests)\n",
      Text(*r, "id").c_str(), Text(*r, "queue").c_str(),
      AmountsText(r->value("guaranteed", json::object())).c_str(),
      UtcText(r->value("until_ms", int64_t{0})).c_str());
  return kExitOk;
}

int ListQuotaRequests(const ContextPtr& ctx) {
  auto c = ctx->Resolve();
  if (!c.ok()) return Fail(c.status(), kExitUsage);
  ApiClient api(*c);
  auto r = api.Get("/api/v1/quota-requests");
  if (!r.ok()) return Fail(r.status());
  if (IsStructured(ctx->format())) {
    PrintStructured(*r, ctx->format());
    return kExitOk;
  }
  const int64_t now = NowMs();
  Table t({"ID", "STATE", "QUEUE", "TENANT", "USER", "GUARANTEED", "BEFORE", "UNTIL", "AGE",
           "DECIDED BY", "REASON"});
  for (const json& x : r->value("items", json::array())) {
    const json diff = x.value("diff", json());
    t.AddRow({Text(x, "id"), Cell(Text(x, "state"), StateColor(x.value("state", ""))),
              Text(x, "queue"), Text(x, "tenant"), Text(x, "user"),
              AmountsText(x.value("guaranteed", json::object())),
              diff.is_object() ? AmountsText(diff.value("before", json::object())) : "-",
              UtcText(x.value("until_ms", int64_t{0})), Since(x, "created_ms", now),
              Text(x, "decided_by"), Text(x, "reason")});
  }
  if (t.rows() == 0) {
    std::printf("no quota requests (make one with `arbiter request quota`)\n");
    return kExitOk;
  }
  t.Print(stdout, StdoutColors());
  return kExitOk;
}

}  // namespace

void RegisterApprovalCommands(CLI::App& app, const ContextPtr& ctx) {
  auto json_flag = std::make_shared<bool>(false);
  auto as_json = [ctx, json_flag] {
    if (*json_flag) ctx->output = "json";
  };

  auto* list = app.add_subcommand(
      "approvals", "What awaits your approval: jobs, services and (admins) quota requests");
  list->add_flag("--json", *json_flag, "Print the items as JSON (as -o json)");
  AddClientFlags(list, ctx);
  AddOutputFlag(list, ctx, false);
  SetExamples(list, {"arbiter approvals", "arbiter approvals --json",
                     "arbiter approve 123 --comment 'budget checked'"});
  list->callback([ctx, as_json] {
    as_json();
    ctx->Run([&] { return ListApprovals(ctx); });
  });

  auto id = std::make_shared<std::string>();
  auto comment = std::make_shared<std::string>();
  for (const bool approve : {true, false}) {
    auto* cmd = app.add_subcommand(
        approve ? "approve" : "reject",
        approve ? "Approve a job, service or quota request awaiting your decision"
                : "Reject a job, service or quota request awaiting your decision");
    cmd->add_option("ID", *id,
                    "A job id (123), a service (service/chat, or chat) or a quota request "
                    "(quota/3), as `arbiter approvals` lists them")
        ->required();
    cmd->add_option("--comment", *comment, "Why (at most 1000 bytes; kept in the audit log)");
    AddClientFlags(cmd, ctx);
    AddOutputFlag(cmd, ctx, false);
    const char* verb = approve ? "approve" : "reject";
    SetExamples(cmd, {fmt::format("arbiter {} 123 --comment 'budget checked'", verb),
                      fmt::format("arbiter {} service/chat", verb),
                      fmt::format("arbiter {} quota/3 --comment 'until the deadline'", verb)});
    cmd->callback([ctx, id, comment, approve] {
      ctx->Run([&] { return Decide(ctx, *id, *comment, approve); });
    });
  }

  auto queue = std::make_shared<std::string>();
  auto guaranteed = std::make_shared<std::vector<std::string>>();
  auto until = std::make_shared<std::string>();
  auto reason = std::make_shared<std::string>();
  auto* request = app.add_subcommand("request", "Ask for something an admin decides");
  request->require_subcommand(1);
  auto* quota = request->add_subcommand(
      "quota", "Ask for more guaranteed capacity for a queue until a time (an admin decides)");
  quota->add_option("--queue", *queue, "The queue (of your tenant)")->required();
  quota
      ->add_option("--guaranteed", *guaranteed,
                   "RESOURCE=AMOUNT, repeatable: gpu=16, cpu=64, memory=512Gi, gpu:H100=8")
      ->required();
  quota
      ->add_option("--until", *until,
                   "Until when: a date (2027-01-31: the end of that day, UTC) or an RFC 3339 "
                   "time")
      ->required();
  quota->add_option("--reason", *reason, "Why the queue needs it")->required();
  AddClientFlags(quota, ctx);
  AddOutputFlag(quota, ctx, false);
  SetExamples(quota, {"arbiter request quota --queue vision-train --guaranteed gpu=16 "
                      "--until 2027-01-31 --reason 'paper deadline'"});
  quota->callback([ctx, queue, guaranteed, until, reason] {
    ctx->Run([&] { return RequestQuota(ctx, *queue, *guaranteed, *until, *reason); });
  });

  auto* qr = app.add_subcommand(
      "quota-requests", "Quota requests: list them (your tenant's; admins: all), approve, reject");
  qr->add_flag("--json", *json_flag, "Print the requests as JSON (as -o json)");
  AddClientFlags(qr, ctx);
  AddOutputFlag(qr, ctx, false);
  SetExamples(qr, {"arbiter quota-requests", "arbiter quota-requests approve 3 --comment ok",
                   "arbiter quota-requests reject 3 --comment 'not this month'"});
  qr->callback([ctx, qr, as_json] {
    if (!qr->get_subcommands().empty()) return;
    as_json();
    ctx->Run([&] { return ListQuotaRequests(ctx); });
  });
  for (const bool approve : {true, false}) {
    auto* cmd = qr->add_subcommand(approve ? "approve" : "reject",
                                   approve ? "Approve a quota request (admins; not your own)"
                                           : "Reject a quota request (admins; not your own)");
    cmd->add_option("ID", *id, "The request's id")->required();
    cmd->add_option("--comment", *comment, "Why (kept in the request and the audit log)");
    AddClientFlags(cmd, ctx);
    AddOutputFlag(cmd, ctx, false);
    cmd->callback([ctx, id, comment, approve] {
      ctx->Run([&] { return Decide(ctx, "quota/" + *id, *comment, approve); });
    });
  }
}

}  // namespace arbiter::cli
