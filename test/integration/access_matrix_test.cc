// The access matrix: every route of /api/v1/openapi.json against every kind of caller, with the
// expected HTTP status written out per (route, caller). A route missing from the table fails the
// test, and so does a table row for a route that no longer exists.
//
// The rules: admins may do everything; a tenant admin its tenant's queues, users and jobs; a
// member submits to its tenant's queues, reads its tenant's jobs and acts on its own only (403 on
// the others'), and manages its tenant's services; a viewer reads its tenant only (403 on every
// mutation); node tokens may use none of these routes but whoami and the gateways' (403); another
// tenant's objects answer 404, exactly like missing ones, and never appear in lists; no token is
// 401. Denied mutations are in the audit log.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <map>
#include <set>
#include <thread>
#include <tuple>

#include "tenant_server.h"

namespace arbiter::testing {
namespace {

using nlohmann::json;

enum Caller : size_t {
  kNone,
  kAdmin,
  kTenantAdmin,
  kMember,
  kOwner,
  kViewer,
  kNode,
  kTenantNode,
  kForeign,
  kCallers
};

struct CallerInfo {
  const char* name;
  const char* key;    // TenantServer token key; "" for none
  const char* actor;  // the user the audit log names
};

constexpr std::array<CallerInfo, kCallers> kCallerInfo = {{
    {"no token", "", ""},
    {"admin", "admin", "admin"},
    {"tenant-admin", "tina", "tina"},
    {"member", "alice", "alice"},  // a vision member who does not own the job
    {"owner", "bob", "bob"},       // the vision member who submitted the job
    {"viewer", "vic", "vic"},
    {"node", "node", "admin"},                // node token of the admin user
    {"node@vision", "node@vision", "alice"},  // node token of a vision member
    {"foreign", "sam", "sam"},                // a member of speech
}};

// Job routes act on a pending job of bob's in vision-train (logs: on one placed on gpu-01), array
// routes on a pending array of two of bob's jobs (POST .../throttle: {"max_running": 1});
// {name} is vision-train for queues and gpu-01 for nodes. Bodies: POST /jobs a job for
// vision-train (POST /jobs/batch a batch of that one job), POST /users a new vision member, POST
// /tokens {"user": "bob"}, PUT /config the same configuration again, POST /agent/register the
// node token's own node (agent-01, or agent-02 for node@vision) without GPUs, POST
// /agent/heartbeat one for its session (registered just before), GET /agent/watch its
// assignments without waiting.
struct Row {
  const char* route;
  std::array<int, kCallers> status;
};

// clang-format off
const Row kMatrix[] = {
    //                                     none admin t-adm member owner viewer node n@vis foreign
    {"GET /healthz",                      {200,  200,  200,  200,  200,  200,  200,  200,  200}},
    {"GET /readyz",                       {200,  200,  200,  200,  200,  200,  200,  200,  200}},
    {"GET /api/v1/openapi.json",          {200,  200,  200,  200,  200,  200,  200,  200,  200}},
    // Metrics cover every tenant: admins (and the server's scrape secret, not a caller here).
    {"GET /metrics",                      {401,  200,  403,  403,  403,  403,  403,  403,  403}},
    {"GET /api/v1/whoami",                {401,  200,  200,  200,  200,  200,  200,  200,  200}},
    // The servers sharing the store and the leader: anyone signed in (agents find the leader).
    {"GET /api/v1/servers",               {401,  200,  200,  200,  200,  200,  200,  200,  200}},
    // The web console's page, and its sessions: signing in takes the caller's own token in the
    // body (none: 400); node tokens speak for a node, not a person (403).
    {"GET /",                             {200,  200,  200,  200,  200,  200,  200,  200,  200}},
    {"POST /api/v1/session",              {400,  201,  201,  201,  201,  201,  403,  403,  201}},
    // How to sign in (docs/identity.md): open, as the sign-in page needs it before any token.
    {"GET /api/v1/auth/config",           {200,  200,  200,  200,  200,  200,  200,  200,  200}},
    {"GET /api/v1/session",               {401,  200,  200,  200,  200,  200,  200,  200,  200}},
    {"DELETE /api/v1/session",            {401,  200,  200,  200,  200,  200,  200,  200,  200}},
    // Signing in with a directory needs no token; this server has no identity.ldap (404).
    {"POST /api/v1/login/ldap",           {404,  404,  404,  404,  404,  404,  404,  404,  404}},
    // A foreign queue is "not found" like a missing one; the queue is a body field, hence 400.
    {"POST /api/v1/jobs",                 {401,  201,  201,  201,  201,  403,  403,  403,  400}},
    {"POST /api/v1/jobs/batch",           {401,  201,  201,  201,  201,  403,  403,  403,  400}},
    {"GET /api/v1/jobs",                  {401,  200,  200,  200,  200,  200,  403,  403,  200}},
    {"GET /api/v1/jobs/{id}",             {401,  200,  200,  200,  200,  200,  403,  403,  404}},
    {"GET /api/v1/jobs/{id}/events",      {401,  200,  200,  200,  200,  200,  403,  403,  404}},
    {"GET /api/v1/jobs/{id}/why",         {401,  200,  200,  200,  200,  200,  403,  403,  404}},
    // The logs of a job placed on gpu-01, which has no agent to serve them: 503 past the checks.
    {"GET /api/v1/jobs/{id}/logs",        {401,  503,  503,  503,  503,  503,  403,  403,  404}},
    {"POST /api/v1/jobs/{id}/cancel",     {401,  200,  200,  403,  200,  403,  403,  403,  404}},
    {"POST /api/v1/jobs/{id}/suspend",    {401,  200,  200,  403,  200,  403,  403,  403,  404}},
    {"POST /api/v1/jobs/{id}/resume",     {401,  200,  200,  403,  200,  403,  403,  403,  404}},
    {"POST /api/v1/jobs/{id}/retry",      {401,  200,  200,  403,  200,  403,  403,  403,  404}},
    // Requeue of a pending job: 409 once past the checks (only admitted or running jobs requeue).
    {"POST /api/v1/jobs/{id}/requeue",    {401,  409,  409,  403,  409,  403,  403,  403,  404}},
    // Approvals, on a pending job no rule holds: only admins may decide on it (409 past the
    // checks: it is not awaiting approval); its submitter never.
    {"POST /api/v1/jobs/{id}/approve",    {401,  409,  403,  403,  403,  403,  403,  403,  404}},
    {"POST /api/v1/jobs/{id}/reject",     {401,  409,  403,  403,  403,  403,  403,  403,  404}},
    {"GET /api/v1/approvals",             {401,  200,  200,  200,  200,  200,  403,  403,  200}},
    // Job arrays (a pending array of bob's): as its jobs.
    {"GET /api/v1/arrays/{id}",           {401,  200,  200,  200,  200,  200,  403,  403,  404}},
    {"POST /api/v1/arrays/{id}/cancel",   {401,  200,  200,  403,  200,  403,  403,  403,  404}},
    {"POST /api/v1/arrays/{id}/suspend",  {401,  200,  200,  403,  200,  403,  403,  403,  404}},
    {"POST /api/v1/arrays/{id}/resume",   {401,  200,  200,  403,  200,  403,  403,  403,  404}},
    {"POST /api/v1/arrays/{id}/retry",    {401,  200,  200,  403,  200,  403,  403,  403,  404}},
    {"POST /api/v1/arrays/{id}/requeue",  {401,  409,  409,  403,  409,  403,  403,  403,  404}},
    {"POST /api/v1/arrays/{id}/throttle", {401,  200,  200,  403,  200,  403,  403,  403,  404}},
    {"GET /api/v1/tenants",               {401,  200,  200,  200,  200,  200,  403,  403,  200}},
    {"GET /api/v1/queues",                {401,  200,  200,  200,  200,  200,  403,  403,  200}},
    {"GET /api/v1/queues/{name}",         {401,  200,  200,  200,  200,  200,  403,  403,  404}},
    {"GET /api/v1/users",                 {401,  200,  200,  200,  200,  200,  403,  403,  200}},
    {"POST /api/v1/users",                {401,  201,  201,  403,  403,  403,  403,  403,  403}},
    // bob may make his own tokens; a foreign tenant's caller does not see that bob exists.
    {"POST /api/v1/tokens",               {401,  201,  201,  403,  201,  403,  403,  403,  404}},
    {"GET /api/v1/tokens",                {401,  200,  200,  200,  200,  200,  403,  403,  200}},
    {"DELETE /api/v1/tokens/{id}",        {401,  200,  200,  404,  200,  404,  403,  403,  404}},
    {"GET /api/v1/priority-classes",      {401,  200,  200,  200,  200,  200,  403,  403,  200}},
    {"GET /api/v1/nodes",                 {401,  200,  200,  200,  200,  200,  403,  403,  200}},
    {"GET /api/v1/nodes/{name}",          {401,  200,  200,  200,  200,  200,  403,  403,  200}},
    {"POST /api/v1/nodes/{name}/cordon",  {401,  200,  403,  403,  403,  403,  403,  403,  403}},
    {"POST /api/v1/nodes/{name}/drain",   {401,  200,  403,  403,  403,  403,  403,  403,  403}},
    {"POST /api/v1/nodes/{name}/uncordon",{401,  200,  403,  403,  403,  403,  403,  403,  403}},
    {"PUT /api/v1/config",                {401,  200,  403,  403,  403,  403,  403,  403,  403}},
    {"GET /api/v1/config",                {401,  200,  403,  403,  403,  403,  403,  403,  403}},
    // Tenant admins read their tenant's records (docs/governance.md).
    {"GET /api/v1/audit",                 {401,  200,  200,  403,  403,  403,  403,  403,  403}},
    {"GET /api/v1/events",                {401,  200,  200,  200,  200,  200,  403,  403,  200}},
    // The node agents' routes take node tokens only (any node token: agents are admin-made).
    {"POST /api/v1/agent/register",       {401,  403,  403,  403,  403,  403,  200,  200,  403}},
    {"POST /api/v1/agent/heartbeat",      {401,  403,  403,  403,  403,  403,  200,  200,  403}},
    {"GET /api/v1/agent/watch",           {401,  403,  403,  403,  403,  403,  200,  200,  403}},
    // Reports: anyone of a tenant reads its own tenant's rows (the foreign member sees speech's);
    // the cluster-wide reports are for admins.
    {"GET /api/v1/reports/usage",         {401,  200,  200,  200,  200,  200,  403,  403,  200}},
    {"GET /api/v1/reports/wait",          {401,  200,  200,  200,  200,  200,  403,  403,  200}},
    {"GET /api/v1/reports/failures",      {401,  200,  200,  200,  200,  200,  403,  403,  200}},
    {"GET /api/v1/reports/preemptions",   {401,  200,  200,  200,  200,  200,  403,  403,  200}},
    {"GET /api/v1/reports/fairness",      {401,  200,  200,  200,  200,  200,  403,  403,  200}},
    {"GET /api/v1/reports/cluster",       {401,  200,  403,  403,  403,  403,  403,  403,  403}},
    {"GET /api/v1/reports/fragmentation", {401,  200,  403,  403,  403,  403,  403,  403,  403}},
    {"GET /api/v1/reports/idle-while-queued",
                                          {401,  200,  403,  403,  403,  403,  403,  403,  403}},
    {"GET /api/v1/reports/serving",       {401,  200,  200,  200,  200,  200,  403,  403,  200}},
    {"GET /api/v1/reports/forecast",      {401,  200,  200,  200,  200,  200,  403,  403,  200}},
    // What-if replays of the history: admins only.
    {"POST /api/v1/plan",                 {401,  200,  403,  403,  403,  403,  403,  403,  403}},
    {"POST /api/v1/plan/capacity",        {401,  200,  403,  403,  403,  403,  403,  403,  403}},
    // Services (one of bob's in vision, fresh for each call): any member of its tenant manages
    // it, viewers read it; a foreign queue is a body field (400) as for jobs. Rollback of a
    // service with one revision: 400 once past the checks.
    {"POST /api/v1/services",             {401,  201,  201,  201,  201,  403,  403,  403,  400}},
    {"GET /api/v1/services",              {401,  200,  200,  200,  200,  200,  403,  403,  200}},
    {"GET /api/v1/services/{name}",       {401,  200,  200,  200,  200,  200,  403,  403,  404}},
    {"PUT /api/v1/services/{name}",       {401,  200,  200,  200,  200,  403,  403,  403,  404}},
    {"DELETE /api/v1/services/{name}",    {401,  200,  200,  200,  200,  403,  403,  403,  404}},
    {"POST /api/v1/services/{name}/scale",
                                          {401,  200,  200,  200,  200,  403,  403,  403,  404}},
    {"POST /api/v1/services/{name}/traffic",
                                          {401,  200,  200,  200,  200,  403,  403,  403,  404}},
    {"POST /api/v1/services/{name}/rollback",
                                          {401,  400,  400,  400,  400,  403,  403,  403,  404}},
    // Approvals of a service (a fresh one of bob's that no rule holds): as for jobs, only admins
    // may decide (409 past the checks: it is not awaiting approval).
    {"POST /api/v1/services/{name}/approve",
                                          {401,  409,  403,  403,  403,  403,  403,  403,  404}},
    {"POST /api/v1/services/{name}/reject",
                                          {401,  409,  403,  403,  403,  403,  403,  403,  404}},
    // Quota requests ({id}: a fresh one of bob's for vision-train): members and tenant admins of
    // the queue's tenant ask (the foreign member's queue is a body field: 400 as for jobs), they
    // and admins read, only admins decide and never on their own.
    {"POST /api/v1/quota-requests",       {401,  201,  201,  201,  201,  403,  403,  403,  400}},
    {"GET /api/v1/quota-requests",        {401,  200,  200,  200,  200,  200,  403,  403,  200}},
    {"GET /api/v1/quota-requests/{id}",   {401,  200,  200,  200,  200,  200,  403,  403,  404}},
    {"POST /api/v1/quota-requests/{id}/approve",
                                          {401,  200,  403,  403,  403,  403,  403,  403,  404}},
    {"POST /api/v1/quota-requests/{id}/reject",
                                          {401,  200,  403,  403,  403,  403,  403,  403,  404}},
    // Webhooks (docs/webhooks.md; {id}: a fresh user-scoped hook of bob's): anyone but viewers
    // and nodes makes their own; a hook is managed by its owner, its tenant's admins and admins;
    // anyone else finds it missing (a viewer may not change one at all: 403).
    {"POST /api/v1/webhooks",             {401,  201,  201,  201,  201,  403,  403,  403,  201}},
    {"GET /api/v1/webhooks",              {401,  200,  200,  200,  200,  200,  403,  403,  200}},
    {"DELETE /api/v1/webhooks/{id}",      {401,  200,  200,  404,  200,  403,  403,  403,  404}},
    {"GET /api/v1/webhooks/{id}/deliveries",
                                          {401,  200,  200,  404,  200,  404,  403,  403,  404}},
    {"POST /api/v1/webhooks/{id}/test",   {401,  202,  202,  404,  202,  403,  403,  403,  404}},
    // Registry credentials (docs/config.md): tenant admins set and delete their tenant's, admins
    // any tenant's; every member of a tenant lists them (never a password); nodes none.
    {"PUT /api/v1/registry-credentials",  {401,  200,  200,  403,  403,  403,  403,  403,  403}},
    {"GET /api/v1/registry-credentials",  {401,  200,  200,  200,  200,  200,  403,  403,  200}},
    {"DELETE /api/v1/registry-credentials",
                                          {401,  200,  200,  403,  403,  403,  403,  403,  403}},
    // The gateways': admins and node (gateway) tokens.
    {"GET /api/v1/gateway/routes",        {401,  200,  403,  403,  403,  403,  200,  200,  403}},
    {"POST /api/v1/gateway/stats",        {401,  200,  403,  403,  403,  403,  200,  200,  403}},
    {"POST /api/v1/gateway/load",         {401,  200,  403,  403,  403,  403,  200,  200,  403}},
};
// clang-format on

std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

struct Call {
  std::string method;
  std::string path;
  std::string body{};
  std::string type = "application/json";
};

struct Reply {
  int status = -1;  // -1: no response
  std::string body;
};

// Sends `call`. The event stream is cut off as soon as its status line is in.
Reply Send(httplib::Client& c, const Call& call) {
  Reply out;
  if (call.path == "/api/v1/events") {
    c.Get(
        call.path, httplib::Headers{},
        [&](const httplib::Response& res) {
          out.status = res.status;
          return false;
        },
        [](const char*, size_t) { return false; });
    return out;
  }
  httplib::Result r = call.method == "GET"    ? c.Get(call.path)
                      : call.method == "POST" ? c.Post(call.path, call.body, call.type.c_str())
                      : call.method == "PUT"  ? c.Put(call.path, call.body, call.type.c_str())
                                              : c.Delete(call.path);
  if (r) {
    out.status = r->status;
    out.body = r->body;
  }
  return out;
}

// (actor, action, target) of a denied call in the audit log.
using AuditKey = std::tuple<std::string, std::string, std::string>;

class AccessMatrixTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(server_.Start()); }

