// ControlPlane: authentication and access; tenants, queues, users, tokens, priority classes and
// nodes as the API shows them.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <set>

#include "api/agent_codec.h"
#include "api/job_codec.h"
#include "api/json_writer.h"
#include "core/budget/budget.h"
#include "server/admissibility.h"
#include "server/audit_export.h"
#include "server/control_plane.h"
#include "server/control_plane_compiled.h"
#include "server/control_plane_helpers.h"
#include "server/reports.h"

namespace arbiter::server {

using nlohmann::json;
// --- Authentication and access --------------------------------------------------------------

Result<Principal> ControlPlane::Authenticate(std::string_view bearer) {
  // The in-process gateway's token: known to this process only, never stored.
  if (bearer.size() == gateway_token_.size() && SecureEquals(bearer, gateway_token_)) {
    return Principal{"gateway", "", Role::kNode, "gateway", ""};
  }
  if (jwt::LooksLikeJwt(bearer)) return oidc_.Authenticate(bearer);
  return tokens_.Authenticate(bearer, now_());
}

json ControlPlane::AuthConfig() {
  bool ldap = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ldap = ldap_configured_;
  }
  json out = oidc_.ClientConfig();  // may fetch the discovery document: outside mu_
  out["ldap"] = ldap;
  return out;
}

void ControlPlane::RefreshUserIndexLocked() {
  std::vector<TokenRegistry::User> users;
  users.reserve(config_.users.size());
  for (const api::UserConfig& u : config_.users) {
    users.push_back({u.name, u.tenant, ParseRole(u.role).value_or(Role::kViewer)});
  }
  tokens_.SetUsers(users);
  // The identity section changes with the configuration, as users do.
  oidc_.Configure(config_.identity);
  ldap_configured_ = config_.identity.ldap.has_value();
  std::vector<std::string> tenants;
  tenants.reserve(config_.tenants.size());
  for (const api::TenantConfig& t : config_.tenants) tenants.push_back(t.name);
  tokens_.SetTenants(tenants);
}

bool ControlPlane::CanReadTenantLocked(const Principal& p, const std::string& tenant) const {
  return p.role == Role::kAdmin || (p.role != Role::kNode && p.tenant == tenant);
}

const api::UserConfig* ControlPlane::FindUserLocked(const std::string& name) const {
  for (const api::UserConfig& u : config_.users) {
    if (u.name == name) return &u;
  }
  return nullptr;
}

Status ControlPlane::CanActOnJobLocked(const Principal& p, const JobEntry& j) const {
  if (p.role == Role::kAdmin) return Status::Ok();
  if (p.tenant != j.spec.tenant)
    return NotFoundError(fmt::format("job {} not found", j.spec.id.value()));
  if (p.role == Role::kTenantAdmin) return Status::Ok();
  if (p.role == Role::kMember && p.user == j.spec.user) return Status::Ok();
  return Forbidden(fmt::format("{} {} may read job {} but not act on it (owned by {})",
                               RoleName(p.role), p.user, j.spec.id.value(), j.spec.user));
}

void ControlPlane::Audit(const Principal& p, std::string action, std::string target,
                         std::string result) {
  store::WriteBatch b;
  store::AuditRecord r =
      AuditRecordOf(p, std::move(action), std::move(target), p.tenant, "{}", std::move(result));
  if (r.actor.empty()) r.actor = "anonymous";
  b.AppendAudit(std::move(r));
  store_->WriteAsync(std::move(b));  // audit of the call; not waited for
}

store::AuditRecord ControlPlane::AuditRecordOf(const Principal& p, std::string action,
                                               std::string target, std::string tenant,
                                               std::string detail_json, std::string result) const {
  return {0,
          now_(),
          p.user,
          std::move(action),
          std::move(target),
          std::move(result),
          std::move(detail_json),
          p.token_id,
          p.source,
          std::move(tenant)};
}

