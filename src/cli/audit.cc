// `arbiter audit`: the audit log (GET /api/v1/audit, docs/governance.md) searched, as a table or
// JSON; --follow keeps printing new records.
#include <fmt/format.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "cli/commands.h"

namespace arbiter::cli {

using nlohmann::json;

namespace {

struct AuditFlags {
  std::string since, until, actor, object, action;
  uint64_t after = 0;
  int limit = 100;
  bool json = false;
  bool follow = false;
};

// Percent-encodes a query value (RFC 3986 unreserved characters are kept).
std::string Escape(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

std::string Text(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return "-";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

// The detail in one short line: "before -> after" states, else the JSON.
std::string DetailText(const json& r) {
  auto d = r.find("detail");
  if (d == r.end() || !d->is_object() || d->empty()) return "";
  if (d->contains("before") && d->contains("after") && (*d)["before"].is_object() &&
      (*d)["after"].is_object() && (*d)["before"].contains("state") &&
      (*d)["after"].contains("state")) {
    return fmt::format("{} -> {}", Text((*d)["before"], "state"), Text((*d)["after"], "state"));
  }
  std::string s = d->dump();
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

std::string QueryOf(const AuditFlags& f, uint64_t after, int limit) {
  std::string q = fmt::format("/api/v1/audit?limit={}", limit);
  if (after > 0) q += fmt::format("&after={}", after);
  for (auto [name, value] :
       {std::pair{"since", &f.since}, std::pair{"until", &f.until}, std::pair{"actor", &f.actor},
        std::pair{"object", &f.object}, std::pair{"action", &f.action}}) {
    if (!value->empty()) q += fmt::format("&{}={}", name, Escape(*value));
  }
  return q;
}

void PrintTable(const json& items) {
  Table t({"SEQ", "TIME", "ACTOR", "SOURCE", "ACTION", "TARGET", "RESULT", "DETAIL"});
  for (const json& r : items) {
    const std::string result = Text(r, "result");
    t.AddRow({Text(r, "seq"), Text(r, "at"), Text(r, "actor"), Text(r, "source"), Text(r, "action"),
              Text(r, "target"),
              Cell(result, result.rfind("ok", 0) == 0 ? Color::kNone : Color::kRed),
              DetailText(r)});
  }
  t.Print(stdout, StdoutColors());
}

int Audit(const ContextPtr& ctx, const AuditFlags& f) {
  auto c = ctx->Resolve();
  if (!c.ok()) return Fail(c.status(), kExitUsage);
  ApiClient api(*c);
  const bool as_json = f.json || IsStructured(ctx->format());
  if (!f.follow) {
    auto r = api.Get(QueryOf(f, f.after, f.limit));
    if (!r.ok()) return Fail(r.status());
    if (as_json) {
      PrintStructured(*r, f.json ? OutputFormat::kJson : ctx->format());
      return kExitOk;
    }
    PrintTable((*r)["items"]);
    if (r->contains("next_after") && !(*r)["next_after"].is_null()) {
      std::fprintf(stderr, "more: arbiter audit --after %s (with the same filters)\n",
                   (*r)["next_after"].dump().c_str());
    }
    return kExitOk;
  }
  // --follow: what matches now, then every new record as it comes (one JSON line each with
  // --json), until interrupted.
  uint64_t after = f.after;
  bool header = !as_json;
  for (;;) {
    auto r = api.Get(QueryOf(f, after, 1000));
    if (!r.ok()) return Fail(r.status());
    const json& items = (*r)["items"];
    for (const json& item : items) {
      if (as_json) {
        std::printf("%s\n", item.dump().c_str());
      } else {
        if (header) {
          std::printf("%-8s %-24s %-12s %-16s %-16s %-20s %s\n", "SEQ", "TIME", "ACTOR", "SOURCE",
                      "ACTION", "TARGET", "RESULT");
          header = false;
        }
        std::printf("%-8s %-24s %-12s %-16s %-16s %-20s %s %s\n", Text(item, "seq").c_str(),
                    Text(item, "at").c_str(), Text(item, "actor").c_str(),
                    Text(item, "source").c_str(), Text(item, "action").c_str(),
                    Text(item, "target").c_str(), Text(item, "result").c_str(),
                    DetailText(item).c_str());
      }
      after = item.value("seq", after);
    }
    std::fflush(stdout);
    if (items.size() < 1000) std::this_thread::sleep_for(std::chrono::seconds(2));
  }
}

}  // namespace

void RegisterAuditCommand(CLI::App& app, const ContextPtr& ctx) {
  auto f = std::make_shared<AuditFlags>();
  auto* audit = app.add_subcommand(
      "audit",
      "The audit log: who changed what, when and from where (admins; tenant admins: "
      "their tenant's records)");
  audit->add_option("--since", f->since,
                    "Records from: a duration back from now (30m, 24h, 7d), an RFC 3339 time or "
                    "milliseconds since the epoch");
  audit->add_option("--until", f->until, "Records before: as --since");
  audit->add_option("--actor", f->actor, "Records of this user");
  audit->add_option("--object", f->object,
                    "Records of this target or under it: job/12, job/ (every job), token/ID, "
                    "user/NAME, config");
  audit->add_option("--action", f->action, "Records of this action: job.cancel, token.create, ...");
  audit->add_option("--after", f->after, "Records after this sequence number (paging)");
  audit->add_option("--limit", f->limit, "At most this many records")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  audit->add_flag("--json", f->json, "JSON (with --follow: one record per line)");
  audit->add_flag("--follow", f->follow, "Keep printing new records until interrupted");
  AddClientFlags(audit, ctx);
  AddOutputFlag(audit, ctx, false);
  SetExamples(audit, {"arbiter audit --since 24h", "arbiter audit --object job/12",
                      "arbiter audit --actor alice --action job.cancel --json",
                      "arbiter audit --object token/ --since 7d",
                      "arbiter audit --follow --json >> audit.jsonl"});
  audit->callback([ctx, f] { ctx->Run([&] { return Audit(ctx, *f); }); });
}

}  // namespace arbiter::cli