  // The concrete call for `route` ("METHOD /path/{param}"): fresh objects where it acts on one.
  // `caller`: the token's key; node tokens speak for their own node only (agent-01 for "node",
  // agent-02 for "node@vision").
  Call Prepare(const std::string& method, const std::string& route,
               const std::string& caller = "") {
    Call call{method, route, ""};
    const std::string node = caller == "node@vision" ? "agent-02" : "agent-01";
    const std::string node_key = caller == "node@vision" ? "node@vision" : "node";
    const size_t id_at = route.find("{id}");
    if (id_at != std::string::npos && route.starts_with("/api/v1/tokens/")) {
      // A fresh token of bob's (made by the admin) for each call.
      auto made = server_.As("admin")->Post("/api/v1/tokens", json{{"user", "bob"}}.dump(),
                                            "application/json");
      EXPECT_TRUE(made && made->status == 201) << (made ? made->body : "no reply");
      const std::string id = json::parse(made->body).value("id", "");
      call.path.replace(id_at, 4, id);
      token_of_path_[call.path] = id;
    } else if (id_at != std::string::npos && route.starts_with("/api/v1/webhooks/")) {
      // A fresh webhook of bob's for each call (its URL is never listened on).
      auto made = server_.As("bob")->Post("/api/v1/webhooks", WebhookBody(), "application/json");
      EXPECT_TRUE(made && made->status == 201) << (made ? made->body : "no reply");
      const std::string id = json::parse(made->body).value("id", "");
      call.path.replace(id_at, 4, id);
      webhook_of_path_[call.path] = id;
      if (method == "POST") call.body = "{}";
    } else if (id_at != std::string::npos && route.starts_with("/api/v1/quota-requests/")) {
      // A fresh quota request of bob's for each call.
      auto made =
          server_.As("bob")->Post("/api/v1/quota-requests", QuotaRequestBody(), "application/json");
      EXPECT_TRUE(made && made->status == 201) << (made ? made->body : "no reply");
      const std::string id = json::parse(made->body).value("id", "");
      call.path.replace(id_at, 4, id);
      quota_request_of_path_[call.path] = id;
      if (method == "POST") call.body = "{}";
    } else if (id_at != std::string::npos && route.ends_with("/logs")) {
      call.path.replace(id_at, 4, std::to_string(PlacedJob()));
    } else if (id_at != std::string::npos && route.starts_with("/api/v1/arrays/")) {
      const uint64_t id = BobsArray();
      call.path.replace(id_at, 4, std::to_string(id));
      const std::string array = fmt::format("/api/v1/arrays/{}", id);
      auto bob = server_.As("bob");
      if (route.ends_with("/resume")) {
        EXPECT_EQ(bob->Post(array + "/suspend", "", "application/json")->status, 200);
      } else if (route.ends_with("/retry")) {
        EXPECT_EQ(bob->Post(array + "/cancel", "", "application/json")->status, 200);
      } else if (route.ends_with("/throttle")) {
        call.body = json{{"max_running", 1}}.dump();
      }
      array_of_path_[call.path] = id;
    } else if (id_at != std::string::npos) {
      const uint64_t id = server_.Submit("bob");
      call.path.replace(id_at, 4, std::to_string(id));
      const std::string job = fmt::format("/api/v1/jobs/{}", id);
      auto bob = server_.As("bob");
      if (route.ends_with("/resume")) {
        EXPECT_EQ(bob->Post(job + "/suspend", "", "application/json")->status, 200);
      } else if (route.ends_with("/retry")) {
        EXPECT_EQ(bob->Post(job + "/cancel", "", "application/json")->status, 200);
      }
      job_of_path_[call.path] = id;
    }
    const size_t name_at = call.path.find("{name}");
    if (name_at != std::string::npos && route.starts_with("/api/v1/services/")) {
      // A fresh service of bob's, without replicas.
      const std::string name = fmt::format("svc-{}", ++services_);
      auto made =
          server_.As("bob")->Post("/api/v1/services", ServiceBody(name), "application/json");
      EXPECT_TRUE(made && made->status == 201) << (made ? made->body : "no reply");
      call.path.replace(name_at, 6, name);
      service_of_path_[call.path] = name;
      if (method == "PUT") call.body = ServiceBody(name);
      if (route.ends_with("/scale")) call.body = json{{"replicas", 0}}.dump();
      if (route.ends_with("/traffic")) {
        call.body = json{{"traffic", {{{"revision", 1}, {"percent", 100}}}}}.dump();
      }
      if (route.ends_with("/rollback")) call.body = "{}";
    } else if (name_at != std::string::npos) {
      call.path.replace(name_at, 6,
                        route.starts_with("/api/v1/queues") ? "vision-train" : "gpu-01");
    }
    if (method == "POST" && route == "/api/v1/session") {
      call.body = caller.empty() ? "{}" : json{{"token", server_.token(caller)}}.dump();
    }
    if (method == "POST" && route == "/api/v1/plan") call.body = json{{"since", "1h"}}.dump();
    if (method == "POST" && route == "/api/v1/plan/capacity") {
      call.body = json{{"since", "1h"}, {"model", "A100-80G"}, {"target_wait_p90", "1h"}}.dump();
    }
    if (method == "POST" && route == "/api/v1/jobs") call.body = JobBody("vision-train");
    if (method == "POST" && route == "/api/v1/jobs/batch") {
      call.body = json{{"jobs", json::array({json::parse(JobBody("vision-train"))})}}.dump();
    }
    if (method == "POST" && route == "/api/v1/users") {
      call.body = json{{"name", fmt::format("user-{}", ++users_)}, {"tenant", "vision"}}.dump();
    }
    if (method == "POST" && route == "/api/v1/tokens") call.body = json{{"user", "bob"}}.dump();
    if (method == "POST" && route == "/api/v1/webhooks") call.body = WebhookBody();
    if (method == "POST" && route == "/api/v1/quota-requests") call.body = QuotaRequestBody();
    if (route == "/api/v1/registry-credentials" && method == "PUT") call.body = CredentialBody();
    if (route == "/api/v1/registry-credentials" && method == "DELETE") {
      // A fresh credential (set by the admin) for each call.
      auto made = server_.As("admin")->Put("/api/v1/registry-credentials", CredentialBody(),
                                           "application/json");
      EXPECT_TRUE(made && made->status == 200) << (made ? made->body : "no reply");
      call.path += "?tenant=vision&registry=registry.example.com/vision/";
    }
    if (method == "POST" && route == "/api/v1/services") {
      call.body = ServiceBody(fmt::format("new-{}", ++services_));
    }
    if (method == "POST" && route == "/api/v1/gateway/load") {
      call.body = json{{"gateway", "matrix"},
                       {"services", {{{"name", "nothing-here"}, {"concurrency", 1}}}}}
                      .dump();
    }
    if (method == "POST" && route == "/api/v1/gateway/stats") {
      call.body = json{{"gateway", "matrix"},
                       {"window_start_ms", 60000},
                       {"window_end_ms", 70000},
                       {"services", json::array()}}
                      .dump();
    }
    if (method == "PUT" && route == "/api/v1/config") {
      call.body = kTenantConfig;
      call.type = "application/yaml";
    }
    if (route == "/api/v1/agent/watch") {
      call.path += fmt::format("?node={}&version=0&wait_ms=0", node);
    }
    const json agent = {{"name", node}, {"instance", "matrix-1"}};
    if (route.starts_with("/api/v1/agent/")) {
      json reg = agent;
      reg.update({{"cpu_milli", 8000}, {"memory_mib", 16384}, {"gpus", json::array()}});
      call.body = route.ends_with("/watch") ? "" : reg.dump();
      if (!route.ends_with("/register")) {
        auto r =
            server_.As(node_key)->Post("/api/v1/agent/register", reg.dump(), "application/json");
        EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no reply");
        call.body = agent.dump();
      }
    }
    return call;
  }