Result<json> ControlPlane::ListAudit(const Principal& p, uint64_t after, size_t limit) {
  store::AuditQuery q;
  q.after_seq = after;
  q.limit = limit;
  return ListAudit(p, std::move(q));
}

Result<json> ControlPlane::ListAudit(const Principal& p, store::AuditQuery q) {
  if (p.role == Role::kTenantAdmin) {
    q.tenant = p.tenant;  // a tenant admin reads its tenant's records, whatever it asked for
  } else if (p.role != Role::kAdmin) {
    return Forbidden("only admins and tenant admins may read the audit log");
  }
  const size_t limit = q.limit;
  // An empty batch is a barrier: every audit record enqueued before it is committed.
  ARBITER_RETURN_IF_ERROR(store_->Write(store::WriteBatch()));
  q.limit = limit + 1;
  auto records = store_->QueryAudit(q);
  if (!records.ok()) return records.status();
  json items = json::array();
  for (const store::AuditRecord& r : *records) {
    if (items.size() == limit) break;
    items.push_back(AuditRecordJson(r));
  }
  json out = {{"items", items}};
  out["next_after"] =
      records->size() > limit && !items.empty() ? json(items.back()["seq"]) : json(nullptr);
  return out;
}

// --- Tenants, queues, users, tokens, classes, nodes ----------------------------------------------

namespace {

// A quota vector in API units: GPUs and CPUs as (decimal) counts, memory in MiB; unlimited omitted.
json QuotaJson(const core::QuotaTree& tree, const core::QuotaVec& v, bool skip_unlimited) {
  json out = json::object();
  for (int d = 0; d < tree.num_dims(); ++d) {
    if (skip_unlimited && v[d] >= core::kUnlimited) continue;
    if (d == core::kDimMemory) {
      out["memory_mib"] = v[d];
    } else if (d == core::kDimTasks) {
      out["tasks"] = v[d];
    } else {
      out[tree.DimName(d)] = static_cast<double>(v[d]) / 1000.0;
    }
  }
  return out;
}

}  // namespace

Result<json> ControlPlane::ListTenants(const Principal& p) {
  if (p.role == Role::kNode) return Forbidden("nodes may not list tenants");
  std::lock_guard<std::mutex> lock(mu_);
  json items = json::array();
  for (const api::TenantConfig& t : config_.tenants) {
    if (!CanReadTenantLocked(p, t.name)) continue;
    json item = {{"name", t.name}};
    const RunAs r = RunAsLocked(t.name, "");
    item["run_as"] = r.user.empty() ? json{{"uid", r.uid}, {"gid", r.gid}} : json{{"user", r.user}};
    item["allow_root"] = t.allow_root;
    json queues = json::array();
    for (const QueueSpec& q : t.queues) {
      if (!q.is_tenant) queues.push_back(q.name);
    }
    item["queues"] = queues;
    item["default_queue"] = t.default_queue.empty() ? json(nullptr) : json(t.default_queue);
    if (t.budget) {
      item["budget"] = {{"gpu_hours", t.budget->gpu_hours},
                        {"period", t.budget->period},
                        {"on_exhausted", t.budget->on_exhausted}};
    }
    items.push_back(item);
  }
  return json{{"items", items}};
}

