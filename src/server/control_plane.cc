#include "server/control_plane.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <set>

#include "api/agent_codec.h"
#include "api/job_codec.h"
#include "api/json_writer.h"
#include "core/budget/budget.h"
#include "server/admissibility.h"
#include "server/control_plane_compiled.h"
#include "server/reports.h"

namespace arbiter::server {

using nlohmann::json;

namespace {

constexpr size_t kMaxEvents = 10000;  // kept in memory for the SSE stream
constexpr const char* kConfigKey = "config.yaml";

Status Forbidden(std::string msg) { return {StatusCode::kPermissionDenied, std::move(msg)}; }
Status NotFoundError(std::string msg) { return {StatusCode::kNotFound, std::move(msg)}; }

json NodeToJson(const Node& n) {
  json gpus = json::array();
  for (const Gpu& g : n.gpus) {
    gpus.push_back({{"index", g.index},
                    {"model", g.model},
                    {"memory_mib", g.memory_mib},
                    {"healthy", g.healthy},
                    {"nvlink_domain", g.nvlink_domain}});
  }
  json taints = json::array();
  for (const Taint& t : n.taints) taints.push_back({{"key", t.key}, {"value", t.value}});
  return {{"name", n.name},
          {"labels", n.labels},
          {"taints", taints},
          {"cpu_milli", n.cpu_milli},
          {"memory_mib", n.memory_mib},
          {"state", std::string(NodeStateName(n.state))},
          {"rack", n.rack},
          {"block", n.block},
          {"gpus", gpus}};
}

Result<Node> NodeFromJson(const std::string& text) {
  try {
    const json j = json::parse(text);
    Node n;
    n.name = j.at("name").get<std::string>();
    n.labels = j.value("labels", std::map<std::string, std::string>{});
    for (const json& t : j.value("taints", json::array())) {
      n.taints.push_back({t.at("key").get<std::string>(), t.value("value", "")});
    }
    n.cpu_milli = j.at("cpu_milli").get<int64_t>();
    n.memory_mib = j.at("memory_mib").get<int64_t>();
    if (!ParseNodeState(j.value("state", "ready"), &n.state)) n.state = NodeState::kReady;
    n.rack = j.value("rack", "");
    n.block = j.value("block", "");
    for (const json& g : j.value("gpus", json::array())) {
      n.gpus.push_back({g.at("index").get<int32_t>(), g.at("model").get<std::string>(),
                        g.value("memory_mib", int64_t{0}), g.value("healthy", true),
                        g.value("nvlink_domain", 0)});
    }
    return n;
  } catch (const std::exception& e) {
    return Status(StatusCode::kInternal, fmt::format("stored node is unreadable: {}", e.what()));
  }
}

std::string Iso8601(TimeMs ms) {
  if (ms <= 0) return "";
  const std::time_t s = ms / 1000;
  std::tm tm{};
  gmtime_r(&s, &tm);
  return fmt::format("{:04d}-{:02d}-{:02d}T{:02d}:{:02d}:{:02d}.{:03d}Z", tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms % 1000);
}

json TimeJson(TimeMs ms) { return ms > 0 ? json(Iso8601(ms)) : json(nullptr); }

}  // namespace

ControlPlane::ControlPlane(store::Store* store, NowFn now) : store_(store), now_(std::move(now)) {}

json ControlPlane::NodeJson(const Node& n) { return NodeToJson(n); }

bool ControlPlane::ready() const {
  std::lock_guard<std::mutex> lock(mu_);
  return loaded_;
}

ControlPlane::Stats ControlPlane::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

// --- Loading and compiling -------------------------------------------------------------------

Status ControlPlane::Load() {
  auto state = store_->Load();
  if (!state.ok()) return state.status();
  std::lock_guard<std::mutex> lock(mu_);
  for (const store::KvRecord& kv : state->kv) {
    if (kv.key == "tenant_uids") LoadTenantUidsLocked(kv.value);
    if (kv.key != kConfigKey) continue;
    auto c = api::ParseConfigYaml(kv.value);
    if (!c.ok()) return Internal("stored configuration is unreadable: " + c.status().ToString());
    config_ = std::move(c).value();
  }
  for (const Node& n : config_.nodes) nodes_[n.name] = NodeEntry{n, true, 0};
  for (const store::NodeRecord& r : state->nodes) {
    auto n = NodeFromJson(r.spec_json);
    if (!n.ok()) return n.status();
    if (ParseNodeState(r.state, &n->state)) {
      // The stored state (cordoned, draining) wins over the spec's.
    }
    auto it = nodes_.find(n->name);
    if (it != nodes_.end()) {
      it->second.node.state = n->state;
    } else {
      const std::string name = n->name;  // read before the move below (evaluated first)
      nodes_[name] = NodeEntry{std::move(n).value(), false, r.updated_at_ms};
    }
  }
  {
    std::unique_lock<std::shared_mutex> tokens(tokens_mu_);
    for (const store::TokenRecord& t : state->tokens) tokens_[t.id] = t;
  }
  for (const store::JobRecord& r : state->jobs) {
    auto spec = api::ParseJobSubmission(r.spec_json);
    if (!spec.ok()) {
      return Internal(
          fmt::format("stored job {} is unreadable: {}", r.id, spec.status().ToString()));
    }
    JobEntry j;
    j.spec = std::move(spec).value();
    if (Status st = api::ParseSecretEnv(r.secret_env_json, &j.spec); !st.ok()) {
      return Internal(
          fmt::format("stored job {} has unreadable secret_env: {}", r.id, st.ToString()));
    }
    j.request_digest = r.request_digest;
    j.spec_json = std::make_shared<const std::string>(r.spec_json);
    j.spec.id = JobId(r.id);
    j.spec.tenant = r.tenant;
    j.spec.user = r.user;
    j.spec.submit_time = r.submitted_at_ms;
    j.idempotency_key = r.idempotency_key;
    try {
      const json s = json::parse(r.status_json.empty() ? "{}" : r.status_json);
      j.state = ParseJobState(s.value("state", r.state)).value_or(JobState::kPending);
      j.reason = s.value("reason", "");
      j.updated_at = s.value("updated_at", r.updated_at_ms);
      j.started_at = s.value("started_at", TimeMs{0});
      j.finished_at = s.value("finished_at", TimeMs{0});
      if (s.contains("exit_code") && !s["exit_code"].is_null()) {
        j.exit_code = s["exit_code"].get<int32_t>();
      }
      j.restarts = s.value("restarts", 0);
      j.preemptions = s.value("preemptions", 0);
      j.not_before = s.value("not_before", TimeMs{0});
      j.gpu_model = s.value("gpu_model", "");
      j.preempted_queues = s.value("preempted_queues", std::vector<std::string>{});
      j.stopping = s.value("stopping", false);
      j.stop_cause = s.value("stop_cause", "");
      j.task_state = s.value("task_state", std::vector<int32_t>{});
      j.task_exit = s.value("task_exit", std::vector<int32_t>{});
      j.attempt = s.value("attempt", uint64_t{0});
      j.held_since = s.value("held_since", TimeMs{0});
      j.task_nodes = s.value("task_nodes", std::vector<std::string>{});
      for (const json& t : s.value("placement", json::array())) {
        PlacedTask p;
        p.node = t.at("node").get<std::string>();
        p.gpu_indices = t.value("gpu_indices", std::vector<int32_t>{});
        p.gpu_milli = t.value("gpu_milli", std::vector<int32_t>{});
        p.gpu_memory_mib = t.value("gpu_memory_mib", std::vector<int64_t>{});
        p.cpu_milli = t.value("cpu_milli", int64_t{0});
        p.memory_mib = t.value("memory_mib", int64_t{0});
        j.placement.push_back(std::move(p));
      }
    } catch (const std::exception& e) {
      return Internal(fmt::format("stored job {} has an unreadable status: {}", r.id, e.what()));
    }
    if (!j.idempotency_key.empty()) {
      idempotency_[j.spec.tenant + "/" + j.spec.user + "/" + j.idempotency_key] = r.id;
    }
    JobEntry& entry = jobs_.emplace(r.id, std::move(j)).first->second;
    if (!IsFinal(entry.state) || entry.stopping) active_.emplace(r.id, &entry);
    if (entry.holds_capacity() && !entry.placement.empty()) placed_.emplace(r.id, &entry);
  }
  next_job_id_ = state->max_job_id + 1;
  ARBITER_RETURN_IF_ERROR(CompileLocked());
  store::WriteBatch uids;
  AllocateTenantUidsLocked(&uids);  // tenants configured before tenants had their own uids
  if (!uids.empty()) ARBITER_RETURN_IF_ERROR(store_->Write(std::move(uids)));
  RefreshUserIndexLocked();
  loaded_ = true;
  return Status::Ok();
}

Status ControlPlane::CompileLocked() {
  auto c = std::make_shared<Compiled>();
  std::vector<Node> nodes;
  nodes.reserve(nodes_.size());
  for (const auto& [name, e] : nodes_) {
    nodes.push_back(e.node);
    auto reported = reported_resources_.find(name);
    if (e.from_config && reported != reported_resources_.end()) {
      Node& n = nodes.back();
      if (n.cpu_milli == 0) n.cpu_milli = reported->second.first;
      if (n.memory_mib == 0) n.memory_mib = reported->second.second;
    }
  }
  auto cluster = core::Cluster::Build(config_.gpu_models, nodes);
  if (!cluster.ok()) return cluster.status();
  c->cluster = std::move(cluster).value();
  std::vector<QueueSpec> specs;
  for (const api::TenantConfig& t : config_.tenants) {
    for (const QueueSpec& q : t.queues) {
      specs.push_back(q);
      QuotaLimits& tasks = specs.back().quota["tasks"];
      if (q.is_tenant && !tasks.max && task_limits_.tenant_max_tasks > 0) {
        tasks.max = task_limits_.tenant_max_tasks;
      }
      if (!tasks.max && !tasks.guaranteed && !tasks.lending_limit)
        specs.back().quota.erase("tasks");
    }
  }
  auto tree = core::QuotaTree::Build(specs, config_.gpu_models);
  if (!tree.ok()) return tree.status();
  c->tree = std::move(tree).value();
  // The placement profile: a named policy, or a custom one; validated here, errors name the
  // configuration field.
  const api::SchedulerConfig& sc = config_.scheduler;
  core::ProfileSpec spec;
  if (!sc.scores.empty()) {
    spec.name = "custom";
    for (const api::ScoreWeightConfig& w : sc.scores) spec.scores.push_back({w.plugin, w.weight});
  } else {
    auto named = core::Profile::Named(sc.policy.empty() ? "default" : sc.policy);
    if (!named.ok()) return InvalidArgument("scheduler.policy", named.status().message());
    spec = *named;
  }
  if (!sc.filters.empty()) spec.filters = sc.filters;
  if (!sc.gpu_selector.empty()) spec.gpu_selector = sc.gpu_selector;
  if (sc.nodes_to_score > 0) spec.nodes_to_score = static_cast<int32_t>(sc.nodes_to_score);
  auto profile = core::Profile::Build(spec);
  if (!profile.ok()) {
    return InvalidArgument("scheduler." + profile.status().field(), profile.status().message());
  }
  c->profile = std::make_unique<core::Profile>(std::move(profile).value());
  for (const PriorityClass& pc : config_.priority_classes) c->classes[pc.name] = pc;
  c->generation = ++compile_generation_;
  compiled_ = std::move(c);
  dirty_ = false;
  return Status::Ok();
}

Status ControlPlane::PersistConfigLocked(store::WriteBatch* b,
                                         const api::ClusterConfig* previous) const {
  // The canonical YAML is what the server loads back; the tables hold the same objects one a row
  // for queries and audits.
  b->PutKv({kConfigKey, api::DumpConfigYaml(config_)});
  std::set<std::string> tenants, queues, classes, models;
  for (const api::TenantConfig& t : config_.tenants) {
    json spec = json::object();
    if (t.budget) {
      spec["budget"] = {{"gpu_hours", t.budget->gpu_hours},
                        {"period", t.budget->period},
                        {"on_exhausted", t.budget->on_exhausted}};
    }
    b->PutTenant({t.name, spec.dump(), now_()});
    tenants.insert(t.name);
    for (const QueueSpec& q : t.queues) {
      if (q.is_tenant) continue;
      json quota = json::object();
      for (const auto& [key, lim] : q.quota) {
        json l = json::object();
        if (lim.guaranteed) l["guaranteed"] = *lim.guaranteed;
        if (lim.max) l["max"] = *lim.max;
        if (lim.lending_limit) l["lending_limit"] = *lim.lending_limit;
        quota[key] = l;
      }
      b->PutQueue({q.name, t.name, q.parent,
                   json{{"quota", quota},
                        {"weight_milli", q.weight_milli},
                        {"default_walltime_seconds", q.default_walltime_seconds},
                        {"allowed_types", q.allowed_types}}
                       .dump()});
      queues.insert(q.name);
    }
  }
  for (const PriorityClass& pc : config_.priority_classes) {
    b->PutPriorityClass({pc.name, json{{"value", pc.value},
                                       {"preemptible", pc.preemptible},
                                       {"min_runtime_seconds", pc.min_runtime_seconds},
                                       {"grace_period_seconds", pc.grace_period_seconds},
                                       {"preempts_anywhere", pc.preempts_anywhere},
                                       {"allowed_tenants", pc.allowed_tenants},
                                       {"allowed_queues", pc.allowed_queues}}
                                      .dump()});
    classes.insert(pc.name);
  }
  for (const GpuModel& m : config_.gpu_models) {
    b->PutGpuModel({m.name, json{{"memory_mib", m.memory_mib},
                                 {"price_milli_per_hour", m.price_milli_per_hour}}
                                .dump()});
    models.insert(m.name);
  }
  if (previous != nullptr) {
    for (const api::TenantConfig& t : previous->tenants) {
      if (!tenants.count(t.name)) b->DeleteTenant(t.name);
      for (const QueueSpec& q : t.queues) {
        if (!q.is_tenant && !queues.count(q.name)) b->DeleteQueue(q.name);
      }
    }
    for (const PriorityClass& pc : previous->priority_classes) {
      if (!classes.count(pc.name)) b->DeletePriorityClass(pc.name);
    }
    for (const GpuModel& m : previous->gpu_models) {
      if (!models.count(m.name)) b->DeleteGpuModel(m.name);
    }
    for (const api::UserConfig& u : previous->users) {
      bool kept = false;
      for (const api::UserConfig& n : config_.users) kept |= n.name == u.name;
      if (!kept) b->DeleteUser(u.name);
    }
  }
  return Status::Ok();
}

bool ControlPlane::HasConfiguration() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !config_.gpu_models.empty() || !config_.priority_classes.empty() ||
         !config_.tenants.empty() || !config_.users.empty() || !config_.nodes.empty();
}

