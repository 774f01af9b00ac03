// Governance against the real server (docs/governance.md): the audit log's records (who, when,
// from where, before and after), its search, its export to a file and to syslog across a restart,
// read-only tokens over the API and in a console session, and the token and audit commands.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli_process.h"
#include "common/time.h"
#include "tenant_server.h"

namespace arbiter::testing {
namespace {

using nlohmann::json;

json Audit(const TenantServer& s, const std::string& key, const std::string& query = "") {
  return BodyJson(s.As(key)->Get("/api/v1/audit?limit=1000" + query));
}

// The records of `audit` with this action and target.
std::vector<json> Records(const json& audit, const std::string& action, const std::string& target) {
  std::vector<json> out;
  for (const json& a : audit["items"]) {
    if (a["action"] == action && a["target"] == target) out.push_back(a);
  }
  return out;
}

std::vector<std::string> Lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// Polls (bounded, 50 ms apart) until the file's last line is the record `seq`; its seqs then.
std::vector<uint64_t> FileSeqsUpTo(const std::string& path, uint64_t seq) {
  std::vector<uint64_t> seqs;
  for (int i = 0; i < 200; ++i) {
    seqs.clear();
    for (const std::string& line : Lines(path)) {
      const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
      EXPECT_TRUE(j.is_object()) << line;
      if (j.is_object()) seqs.push_back(j["seq"].get<uint64_t>());
    }
    if (!seqs.empty() && seqs.back() >= seq) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return seqs;
}

uint64_t LastSeq(const TenantServer& s) {
  const json audit = Audit(s, "admin");
  return audit["items"].empty() ? 0 : audit["items"].back()["seq"].get<uint64_t>();
}

TEST(GovernanceTest, JobTransitionsAreAuditedWithSourceTenantAndBeforeAfter) {
  TenantServer server;
  ASSERT_TRUE(server.Start());
  const uint64_t id = server.Submit("alice");
  ASSERT_NE(id, 0u);
  const std::string job = fmt::format("job/{}", id);
  auto held =
      server.As("alice")->Post(fmt::format("/api/v1/jobs/{}/hold", id), "", "application/json");
  ASSERT_TRUE(held);
  auto cancelled =
      server.As("tina")->Post(fmt::format("/api/v1/jobs/{}/cancel", id), "", "application/json");
  ASSERT_TRUE(cancelled && cancelled->status == 200) << (cancelled ? cancelled->body : "");

  const json audit = Audit(server, "admin");
  const auto submit = Records(audit, "job.submit", job);
  ASSERT_EQ(submit.size(), 1u) << audit.dump();
  EXPECT_EQ(submit[0]["actor"], "alice");
  EXPECT_EQ(submit[0]["source"], "127.0.0.1");
  EXPECT_EQ(submit[0]["tenant"], "vision");
  EXPECT_TRUE(submit[0]["token_id"].is_string());
  EXPECT_TRUE(submit[0]["at"].is_string());
  const auto cancel = Records(audit, "job.cancel", job);
  ASSERT_EQ(cancel.size(), 1u) << audit.dump();
  EXPECT_EQ(cancel[0]["actor"], "tina");
  EXPECT_EQ(cancel[0]["source"], "127.0.0.1");
  EXPECT_EQ(cancel[0]["detail"]["after"]["state"], "cancelled") << cancel[0].dump();
  const std::string before = cancel[0]["detail"]["before"]["state"].get<std::string>();
  EXPECT_TRUE(before == "held" || before == "pending") << cancel[0].dump();
  if (held->status == 200) {
    const auto hold = Records(audit, "job.hold", job);
    ASSERT_EQ(hold.size(), 1u) << audit.dump();
    EXPECT_EQ(hold[0]["detail"]["before"]["state"], "pending") << hold[0].dump();
    EXPECT_EQ(hold[0]["detail"]["after"]["state"], "held") << hold[0].dump();
  }
  // User and token creation: what was made.
  const auto user = Records(audit, "token.create", "user/alice");
  ASSERT_FALSE(user.empty()) << audit.dump();
  EXPECT_EQ(user[0]["detail"]["after"]["user"], "alice");
  EXPECT_EQ(user[0]["detail"]["after"]["scope"], "full");
  auto made = server.As("admin")->Post(
      "/api/v1/users", json{{"name", "uma"}, {"tenant", "speech"}}.dump(), "application/json");
  ASSERT_TRUE(made && made->status == 201) << (made ? made->body : "");
  const auto created = Records(Audit(server, "admin"), "user.create", "user/uma");
  ASSERT_EQ(created.size(), 1u);
  EXPECT_EQ(created[0]["detail"]["after"]["tenant"], "speech");
  EXPECT_EQ(created[0]["tenant"], "speech");
}

TEST(GovernanceTest, TheAuditLogIsSearchedByTimeActorObjectAndAction) {
  TenantServer server;
  ASSERT_TRUE(server.Start());
  const uint64_t a = server.Submit("alice");
  const uint64_t b = server.Submit("bob");
  const uint64_t s = server.Submit("sam", "speech-train");
  ASSERT_TRUE(a != 0 && b != 0 && s != 0);
  ASSERT_EQ(server.As("alice")
                ->Post(fmt::format("/api/v1/jobs/{}/cancel", a), "", "application/json")
                ->status,
            200);

  const json by_alice = Audit(server, "admin", "&actor=alice");
  ASSERT_FALSE(by_alice["items"].empty());
  for (const json& r : by_alice["items"]) EXPECT_EQ(r["actor"], "alice") << r.dump();
  EXPECT_EQ(by_alice["items"].size(), 2u) << by_alice.dump();  // submit, cancel

  const json of_a = Audit(server, "admin", fmt::format("&object=job/{}", a));
  EXPECT_EQ(of_a["items"].size(), 2u) << of_a.dump();
  const json jobs = Audit(server, "admin", "&object=job/");
  EXPECT_EQ(jobs["items"].size(), 4u) << jobs.dump();
  const json cancels = Audit(server, "admin", "&action=job.cancel");
  ASSERT_EQ(cancels["items"].size(), 1u) << cancels.dump();
  EXPECT_EQ(cancels["items"][0]["target"], fmt::format("job/{}", a));
  const json combined =
      Audit(server, "admin", fmt::format("&actor=alice&action=job.submit&object=job/{}", a));
  EXPECT_EQ(combined["items"].size(), 1u) << combined.dump();

  // Time: relative, RFC 3339 and milliseconds agree; the future holds nothing.
  const size_t all = Audit(server, "admin")["items"].size();
  EXPECT_EQ(Audit(server, "admin", "&since=1h")["items"].size(), all);
  EXPECT_EQ(Audit(server, "admin", "&since=2020-01-01T00:00:00Z")["items"].size(), all);
  EXPECT_EQ(Audit(server, "admin", "&until=2020-01-01T00:00:00Z")["items"].size(), 0u);
  EXPECT_EQ(Audit(server, "admin", "&since=4102444800000")["items"].size(), 0u);  // 2100

  // Paging through a filter.
  const json first = BodyJson(server.As("admin")->Get("/api/v1/audit?object=job/&limit=1"));
  ASSERT_EQ(first["items"].size(), 1u) << first.dump();
  const json second = BodyJson(server.As("admin")->Get(fmt::format(
      "/api/v1/audit?object=job/&limit=1&after={}", first["next_after"].get<uint64_t>())));
  ASSERT_EQ(second["items"].size(), 1u) << second.dump();
  EXPECT_GT(second["items"][0]["seq"], first["items"][0]["seq"]);

  // Errors name the field.
  for (const auto& [query, field] :
       std::vector<std::pair<std::string, std::string>>{{"since=yesterday", "since"},
                                                        {"until=7x", "until"},
                                                        {"since=1h&until=2h", "until"},
                                                        {"actor=", "actor"},
                                                        {"object=", "object"},
                                                        {"limit=0", "limit"}}) {
    auto r = server.As("admin")->Get("/api/v1/audit?" + query);
    ASSERT_TRUE(r) << query;
    EXPECT_EQ(r->status, 400) << query << ": " << r->body;
    EXPECT_EQ(BodyJson(r)["error"]["field"], field) << query << ": " << r->body;
  }

  // A tenant admin reads its tenant's records only; members none.
  const json tina = Audit(server, "tina");
  ASSERT_FALSE(tina["items"].empty()) << tina.dump();
  for (const json& r : tina["items"]) EXPECT_EQ(r["tenant"], "vision") << r.dump();
  EXPECT_TRUE(Audit(server, "tina", fmt::format("&object=job/{}", s))["items"].empty());
  EXPECT_EQ(server.As("alice")->Get("/api/v1/audit")->status, 403);
}

TEST(GovernanceTest, AConfigurationApplyIsAuditedWithItsDiff) {
  TenantServer server;
  ASSERT_TRUE(server.Start({}, {"tina"}));
  std::string config = kTenantConfig;
  const std::string from = "{name: vision-train, guaranteed: {gpu: 8}}";
  config.replace(config.find(from), from.size(), "{name: vision-train, guaranteed: {gpu: 4}}");
  auto r = server.As("admin")->Put("/api/v1/config", config, "application/yaml");
  ASSERT_TRUE(r && r->status == 200) << (r ? r->body : "");

  const json audit = Audit(server, "admin", "&action=config.apply");
  ASSERT_EQ(audit["items"].size(), 2u) << audit.dump();  // the test's setup, then this one
  const json& rec = audit["items"][1];
  EXPECT_EQ(rec["target"], "config");
  EXPECT_EQ(rec["source"], "127.0.0.1");
  EXPECT_TRUE(rec["tenant"].is_null());
  ASSERT_EQ(rec["detail"]["changes"].size(), 1u) << rec.dump();
  const json& change = rec["detail"]["changes"][0];
  EXPECT_EQ(change["kind"], "queue");
  EXPECT_EQ(change["name"], "vision-train");
  EXPECT_EQ(change["action"], "update");
  EXPECT_NE(change["detail"].get<std::string>().find("8 -> 4"), std::string::npos) << rec.dump();
  // The first apply created every object.
  EXPECT_GT(audit["items"][0]["detail"]["changes"].size(), 5u) << audit["items"][0].dump();
}

TEST(GovernanceTest, AReadOnlyTokenReadsButChangesNothing) {
  TenantServer server;
  ASSERT_TRUE(server.Start({}, {"alice"}));
  auto made = server.As("alice")->Post(
      "/api/v1/tokens", json{{"scope", "read-only"}, {"expires_in_seconds", 3600}}.dump(),
      "application/json");
  ASSERT_TRUE(made && made->status == 201) << (made ? made->body : "");
  const json token = BodyJson(made);
  EXPECT_EQ(token["scope"], "read-only");
  EXPECT_EQ(token["user"], "alice");
  ASSERT_TRUE(token["expires_at"].is_string());
  const std::string ro = token["token"].get<std::string>();
  const std::string id = token["id"].get<std::string>();

  auto c = server.process().Client(ro);
  EXPECT_EQ(c->Get("/api/v1/jobs")->status, 200);
  EXPECT_EQ(c->Get("/api/v1/whoami")->status, 200);
  EXPECT_EQ(c->Head("/api/v1/jobs")->status, 200);
  auto refused = c->Post("/api/v1/jobs", JobBody("vision-train"), "application/json");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 403);
  EXPECT_NE(BodyJson(refused)["error"]["message"].get<std::string>().find("read-only"),
            std::string::npos)
      << refused->body;
  EXPECT_EQ(c->Delete("/api/v1/tokens/" + id)->status, 403);
  EXPECT_EQ(c->Post("/api/v1/tokens", "{}", "application/json")->status, 403);

  // Listed with its scope; the refusal is audited.
  bool listed = false;
  const json tokens = BodyJson(server.As("alice")->Get("/api/v1/tokens"));
  for (const json& t : tokens["items"]) {
    if (t["id"] == id) listed = t["scope"] == "read-only";
  }
  EXPECT_TRUE(listed);
  const json denied = Audit(server, "admin", "&actor=alice");
  bool refusal = false;
  for (const json& r : denied["items"]) {
    refusal |= r["action"] == "POST /api/v1/jobs" && r["token_id"] == id &&
               r["result"].get<std::string>().find("read-only") != std::string::npos;
  }
  EXPECT_TRUE(refusal) << denied.dump();

  // A console session of the token is read-only too; signing out still works.
  auto signin =
      server.As("")->Post("/api/v1/session", json{{"token", ro}}.dump(), "application/json");
  ASSERT_TRUE(signin && signin->status == 201) << (signin ? signin->body : "");
  EXPECT_EQ(BodyJson(signin)["read_only"], true);
  const std::string set_cookie = signin->get_header_value("Set-Cookie");
  const std::string cookie = set_cookie.substr(0, set_cookie.find(';'));
  const std::string csrf = BodyJson(signin)["csrf_token"].get<std::string>();
  httplib::Headers h{{"Cookie", cookie}, {"X-CSRF-Token", csrf}};
  EXPECT_EQ(server.As("")->Get("/api/v1/jobs", h)->status, 200);
  auto by_session =
      server.As("")->Post("/api/v1/jobs", h, JobBody("vision-train"), "application/json");
  ASSERT_TRUE(by_session);
  EXPECT_EQ(by_session->status, 403) << by_session->body;
  EXPECT_EQ(server.As("")->Delete("/api/v1/session", h)->status / 100, 2);

  // Bad scopes and read-only node tokens are refused, naming the field.
  for (const json& body :
       {json{{"scope", "write"}}, json{{"scope", true}},
        json{{"user", "admin"}, {"role", "node"}, {"node", "agent-09"}, {"scope", "read-only"}}}) {
    auto r = server.As("admin")->Post("/api/v1/tokens", body.dump(), "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << body.dump() << ": " << r->body;
    EXPECT_EQ(BodyJson(r)["error"]["field"], "scope") << r->body;
  }
  // The TTL: expires_at is creation + expires_in_seconds.
  auto ttl = server.As("alice")->Post("/api/v1/tokens", json{{"expires_in_seconds", 60}}.dump(),
                                      "application/json");
  ASSERT_TRUE(ttl && ttl->status == 201);
  const std::string ttl_id = BodyJson(ttl)["id"].get<std::string>();
  const json with_ttl = BodyJson(server.As("alice")->Get("/api/v1/tokens"));
  for (const json& t : with_ttl["items"]) {
    if (t["id"] != ttl_id) continue;
    EXPECT_EQ(t["state"], "active");
    const auto created = ParseRfc3339Ms(t["created_at"].get<std::string>());
    const auto expires = ParseRfc3339Ms(t["expires_at"].get<std::string>());
    ASSERT_TRUE(created && expires) << t.dump();
    EXPECT_EQ(*expires - *created, 60'000) << t.dump();
  }
  // Revocation is audited with its before and after.
  ASSERT_EQ(server.As("alice")->Delete("/api/v1/tokens/" + id)->status, 200);
  const auto revoked = Records(Audit(server, "admin"), "token.revoke", "token/" + id);
  ASSERT_EQ(revoked.size(), 1u);
  EXPECT_EQ(revoked[0]["detail"]["before"]["state"], "active");
  EXPECT_EQ(revoked[0]["detail"]["after"]["state"], "revoked");
  EXPECT_EQ(c->Get("/api/v1/jobs")->status, 401);
}

TEST(GovernanceTest, RecordsAreExportedToAFileAndSyslogOnceEachAcrossARestart) {
  // The syslog receiver: a UDP socket of the test's own on loopback.
  const int udp = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(udp, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(udp, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(udp, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int udp_port = ntohs(addr.sin_port);

  TempDir out;
  const std::string file = out.path() + "/audit.jsonl";
  const std::vector<std::string> flags = {"--audit-file", file, "--audit-syslog",
                                          fmt::format("udp://127.0.0.1:{}", udp_port)};
  TenantServer server;
  ASSERT_TRUE(server.Start(flags, {"alice"}));
  const uint64_t id = server.Submit("alice");
  ASSERT_NE(id, 0u);
  const uint64_t last = LastSeq(server);
  std::vector<uint64_t> seqs = FileSeqsUpTo(file, last);
  std::vector<uint64_t> want;
  for (uint64_t s = 1; s <= last; ++s) want.push_back(s);
  EXPECT_EQ(seqs, want);
  // A line is the record as the API shows it.
  const std::vector<std::string> lines = Lines(file);
  ASSERT_FALSE(lines.empty());
  const json submit = json::parse(lines.back());
  EXPECT_EQ(submit["action"], "job.submit");
  EXPECT_EQ(submit["source"], "127.0.0.1");
  EXPECT_EQ(submit["target"], fmt::format("job/{}", id));

  // Syslog: RFC 5424, facility authpriv (10), informational, the record as the message.
  std::vector<std::string> messages;
  for (int i = 0; i < 100 && messages.size() < last; ++i) {
    pollfd p{udp, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char buf[65536];
    const ssize_t n = recv(udp, buf, sizeof(buf), 0);
    if (n > 0) messages.emplace_back(buf, static_cast<size_t>(n));
  }
  ASSERT_EQ(messages.size(), last);
  const std::string& m = messages.back();
  EXPECT_EQ(m.rfind("<86>1 ", 0), 0u) << m;
  EXPECT_NE(m.find(" arbiter "), std::string::npos) << m;
  const size_t brace = m.find(" audit - {");
  ASSERT_NE(brace, std::string::npos) << m;
  const json in_syslog = json::parse(m.substr(brace + 9), nullptr, false);
  EXPECT_EQ(in_syslog["seq"], last) << m;
  EXPECT_EQ(in_syslog["action"], "job.submit") << m;

  // Restarted: the exports go on from where they stopped, sending nothing twice.
  ASSERT_TRUE(WIFEXITED(server.process().Kill(SIGTERM)));
  ASSERT_TRUE(server.process().Start(server.data_dir(), flags)) << server.process().output();
  ASSERT_EQ(server.As("alice")
                ->Post(fmt::format("/api/v1/jobs/{}/cancel", id), "", "application/json")
                ->status,
            200);
  const uint64_t after_restart = LastSeq(server);
  ASSERT_GT(after_restart, last);
  seqs = FileSeqsUpTo(file, after_restart);
  want.clear();
  for (uint64_t s = 1; s <= after_restart; ++s) want.push_back(s);
  EXPECT_EQ(seqs, want);
  EXPECT_EQ(json::parse(Lines(file).back())["action"], "job.cancel");
  std::set<uint64_t> received;
  for (const std::string& msg : messages) {
    received.insert(json::parse(msg.substr(msg.find(" audit - {") + 9))["seq"].get<uint64_t>());
  }
  for (int i = 0; i < 100 && received.size() < after_restart; ++i) {
    pollfd p{udp, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char buf[65536];
    const ssize_t n = recv(udp, buf, sizeof(buf), 0);
    if (n <= 0) continue;
    const std::string msg(buf, static_cast<size_t>(n));
    const uint64_t seq = json::parse(msg.substr(msg.find(" audit - {") + 9))["seq"].get<uint64_t>();
    EXPECT_TRUE(received.insert(seq).second) << "sent twice: " << msg;
  }
  EXPECT_EQ(received.size(), after_restart);

  // A rotated file (moved away) is noticed: the next records go to a new file at the path.
  ASSERT_EQ(std::rename(file.c_str(), (file + ".1").c_str()), 0);
  ASSERT_NE(server.Submit("alice"), 0u);
  const uint64_t rotated = LastSeq(server);
  EXPECT_EQ(FileSeqsUpTo(file, rotated), std::vector<uint64_t>{rotated});
  close(udp);
}

TEST(GovernanceTest, BadExportTargetsStopTheServerWithAClearError) {
  TempDir dir;
  ServerProcess server;
  EXPECT_FALSE(server.Start(dir.path(), {"--audit-syslog", "tcp://127.0.0.1:514"}));
}

// The token and audit commands against the real server.
TEST(GovernanceTest, TokenAndAuditCommands) {
  TenantServer server;
  ASSERT_TRUE(server.Start({}, {"alice", "tina"}));
  TempDir home;
  auto as = [&](const std::string& key, const std::vector<std::string>& args) {
    CliOptions o;
    o.env["HOME"] = home.path();
    o.env["ARBITER_SERVER"] = fmt::format("http://127.0.0.1:{}", server.port());
    o.env["ARBITER_TOKEN"] = server.token(key);
    return RunCli(args, o);
  };
  const CliResult made =
      as("alice", {"token", "create", "--ttl", "30d", "--read-only", "-o", "json"});
  ASSERT_EQ(made.code, 0) << made.err;
  const json token = json::parse(made.out, nullptr, false);
  EXPECT_EQ(token["scope"], "read-only") << made.out;
  EXPECT_EQ(token["user"], "alice");
  EXPECT_TRUE(token["expires_at"].is_string());
  const std::string id = token["id"].get<std::string>();

  const CliResult list = as("alice", {"token", "list", "--json"});
  ASSERT_EQ(list.code, 0) << list.err;
  bool found = false;
  const json listed = json::parse(list.out, nullptr, false);
  for (const json& t : listed["items"]) {
    EXPECT_EQ(t["user"], "alice");
    if (t["id"] == id) found = t["scope"] == "read-only" && t["expires_at"].is_string();
  }
  EXPECT_TRUE(found) << list.out;
  const CliResult table = as("alice", {"token", "list"});
  EXPECT_NE(table.out.find("SCOPE"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("read-only"), std::string::npos) << table.out;

  const CliResult revoked = as("alice", {"token", "revoke", id});
  EXPECT_EQ(revoked.code, 0) << revoked.err;
  EXPECT_EQ(revoked.out, fmt::format("token {} revoked\n", id));

  const uint64_t job = server.Submit("alice");
  ASSERT_NE(job, 0u);
  const CliResult audit =
      as("admin", {"audit", "--object", fmt::format("job/{}", job), "--since", "1h", "--json"});
  ASSERT_EQ(audit.code, 0) << audit.err;
  const json items = json::parse(audit.out, nullptr, false)["items"];
  ASSERT_EQ(items.size(), 1u) << audit.out;
  EXPECT_EQ(items[0]["action"], "job.submit");
  const CliResult revokes = as("admin", {"audit", "--action", "token.revoke", "--actor", "alice"});
  ASSERT_EQ(revokes.code, 0) << revokes.err;
  EXPECT_NE(revokes.out.find("token/" + id), std::string::npos) << revokes.out;
  EXPECT_NE(revokes.out.find("active -> revoked"), std::string::npos) << revokes.out;
  EXPECT_NE(revokes.out.find("127.0.0.1"), std::string::npos) << revokes.out;
  // A tenant admin's view; a member's refusal; a bad time naming its flag's field.
  EXPECT_EQ(as("tina", {"audit", "--json"}).code, 0);
  EXPECT_NE(as("alice", {"audit"}).code, 0);
  const CliResult bad = as("admin", {"audit", "--since", "yesterday"});
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.err.find("since"), std::string::npos) << bad.err;

  // --follow prints what comes, as it comes.
  CliProcess follow;
  CliOptions o;
  o.env["HOME"] = home.path();
  o.env["ARBITER_SERVER"] = fmt::format("http://127.0.0.1:{}", server.port());
  o.env["ARBITER_TOKEN"] = server.token("admin");
  ASSERT_TRUE(follow.Start({"audit", "--follow", "--json", "--action", "job.cancel"}, o));
  ASSERT_EQ(server.As("alice")
                ->Post(fmt::format("/api/v1/jobs/{}/cancel", job), "", "application/json")
                ->status,
            200);
  EXPECT_TRUE(follow.ReadUntil(
      [&](const std::string& s) { return s.find(fmt::format("job/{}", job)) != std::string::npos; },
      20))
      << follow.output();
}

}  // namespace
}  // namespace arbiter::testing
