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
#include "server/control_plane_helpers.h"
#include "server/reports.h"

namespace arbiter::server {

using nlohmann::json;

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

ControlPlane::ControlPlane(store::Store* store, NowFn now)
    : store_(store),
      now_(std::move(now)),
      routes_(std::make_unique<RoutesBoard>(static_cast<uint64_t>(std::max<TimeMs>(1, now_())))),
      serving_(store),
      gateway_token_(fmt::format("arbgw_{}", NewSecretHex())),
      webhooks_(std::make_unique<Webhooks>(store, now_, &metrics_)) {
  estimates_ = std::make_unique<StartEstimates>(store, StartEstimates::Options{});
  webhooks_->SetTenantCheck([this](const std::string& tenant) {
    std::lock_guard<std::mutex> lock(mu_);
    return std::any_of(config_.tenants.begin(), config_.tenants.end(),
                       [&](const api::TenantConfig& t) { return t.name == tenant; });
  });
}

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
  // The live jobs and the window of finished ones: a start costs the live work, not the history.
  store::LoadOptions window;
  window.finished_max = window_.finished_max;
  if (window_.finished_max_age_ms > 0) {
    window.finished_since_ms = std::max<int64_t>(0, now_() - window_.finished_max_age_ms);
  }
  auto state = store_->Load(window);
  if (!state.ok()) return state.status();
  std::lock_guard<std::mutex> lock(mu_);
  for (const store::KvRecord& kv : state->kv) {
    if (kv.key == "tenant_uids") LoadTenantUidsLocked(kv.value);
    if (kv.key == kStepSecretKey) step_secret_ = kv.value;
    if (kv.key.starts_with(kQuotaRequestKeyPrefix)) LoadQuotaRequestLocked(kv.key, kv.value);
    if (kv.key.starts_with(kRegistryCredentialKeyPrefix)) {
      LoadRegistryCredentialLocked(kv.key, kv.value);
    }
    if (kv.key != kConfigKey) continue;
    auto c = api::ParseConfigYaml(kv.value);
    if (!c.ok()) return Internal("stored configuration is unreadable: " + c.status().ToString());
    config_ = std::move(c).value();
  }
  for (const Node& n : config_.nodes) nodes_.all[n.name] = NodeEntry{n, true, 0};
  for (const store::NodeRecord& r : state->nodes) {
    auto n = NodeFromJson(r.spec_json);
    if (!n.ok()) return n.status();
    if (ParseNodeState(r.state, &n->state)) {
      // The stored state (cordoned, draining) wins over the spec's.
    }
    auto it = nodes_.all.find(n->name);
    if (it != nodes_.all.end()) {
      it->second.node.state = n->state;
    } else {
      const std::string name = n->name;  // read before the move below (evaluated first)
      nodes_.all[name] = NodeEntry{std::move(n).value(), false, r.updated_at_ms};
    }
  }
  for (const store::TokenRecord& t : state->tokens) tokens_.Put(t);
  for (const store::JobRecord& r : state->jobs) {
    auto j = JobEntryFromRecord(r);
    if (!j.ok()) return j.status();
    InsertJobLocked(r.id, std::move(j).value());
  }
  // Ids the store has and memory does not: finished jobs beyond the window (or deleted ones).
  history_in_store_ = state->jobs.size() < state->max_job_id;
  // An array with a job in memory is held whole: the window may have cut it.
  if (history_in_store_) {
    std::vector<std::pair<uint64_t, int32_t>> arrays;
    for (const auto& [id, a] : jobs_.arrays) {
      arrays.emplace_back(id, jobs_.all.at(a.elements.front()).spec.array.size);
    }
    for (const auto& [id, size] : arrays) CompleteArrayLocked(id, size);
  }
  for (auto& [id, a] : jobs_.arrays) {
    std::sort(a.elements.begin(), a.elements.end());
    std::vector<int64_t> indices;
    for (uint64_t e : a.elements) indices.push_back(jobs_.all.at(e).spec.array.index);
    a.bounds = BoundsOf(indices);
  }
  jobs_.next_id = state->max_job_id + 1;
  LoadServicesLocked(state->services);
  webhooks_->Load(*state);
  ARBITER_RETURN_IF_ERROR(CompileLocked());
  store::WriteBatch uids;
  AllocateTenantUidsLocked(&uids);  // tenants configured before tenants had their own uids
  if (step_secret_.empty()) {
    step_secret_ = NewSecretHex();
    uids.PutKv({kStepSecretKey, step_secret_});
  }
  if (!uids.empty()) {
    // A follower of several servers writes nothing (its store is fenced): it keeps these in
    // memory only, and the leader writes them when it loads (docs/operations.md).
    if (Status st = store_->Write(std::move(uids)); !st.ok() && !store::IsFenced(st)) return st;
  }
  RefreshUserIndexLocked();
  loaded_ = true;
  return Status::Ok();
}