std::string ControlPlane::ConfigYaml() const {
  std::lock_guard<std::mutex> lock(mu_);
  return api::DumpConfigYaml(config_);
}

std::string ControlPlane::FirstGpuModel() const {
  std::lock_guard<std::mutex> lock(mu_);
  return config_.gpu_models.empty() ? "" : config_.gpu_models.front().name;
}

Result<std::string> ControlPlane::BootstrapAdmin() {
  store::WriteBatch b;
  NewToken t = GenerateToken();
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::unique_lock<std::shared_mutex> tokens(tokens_mu_);
    for (const auto& [id, rec] : tokens_) {
      if (rec.role == "admin" && !rec.revoked) return std::string();
    }
    store::TokenRecord rec;
    rec.id = t.id;
    rec.hash_hex = t.hash_hex;
    rec.user = "admin";
    rec.role = "admin";
    rec.kind = "user";
    rec.created_at_ms = now_();
    tokens_[rec.id] = rec;
    b.PutToken(rec);
  }
  ARBITER_RETURN_IF_ERROR(store_->Write(std::move(b)));
  return t.token;
}

// --- Authentication and access --------------------------------------------------------------

Result<Principal> ControlPlane::Authenticate(std::string_view bearer) {
  std::string id;
  std::string secret;
  if (!ParseToken(bearer, &id, &secret)) {
    return Status(StatusCode::kUnauthenticated, "missing or malformed bearer token");
  }
  const std::string hash = HashSecret(secret);
  std::shared_lock<std::shared_mutex> lock(tokens_mu_);
  auto it = tokens_.find(id);
  if (it == tokens_.end() || it->second.revoked || !SecureEquals(it->second.hash_hex, hash) ||
      (it->second.expires_at_ms > 0 && it->second.expires_at_ms < now_())) {
    return Status(StatusCode::kUnauthenticated, "invalid, revoked or expired token");
  }
  Principal p;
  p.user = it->second.user;
  p.tenant = it->second.tenant;
  p.role = ParseRole(it->second.role).value_or(Role::kViewer);
  p.token_id = id;
  p.node = it->second.node;
  if (it->second.kind != "node" && p.user != "admin") {
    // A user's token speaks for the user as the user is now: deleted, it stops working; moved to
    // another tenant or given another role, it follows (never above the role it was made with).
    auto u = user_index_.find(p.user);
    if (u == user_index_.end()) {
      return Status(StatusCode::kUnauthenticated,
                    fmt::format("the user {} of this token no longer exists", p.user));
    }
    p.tenant = u->second.first;
    p.role =
        static_cast<Role>(std::max(static_cast<int>(p.role), static_cast<int>(u->second.second)));
  }
  return p;
}

std::string ControlPlane::TokenTenantLocked(const store::TokenRecord& r) const {
  if (r.kind == "node") return r.tenant;
  auto u = user_index_.find(r.user);
  return u != user_index_.end() ? u->second.first : r.tenant;
}

void ControlPlane::RefreshUserIndexLocked() {
  std::unordered_map<std::string, std::pair<std::string, Role>> index;
  for (const api::UserConfig& u : config_.users) {
    index[u.name] = {u.tenant, ParseRole(u.role).value_or(Role::kViewer)};
  }
  std::unique_lock<std::shared_mutex> tokens(tokens_mu_);
  user_index_ = std::move(index);
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
  b.AppendAudit({0, now_(), p.user.empty() ? "anonymous" : p.user, std::move(action),
                 std::move(target), std::move(result), "{}", p.token_id});
  store_->WriteAsync(std::move(b));  // audit of the call; not waited for
}

Result<json> ControlPlane::ListAudit(const Principal& p, uint64_t after, size_t limit) {
  if (p.role != Role::kAdmin) return Forbidden("only admins may read the audit log");
  // An empty batch is a barrier: every audit record enqueued before it is committed.
  ARBITER_RETURN_IF_ERROR(store_->Write(store::WriteBatch()));
  auto records = store_->Audit(after, limit + 1);
  if (!records.ok()) return records.status();
  json items = json::array();
  for (const store::AuditRecord& r : *records) {
    if (items.size() == limit) break;
    json detail = json::parse(r.detail_json, nullptr, /*allow_exceptions=*/false);
    items.push_back({{"seq", r.seq},
                     {"at", Iso8601(r.at_ms)},
                     {"actor", r.actor},
                     {"action", r.action},
                     {"target", r.target},
                     {"result", r.result},
                     {"token_id", r.token_id.empty() ? json(nullptr) : json(r.token_id)},
                     {"detail", detail.is_discarded() ? json(r.detail_json) : detail}});
  }
  json out = {{"items", items}};
  out["next_after"] =
      records->size() > limit && !items.empty() ? json(items.back()["seq"]) : json(nullptr);
  return out;
}

// --- Configuration ----------------------------------------------------------------------------

std::vector<ControlPlane::AffectedJob> ControlPlane::AffectedJobsLocked(
    const api::ClusterConfig& desired) const {
  std::set<std::string, std::less<>> tenants, queues, classes, nodes;
  for (const api::TenantConfig& t : desired.tenants) {
    tenants.insert(t.name);
    for (const QueueSpec& q : t.queues) {
      if (!q.is_tenant) queues.insert(q.name);
    }
  }
  for (const PriorityClass& pc : desired.priority_classes) classes.insert(pc.name);
  for (const Node& n : desired.nodes) nodes.insert(n.name);
  std::vector<AffectedJob> out;
  for (const auto& [id, entry] : active_) {
    const JobEntry& j = *entry;
    if (IsFinal(j.state)) continue;  // stopping ones hold on until their nodes report them gone
    std::string because;
    if (!tenants.contains(j.spec.tenant)) {
      because = fmt::format("tenant '{}' is deleted", j.spec.tenant);
    } else if (!queues.contains(j.spec.queue) && !tenants.contains(j.spec.queue)) {
      because = fmt::format("queue '{}' is deleted", j.spec.queue);
    } else if (!j.spec.priority_class.empty() && !classes.contains(j.spec.priority_class)) {
      because = fmt::format("priority class '{}' is deleted", j.spec.priority_class);
    } else {
      for (const PlacedTask& t : j.placement) {
        auto nit = nodes_.find(t.node);
        if (nit != nodes_.end() && nit->second.from_config && !nodes.contains(t.node)) {
          because = fmt::format("node '{}' is deleted", t.node);
          break;
        }
      }
    }
    if (because.empty()) continue;
    out.push_back({id, j.spec.tenant, j.spec.queue, j.spec.user, std::string(JobStateName(j.state)),
                   std::move(because)});
  }
  std::sort(out.begin(), out.end(),
            [](const AffectedJob& a, const AffectedJob& b) { return a.id < b.id; });
  return out;
}