  // A credential of vision's for its registry.
  static std::string CredentialBody() {
    return json{{"tenant", "vision"},
                {"registry", "registry.example.com/vision/"},
                {"user", "robot"},
                {"password", "s3cret"}}
        .dump();
  }

  // One more guaranteed GPU for vision-train for 30 days.
  static std::string QuotaRequestBody() {
    const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
    return json{{"queue", "vision-train"},
                {"guaranteed", {{"gpu", 1}}},
                {"until", now_ms + int64_t{30} * 86'400'000},
                {"reason", "matrix"}}
        .dump();
  }

  // A user-scoped webhook whose URL nothing listens on.
  static std::string WebhookBody() {
    return json{{"url", "http://127.0.0.1:9/matrix"}, {"events", {"job.failed"}}}.dump();
  }

  // A service of vision's queue without replicas.
  static std::string ServiceBody(const std::string& name) {
    return json{{"name", name},
                {"queue", "vision-train"},
                {"replicas", 0},
                {"template", {{"command", {"sleep", "1"}}}}}
        .dump();
  }

  // A new pending array of two of bob's jobs; its id.
  uint64_t BobsArray() {
    json body = json::parse(JobBody("vision-train"));
    body["array"] = {{"indices", "0-1"}};
    auto r = server_.As("bob")->Post("/api/v1/jobs", body.dump(), "application/json");
    EXPECT_TRUE(r && r->status == 201) << (r ? r->body : "no reply");
    return r && r->status == 201 ? BodyJson(r)["id"].get<uint64_t>() : 0;
  }