json ControlPlane::QueueJsonLocked(size_t index) const {
  const core::QuotaTree& tree = compiled_->tree;
  const core::QuotaNode& n = tree.nodes()[index];
  core::QuotaState usage(tree, compiled_->cluster.capacity());
  size_t pending = 0;
  size_t running = 0;
  for (const auto& [id, entry] : jobs_.active) {
    const JobEntry& j = *entry;
    if (!j.holds_capacity() && j.state != JobState::kPending) continue;
    QueueId q;
    if (!tree.Find(j.spec.queue, &q)) continue;
    bool below = false;
    for (QueueId a = q;; a = tree.node(a).parent) {
      if (a.value() == index) below = true;
      if (a == core::QuotaTree::kRoot) break;
    }
    if (j.holds_capacity()) {
      const GpuModelId m = compiled_->cluster.FindModel(j.gpu_model);
      usage.Add(q, j.HeldQuota(m));
      running += below ? 1 : 0;
    } else if (j.state == JobState::kPending && below) {
      ++pending;
    }
  }
  const QueueId id(static_cast<uint32_t>(index));
  core::QuotaVec borrowed;
  for (int d = 0; d < tree.num_dims(); ++d) borrowed[d] = usage.Borrowed(id, d);
  json out = {{"name", n.name},
              {"tenant", tree.node(n.tenant).name},
              {"parent", n.parent == core::QuotaTree::kRoot ? "" : tree.node(n.parent).name},
              {"is_tenant", n.is_tenant},
              {"weight", n.weight},
              {"guaranteed", QuotaJson(tree, n.guaranteed, true)},
              {"max", QuotaJson(tree, n.max, true)},
              {"lending_limit", QuotaJson(tree, n.lending_limit, true)},
              {"usage", QuotaJson(tree, usage.usage(id), false)},
              {"borrowed", QuotaJson(tree, borrowed, false)},
              {"pending", pending},
              {"running", running},
              {"default_walltime_seconds", n.default_walltime_seconds}};
  // Its tenant's default_queue: where the tenant's submissions that name no queue go.
  auto d = compiled_->default_queue.find(tree.node(n.tenant).name);
  out["default"] = d != compiled_->default_queue.end() && d->second == n.name;
  return out;
}

Result<json> ControlPlane::ListQueues(const Principal& p) {
  if (p.role == Role::kNode) return Forbidden("nodes may not read queues");
  std::lock_guard<std::mutex> lock(mu_);
  if (dirty_) ARBITER_RETURN_IF_ERROR(CompileLocked());
  json items = json::array();
  const core::QuotaTree& tree = compiled_->tree;
  for (size_t i = 1; i < tree.size(); ++i) {
    const core::QuotaNode& n = tree.nodes()[i];
    if (n.is_tenant || !CanReadTenantLocked(p, tree.node(n.tenant).name)) continue;
    items.push_back(QueueJsonLocked(i));
  }
  return json{{"items", items}};
}

Result<json> ControlPlane::GetQueue(const Principal& p, const std::string& name) {
  if (p.role == Role::kNode) return Forbidden("nodes may not read queues");
  std::lock_guard<std::mutex> lock(mu_);
  if (dirty_) ARBITER_RETURN_IF_ERROR(CompileLocked());
  QueueId q;
  const core::QuotaTree& tree = compiled_->tree;
  if (!tree.Find(name, &q) || tree.node(q).is_tenant ||
      !CanReadTenantLocked(p, tree.node(tree.node(q).tenant).name)) {
    return NotFoundError(fmt::format("queue {} not found", name));
  }
  return QueueJsonLocked(q.value());
}

Result<json> ControlPlane::ListUsers(const Principal& p) {
  if (p.role == Role::kNode) return Forbidden("nodes may not list users");
  std::lock_guard<std::mutex> lock(mu_);
  json items = json::array();
  for (const api::UserConfig& u : config_.users) {
    if (!CanReadTenantLocked(p, u.tenant)) continue;
    items.push_back({{"name", u.name}, {"tenant", u.tenant}, {"role", u.role}});
  }
  return json{{"items", items}};
}