Result<ControlPlane::ConfigApplied> ControlPlane::ApplyConfig(const Principal& p,
                                                              const api::ClusterConfig& c,
                                                              bool dry_run, bool prune) {
  if (p.role != Role::kAdmin) return Forbidden("only admins may change the configuration");
  std::shared_future<Status> done;
  // Checked here, not by the parser: a data dir from before the names were reserved still loads.
  for (size_t i = 0; i < c.users.size(); ++i) {
    if (api::IsReservedUserName(c.users[i].name)) {
      return InvalidArgument(
          fmt::format("users[{}].name", i),
          fmt::format("'{}' is reserved for the server's own identities", c.users[i].name));
    }
  }
  ConfigApplied out;
  std::vector<uint64_t> stops;
  {
    std::lock_guard<std::mutex> lock(mu_);
    out.changes = api::DiffConfig(config_, c);
    std::vector<AffectedJob> affected = AffectedJobsLocked(c);
    out.affected_total = affected.size();
    // Validate by compiling the desired state before anything changes.
    api::ClusterConfig old = config_;
    auto old_nodes = nodes_;
    config_ = c;
    for (auto it = nodes_.begin(); it != nodes_.end();) {
      it = it->second.from_config ? nodes_.erase(it) : std::next(it);
    }
    for (const Node& n : config_.nodes) nodes_[n.name] = NodeEntry{n, true, 0};
    Status st = CompileLocked();
    if (st.ok() && !dry_run && !prune && !affected.empty()) {
      std::string ids;
      for (size_t i = 0; i < affected.size() && i < 5; ++i) {
        ids += fmt::format("{}{} ({})", i == 0 ? "" : ", ", affected[i].id, affected[i].because);
      }
      st = Status(
          StatusCode::kConflict,
          fmt::format("the configuration would leave {} live job{} without what {} run{} in: {}{}; "
                      "nothing was changed. Apply with prune=true (arbiter apply --prune) to "
                      "cancel them, or see them all with dry_run=true",
                      affected.size(), affected.size() == 1 ? "" : "s",
                      affected.size() == 1 ? "it" : "they", affected.size() == 1 ? "s" : "", ids,
                      affected.size() > 5 ? ", ..." : ""),
          "prune");
    }
    const size_t listed = std::min(affected.size(), ConfigApplied::kMaxAffectedListed);
    out.affected.assign(affected.begin(), affected.begin() + static_cast<ptrdiff_t>(listed));
    if (!st.ok() || dry_run) {
      config_ = old;
      nodes_ = std::move(old_nodes);
      Status back = CompileLocked();
      if (!st.ok()) return st;
      ARBITER_RETURN_IF_ERROR(back);
      return out;
    }
    store::WriteBatch b;
    ARBITER_RETURN_IF_ERROR(PersistConfigLocked(&b, &old));
    AllocateTenantUidsLocked(&b);
    for (const api::UserConfig& u : config_.users) b.PutUser({u.name, u.tenant, u.role, now_()});
    RefreshUserIndexLocked();
    // Pruned: the jobs the configuration leaves behind are cancelled, saying why.
    for (const AffectedJob& a : affected) {
      auto it = jobs_.find(a.id);
      if (it == jobs_.end()) continue;
      JobEntry& j = it->second;
      if (StopJobLocked(j, JobState::kCancelled,
                        fmt::format("cancelled by {}: {} by the configuration", p.user, a.because),
                        &b)) {
        stops.push_back(a.id);
      }
      ++out.cancelled;
    }
    b.AppendAudit({0, now_(), p.user, "config.apply", "config",
                   out.cancelled > 0 ? fmt::format("ok: {} changes, {} jobs cancelled",
                                                   out.changes.size(), out.cancelled)
                                     : fmt::format("ok: {} changes", out.changes.size()),
                   "{}", p.token_id});
    done = store_->WriteAsync(std::move(b));
    PushEventLocked("config", {{"changes", out.changes.size()}, {"cancelled", out.cancelled}});
  }
  const Status committed = done.get();
  if (!stops.empty()) PublishStops(stops);
  ARBITER_RETURN_IF_ERROR(committed);
  return out;
}

// --- Jobs ------------------------------------------------------------------------------------

namespace {

// "placement": [...]. The stored form (the status column) keeps what a restart needs, each GPU's
// memory share included, under the loader's names; the API's names a task's GPUs "gpus".
void WritePlacement(api::JsonWriter& w, const std::vector<PlacedTask>& placement, bool stored) {
  w.Key("placement").BeginArray();
  for (const PlacedTask& t : placement) {
    w.BeginObject().Field("node", t.node).Field(stored ? "gpu_indices" : "gpus", t.gpu_indices);
    w.Field("gpu_milli", t.gpu_milli);
    if (stored) w.Field("gpu_memory_mib", t.gpu_memory_mib);
    w.Field("cpu_milli", t.cpu_milli).Field("memory_mib", t.memory_mib).EndObject();
  }
  w.EndArray();
}

}  // namespace

store::JobRecord ControlPlane::JobRecordLocked(const JobEntry& j) const {
  store::JobRecord r;
  r.id = j.spec.id.value();
  r.tenant = j.spec.tenant;
  r.queue = j.spec.queue;
  r.user = j.spec.user;
  r.name = j.spec.name;
  r.type = std::string(JobTypeName(j.spec.type));
  r.state = std::string(JobStateName(j.state));
  r.spec_json = j.spec_json ? *j.spec_json : api::JobSpecJsonText(j.spec);
  // Fields at their zero value are left out (the loader defaults them): a pending job's status
  // is three fields, not twenty, at each submission.
  r.status_json.reserve(128);
  api::JsonWriter w(&r.status_json);
  w.BeginObject()
      .Field("state", r.state)
      .Field("reason", j.reason)
      .Field("updated_at", j.updated_at);
  auto put = [&w](const char* key, const auto& v) {
    if (v != std::decay_t<decltype(v)>{}) w.Field(key, v);
  };
  put("started_at", j.started_at);
  put("finished_at", j.finished_at);
  if (j.exit_code) w.Field("exit_code", *j.exit_code);
  put("restarts", j.restarts);
  put("preemptions", j.preemptions);
  put("not_before", j.not_before);
  put("gpu_model", j.gpu_model);
  put("preempted_queues", j.preempted_queues);
  put("stopping", j.stopping);
  put("stop_cause", j.stop_cause);
  put("task_state", j.task_state);
  put("task_exit", j.task_exit);
  put("attempt", j.attempt);
  put("held_since", j.held_since);
  put("task_nodes", j.task_nodes);
  if (!j.placement.empty()) WritePlacement(w, j.placement, /*stored=*/true);
  w.EndObject();
  r.idempotency_key = j.idempotency_key;
  r.submitted_at_ms = j.spec.submit_time;
  r.updated_at_ms = j.updated_at;
  r.secret_env_json = api::SecretEnvJsonText(j.spec);
  r.request_digest = j.request_digest;
  return r;
}

json ControlPlane::JobJsonLocked(const JobEntry& j, const Principal& p) const {
  return json::parse(JobTextLocked(j, p));
}

bool ControlPlane::MaySeeEnvValuesLocked(const Principal& p, const JobEntry& j) const {
  if (p.role == Role::kAdmin) return true;
  if (p.tenant != j.spec.tenant) return false;
  return p.role == Role::kTenantAdmin || (p.role == Role::kMember && p.user == j.spec.user);
}

// The spec's stored text with the status fields written in before its closing brace: the two
// share no key (JobSpecJsonText never writes id, tenant, state and the rest).
std::string ControlPlane::JobTextLocked(const JobEntry& j, const Principal& p) const {
  std::string out = j.spec.env.empty() || MaySeeEnvValuesLocked(p, j)
                        ? (j.spec_json ? *j.spec_json : api::JobSpecJsonText(j.spec))
                        : api::JobSpecJsonText(j.spec, /*env_values=*/false);
  out.pop_back();  // '}'
  out.reserve(out.size() + 320);
  if (out.size() > 1) out += ',';
  auto time = [](api::JsonWriter& w, const char* key, TimeMs ms) {
    w.Key(key);
    if (ms > 0) {
      w.String(Iso8601(ms));
    } else {
      w.Null();
    }
  };
  // Written as the members of an object whose braces are the spec's.
  std::string fields;
  api::JsonWriter w(&fields);
  w.BeginObject();
  w.Field("id", j.spec.id.value()).Field("tenant", j.spec.tenant).Field("user", j.spec.user);
  w.Field("state", JobStateName(j.state)).Field("reason", j.reason);
  time(w, "submitted_at", j.spec.submit_time);
  time(w, "started_at", j.started_at);
  time(w, "finished_at", j.finished_at);
  w.Key("exit_code");
  if (j.exit_code) {
    w.Int(*j.exit_code);
  } else {
    w.Null();
  }
  w.Field("restarts", j.restarts).Field("preemptions", j.preemptions);
  if (!j.spec.secret_env.empty()) {  // the names only, to everyone
    w.Key("secret_env").BeginArray();
    for (const auto& [name, value] : j.spec.secret_env) w.String(name);
    w.EndArray();
  }
  if (j.stopping) w.Field("stopping", j.stop_cause);
  WritePlacement(w, j.placement, /*stored=*/false);
  if (!j.gpu_model.empty()) w.Field("gpu_model", j.gpu_model);
  if (j.verdict && j.state == JobState::kPending) {
    w.Key("pending")
        .BeginObject()
        .Field("code", core::VerdictCodeName(j.verdict->code))
        .Field("message", j.verdict->message)
        .Field("position", j.verdict->position);
    time(w, "estimated_start", j.verdict->estimated_start.value_or(0));
    w.EndObject();
  }
  w.EndObject();
  out.append(fields, 1, std::string::npos);
  return out;
}