  // A job of bob's that the scheduler placed on gpu-01 (made once; bounded wait).
  uint64_t PlacedJob() {
    if (placed_job_ != 0) return placed_job_;
    auto bob = server_.As("bob");
    auto r = bob->Post("/api/v1/jobs", JobBody("vision-train", 1), "application/json");
    EXPECT_TRUE(r && r->status == 201) << (r ? r->body : "no reply");
    if (!r || r->status != 201) return 0;
    placed_job_ = BodyJson(r)["id"].get<uint64_t>();
    std::string state;
    for (int i = 0; i < 200 && state != "admitted"; ++i) {  // bounded: a cycle every 50 ms
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      const json j = BodyJson(bob->Get(fmt::format("/api/v1/jobs/{}", placed_job_)));
      state = j.is_object() ? j.value("state", "") : "";
    }
    EXPECT_EQ(state, "admitted") << "job " << placed_job_;
    return placed_job_;
  }

  // Every record of the audit log, read page by page (bounded).
  std::vector<json> AuditLog() {
    std::vector<json> out;
    auto admin = server_.As("admin");
    uint64_t after = 0;
    for (int page = 0; page < 1000; ++page) {
      auto r = admin->Get(fmt::format("/api/v1/audit?after={}&limit=50", after));
      EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no reply");
      if (!r || r->status != 200) break;
      const json body = BodyJson(r);
      EXPECT_LE(body["items"].size(), 50u);
      for (const json& item : body["items"]) {
        EXPECT_GT(item["seq"].get<uint64_t>(), after) << "out of order: " << item.dump();
        after = item["seq"].get<uint64_t>();
        out.push_back(item);
      }
      if (body["next_after"].is_null()) break;
      EXPECT_EQ(body["next_after"].get<uint64_t>(), after);
    }
    return out;
  }