Result<json> ControlPlane::CreateUser(const Principal& p, const api::UserConfig& u) {
  if (p.role != Role::kAdmin && !(p.role == Role::kTenantAdmin && p.tenant == u.tenant)) {
    return Forbidden("only admins, or tenant admins of the user's tenant, may create users");
  }
  if (!IsValidName(u.name)) {
    return InvalidArgument("name", fmt::format("'{}' is not a valid user name", u.name));
  }
  if (api::IsReservedUserName(u.name)) {
    return InvalidArgument("name",
                           fmt::format("'{}' is reserved for the server's own identities", u.name));
  }
  const auto role = ParseRole(u.role);
  if (!role || *role == Role::kNode || (*role == Role::kAdmin && p.role != Role::kAdmin)) {
    return InvalidArgument("role", fmt::format("role '{}' is not allowed here; use tenant-admin, "
                                               "member or viewer",
                                               u.role));
  }
  std::shared_future<Status> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    bool tenant_found = false;
    for (const api::TenantConfig& t : config_.tenants) tenant_found |= t.name == u.tenant;
    if (!tenant_found && *role != Role::kAdmin) {
      return InvalidArgument("tenant", fmt::format("tenant {} not found", u.tenant));
    }
    if (FindUserLocked(u.name) != nullptr) {
      return Status(StatusCode::kAlreadyExists, fmt::format("user {} already exists", u.name));
    }
    config_.users.push_back(u);
    RefreshUserIndexLocked();
    store::WriteBatch b;
    ARBITER_RETURN_IF_ERROR(PersistConfigLocked(&b, nullptr));
    b.PutUser({u.name, u.tenant, u.role, now_()});
    b.AppendAudit(AuditRecordOf(
        p, "user.create", "user/" + u.name, u.tenant,
        json{{"after", {{"name", u.name}, {"tenant", u.tenant}, {"role", u.role}}}}.dump()));
    done = store_->WriteAsync(std::move(b));
  }
  ARBITER_RETURN_IF_ERROR(done.get());
  return json{{"name", u.name}, {"tenant", u.tenant}, {"role", u.role}};
}