void ControlPlane::RecordTransitionLocked(JobEntry& j, JobState to, std::string reason,
                                          store::WriteBatch* b) {
  const JobState from = j.state;
  CountTransitionLocked(j, from, to, j.updated_at);
  j.state = to;
  j.reason = reason;
  active_.emplace(j.spec.id.value(), &j);
  j.updated_at = now_();
  b->PutJob(JobRecordLocked(j));
  b->AppendJobEvent({0, j.spec.id.value(), j.updated_at, std::string(JobStateName(from)),
                     std::string(JobStateName(to)), reason, "{}"});
  TouchNodesLocked(j);
  // Work for the scheduler: a job to place, or capacity given back.
  const bool takes = to == JobState::kAdmitted || to == JobState::kStarting ||
                     to == JobState::kRunning || to == JobState::kPreempting;
  if (!takes && wake_scheduler_) wake_scheduler_();
  PushJobEventLocked(j, JobStateName(from), JobStateName(to), reason);
}

namespace {

// What identifies a submission for Idempotency-Key replays: its canonical spec (the same job
// written with other spacing or key order is the same submission) and its secret values.
std::string RequestDigest(const std::string& spec_json, const JobSpec& spec) {
  return HashSecret(spec_json + '\n' + api::SecretEnvJsonText(spec));
}

Status MaySubmit(const Principal& p) {
  if (p.role == Role::kViewer || p.role == Role::kNode) {
    return Forbidden(fmt::format("{}s may not submit jobs", RoleName(p.role)));
  }
  return Status::Ok();
}

// Whether a job in queue `q` may use priority class `pc` (its allowed_tenants and
// allowed_queues); the rule is about the job, whoever submits it.
Status CheckClassAllowed(const PriorityClass& pc, const core::QuotaTree& tree, QueueId q) {
  if (pc.allowed_tenants.empty() && pc.allowed_queues.empty()) return Status::Ok();
  auto listed = [](const std::vector<std::string>& names, const std::string& name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  const std::string& tenant = tree.node(tree.node(q).tenant).name;
  if (listed(pc.allowed_tenants, tenant)) return Status::Ok();
  for (QueueId n = q; !tree.node(n).is_tenant && n != core::QuotaTree::kRoot;
       n = tree.node(n).parent) {
    if (listed(pc.allowed_queues, tree.node(n).name)) return Status::Ok();
  }
  std::vector<std::string> allowed;
  for (const std::string& t : pc.allowed_tenants) allowed.push_back("tenant " + t);
  for (const std::string& name : pc.allowed_queues) allowed.push_back("queue " + name);
  return Status(StatusCode::kPermissionDenied,
                fmt::format("priority class '{}' is not allowed for queue {} of tenant {}; it is "
                            "allowed for: {}",
                            pc.name, tree.node(q).name, tenant, fmt::join(allowed, ", ")),
                "priority_class");
}

}  // namespace

Status ControlPlane::CheckSubmissionLocked(const Principal& p, JobSpec& spec) const {
  ARBITER_RETURN_IF_ERROR(CheckSubmittedEnv(spec));
  const core::QuotaTree& tree = compiled_->tree;
  QueueId q;
  const bool found = tree.Find(spec.queue, &q) && !tree.node(q).is_tenant;
  const std::string tenant = found ? tree.node(tree.node(q).tenant).name : "";
  if (!found || (p.role != Role::kAdmin && tenant != p.tenant)) {
    std::string usable;
    for (size_t i = 1; i < tree.size(); ++i) {
      const core::QuotaNode& n = tree.nodes()[i];
      if (!n.is_leaf() || n.is_tenant) continue;
      if (p.role != Role::kAdmin && tree.node(n.tenant).name != p.tenant) continue;
      usable += (usable.empty() ? "" : ", ") + n.name;
    }
    return InvalidArgument("queue", fmt::format("queue {} not found; queues you can use: {}",
                                                spec.queue, usable.empty() ? "none" : usable));
  }
  if (!tree.node(q).is_leaf()) {
    return InvalidArgument(
        "queue", fmt::format("queue {} has child queues; submit to one of them", spec.queue));
  }
  if (!spec.priority_class.empty()) {
    auto pc = compiled_->classes.find(spec.priority_class);
    if (pc == compiled_->classes.end()) {
      std::string known;
      for (const auto& [name, c] : compiled_->classes) known += (known.empty() ? "" : ", ") + name;
      return InvalidArgument("priority_class",
                             fmt::format("unknown priority class '{}'; known: {}",
                                         spec.priority_class, known.empty() ? "none" : known));
    }
    ARBITER_RETURN_IF_ERROR(CheckClassAllowed(pc->second, tree, q));
  }
  for (size_t i = 0; i < spec.gpu_models.size(); ++i) {
    if (compiled_->cluster.FindModel(spec.gpu_models[i]) == core::kNoModel) {
      return InvalidArgument(fmt::format("gpu_models[{}]", i),
                             fmt::format("unknown GPU model '{}'", spec.gpu_models[i]));
    }
  }
  // Beyond a max of its queue or tenant: it could never start (nodes are no reason here).
  ARBITER_RETURN_IF_ERROR(CheckQuotaAdmissible(tree, compiled_->cluster, spec, q));
  spec.tenant = tenant;
  spec.user = p.user;
  return Status::Ok();
}

void ControlPlane::ApplyTaskMinimums(JobSpec* spec) const {
  TaskResources& r = spec->resources;
  r.cpu_milli = std::max(r.cpu_milli, task_limits_.min_cpu_milli);
  r.memory_mib = std::max(r.memory_mib, task_limits_.min_memory_mib);
}

Status ControlPlane::CheckReplayLocked(const std::string& tenant, const std::string& user,
                                       const std::string& idem_key, const std::string& digest,
                                       const std::string& what) const {
  if (idem_key.empty()) return Status::Ok();
  auto it = idempotency_.find(tenant + "/" + user + "/" + idem_key);
  if (it == idempotency_.end()) return Status::Ok();
  const JobEntry& j = jobs_.at(it->second);
  if (j.request_digest.empty() || j.request_digest == digest) return Status::Ok();
  return Status(StatusCode::kUnprocessable,
                fmt::format("Idempotency-Key {} already made job {} from a different submission{}; "
                            "a retry must send the same body, a new job needs a new key",
                            idem_key, it->second, what),
                "Idempotency-Key");
}

uint64_t ControlPlane::AddJobLocked(const Principal& p, JobSpec spec,
                                    std::shared_ptr<const std::string> spec_json,
                                    const std::string& idem_key, const std::string& digest,
                                    store::WriteBatch* b, bool* created) {
  const std::string tenant = spec.tenant;
  if (!idem_key.empty()) {
    auto it = idempotency_.find(tenant + "/" + p.user + "/" + idem_key);
    if (it != idempotency_.end()) return it->second;
  }
  spec.id = JobId(next_job_id_++);
  spec.submit_time = now_();
  JobEntry j;
  j.spec = std::move(spec);
  j.spec_json = std::move(spec_json);
  j.idempotency_key = idem_key;
  if (!idem_key.empty()) j.request_digest = digest;
  j.updated_at = j.spec.submit_time;
  j.reason = "submitted";
  const uint64_t id = j.spec.id.value();
  if (!idem_key.empty()) idempotency_[tenant + "/" + p.user + "/" + idem_key] = id;
  auto& entry = jobs_.emplace(id, std::move(j)).first->second;
  active_.emplace(id, &entry);
  metrics_.JobSubmitted(tenant, entry.spec.queue);
  b->PutJob(JobRecordLocked(entry));
  b->AppendJobEvent({0, id, entry.updated_at, "", "pending", "submitted", "{}"});
  b->AppendAudit({0, entry.updated_at, p.user, "job.submit", fmt::format("job/{}", id), "ok", "{}",
                  p.token_id});
  PushJobEventLocked(entry, "", "pending", "submitted");
  *created = true;
  return id;
}

Result<ControlPlane::Submitted> ControlPlane::SubmitJob(const Principal& p, JobSpec spec,
                                                        const std::string& idem_key,
                                                        bool* created) {
  *created = false;
  ARBITER_RETURN_IF_ERROR(MaySubmit(p));
  ApplyTaskMinimums(&spec);
  auto spec_json = std::make_shared<const std::string>(api::JobSpecJsonText(spec));
  const std::string digest = idem_key.empty() ? "" : RequestDigest(*spec_json, spec);
  std::shared_future<Status> done;
  Submitted out;
  bool added = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (dirty_) ARBITER_RETURN_IF_ERROR(CompileLocked());
    ARBITER_RETURN_IF_ERROR(CheckSubmissionLocked(p, spec));
    ARBITER_RETURN_IF_ERROR(CheckReplayLocked(spec.tenant, p.user, idem_key, digest, ""));
    store::WriteBatch b;
    b.Reserve(3);  // the job, its first event, the audit record
    out.id = AddJobLocked(p, std::move(spec), std::move(spec_json), idem_key, digest, &b, &added);
    out.body = JobTextLocked(jobs_.at(out.id), p);
    done = store_->WriteAsync(std::move(b));  // empty (a barrier) for a repeated key
    if (added && wake_scheduler_) wake_scheduler_();
  }
  ARBITER_RETURN_IF_ERROR(done.get());
  *created = added;
  return out;
}

Result<std::string> ControlPlane::SubmitJobs(const Principal& p, std::vector<JobSpec> specs,
                                             const std::string& idem_key, bool* created) {
  *created = false;
  ARBITER_RETURN_IF_ERROR(MaySubmit(p));
  std::vector<std::shared_ptr<const std::string>> texts;
  std::vector<std::string> digests(specs.size());
  texts.reserve(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    ApplyTaskMinimums(&specs[i]);
    texts.push_back(std::make_shared<const std::string>(api::JobSpecJsonText(specs[i])));
    if (!idem_key.empty()) digests[i] = RequestDigest(*texts[i], specs[i]);
  }
  // A repeated batch finds each of its jobs by its own key: KEY#INDEX.
  auto key_of = [&idem_key](size_t i) {
    return idem_key.empty() ? std::string() : fmt::format("{}#{}", idem_key, i);
  };
  std::shared_future<Status> done;
  std::string items = "{\"items\":[";
  bool any = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (dirty_) ARBITER_RETURN_IF_ERROR(CompileLocked());
    // All or nothing: every job is checked before any is recorded.
    for (size_t i = 0; i < specs.size(); ++i) {
      ARBITER_RETURN_IF_ERROR(api::ForBatchJob(CheckSubmissionLocked(p, specs[i]), i));
      ARBITER_RETURN_IF_ERROR(CheckReplayLocked(specs[i].tenant, p.user, key_of(i), digests[i],
                                                fmt::format(" (job {} of the batch)", i)));
    }
    store::WriteBatch b;
    b.Reserve(3 * specs.size());
    for (size_t i = 0; i < specs.size(); ++i) {
      bool added = false;
      const uint64_t id = AddJobLocked(p, std::move(specs[i]), std::move(texts[i]), key_of(i),
                                       digests[i], &b, &added);
      if (i > 0) items += ',';
      items += JobTextLocked(jobs_.at(id), p);
      any = any || added;
    }
    done = store_->WriteAsync(std::move(b));
    if (any && wake_scheduler_) wake_scheduler_();
  }
  ARBITER_RETURN_IF_ERROR(done.get());
  *created = any;
  items += "]}";
  return items;
}