Status ControlPlane::CompileLocked() {
  auto c = std::make_shared<Compiled>();
  std::vector<Node> nodes;
  nodes.reserve(nodes_.all.size());
  for (const auto& [name, e] : nodes_.all) {
    nodes.push_back(e.node);
    auto reported = nodes_.reported.find(name);
    if (e.from_config && reported != nodes_.reported.end()) {
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
    if (!t.default_queue.empty()) c->default_queue[t.name] = t.default_queue;
    for (const QueueSpec& q : t.queues) {
      if (!q.is_tenant) {
        c->queue_names[LowerAscii(q.name)] = q.name;
        for (const std::string& a : q.aliases) c->queue_names[LowerAscii(a)] = q.name;
      }
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
    if (tokens_.AnyActiveWithRole("admin")) return std::string();
    store::TokenRecord rec;
    rec.id = t.id;
    rec.hash_hex = t.hash_hex;
    rec.user = "admin";
    rec.role = "admin";
    rec.kind = "user";
    rec.created_at_ms = now_();
    tokens_.Put(rec);
    b.PutToken(rec);
  }
  ARBITER_RETURN_IF_ERROR(store_->Write(std::move(b)));
  return t.token;
}

// --- Events ---------------------------------------------------------------------------------

void ControlPlane::TouchNodesLocked(const JobEntry& j) {
  if (j.holds_capacity() && !j.placement.empty()) jobs_.placed.emplace(j.spec.id.value(), &j);
  bool any = false;
  for (const PlacedTask& t : j.placement) {
    auto it = nodes_.all.find(t.node);
    if (it == nodes_.all.end()) continue;
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
  auto it = nodes_.all.find(node);
  if (it == nodes_.all.end()) {
    return NotFound(fmt::format("node {} is not registered: register it first", node));
  }
  assign_cv_.wait_for(lock, std::chrono::milliseconds(std::max<DurationMs>(0, wait_ms)), [&] {
    auto n = nodes_.all.find(node);
    return shutting_down_ || n == nodes_.all.end() || n->second.assign_version != known;
  });
  auto n = nodes_.all.find(node);
  return n == nodes_.all.end() ? known : n->second.assign_version;
}

void ControlPlane::PushEventLocked(std::string kind, const json& data) {
  if (kind == "node" && wake_scheduler_) wake_scheduler_();
  std::string tenant = data.is_object() ? data.value("tenant", "") : "";
  events_.Push(std::move(kind), std::move(tenant), data.dump());
}

void ControlPlane::PushJobEventLocked(const JobEntry& j, std::string_view from, std::string_view to,
                                      std::string_view reason) {
  std::string text;
  api::JsonWriter(&text)
      .BeginObject()
      .Field("from", from)
      .Field("id", j.spec.id.value())
      .Field("reason", reason)
      .Field("tenant", j.spec.tenant)
      .Field("to", to)
      .EndObject();
  events_.Push("job", j.spec.tenant, std::move(text));
  if (const std::string_view hook_event = JobWebhookEvent(from, to); !hook_event.empty()) {
    json job = {{"id", j.spec.id.value()},
                {"name", j.spec.name},
                {"state", to},
                {"reason", reason},
                {"tenant", j.spec.tenant},
                {"queue", j.spec.queue},
                {"user", j.spec.user},
                {"attempt", j.attempt},
                {"submitted_at", TimeJson(j.spec.submit_time)},
                {"started_at", TimeJson(j.started_at)},
                {"finished_at", TimeJson(j.finished_at)}};
    if (j.exit_code) job["exit_code"] = *j.exit_code;
    webhooks_->JobEvent(hook_event, j.spec.tenant, j.spec.user, std::move(job));
  }
}

uint64_t ControlPlane::last_event_seq() const { return events_.last_seq(); }

void ControlPlane::WakeAll() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutting_down_ = true;
  }
  events_.Close();
  routes_->WakeAll();
  assign_cv_.notify_all();
}

std::vector<ServerEvent> ControlPlane::EventsAfter(uint64_t seq, int64_t wait_ms) {
  return events_.After(seq, wait_ms);
}

}  // namespace arbiter::server