  TenantServer server_;
  std::map<std::string, uint64_t> job_of_path_;
  std::map<std::string, uint64_t> array_of_path_;
  std::map<std::string, std::string> token_of_path_;          // DELETE /tokens/ID -> ID
  std::map<std::string, std::string> webhook_of_path_;        // /webhooks/ID... -> ID
  std::map<std::string, std::string> quota_request_of_path_;  // /quota-requests/ID... -> ID
  std::map<std::string, std::string> service_of_path_;        // /services/NAME... -> NAME
  int services_ = 0;
  uint64_t placed_job_ = 0;
  int users_ = 0;
};

TEST_F(AccessMatrixTest, EveryRouteForEveryCaller) {
  std::map<std::string, const Row*> table;
  for (const Row& row : kMatrix) {
    EXPECT_TRUE(table.emplace(row.route, &row).second) << "twice in the table: " << row.route;
  }
  const json doc = BodyJson(server_.As("")->Get("/api/v1/openapi.json"));
  ASSERT_TRUE(doc.contains("paths")) << doc.dump();

  std::set<std::string> documented;
  std::multiset<AuditKey> expected_denials;
  size_t cells = 0;
  for (auto& [route, ops] : doc["paths"].items()) {
    for (auto& [lower_method, op] : ops.items()) {
      const std::string method = Upper(lower_method);
      const std::string key = fmt::format("{} {}", method, route);
      documented.insert(key);
      auto it = table.find(key);
      if (it == table.end()) {
        ADD_FAILURE() << "route " << key << " has no row in the access matrix";
        continue;
      }
      const bool needs_token = op.contains("security");
      for (size_t c = 0; c < kCallers; ++c) {
        const int want = it->second->status[c];
        EXPECT_EQ(want == 401, c == kNone && needs_token) << key << ": 401 iff no token";
        const Call call = Prepare(method, route, kCallerInfo[c].key);
        auto client = server_.As(kCallerInfo[c].key);
        const Reply got = Send(*client, call);
        ++cells;
        EXPECT_EQ(got.status, want)
            << key << " (" << call.path << ") as " << kCallerInfo[c].name << ": " << got.body;
        if (want >= 400 && call.path != "/api/v1/events") {
          const json e = json::parse(got.body, nullptr, false);
          EXPECT_TRUE(e.is_object() && e.contains("error") &&
                      !e["error"].value("code", "").empty() &&
                      !e["error"].value("message", "").empty())
              << key << " as " << kCallerInfo[c].name << ": not an error body: " << got.body;
        }
        if (c == kNone && want == 401) {  // a well-formed but unknown token is refused alike
          auto bogus = server_.process().Client("arb_000000000000_" + std::string(48, '0'));
          EXPECT_EQ(Send(*bogus, Prepare(method, route)).status, 401) << key << " bogus token";
        }
        if (method != "GET" && want == 403) {
          // The audit log names the path without its query.
          const std::string bare = call.path.substr(0, call.path.find('?'));
          expected_denials.insert({kCallerInfo[c].actor, fmt::format("{} {}", method, bare), bare});
        }
        if (method != "GET" && want == 404 && c == kForeign) {
          // Refused because the object is another tenant's: the audit log says so.
          if (job_of_path_.count(call.path)) {
            const std::string verb = call.path.substr(call.path.rfind('/') + 1);
            expected_denials.insert({"sam", fmt::format("job.{}", verb),
                                     fmt::format("job/{}", job_of_path_.at(call.path))});
          } else if (array_of_path_.count(call.path)) {
            const std::string verb = call.path.substr(call.path.rfind('/') + 1);
            expected_denials.insert({"sam", fmt::format("array.{}", verb),
                                     fmt::format("array/{}", array_of_path_.at(call.path))});
          } else if (route == "/api/v1/tokens") {
            expected_denials.insert({"sam", "token.create", "user/bob"});
          } else if (service_of_path_.count(call.path)) {
            std::string verb = call.path.substr(call.path.rfind('/') + 1);
            if (method == "PUT") verb = "update";
            if (method == "DELETE") verb = "delete";
            expected_denials.insert({"sam", fmt::format("service.{}", verb),
                                     fmt::format("service/{}", service_of_path_.at(call.path))});
          } else if (webhook_of_path_.count(call.path)) {
            expected_denials.insert({"sam", method == "DELETE" ? "webhook.delete" : "webhook.test",
                                     fmt::format("webhook/{}", webhook_of_path_.at(call.path))});
          } else if (token_of_path_.count(call.path)) {
            expected_denials.insert(
                {"sam", "token.revoke", fmt::format("token/{}", token_of_path_.at(call.path))});
          } else if (quota_request_of_path_.count(call.path)) {
            const std::string verb = call.path.substr(call.path.rfind('/') + 1);
            expected_denials.insert(
                {"sam", fmt::format("quota_request.{}", verb),
                 fmt::format("quota_request/{}", quota_request_of_path_.at(call.path))});
          } else if (route == "/api/v1/login/ldap") {
            // Not configured on this server: nobody's object, nothing to audit.
          } else {
            ADD_FAILURE() << "no audit expectation for " << key << " as foreign";
          }
        }
      }
    }
  }
  for (const Row& row : kMatrix) {
    EXPECT_TRUE(documented.count(row.route))
        << "table row for an undocumented route: " << row.route;
  }
  EXPECT_EQ(cells, documented.size() * kCallers);
  EXPECT_GE(documented.size(), 32u);

  // Every denied mutation is in the audit log, with who tried it.
  std::multiset<AuditKey> denied;
  for (const json& a : AuditLog()) {
    EXPECT_FALSE(a.value("at", "").empty()) << a.dump();
    if (a["result"].get<std::string>().starts_with("denied")) {
      denied.insert({a["actor"].get<std::string>(), a["action"].get<std::string>(),
                     a["target"].get<std::string>()});
    }
  }
  EXPECT_GT(expected_denials.size(), 50u);
  for (const AuditKey& k : expected_denials) {
    auto it = denied.find(k);
    if (it == denied.end()) {
      ADD_FAILURE() << "not in the audit log: " << std::get<0>(k) << " " << std::get<1>(k) << " "
                    << std::get<2>(k);
    } else {
      denied.erase(it);
    }
  }
}