Result<json> ControlPlane::GetJob(const Principal& p, uint64_t id) {
  if (p.role == Role::kNode) return Forbidden("nodes may not read jobs");
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end() || !CanReadTenantLocked(p, it->second.spec.tenant)) {
    return NotFoundError(fmt::format("job {} not found", id));
  }
  return JobJsonLocked(it->second, p);
}

Result<std::string> ControlPlane::ListJobs(const Principal& p, const JobFilter& f) {
  if (p.role == Role::kNode) return Forbidden("nodes may not list jobs");
  std::lock_guard<std::mutex> lock(mu_);
  std::string out = "{\"items\":[";
  size_t items = 0;
  uint64_t last = 0;
  bool more = false;
  for (auto it = jobs_.upper_bound(f.after_id); it != jobs_.end(); ++it) {
    const JobEntry& j = it->second;
    if (!CanReadTenantLocked(p, j.spec.tenant)) continue;
    if (!f.tenant.empty() && j.spec.tenant != f.tenant) continue;
    if (!f.queue.empty() && j.spec.queue != f.queue) continue;
    if (!f.user.empty() && j.spec.user != f.user) continue;
    if (!f.state.empty() && JobStateName(j.state) != f.state) continue;
    if (!f.type.empty() && JobTypeName(j.spec.type) != f.type) continue;
    if (items == f.limit) {
      more = true;
      break;
    }
    if (items++ > 0) out += ',';
    out += JobTextLocked(j, p);
    last = it->first;
  }
  out += more ? fmt::format("],\"next_cursor\":\"{}\"}}", last) : "],\"next_cursor\":null}";
  return out;
}

Result<json> ControlPlane::JobAction(const Principal& p, uint64_t id, std::string_view action) {
  if (p.role == Role::kNode) return Forbidden("nodes may not act on jobs");
  std::shared_future<Status> done;
  json out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_.find(id);
    if (it == jobs_.end() || !CanReadTenantLocked(p, it->second.spec.tenant)) {
      // Another tenant's job looks missing to the caller; the audit log says what it was.
      if (it != jobs_.end()) {
        Audit(p, fmt::format("job.{}", action), fmt::format("job/{}", id),
              "denied: another tenant's job");
      }
      return NotFoundError(fmt::format("job {} not found", id));
    }
    JobEntry& j = it->second;
    ARBITER_RETURN_IF_ERROR(CanActOnJobLocked(p, j));
    store::WriteBatch b;
    JobState to;
    std::string reason = fmt::format("{} by {}", action, p.user);
    if (action == "cancel") {
      to = JobState::kCancelled;
    } else if (action == "suspend") {
      to = JobState::kSuspended;
    } else if (action == "resume") {
      if (j.state != JobState::kSuspended) {
        return Status(StatusCode::kConflict,
                      fmt::format("job {} is {}, not suspended", id, JobStateName(j.state)));
      }
      to = JobState::kPending;
    } else if (action == "retry") {
      if (j.state != JobState::kFailed && j.state != JobState::kCancelled &&
          j.state != JobState::kTimedOut) {
        return Status(StatusCode::kConflict,
                      fmt::format("job {} is {}; only failed, cancelled or timed-out jobs can be "
                                  "retried",
                                  id, JobStateName(j.state)));
      }
      to = JobState::kRetryWait;
    } else {
      return NotFoundError(fmt::format("unknown action '{}'", action));
    }
    ARBITER_RETURN_IF_ERROR(CheckTransition(j.state, to));
    if (to == JobState::kCancelled || to == JobState::kSuspended) {
      StopJobLocked(j, to, reason, &b);
    } else {
      if (to == JobState::kRetryWait) {
        j.not_before = now_();
        j.exit_code.reset();
        j.finished_at = 0;
      }
      RecordTransitionLocked(j, to, reason, &b);
    }
    b.AppendAudit({0, now_(), p.user, fmt::format("job.{}", action), fmt::format("job/{}", id),
                   "ok", "{}", p.token_id});
    out = JobJsonLocked(j, p);
    done = store_->WriteAsync(std::move(b));
  }
  const Status committed = done.get();
  PublishStops({id});  // even after a failed write: memory, which the nodes follow, has the stop
  ARBITER_RETURN_IF_ERROR(committed);
  return out;
}

bool ControlPlane::StopJobLocked(JobEntry& j, JobState to, std::string reason,
                                 store::WriteBatch* b) {
  const bool started =
      std::any_of(j.task_state.begin(), j.task_state.end(), [](int32_t t) { return t == 1; });
  if (started) {
    j.stopping = true;  // the node stops the processes; the placement stays until it has
    j.stop_cause = to == JobState::kCancelled ? "cancel" : "suspend";
    j.stop_unpublished = true;
  }
  j.finished_at = to == JobState::kCancelled ? now_() : 0;
  RecordTransitionLocked(j, to, std::move(reason), b);
  // Nothing runs: the GPUs are released (and metered) now.
  if (!started) FinishExecutionLocked(j, b);
  return started;
}

void ControlPlane::PublishStops(const std::vector<uint64_t>& ids) {
  std::lock_guard<std::mutex> lock(mu_);
  for (uint64_t id : ids) {
    auto it = jobs_.find(id);
    if (it == jobs_.end() || !it->second.stop_unpublished) continue;
    it->second.stop_unpublished = false;
    TouchNodesLocked(it->second);
  }
}

Result<json> ControlPlane::JobEvents(const Principal& p, uint64_t id) {
  if (p.role == Role::kNode) return Forbidden("nodes may not read jobs");
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_.find(id);
    if (it == jobs_.end() || !CanReadTenantLocked(p, it->second.spec.tenant)) {
      return NotFoundError(fmt::format("job {} not found", id));
    }
  }
  // Every change already visible in memory is in the history: wait for the writes enqueued so
  // far (an empty batch is a barrier) before reading it.
  ARBITER_RETURN_IF_ERROR(store_->Write(store::WriteBatch{}));
  auto events = store_->JobEvents(id);
  if (!events.ok()) return events.status();
  json items = json::array();
  for (const store::JobEventRecord& e : *events) {
    items.push_back({{"at", Iso8601(e.at_ms)},
                     {"from", e.from_state},
                     {"to", e.to_state},
                     {"reason", e.reason}});
  }
  return json{{"items", items}};
}

Result<json> ControlPlane::WhyPending(const Principal& p, uint64_t id) {
  if (p.role == Role::kNode) return Forbidden("nodes may not read jobs");
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end() || !CanReadTenantLocked(p, it->second.spec.tenant)) {
    return NotFoundError(fmt::format("job {} not found", id));
  }
  const JobEntry& j = it->second;
  json out = {{"id", id}, {"state", std::string(JobStateName(j.state))}};
  if (j.state != JobState::kPending) {
    out["message"] = fmt::format("job {} is {}: {}", id, JobStateName(j.state), j.reason);
  } else if (!j.verdict) {
    out["message"] = "waiting for the next scheduling cycle";
  } else {
    out["code"] = std::string(core::VerdictCodeName(j.verdict->code));
    out["message"] = j.verdict->message;
    out["position"] = j.verdict->position;
    out["estimated_start"] =
        j.verdict->estimated_start ? TimeJson(*j.verdict->estimated_start) : json(nullptr);
  }
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
  for (const auto& [id, entry] : active_) {
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
      usage.Add(q, core::JobQuotaRequest(j.spec.resources, j.spec.tasks, m));
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
    b.AppendAudit({0, now_(), p.user, "user.create", "user/" + u.name, "ok", "{}", p.token_id});
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
      if (req.node == builtin_node_) {
        return InvalidArgument("node", fmt::format("{} is the server's built-in node "
                                                   "(--local-node); no agent may register it",
                                                   req.node));
      }
    } else if (!req.node.empty()) {
      return InvalidArgument("node", "only node tokens (role node) name a node");
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
    rec.created_at_ms = now_();
    if (req.expires_in_ms > 0) rec.expires_at_ms = rec.created_at_ms + req.expires_in_ms;
    {
      std::unique_lock<std::shared_mutex> tokens(tokens_mu_);
      tokens_[rec.id] = rec;
    }
    store::WriteBatch b;
    b.PutToken(rec);
    b.AppendAudit({0, now_(), p.user, "token.create", "user/" + user, "ok", "{}", p.token_id});
    done = store_->WriteAsync(std::move(b));
  }
  ARBITER_RETURN_IF_ERROR(done.get());
  json out = {{"token", t.token},
              {"id", rec.id},
              {"user", rec.user},
              {"role", rec.role},
              {"tenant", rec.tenant}};
  if (!rec.node.empty()) out["node"] = rec.node;
  if (rec.expires_at_ms > 0) out["expires_at"] = Iso8601(rec.expires_at_ms);
  return out;
}