Result<json> ControlPlane::CreateToken(const Principal& p, const TokenRequest& req) {
  const std::string& user = req.user;
  const std::optional<Role>& role = req.role;
  if (p.role == Role::kViewer || p.role == Role::kNode) {
    return Forbidden(fmt::format("{}s may not create tokens", RoleName(p.role)));
  }
  NewToken t = GenerateToken();
  std::shared_future<Status> done;
  store::TokenRecord rec;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const api::UserConfig* u = FindUserLocked(user);
    const bool self = user == p.user;
    // A person the identity provider vouches for (docs/identity.md) is no configured user: a
    // token of theirs would outlive what the provider says of them. Tokens are for configured
    // users (service accounts) and nodes.
    if (u == nullptr && self && p.token_id.rfind("oidc:", 0) == 0) {
      return Forbidden(fmt::format(
          "{} signs in through the identity provider (arbiter login --oidc) and has no Arbiter "
          "tokens; tokens are for configured users (service accounts) and nodes",
          user));
    }
    // Someone signed in through a directory is no configured user: a token made for it here would
    // follow no one (and answer 401 at once). Its tokens come from signing in.
    if (u == nullptr && self && p.user != "admin") {
      return Status(StatusCode::kFailedPrecondition,
                    fmt::format("{} signed in through an identity provider or directory and is "
                                "not a configured user: sign in again for another token",
                                user),
                    "user");
    }
    if (u == nullptr && !(self && p.role == Role::kAdmin)) {
      return NotFoundError(fmt::format("user {} not found", user));
    }
    // Another tenant's users do not exist for the caller (the same answer as for unknown ones).
    if (u != nullptr && p.role != Role::kAdmin && u->tenant != p.tenant) {
      Audit(p, "token.create", "user/" + user, "denied: another tenant's user");
      return NotFoundError(fmt::format("user {} not found", user));
    }
    const std::string tenant = u != nullptr ? u->tenant : "";
    Role user_role = u != nullptr ? ParseRole(u->role).value_or(Role::kViewer) : Role::kAdmin;
    const bool allowed =
        p.role == Role::kAdmin || self ||
        (p.role == Role::kTenantAdmin && p.tenant == tenant && user_role != Role::kAdmin);
    if (!allowed) return Forbidden(fmt::format("{} may not create tokens for {}", p.user, user));
    if (role) {
      // Node tokens (agents) are made by admins only; other tokens never exceed the user's role.
      if (*role == Role::kNode && p.role != Role::kAdmin) {
        return Forbidden("only admins may create node tokens");
      }
      if (*role != Role::kNode && static_cast<int>(*role) < static_cast<int>(user_role)) {
        return InvalidArgument(
            "role", fmt::format("a token cannot exceed its user's role ({})", RoleName(user_role)));
      }
      user_role = *role;
    }
    if (user_role == Role::kNode) {
      if (req.node.empty()) {
        return InvalidArgument("node",
                               "a node token is good for one node only: name it (arbiter token "
                               "create --role node --node NAME, the agent's --name)");
      }
      if (!IsValidHostName(req.node)) {
        return InvalidArgument("node", fmt::format("'{}' is not a valid node name", req.node));
      }
      if (req.node == nodes_.builtin) {
        return InvalidArgument("node", fmt::format("{} is the server's built-in node "
                                                   "(--local-node); no agent may register it",
                                                   req.node));
      }
    } else if (!req.node.empty()) {
      return InvalidArgument("node", "only node tokens (role node) name a node");
    }
    if (user_role == Role::kNode && req.read_only) {
      return InvalidArgument("scope",
                             "node tokens speak for an agent, which must write: they "
                             "cannot be read-only");
    }
    // Nor the caller's own: a tenant admin's member token cannot mint tenant-admin tokens.
    if (p.role != Role::kAdmin && static_cast<int>(user_role) < static_cast<int>(p.role)) {
      return Forbidden(fmt::format("a {} token cannot create a {} token; ask for role {} or lower",
                                   RoleName(p.role), RoleName(user_role), RoleName(p.role)));
    }
    rec.id = t.id;
    rec.hash_hex = t.hash_hex;
    rec.user = user;
    rec.tenant = tenant;
    rec.role = std::string(RoleName(user_role));
    rec.kind = user_role == Role::kNode ? "node" : "user";
    rec.node = req.node;
    rec.scope = req.read_only ? "read-only" : "full";
    rec.created_at_ms = now_();
    if (req.expires_in_ms > 0) rec.expires_at_ms = rec.created_at_ms + req.expires_in_ms;
    tokens_.Put(rec);
    store::WriteBatch b;
    b.PutToken(rec);
    json after = {{"id", rec.id},     {"user", rec.user},   {"tenant", rec.tenant},
                  {"role", rec.role}, {"scope", rec.scope}, {"kind", rec.kind}};
    if (!rec.node.empty()) after["node"] = rec.node;
    after["expires_at"] = rec.expires_at_ms > 0 ? json(Iso8601(rec.expires_at_ms)) : json(nullptr);
    b.AppendAudit(
        AuditRecordOf(p, "token.create", "user/" + user, tenant, json{{"after", after}}.dump()));
    done = store_->WriteAsync(std::move(b));
  }
  ARBITER_RETURN_IF_ERROR(done.get());
  json out = {{"token", t.token}, {"id", rec.id},         {"user", rec.user},
              {"role", rec.role}, {"tenant", rec.tenant}, {"scope", rec.scope}};
  if (!rec.node.empty()) out["node"] = rec.node;
  if (rec.expires_at_ms > 0) out["expires_at"] = Iso8601(rec.expires_at_ms);
  return out;
}

namespace {

// `tenant`: the token's tenant now (TokenRegistry::Entry).
json TokenToJson(const store::TokenRecord& r, const std::string& tenant, TimeMs now) {
  json j = {{"id", r.id},
            {"user", r.user},
            {"tenant", tenant},
            {"role", r.role},
            {"scope", r.scope},
            {"node", r.node.empty() ? json(nullptr) : json(r.node)},
            {"created_at", Iso8601(r.created_at_ms)},
            {"expires_at", r.expires_at_ms > 0 ? json(Iso8601(r.expires_at_ms)) : json(nullptr)},
            {"state", r.revoked                                      ? "revoked"
                      : r.expires_at_ms > 0 && r.expires_at_ms < now ? "expired"
                                                                     : "active"}};
  return j;
}

// Whether `p` may see (and revoke) the token `r`, whose tenant is now `tenant`.
bool MaySeeToken(const Principal& p, const store::TokenRecord& r, const std::string& tenant) {
  if (p.role == Role::kAdmin) return true;
  if (p.role == Role::kTenantAdmin) return r.kind != "node" && tenant == p.tenant;
  return p.role != Role::kNode && r.user == p.user && tenant == p.tenant;
}

}  // namespace