// A foreign tenant's object answers exactly like a missing one: same status, same error, the same
// message but for the name.
TEST_F(AccessMatrixTest, ForeignObjectsLookMissing) {
  auto sam = server_.As("sam");
  auto tina = server_.As("tina");
  struct Probe {
    std::string what;
    Reply existing, missing;
    std::string existing_name, missing_name;
  };
  std::vector<Probe> probes;
  const uint64_t id = server_.Submit("bob");
  const uint64_t missing = id + 1000;
  for (const char* suffix : {"", "/events", "/why", "/logs"}) {
    probes.push_back({fmt::format("GET /api/v1/jobs/{{id}}{}", suffix),
                      Send(*sam, {"GET", fmt::format("/api/v1/jobs/{}{}", id, suffix)}),
                      Send(*sam, {"GET", fmt::format("/api/v1/jobs/{}{}", missing, suffix)}),
                      std::to_string(id), std::to_string(missing)});
  }
  for (const char* action : {"cancel", "suspend", "resume", "retry"}) {
    probes.push_back({fmt::format("POST /api/v1/jobs/{{id}}/{}", action),
                      Send(*sam, {"POST", fmt::format("/api/v1/jobs/{}/{}", id, action)}),
                      Send(*sam, {"POST", fmt::format("/api/v1/jobs/{}/{}", missing, action)}),
                      std::to_string(id), std::to_string(missing)});
  }
  // A foreign array, its elements and their list are missing alike.
  json array_body = json::parse(JobBody("vision-train"));
  array_body["array"] = {{"indices", "0-2"}};
  const uint64_t array =
      BodyJson(server_.As("bob")->Post("/api/v1/jobs", array_body.dump(), "application/json"))["id"]
          .get<uint64_t>();
  probes.push_back({"GET /api/v1/arrays/{id}",
                    Send(*sam, {"GET", fmt::format("/api/v1/arrays/{}", array)}),
                    Send(*sam, {"GET", fmt::format("/api/v1/arrays/{}", missing)}),
                    std::to_string(array), std::to_string(missing)});
  for (const char* action : {"cancel", "suspend", "resume", "retry", "throttle"}) {
    const std::string body = json{{"max_running", 1}}.dump();
    probes.push_back(
        {fmt::format("POST /api/v1/arrays/{{id}}/{}", action),
         Send(*sam, {"POST", fmt::format("/api/v1/arrays/{}/{}", array, action), body}),
         Send(*sam, {"POST", fmt::format("/api/v1/arrays/{}/{}", missing, action), body}),
         std::to_string(array), std::to_string(missing)});
  }
  EXPECT_EQ(BodyJson(sam->Get(fmt::format("/api/v1/jobs?array={}", array)))["items"].size(), 0u);
  EXPECT_EQ(BodyJson(sam->Get(fmt::format("/api/v1/jobs?array={}&index=1", array)))["items"].size(),
            0u);
  probes.push_back({"GET /api/v1/queues/{name}", Send(*sam, {"GET", "/api/v1/queues/vision-train"}),
                    Send(*sam, {"GET", "/api/v1/queues/no-such-queue"}), "vision-train",
                    "no-such-queue"});
  probes.push_back({"POST /api/v1/jobs",
                    Send(*sam, {"POST", "/api/v1/jobs", JobBody("vision-train")}),
                    Send(*sam, {"POST", "/api/v1/jobs", JobBody("no-such-queue")}), "vision-train",
                    "no-such-queue"});
  probes.push_back(
      {"POST /api/v1/tokens", Send(*sam, {"POST", "/api/v1/tokens", json{{"user", "bob"}}.dump()}),
       Send(*sam, {"POST", "/api/v1/tokens", json{{"user", "nobody"}}.dump()}), "bob", "nobody"});
  probes.push_back({"POST /api/v1/tokens (tenant admin)",
                    Send(*tina, {"POST", "/api/v1/tokens", json{{"user", "sam"}}.dump()}),
                    Send(*tina, {"POST", "/api/v1/tokens", json{{"user", "nobody"}}.dump()}), "sam",
                    "nobody"});
  probes.push_back(
      {"POST /api/v1/users (tenant admin, other tenant)",
       Send(*tina, {"POST", "/api/v1/users", json{{"name", "eve"}, {"tenant", "speech"}}.dump()}),
       Send(*tina,
            {"POST", "/api/v1/users", json{{"name", "eve"}, {"tenant", "no-such-tenant"}}.dump()}),
       "speech", "no-such-tenant"});
  for (const Probe& p : probes) {
    EXPECT_GE(p.existing.status, 400) << p.what << ": " << p.existing.body;
    EXPECT_EQ(p.existing.status, p.missing.status)
        << p.what << ": " << p.existing.body << " vs " << p.missing.body;
    json a = json::parse(p.existing.body, nullptr, false);
    json b = json::parse(p.missing.body, nullptr, false);
    ASSERT_TRUE(a.contains("error") && b.contains("error")) << p.what;
    EXPECT_EQ(a["error"].value("code", ""), b["error"].value("code", "")) << p.what;
    EXPECT_EQ(a["error"].value("field", ""), b["error"].value("field", "")) << p.what;
    std::string ma = a["error"].value("message", "");
    std::string mb = b["error"].value("message", "");
    for (auto [m, name] : {std::pair{&ma, &p.existing_name}, std::pair{&mb, &p.missing_name}}) {
      for (size_t at = m->find(*name); at != std::string::npos; at = m->find(*name, at)) {
        m->replace(at, name->size(), "NAME");
      }
    }
    EXPECT_EQ(ma, mb) << p.what;
  }
  // The job and the array are untouched.
  EXPECT_EQ(BodyJson(server_.As("bob")->Get(fmt::format("/api/v1/jobs/{}", id)))["state"],
            "pending");
  EXPECT_EQ(BodyJson(server_.As("bob")->Get(fmt::format("/api/v1/arrays/{}", array)))["states"],
            (json{{"pending", 3}}));
}