namespace {

// `tenant`: the token's tenant now (ControlPlane::TokenTenantLocked).
json TokenToJson(const store::TokenRecord& r, const std::string& tenant, TimeMs now) {
  json j = {{"id", r.id},
            {"user", r.user},
            {"tenant", tenant},
            {"role", r.role},
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
  std::shared_lock<std::shared_mutex> lock(tokens_mu_);
  json items = json::array();
  for (const auto& [id, r] : tokens_) {
    const std::string tenant = TokenTenantLocked(r);
    if (MaySeeToken(p, r, tenant)) items.push_back(TokenToJson(r, tenant, now));
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
    std::unique_lock<std::shared_mutex> tokens(tokens_mu_);
    auto it = tokens_.find(id);
    if (it != tokens_.end()) tenant = TokenTenantLocked(it->second);
    // Tokens the caller may not see do not exist for it (the same answer as for unknown ones).
    if (it == tokens_.end() || !MaySeeToken(p, it->second, tenant)) {
      if (it != tokens_.end()) Audit(p, "token.revoke", "token/" + id, "denied: not the caller's");
      return NotFoundError(fmt::format("token {} not found", id));
    }
    it->second.revoked = true;
    rec = it->second;
    store::WriteBatch b;
    b.PutToken(rec);
    b.AppendAudit({0, now_(), p.user, "token.revoke", "token/" + id, "ok", "{}", p.token_id});
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

Result<json> ControlPlane::ListNodes(const Principal& p) {
  if (p.role == Role::kNode) return Forbidden("nodes may not list nodes");
  std::lock_guard<std::mutex> lock(mu_);
  json items = json::array();
  for (const auto& [name, e] : nodes_) {
    json n = NodeToJson(e.node);
    n["source"] = e.from_config ? "config" : "agent";
    n["last_heartbeat"] = TimeJson(e.last_heartbeat);
    if (!e.status.is_null()) n["status"] = e.status;
    items.push_back(n);
  }
  return json{{"items", items}};
}

Result<json> ControlPlane::GetNode(const Principal& p, const std::string& name) {
  if (p.role == Role::kNode) return Forbidden("nodes may not read nodes");
  std::lock_guard<std::mutex> lock(mu_);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return NotFoundError(fmt::format("node {} not found", name));
  json n = NodeToJson(it->second.node);
  n["source"] = it->second.from_config ? "config" : "agent";
  if (!it->second.status.is_null()) n["status"] = it->second.status;
  json jobs = json::array();
  for (const auto& [id, entry] : active_) {
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
                                      std::string_view action) {
  if (p.role != Role::kAdmin) return Forbidden("only admins may cordon, drain or uncordon nodes");
  std::shared_future<Status> done;
  json out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = nodes_.find(name);
    if (it == nodes_.end()) return NotFoundError(fmt::format("node {} not found", name));
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
    it->second.node.state = to;
    dirty_ = true;
    store::WriteBatch b;
    b.PutNode({name, NodeToJson(it->second.node).dump(), std::string(NodeStateName(to)), now_()});
    b.AppendAudit({0, now_(), p.user, fmt::format("node.{}", action), "node/" + name, "ok", "{}",
                   p.token_id});
    PushEventLocked("node", {{"name", name}, {"state", NodeStateName(to)}});
    out = NodeToJson(it->second.node);
    done = store_->WriteAsync(std::move(b));
  }
  ARBITER_RETURN_IF_ERROR(done.get());
  return out;
}

// --- Events ---------------------------------------------------------------------------------

void ControlPlane::TouchNodesLocked(const JobEntry& j) {
  if (j.holds_capacity() && !j.placement.empty()) placed_.emplace(j.spec.id.value(), &j);
  bool any = false;
  for (const PlacedTask& t : j.placement) {
    auto it = nodes_.find(t.node);
    if (it == nodes_.end()) continue;
    ++it->second.assign_version;
    any = true;
  }
  if (any) assign_cv_.notify_all();
}

void ControlPlane::SetSchedulerWake(std::function<void()> wake) {
  std::lock_guard<std::mutex> lock(mu_);
  wake_scheduler_ = std::move(wake);
}

Result<uint64_t> ControlPlane::WatchAssignments(const Principal& p, const std::string& node,
                                                uint64_t known, DurationMs wait_ms) {
  ARBITER_RETURN_IF_ERROR(CheckNodeToken(p, node));
  std::unique_lock<std::mutex> lock(mu_);
  auto it = nodes_.find(node);
  if (it == nodes_.end()) {
    return NotFound(fmt::format("node {} is not registered: register it first", node));
  }
  assign_cv_.wait_for(lock, std::chrono::milliseconds(std::max<DurationMs>(0, wait_ms)), [&] {
    auto n = nodes_.find(node);
    return shutting_down_ || n == nodes_.end() || n->second.assign_version != known;
  });
  auto n = nodes_.find(node);
  return n == nodes_.end() ? known : n->second.assign_version;
}

void ControlPlane::PushEventLocked(std::string kind, const json& data) {
  if (kind == "node" && wake_scheduler_) wake_scheduler_();
  std::string tenant = data.is_object() ? data.value("tenant", "") : "";
  events_.push_back({++event_seq_, std::move(kind), std::move(tenant), data.dump()});
  while (events_.size() > kMaxEvents) events_.pop_front();
  events_cv_.notify_all();
}

void ControlPlane::PushJobEventLocked(const JobEntry& j, std::string_view from, std::string_view to,
                                      std::string_view reason) {
  ServerEvent e{++event_seq_, "job", j.spec.tenant, {}};
  api::JsonWriter(&e.data)
      .BeginObject()
      .Field("from", from)
      .Field("id", j.spec.id.value())
      .Field("reason", reason)
      .Field("tenant", j.spec.tenant)
      .Field("to", to)
      .EndObject();
  events_.push_back(std::move(e));
  while (events_.size() > kMaxEvents) events_.pop_front();
  events_cv_.notify_all();
}

uint64_t ControlPlane::last_event_seq() const {
  std::lock_guard<std::mutex> lock(mu_);
  return event_seq_;
}

void ControlPlane::WakeAll() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutting_down_ = true;
  }
  events_cv_.notify_all();
  assign_cv_.notify_all();
}

std::vector<ServerEvent> ControlPlane::EventsAfter(uint64_t seq, int64_t wait_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  events_cv_.wait_for(lock, std::chrono::milliseconds(wait_ms), [&] { return event_seq_ > seq; });
  std::vector<ServerEvent> out;
  for (const ServerEvent& e : events_) {
    if (e.seq > seq) out.push_back(e);
  }
  return out;
}

// --- Scheduling -------------------------------------------------------------------------------

Result<size_t> ControlPlane::RunSchedulingCycle() {
  const auto t0 = std::chrono::steady_clock::now();
  core::CycleInput in;
  std::vector<core::PendingJob> pending;
  std::vector<uint64_t> pending_ids;
  std::vector<JobEntry*> pending_entries;
  std::vector<core::RunningJob> running;
  std::vector<core::Constraints> constraints(1);
  std::vector<core::Nomination> nominations;
  std::vector<core::TenantBudget> budgets;
  std::shared_ptr<Compiled> compiled;
  std::shared_future<Status> promoted;
  const TimeMs now = now_();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (dirty_) ARBITER_RETURN_IF_ERROR(CompileLocked());
    compiled = compiled_;
    const core::Cluster& cluster = compiled->cluster;
    const core::QuotaTree& tree = compiled->tree;
    store::WriteBatch b;
    for (auto at = active_.begin(); at != active_.end();) {
      const uint64_t id = at->first;
      JobEntry& j = *at->second;
      if (IsFinal(j.state) && !j.stopping) {
        at = active_.erase(at);  // finished for good: later cycles pass it by
        continue;
      }
      ++at;
      if (j.state == JobState::kRetryWait && j.not_before <= now) {
        RecordTransitionLocked(j, JobState::kPending, "retry backoff over", &b);
      }
      // Finished jobs (most of a long-lived server's) are passed over before any lookup.
      const bool is_pending = j.state == JobState::kPending || j.state == JobState::kRetryWait;
      if (!is_pending && !(j.holds_capacity() && !j.placement.empty())) continue;
      if (j.resolved_generation != compiled->generation) {
        auto pit = compiled->classes.find(j.spec.priority_class);
        j.priority_class = pit != compiled->classes.end() ? &pit->second : nullptr;
        j.queue_found = tree.Find(j.spec.queue, &j.queue_id);
        j.resolved_generation = compiled->generation;
      }
      const PriorityClass* pc = j.priority_class;
      // A job whose queue the configuration deleted (pruned: cancelled, its tasks still stopping)
      // keeps its GPUs until its node reports them free: counted against the root, so nothing
      // else is placed on them, and never a preemption victim.
      const bool orphan = !j.queue_found;
      if (orphan && is_pending) continue;
      const QueueId q = orphan ? core::QuotaTree::kRoot : j.queue_id;
      if (is_pending) {
        core::PendingJob p;
        p.id = j.spec.id;
        p.queue = q;
        p.priority = pc != nullptr ? pc->value : 0;
        p.preemptible = j.spec.preemptible.value_or(pc == nullptr || pc->preemptible);
        p.preempts_anywhere = pc != nullptr && pc->preempts_anywhere;
        p.distinct_nodes = j.spec.distinct_nodes;
        p.type = j.spec.type;
        p.tasks = j.spec.tasks;
        p.resources = j.spec.resources;
        for (const std::string& m : j.spec.gpu_models) p.models.push_back(cluster.FindModel(m));
        if (!j.spec.node_selector.empty() || !j.spec.tolerations.empty()) {
          constraints.push_back(cluster.MakeConstraints(j.spec.node_selector, j.spec.tolerations));
          p.constraints = static_cast<uint32_t>(constraints.size() - 1);
        }
        p.walltime = SecondsToMs(j.spec.walltime_seconds);
        p.submit_time = j.spec.submit_time;
        p.not_before = j.not_before;
        pending.push_back(std::move(p));
        pending_ids.push_back(id);
        pending_entries.push_back(&j);
      } else if (j.holds_capacity() && !j.placement.empty()) {
        core::RunningJob r;
        r.id = j.spec.id;
        r.queue = q;
        r.priority = pc != nullptr ? pc->value : 0;
        r.preemptible = !orphan && j.spec.preemptible.value_or(pc == nullptr || pc->preemptible);
        r.model = cluster.FindModel(j.gpu_model);
        r.resources = j.spec.resources;
        r.start_time = j.started_at > 0 ? j.started_at : j.updated_at;
        r.walltime = SecondsToMs(j.spec.walltime_seconds);
        if (pc != nullptr) {
          r.min_runtime = SecondsToMs(pc->min_runtime_seconds);
          r.grace_period = SecondsToMs(pc->grace_period_seconds);
        }
        if (j.spec.grace_period_seconds) r.grace_period = SecondsToMs(*j.spec.grace_period_seconds);
        r.terminating = j.state == JobState::kPreempting || j.stopping;
        for (const std::string& name : j.preempted_queues) {
          QueueId pq;
          if (tree.Find(name, &pq)) r.preempted_queues.push_back(pq);
        }
        bool mapped = true;
        for (const PlacedTask& t : j.placement) {
          core::TaskPlacement tp;
          if (!cluster.FindNode(t.node, &tp.node)) {
            mapped = false;
            break;
          }
          const core::NodeInfo& info = cluster.node(tp.node);
          for (size_t g = 0; g < t.gpu_indices.size(); ++g) {
            for (uint16_t s = 0; s < info.gpu_count; ++s) {
              if (cluster.gpus()[info.gpu_begin + s].index != t.gpu_indices[g]) continue;
              tp.gpus.push_back({s, static_cast<int16_t>(t.gpu_milli[g]),
                                 g < t.gpu_memory_mib.size() ? t.gpu_memory_mib[g] : 0});
            }
          }
          tp.cpu_milli = t.cpu_milli;
          tp.memory_mib = t.memory_mib;
          r.tasks.push_back(std::move(tp));
        }
        if (mapped && !r.tasks.empty()) running.push_back(std::move(r));
      }
    }
    nominations = nominations_;
    budgets = BudgetsLocked(now);
    if (!b.empty()) promoted = store_->WriteAsync(std::move(b));
  }
  if (promoted.valid()) ARBITER_RETURN_IF_ERROR(promoted.get());

  in.cluster = &compiled->cluster;
  in.tree = &compiled->tree;
  in.running = &running;
  in.pending = &pending;
  in.constraints = &constraints;
  in.nominations = &nominations;
  in.budgets = budgets.empty() ? nullptr : &budgets;
  in.now = now;
  core::CycleResult result = core::RunCycle(in, *compiled->profile);

  std::shared_future<Status> done;
  size_t admitted = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.cycles;
    stats_.last_cycle_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    metrics_.SchedulingCycle(stats_.last_cycle_seconds);
    if (compiled != compiled_) return size_t{0};  // configuration changed meanwhile: next cycle
    store::WriteBatch b;
    ApplyCycleLocked(in, result, pending_ids, pending_entries, &b);
    admitted = result.admissions.size();
    stats_.admissions += admitted;
    if (!b.empty()) done = store_->WriteAsync(std::move(b));
  }
  const Status committed = done.valid() ? done.get() : Status::Ok();
  // The admissions are durable: their nodes may start them now (AssignmentsFor skipped them), so
  // a crash before the commit never leaves a task running for a job the store still has pending.
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const core::Admission& a : result.admissions) {
      auto it = jobs_.find(a.job.value());
      if (it == jobs_.end() || it->second.dispatchable) continue;
      it->second.dispatchable = true;
      TouchNodesLocked(it->second);
    }
    // Likewise the preemptions: victims stop only once their preemption is durable.
    for (const core::PreemptionDecision& d : result.preemptions) {
      for (JobId v : d.victims) {
        auto it = jobs_.find(v.value());
        if (it == jobs_.end() || !it->second.stop_unpublished) continue;
        it->second.stop_unpublished = false;
        TouchNodesLocked(it->second);
      }
    }
  }
  ARBITER_RETURN_IF_ERROR(committed);
  return admitted;
}