Result<json> ControlPlane::ListTokens(const Principal& p) {
  if (p.role == Role::kNode) return Forbidden("nodes may not list tokens");
  const TimeMs now = now_();
  json items = json::array();
  for (const TokenRegistry::Entry& e : tokens_.List(
           [&](const TokenRegistry::Entry& t) { return MaySeeToken(p, t.record, t.tenant); })) {
    items.push_back(TokenToJson(e.record, e.tenant, now));
  }
  return json{{"items", items}};
}

Result<json> ControlPlane::RevokeToken(const Principal& p, const std::string& id) {
  if (p.role == Role::kNode) return Forbidden("nodes may not revoke tokens");
  std::shared_future<Status> done;
  store::TokenRecord rec;
  std::string tenant;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const std::optional<TokenRegistry::Entry> found = tokens_.Find(id);
    // Tokens the caller may not see do not exist for it (the same answer as for unknown ones).
    if (!found || !MaySeeToken(p, found->record, found->tenant)) {
      if (found) Audit(p, "token.revoke", "token/" + id, "denied: not the caller's");
      return NotFoundError(fmt::format("token {} not found", id));
    }
    tenant = found->tenant;
    rec = tokens_.Revoke(id).value_or(found->record);
    store::WriteBatch b;
    b.PutToken(rec);
    const TimeMs now = now_();
    const char* before = found->record.revoked ? "revoked"
                         : found->record.expires_at_ms > 0 && found->record.expires_at_ms < now
                             ? "expired"
                             : "active";
    b.AppendAudit(AuditRecordOf(
        p, "token.revoke", "token/" + id, tenant,
        json{{"user", rec.user}, {"before", {{"state", before}}}, {"after", {{"state", "revoked"}}}}
            .dump()));
    done = store_->WriteAsync(std::move(b));
  }
  ARBITER_RETURN_IF_ERROR(done.get());
  return TokenToJson(rec, tenant, now_());
}

Result<json> ControlPlane::ListPriorityClasses(const Principal& p) {
  if (p.role == Role::kNode) return Forbidden("nodes may not list priority classes");
  std::lock_guard<std::mutex> lock(mu_);
  json items = json::array();
  for (const PriorityClass& pc : config_.priority_classes) {
    items.push_back({{"name", pc.name},
                     {"value", pc.value},
                     {"preemptible", pc.preemptible},
                     {"min_runtime_seconds", pc.min_runtime_seconds},
                     {"grace_period_seconds", pc.grace_period_seconds},
                     {"preempts_anywhere", pc.preempts_anywhere},
                     {"allowed_tenants", pc.allowed_tenants},
                     {"allowed_queues", pc.allowed_queues}});
  }
  return json{{"items", items}};
}

json ControlPlane::NodeListJsonLocked(const NodeEntry& e,
                                      const std::map<std::string, NodeAllocation>& used) const {
  json n = NodeToJson(e.node);
  n["source"] = e.from_config ? "config" : "agent";
  n["last_heartbeat"] = TimeJson(e.last_heartbeat);
  if (!e.status.is_null()) n["status"] = e.status;
  auto it = used.find(e.node.name);
  const NodeAllocation a = it == used.end() ? NodeAllocation{} : it->second;
  n["allocated"] = {{"gpus", static_cast<double>(a.gpu_milli) / 1000.0},
                    {"cpu_milli", a.cpu_milli},
                    {"memory_mib", a.memory_mib},
                    {"jobs", a.jobs}};
  if (e.node.state != NodeState::kReady) {
    n["state_reason"] = e.state_reason;
    n["state_changed_by"] = e.state_by;
    n["state_changed_at"] = TimeJson(e.state_since);
  }
  return n;
}