// Lists show the caller's tenant only: jobs (also when filtered by another tenant), queues,
// tenants, users, and the jobs on a node.
TEST_F(AccessMatrixTest, ListsNeverShowAnotherTenant) {
  auto bob = server_.As("bob");
  auto placed = bob->Post("/api/v1/jobs", JobBody("vision-train", 1), "application/json");
  ASSERT_EQ(placed->status, 201) << placed->body;
  const uint64_t vision_job = BodyJson(placed)["id"].get<uint64_t>();
  const uint64_t speech_job = server_.Submit("sam", "speech-train");
  json j;
  for (int i = 0; i < 200; ++i) {  // bounded: a cycle every 50 ms
    j = BodyJson(bob->Get(fmt::format("/api/v1/jobs/{}", vision_job)));
    if (j["state"] == "admitted") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(j["state"], "admitted") << j.dump();

  const std::map<std::string, std::string> tenant_of = {{"tina", "vision"}, {"alice", "vision"},
                                                        {"bob", "vision"},  {"vic", "vision"},
                                                        {"sam", "speech"},  {"admin", ""}};
  for (const auto& [who, tenant] : tenant_of) {
    SCOPED_TRACE(who);
    auto c = server_.As(who);
    std::set<uint64_t> jobs;
    const json job_list = BodyJson(c->Get("/api/v1/jobs"));
    for (const json& item : job_list["items"]) {
      if (!tenant.empty()) {
        EXPECT_EQ(item["tenant"], tenant) << item.dump();
      }
      jobs.insert(item["id"].get<uint64_t>());
    }
    EXPECT_EQ(jobs.count(vision_job), tenant != "speech" ? 1u : 0u);
    EXPECT_EQ(jobs.count(speech_job), tenant != "vision" ? 1u : 0u);
    const std::string other = tenant == "speech" ? "vision" : "speech";
    if (!tenant.empty()) {
      // Filtering by another tenant is refused as for a tenant that does not exist, naming only
      // the caller's own.
      auto r = c->Get("/api/v1/jobs?tenant=" + other);
      auto missing = c->Get("/api/v1/jobs?tenant=no-such-tenant");
      ASSERT_TRUE(r && missing);
      EXPECT_EQ(r->status, 400) << r->body;
      const json e = json::parse(r->body)["error"];
      EXPECT_EQ(e["field"], "tenant");
      EXPECT_EQ(e["message"],
                fmt::format("tenant {} not found; tenants you can see: {}", other, tenant));
      EXPECT_EQ(json::parse(missing->body)["error"]["message"],
                fmt::format("tenant no-such-tenant not found; tenants you can see: {}", tenant));
    }
    std::set<std::string> tenants;
    const json tenant_list = BodyJson(c->Get("/api/v1/tenants"));
    for (const json& item : tenant_list["items"]) {
      tenants.insert(item["name"].get<std::string>());
    }
    const std::set<std::string> want =
        tenant.empty() ? std::set<std::string>{"speech", "vision"} : std::set<std::string>{tenant};
    EXPECT_EQ(tenants, want);
    for (const char* list : {"/api/v1/queues", "/api/v1/users"}) {
      const json items = BodyJson(c->Get(list))["items"];
      EXPECT_FALSE(items.empty()) << list;
      for (const json& item : items) {
        if (!tenant.empty()) {
          EXPECT_EQ(item["tenant"], tenant) << list << ": " << item.dump();
        }
      }
    }
    const json node = BodyJson(c->Get("/api/v1/nodes/gpu-01"));
    EXPECT_EQ(node["jobs"], tenant == "speech" ? json::array() : json::array({vision_job}))
        << node.dump();
  }
}

// A token never grants more than the token that made it: viewers and nodes make none, a tenant
// admin's member token makes member tokens at most, and tenant admins only for their tenant.
TEST_F(AccessMatrixTest, TokensNeverExceedTheirMaker) {
  auto post = [&](const std::string& token, const json& body) {
    return server_.process().Client(token)->Post("/api/v1/tokens", body.dump(), "application/json");
  };
  EXPECT_EQ(post(server_.token("vic"), {{"user", "vic"}})->status, 403);
  EXPECT_EQ(post(server_.token("node@vision"), {{"user", "alice"}})->status, 403);
  EXPECT_EQ(post(server_.token("node"), {{"user", "admin"}})->status, 403);
  EXPECT_EQ(post(server_.token("tina"), {{"user", "alice"}, {"role", "node"}})->status, 403);

  auto r = post(server_.token("tina"), {{"user", "tina"}, {"role", "member"}});
  ASSERT_EQ(r->status, 201) << r->body;
  EXPECT_EQ(BodyJson(r)["role"], "member");
  const std::string tina_member = BodyJson(r)["token"];
  EXPECT_EQ(post(tina_member, {{"user", "tina"}})->status, 403);  // would be tenant-admin
  EXPECT_EQ(post(tina_member, {{"user", "tina"}, {"role", "tenant-admin"}})->status, 403);
  EXPECT_EQ(post(tina_member, {{"user", "alice"}})->status, 403);  // members: own tokens only
  r = post(tina_member, {{"user", "tina"}, {"role", "viewer"}});
  ASSERT_EQ(r->status, 201) << r->body;
  EXPECT_EQ(BodyJson(r)["role"], "viewer");

  r = post(server_.token("alice"), {{"user", "alice"}, {"role", "viewer"}});
  ASSERT_EQ(r->status, 201) << r->body;
  const std::string alice_viewer = BodyJson(r)["token"];
  EXPECT_EQ(post(alice_viewer, {{"user", "alice"}})->status, 403);
  EXPECT_EQ(server_.process()
                .Client(alice_viewer)
                ->Post("/api/v1/jobs", JobBody("vision-train"), "application/json")
                ->status,
            403);
  // A user's role still caps the tokens made for it.
  EXPECT_EQ(post(server_.token("admin"), {{"user", "alice"}, {"role", "tenant-admin"}})->status,
            400);
  r = post(server_.token("tina"), {{"user", "alice"}});
  ASSERT_EQ(r->status, 201) << r->body;
  EXPECT_EQ(BodyJson(r)["role"], "member");
}

}  // namespace
}  // namespace arbiter::testing