void ControlPlane::ApplyCycleLocked(const core::CycleInput& in, core::CycleResult& r,
                                    const std::vector<uint64_t>& pending_ids,
                                    const std::vector<JobEntry*>& pending_entries,
                                    store::WriteBatch* b) {
  const core::Cluster& cluster = *in.cluster;
  const core::QuotaTree& tree = *in.tree;
  for (const core::Admission& a : r.admissions) {
    auto it = jobs_.find(a.job.value());
    if (it == jobs_.end() || it->second.state != JobState::kPending) continue;
    JobEntry& j = it->second;
    j.placement.clear();
    for (const core::TaskPlacement& t : a.tasks) {
      const core::NodeInfo& info = cluster.node(t.node);
      PlacedTask p;
      p.node = info.name;
      for (const core::GpuShare& g : t.gpus) {
        p.gpu_indices.push_back(cluster.gpus()[info.gpu_begin + g.slot].index);
        p.gpu_milli.push_back(g.milli);
        p.gpu_memory_mib.push_back(g.memory_mib);
      }
      p.cpu_milli = t.cpu_milli;
      p.memory_mib = t.memory_mib;
      j.placement.push_back(std::move(p));
    }
    j.gpu_model = a.model == core::kNoModel ? "" : cluster.models()[a.model.value()].name;
    j.verdict.reset();
    j.task_state.assign(j.placement.size(), 0);
    j.task_exit.assign(j.placement.size(), 0);
    j.stopping = false;
    j.stop_cause.clear();
    ++j.attempt;
    j.dispatchable = false;  // until the admission is committed (RunSchedulingCycle)
    j.held_since = now_();
    j.task_nodes.clear();
    for (const PlacedTask& t : j.placement) j.task_nodes.push_back(t.node);
    std::string reason = a.borrowing() ? "admitted on borrowed capacity" : "admitted";
    if (a.best_effort) reason += " at best-effort priority (budget spent)";
    RecordTransitionLocked(j, JobState::kAdmitted, reason, b);
    std::erase_if(nominations_, [&](const core::Nomination& n) { return n.preemptor == a.job; });
  }
  for (const core::PreemptionDecision& d : r.preemptions) {
    std::vector<std::string> victim_queues;
    for (QueueId q : d.victim_queues) victim_queues.push_back(tree.node(q).name);
    for (JobId v : d.victims) {
      auto it = jobs_.find(v.value());
      if (it == jobs_.end() || !HoldsResources(it->second.state)) continue;
      it->second.stopping = true;
      it->second.stop_cause = "preempt";
      it->second.stop_unpublished = true;
      RecordTransitionLocked(it->second, JobState::kPreempting,
                             fmt::format("preempted by job {} ({})", d.preemptor.value(),
                                         core::PreemptionReasonName(d.reason)),
                             b);
      metrics_.JobPreempted(it->second.spec.tenant, it->second.spec.queue,
                            core::PreemptionReasonName(d.reason));
    }
    auto p = jobs_.find(d.preemptor.value());
    if (p != jobs_.end()) {
      for (const std::string& q : victim_queues) {
        if (std::find(p->second.preempted_queues.begin(), p->second.preempted_queues.end(), q) ==
            p->second.preempted_queues.end()) {
          p->second.preempted_queues.push_back(q);
        }
      }
    }
    nominations_.push_back({d.preemptor, d.victims});
  }
  for (JobId id : r.finished_nominations) {
    std::erase_if(nominations_, [&](const core::Nomination& n) { return n.preemptor == id; });
  }
  // A verdict for each pending job: found by binary search in the input's ids, not in jobs_.
  for (core::Verdict& v : r.verdicts) {
    const auto at = std::lower_bound(pending_ids.begin(), pending_ids.end(), v.job.value());
    if (at != pending_ids.end() && *at == v.job.value()) {
      pending_entries[static_cast<size_t>(at - pending_ids.begin())]->verdict = std::move(v);
    } else if (auto it = jobs_.find(v.job.value()); it != jobs_.end()) {
      it->second.verdict = std::move(v);
    }
  }
}

// --- Execution --------------------------------------------------------------------------------

void ControlPlane::SetNodeTelemetry(const std::string& node, const std::string& discovery,
                                    const std::vector<GpuTelemetry>& gpus) {
  json telemetry = json::array();
  for (const GpuTelemetry& g : gpus) telemetry.push_back(api::GpuTelemetryToJson(g));
  std::lock_guard<std::mutex> lock(mu_);
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return;
  NodeEntry& e = it->second;
  if (!e.status.is_object()) e.status = json::object();
  e.status["gpu_discovery"] = discovery;
  e.status["gpus"] = std::move(telemetry);
  e.last_heartbeat = now_();
  e.status["last_heartbeat"] = e.last_heartbeat;
}

void ControlPlane::SetNodeStatus(const std::string& node, const std::string& key,
                                 const std::string& value) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return;
  if (!it->second.status.is_object()) it->second.status = json::object();
  it->second.status[key] = value;
}

void ControlPlane::NoteReportedResourcesLocked(const Node& reported) {
  auto& r = reported_resources_[reported.name];
  const std::pair<int64_t, int64_t> now{reported.cpu_milli, reported.memory_mib};
  if (r != now) {
    r = now;
    dirty_ = true;
  }
}

void ControlPlane::SetTaskLimits(const TaskLimits& limits) {
  std::lock_guard<std::mutex> lock(mu_);
  task_limits_ = limits;
  dirty_ = true;  // the tenants' default ceilings are compiled into the quota tree
}

void ControlPlane::SetNodeTimeout(DurationMs ms) {
  std::lock_guard<std::mutex> lock(mu_);
  node_timeout_ms_ = ms;
}

bool ControlPlane::HasGpuModel(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  return std::any_of(config_.gpu_models.begin(), config_.gpu_models.end(),
                     [&](const GpuModel& m) { return m.name == name; });
}

void ControlPlane::SetBuiltinNode(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  builtin_node_ = name;
}

Status ControlPlane::RegisterNode(const Node& node, const std::string& address) {
  ARBITER_RETURN_IF_ERROR(ValidateNode(node, "node"));
  std::shared_future<Status> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    builtin_node_ = node.name;
    auto it = nodes_.find(node.name);
    if (it != nodes_.end() && it->second.from_config) {
      it->second.last_heartbeat = now_();
      it->second.address = address;
      NoteReportedResourcesLocked(node);
      return Status::Ok();  // configured statically: the config is the truth
    }
    NodeEntry e{node, false, now_()};
    e.address = address;
    if (it != nodes_.end()) e.status = it->second.status;
    if (it != nodes_.end() && it->second.node.state != NodeState::kDown) {
      e.node.state = it->second.node.state;  // keep cordoned/draining
    }
    nodes_[node.name] = e;
    dirty_ = true;
    store::WriteBatch b;
    b.PutNode(
        {node.name, NodeToJson(e.node).dump(), std::string(NodeStateName(e.node.state)), now_()});
    PushEventLocked("node", {{"name", node.name}, {"state", NodeStateName(e.node.state)}});
    done = store_->WriteAsync(std::move(b));
  }
  return done.get();
}

std::vector<TaskAssignment> ControlPlane::AssignmentsFor(const std::string& node) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<TaskAssignment> out;
  for (auto at = placed_.begin(); at != placed_.end();) {
    const uint64_t id = at->first;
    const JobEntry& j = *at->second;
    if (!j.holds_capacity() || j.placement.empty()) {
      at = placed_.erase(at);  // released: no node has work for it any more
      continue;
    }
    ++at;
    if (!j.dispatchable) continue;
    const bool stop = (j.stopping || j.state == JobState::kPreempting) && !j.stop_unpublished;
    bool here = false;
    for (const PlacedTask& p : j.placement) here |= p.node == node;
    if (!here) continue;
    const RunAs run_as = RunAsLocked(j.spec.tenant, j.spec.user);
    for (size_t t = 0; t < j.placement.size(); ++t) {
      if (j.placement[t].node != node) continue;
      if (t < j.task_state.size() && j.task_state[t] == 2) continue;  // already exited
      TaskAssignment a;
      a.job = id;
      a.task = static_cast<int32_t>(t);
      a.attempt = j.attempt;
      a.run = !stop;
      auto pc = compiled_->classes.find(j.spec.priority_class);
      a.grace_ms = SecondsToMs(j.spec.grace_period_seconds.value_or(
          pc != compiled_->classes.end() ? pc->second.grace_period_seconds : 30));
      a.deadline = j.spec.walltime_seconds > 0 && j.started_at > 0
                       ? j.started_at + SecondsToMs(j.spec.walltime_seconds)
                       : 0;
      a.spec = j.spec;
      a.run_as = run_as;
      a.gpus = j.placement[t].gpu_indices;
      a.restarts = j.restarts + j.preemptions;
      a.master_node = j.placement[0].node;
      // One MASTER_ADDR for every rank: the address of the first task's node as its agent (or
      // the built-in node) gave it, else its name.
      if (auto m = nodes_.find(a.master_node); m != nodes_.end() && !m->second.address.empty()) {
        a.master_addr = m->second.address;
      }
      a.started = t < j.task_state.size() && j.task_state[t] == 1;
      out.push_back(std::move(a));
    }
  }
  return out;
}