std::map<std::string, ControlPlane::NodeAllocation> ControlPlane::NodeAllocationsLocked() const {
  std::map<std::string, NodeAllocation> used;
  for (const auto& [id, entry] : jobs_.active) {
    const JobEntry& j = *entry;
    if (!j.holds_capacity()) continue;
    std::set<std::string> nodes;
    for (const PlacedTask& t : j.placement) {
      NodeAllocation& a = used[t.node];
      for (int32_t m : t.gpu_milli) a.gpu_milli += m;
      a.cpu_milli += t.cpu_milli;
      a.memory_mib += t.memory_mib;
      if (nodes.insert(t.node).second) ++a.jobs;
    }
  }
  return used;
}

Result<json> ControlPlane::ListNodes(const Principal& p) {
  if (p.role == Role::kNode) return Forbidden("nodes may not list nodes");
  std::lock_guard<std::mutex> lock(mu_);
  const auto used = NodeAllocationsLocked();
  json items = json::array();
  for (const auto& [name, e] : nodes_.all) items.push_back(NodeListJsonLocked(e, used));
  return json{{"items", items}};
}

Result<json> ControlPlane::GetNode(const Principal& p, const std::string& name) {
  if (p.role == Role::kNode) return Forbidden("nodes may not read nodes");
  std::lock_guard<std::mutex> lock(mu_);
  auto it = nodes_.all.find(name);
  if (it == nodes_.all.end()) return NotFoundError(fmt::format("node {} not found", name));
  json n = NodeListJsonLocked(it->second, NodeAllocationsLocked());
  json jobs = json::array();
  for (const auto& [id, entry] : jobs_.active) {
    const JobEntry& j = *entry;
    if (!HoldsResources(j.state)) continue;
    for (const PlacedTask& t : j.placement) {
      if (t.node == name && CanReadTenantLocked(p, j.spec.tenant)) jobs.push_back(id);
    }
  }
  n["jobs"] = jobs;
  return n;
}

Result<json> ControlPlane::NodeAction(const Principal& p, const std::string& name,
                                      std::string_view action, const std::string& reason) {
  if (p.role != Role::kAdmin) return Forbidden("only admins may cordon, drain or uncordon nodes");
  std::shared_future<Status> done;
  json out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = nodes_.all.find(name);
    if (it == nodes_.all.end()) return NotFoundError(fmt::format("node {} not found", name));
    NodeState to;
    if (action == "cordon") {
      to = NodeState::kCordoned;
    } else if (action == "drain") {
      to = NodeState::kDraining;
    } else if (action == "uncordon") {
      to = NodeState::kReady;
    } else {
      return NotFoundError(fmt::format("unknown node action '{}'", action));
    }
    if (it->second.node.state == NodeState::kDown && to == NodeState::kReady) {
      return Status(StatusCode::kConflict,
                    fmt::format("node {} is down; it becomes ready when its agent reports", name));
    }
    const NodeState from = it->second.node.state;
    it->second.node.state = to;
    it->second.state_reason = to == NodeState::kReady ? "" : reason;
    it->second.state_by = to == NodeState::kReady ? "" : p.user;
    it->second.state_since = now_();
    dirty_ = true;
    store::WriteBatch b;
    b.PutNode({name, NodeToJson(it->second.node).dump(), std::string(NodeStateName(to)), now_()});
    b.AppendAudit(AuditRecordOf(
        p, fmt::format("node.{}", action), "node/" + name, "",
        json{{"before", {{"state", NodeStateName(from)}}},
             {"after", {{"state", NodeStateName(to)}, {"reason", it->second.state_reason}}}}
            .dump()));
    PushEventLocked("node", {{"name", name}, {"state", NodeStateName(to)}});
    out = NodeToJson(it->second.node);
    done = store_->WriteAsync(std::move(b));
  }
  ARBITER_RETURN_IF_ERROR(done.get());
  return out;
}

}  // namespace arbiter::server