void ControlPlane::ReportTaskStarted(uint64_t job, int32_t task, uint64_t attempt) {
  std::shared_future<Status> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_.find(job);
    if (it == jobs_.end()) return;
    JobEntry& j = it->second;
    if (task < 0 || static_cast<size_t>(task) >= j.task_state.size()) return;
    if (attempt != j.attempt || j.task_state[static_cast<size_t>(task)] != 0) return;  // applied
    j.task_state[static_cast<size_t>(task)] = 1;
    store::WriteBatch b;
    if (j.state == JobState::kAdmitted)
      RecordTransitionLocked(j, JobState::kStarting, "dispatched", &b);
    const bool all =
        std::all_of(j.task_state.begin(), j.task_state.end(), [](int32_t s) { return s >= 1; });
    if (all && j.state == JobState::kStarting) {
      j.started_at = now_();
      RecordTransitionLocked(j, JobState::kRunning, "all tasks started", &b);
    } else {
      b.PutJob(JobRecordLocked(j));
    }
    done = store_->WriteAsync(std::move(b));
  }
  done.get();
  PublishStops({job});
}

void ControlPlane::ReportTaskExited(uint64_t job, int32_t task, uint64_t attempt, int32_t exit_code,
                                    bool timed_out) {
  std::shared_future<Status> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_.find(job);
    if (it == jobs_.end()) return;
    JobEntry& j = it->second;
    if (task < 0 || static_cast<size_t>(task) >= j.task_state.size()) return;
    if (attempt != j.attempt || j.task_state[static_cast<size_t>(task)] == 2) return;  // applied
    j.task_state[static_cast<size_t>(task)] = 2;
    j.task_exit[static_cast<size_t>(task)] = exit_code;
    store::WriteBatch b;
    if (!j.stopping && timed_out) {
      j.stopping = true;
      j.stop_cause = "timeout";
      j.stop_unpublished = true;
    } else if (!j.stopping && exit_code != 0) {
      // One failed task fails its gang: the others are stopped.
      j.stopping = true;
      j.stop_cause = "failed";
      j.exit_code = exit_code;
      j.stop_unpublished = true;
    }
    // The job ends once every task has exited. A task that never started counts only when the
    // job is being stopped: its node then reports it exited before start, or is lost.
    const bool all = std::all_of(j.task_state.begin(), j.task_state.end(),
                                 [&](int32_t s) { return s == 2 || (s == 0 && j.stopping); });
    if (all) {
      FinishExecutionLocked(j, &b);
    } else {
      b.PutJob(JobRecordLocked(j));
    }
    done = store_->WriteAsync(std::move(b));
  }
  done.get();
}

std::vector<core::TenantBudget> ControlPlane::BudgetsLocked(TimeMs now) {
  const core::QuotaTree& tree = compiled_->tree;
  std::vector<core::TenantBudget> out(tree.size());
  bool any = false;
  for (const api::TenantConfig& t : config_.tenants) {
    if (!t.budget || t.budget->gpu_hours <= 0) continue;
    QueueId id;
    if (!tree.Find(t.name, &id)) continue;
    any = true;
    const TimeMs start = reports::BudgetPeriod(t.budget->period, now).first;
    auto& closed = closed_usage_[t.name];
    if (closed.first != start) {
      // A new period (or the first look since start): recount from the stored records.
      closed = {start, 0};
      auto records = store_->Usage(start, now);
      if (records.ok()) {
        for (const store::UsageRecord& u : *records) {
          if (u.tenant == t.name) {
            closed.second += u.gpu_milli * (u.end_ms - std::max(u.start_ms, start));
          }
        }
      }
    }
    // Plus what running jobs have held so far in this period.
    int64_t used = closed.second;
    for (const auto& [jid, entry] : active_) {
      const JobEntry& j = *entry;
      if (j.spec.tenant != t.name || !j.holds_capacity()) continue;
      const TimeMs held = j.held_since > 0   ? j.held_since
                          : j.started_at > 0 ? j.started_at
                                             : j.updated_at;
      const TimeMs since = std::max(start, held);
      for (const PlacedTask& p : j.placement) {
        for (int32_t m : p.gpu_milli) used += m * std::max<TimeMs>(0, now - since);
      }
    }
    core::TenantUsage u;
    u.gpu_milli_ms = used;
    core::TenantBudget& b = out[id.value()];
    b.exhausted = core::BudgetSpent(u, t.budget->gpu_hours);
    b.on_exhausted = t.budget->on_exhausted == "best-effort" ? core::BudgetPolicy::kBestEffort
                                                             : core::BudgetPolicy::kBlock;
  }
  if (!any) out.clear();
  return out;
}

void ControlPlane::ReportTaskLost(uint64_t job, int32_t task, uint64_t attempt) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_.find(job);
    if (it == jobs_.end()) return;
    JobEntry& j = it->second;
    if (task < 0 || static_cast<size_t>(task) >= j.task_state.size()) return;
    if (attempt != j.attempt || j.task_state[static_cast<size_t>(task)] == 2) return;  // applied
    if (!j.stopping) {
      j.stopping = true;
      j.stop_cause = "lost";
      j.stop_unpublished = true;  // published once ReportTaskExited has committed the loss
    }
  }
  ReportTaskExited(job, task, attempt, 137, false);
}

// Every task is gone: decide the job's next state from why it stopped.
void ControlPlane::FinishExecutionLocked(JobEntry& j, store::WriteBatch* b) {
  const std::string cause = j.stop_cause;
  // Metering: the interval during which each task held its resources, from the admission of this
  // run to their release, recorded exactly once: here, in the batch that clears the placement
  // (cost from the model's price per GPU-hour). Jobs stored before held_since existed fall back
  // to the start of the run.
  const TimeMs held_since = j.held_since > 0   ? j.held_since
                            : j.started_at > 0 ? j.started_at
                                               : j.updated_at;
  int64_t price = 0;
  for (const GpuModel& m : config_.gpu_models) {
    if (m.name == j.gpu_model) price = m.price_milli_per_hour;
  }
  for (size_t t = 0; t < j.placement.size(); ++t) {
    const PlacedTask& p = j.placement[t];
    store::UsageRecord u;
    u.job_id = j.spec.id.value();
    u.task = static_cast<int32_t>(t);
    u.tenant = j.spec.tenant;
    u.queue = j.spec.queue;
    u.user = j.spec.user;
    u.job_type = std::string(JobTypeName(j.spec.type));
    u.gpu_model = j.gpu_model;
    for (int32_t m : p.gpu_milli) u.gpu_milli += m;
    for (int64_t m : p.gpu_memory_mib) u.gpu_memory_mib += m;
    u.start_ms = held_since;
    u.end_ms = std::max(held_since, now_());
    // cost (millionths) = milli-GPU x ms x price (milli per GPU-hour) x 1000 / (1000 x 3.6e6)
    __extension__ using I128 = __int128;
    u.cost_micro = static_cast<int64_t>(static_cast<I128>(u.gpu_milli) * (u.end_ms - u.start_ms) *
                                        price / 3600000);
    auto& closed = closed_usage_[u.tenant];
    if (u.end_ms >= closed.first)
      closed.second += u.gpu_milli * (u.end_ms - std::max(u.start_ms, closed.first));
    b->AppendUsage(std::move(u));
  }
  j.placement.clear();
  j.task_state.clear();
  j.held_since = 0;
  j.stopping = false;
  j.stop_cause.clear();
  const TimeMs now = now_();
  if (j.state == JobState::kCancelled || j.state == JobState::kSuspended) {
    b->PutJob(JobRecordLocked(j));  // already in its final or held state; resources now free
    return;
  }
  if (cause == "preempt" || j.state == JobState::kPreempting) {
    ++j.preemptions;
    RecordTransitionLocked(j, JobState::kPreempted, "stopped for a preemption", b);
    RecordTransitionLocked(j, JobState::kPending, "requeued after preemption", b);
    return;
  }
  if (j.state == JobState::kAdmitted)
    RecordTransitionLocked(j, JobState::kStarting, "dispatched", b);
  j.finished_at = now;
  if (cause == "lost") {
    RecordTransitionLocked(j, JobState::kLost, "its processes are gone (node restarted or down)",
                           b);
    if (j.restarts < j.spec.retry.max_retries) {
      ++j.restarts;
      const int64_t backoff = RetryBackoffSeconds(j.spec.retry, j.restarts);
      j.not_before = now + SecondsToMs(backoff);
      j.finished_at = 0;
      RecordTransitionLocked(
          j, JobState::kRetryWait,
          fmt::format("retry {} of {} in {} s", j.restarts, j.spec.retry.max_retries, backoff), b);
    } else {
      RecordTransitionLocked(j, JobState::kFailed, "lost, and no retries left", b);
    }
    return;
  }
  if (cause == "timeout") {
    RecordTransitionLocked(j, JobState::kTimedOut,
                           fmt::format("walltime of {} s reached", j.spec.walltime_seconds), b);
    return;
  }
  int32_t code = 0;
  for (int32_t c : j.task_exit) {
    if (c != 0) {
      code = c;
      break;
    }
  }
  if (!j.exit_code || code != 0) j.exit_code = code;
  if (code == 0 && cause.empty()) {
    RecordTransitionLocked(j, JobState::kSucceeded, "all tasks exited 0", b);
    return;
  }
  RecordTransitionLocked(j, JobState::kFailed, fmt::format("a task exited with code {}", code), b);
  if (ShouldRetry(j.spec.retry, j.restarts, code)) {
    ++j.restarts;
    const int64_t backoff = RetryBackoffSeconds(j.spec.retry, j.restarts);
    j.not_before = now + SecondsToMs(backoff);
    j.finished_at = 0;
    RecordTransitionLocked(
        j, JobState::kRetryWait,
        fmt::format("retry {} of {} in {} s", j.restarts, j.spec.retry.max_retries, backoff), b);
  }
}

}  // namespace arbiter::server
