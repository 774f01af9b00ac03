// The canonical form of a configuration and DumpConfigYaml.
#include <fmt/format.h>
#include <yaml-cpp/emitter.h>
#include <yaml-cpp/emittermanip.h>

#include <algorithm>
#include <cctype>
#include <map>

#include "api/config_canonical.h"
#include "api/config_codec.h"
#include "common/check.h"
#include "model/resources.h"

namespace arbiter::api {

namespace {

Value Int(int64_t v) { return Value::Plain(fmt::format("{}", v)); }
Value Milli(int64_t v) { return Value::Plain(FormatMilli(v)); }
Value Bool(bool v) { return Value::Plain(v ? "true" : "false"); }

constexpr std::string_view kLimitKinds[] = {"guaranteed", "max", "lending_limit"};

const std::optional<int64_t>& Slot(const QuotaLimits& l, std::string_view kind) {
  if (kind == "guaranteed") return l.guaranteed;
  if (kind == "max") return l.max;
  return l.lending_limit;
}

// {cpu: 4, memory: 65536, gpu: 8} or {gpu: {any: 8, A100-80G: 4}}, for one kind of limit.
Value LimitsValue(const std::map<std::string, QuotaLimits>& quota, std::string_view kind) {
  Value out = Value::Mapping();
  Value models = Value::Mapping();
  std::optional<int64_t> any_gpu;
  for (const auto& [key, limits] : quota) {
    ARBITER_CHECK(key == "cpu" || key == "memory" || key == "gpu" || key == "tasks" ||
                      key.rfind("gpu:", 0) == 0,
                  "unknown quota key " + key);
  }
  if (auto it = quota.find("cpu"); it != quota.end() && Slot(it->second, kind)) {
    out.Set("cpu", Milli(*Slot(it->second, kind)));
  }
  if (auto it = quota.find("memory"); it != quota.end() && Slot(it->second, kind)) {
    out.Set("memory", Int(*Slot(it->second, kind)));
  }
  if (auto it = quota.find("tasks"); it != quota.end() && Slot(it->second, kind)) {
    out.Set("tasks", Int(*Slot(it->second, kind)));
  }
  if (auto it = quota.find("gpu"); it != quota.end()) any_gpu = Slot(it->second, kind);
  for (const auto& [key, limits] : quota) {
    if (key.rfind("gpu:", 0) == 0 && Slot(limits, kind)) {
      models.Set(key.substr(4), Milli(*Slot(limits, kind)));
    }
  }
  if (models.members.empty()) {
    if (any_gpu) out.Set("gpu", Milli(*any_gpu));
  } else {
    if (any_gpu) models.members.insert(models.members.begin(), Member{"any", Milli(*any_gpu)});
    out.Set("gpu", std::move(models));
  }
  return out;
}

void AddQueueFields(const QueueSpec& q, Value* out) {
  for (std::string_view kind : kLimitKinds) {
    Value limits = LimitsValue(q.quota, kind);
    if (!limits.members.empty()) out->Set(std::string(kind), std::move(limits));
  }
  if (q.weight_milli != 1000) out->Set("weight", Milli(q.weight_milli));
  if (q.default_walltime_seconds != 0) {
    out->Set("default_walltime_seconds", Int(q.default_walltime_seconds));
  }
  if (!q.allowed_types.empty()) {
    Value& types = out->Set("allowed_types", Value::Sequence());
    for (const std::string& t : q.allowed_types) types.Add(Value::String(t));
  }
  if (q.decay.half_life_seconds != 0) {
    out->Set("fair_share", Value::Mapping())
        .Set("half_life_seconds", Int(q.decay.half_life_seconds));
  }
  if (!q.aliases.empty()) {
    Value& aliases = out->Set("aliases", Value::Sequence());
    for (const std::string& a : q.aliases) aliases.Add(Value::String(a));
  }
}

// The queue named `name` with its children (by parent name, in list order) nested.
Value QueueTree(const QueueSpec& q, const std::multimap<std::string, const QueueSpec*>& children,
                bool tenant_fields, const TenantConfig& t) {
  Value v = tenant_fields ? TenantValue(t) : QueueValue(q);
  auto [first, last] = children.equal_range(q.name);
  if (first != last) {
    Value& list = v.Set("queues", Value::Sequence());
    for (auto it = first; it != last; ++it) list.Add(QueueTree(*it->second, children, false, t));
  }
  return v;
}

bool CompactGpus(const Node& n, const std::vector<GpuModel>& models, int32_t* domains) {
  const auto count = static_cast<int32_t>(n.gpus.size());
  const Gpu& first = n.gpus.front();
  // The number of domains is one more than the last GPU's domain when the pattern holds.
  *domains = first.nvlink_domain == 0 ? n.gpus.back().nvlink_domain + 1 : 0;
  if (*domains < 1 || *domains > count || count % *domains != 0) return false;
  const int32_t per_domain = count / *domains;
  for (int32_t i = 0; i < count; ++i) {
    const Gpu& g = n.gpus[static_cast<size_t>(i)];
    if (g.index != i || g.model != first.model || g.memory_mib != first.memory_mib || !g.healthy ||
        g.nvlink_domain != i / per_domain) {
      return false;
    }
  }
  return std::any_of(models.begin(), models.end(),
                     [&](const GpuModel& m) { return m.name == first.model; });
}

int64_t ModelMemory(const std::vector<GpuModel>& models, const std::string& name) {
  for (const GpuModel& m : models) {
    if (m.name == name) return m.memory_mib;
  }
  return -1;
}

Value GpusValue(const Node& n, const std::vector<GpuModel>& models) {
  int32_t domains = 1;
  if (CompactGpus(n, models, &domains)) {
    Value g = Value::Mapping();
    g.Set("count", Int(static_cast<int64_t>(n.gpus.size())));
    g.Set("model", Value::String(n.gpus.front().model));
    if (domains != 1) g.Set("nvlink_domains", Int(domains));
    if (n.gpus.front().memory_mib != ModelMemory(models, n.gpus.front().model)) {
      g.Set("memory_mib", Int(n.gpus.front().memory_mib));
    }
    return g;
  }
  Value list = Value::Sequence();
  for (const Gpu& gpu : n.gpus) {
    Value& g = list.Add(Value::Mapping());
    g.Set("index", Int(gpu.index));
    g.Set("model", Value::String(gpu.model));
    if (gpu.memory_mib != ModelMemory(models, gpu.model)) g.Set("memory_mib", Int(gpu.memory_mib));
    if (gpu.nvlink_domain != 0) g.Set("nvlink_domain", Int(gpu.nvlink_domain));
    if (!gpu.healthy) g.Set("healthy", Bool(false));
  }
  return list;
}

// ---- YAML emission ------------------------------------------------------------------------------

// Whether a string would read back as something else when written plain (YAML 1.1 and 1.2
// readers alike): numbers, booleans, null, and anything starting like a number.
bool LooksTyped(std::string_view s) {
  if (s.empty()) return true;
  std::string lower(s);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (std::string_view w : {"true", "false", "yes", "no", "on", "off", "y", "n", "null", "~",
                             ".inf", "-.inf", "+.inf", ".nan"}) {
    if (lower == w) return true;
  }
  const char c = s[0];
  if (c >= '0' && c <= '9') return true;
  return (c == '-' || c == '+' || c == '.') && s.size() > 1 &&
         ((s[1] >= '0' && s[1] <= '9') || s[1] == '.');
}

// Below the sections (depth >= 2), small mappings and lists of scalars are written in flow style
// ({name: a, value: 1}); lists of mappings stay one item a line ("- {...}").
bool Flow(const Value& v, int depth) {
  if (depth < 2) return false;
  if (v.kind == Value::Kind::kSequence) {
    return v.items.size() <= 16 && std::all_of(v.items.begin(), v.items.end(),
                                               [](const Value& i) { return i.is_scalar(); });
  }
  return v.Height() <= 3 && v.CountValues() <= 12;
}

void Emit(YAML::Emitter& e, const Value& v, int depth) {
  switch (v.kind) {
    case Value::Kind::kNull:
      e << YAML::Null;
      return;
    case Value::Kind::kBool:
    case Value::Kind::kNumber:
    case Value::Kind::kPlain:
      e << v.text;
      return;
    case Value::Kind::kString:
      if (LooksTyped(v.text)) e << YAML::DoubleQuoted;
      e << v.text;
      return;
    case Value::Kind::kSequence:
      if (Flow(v, depth)) e << YAML::Flow;
      e << YAML::BeginSeq;
      for (const Value& item : v.items) Emit(e, item, depth + 1);
      e << YAML::EndSeq;
      return;
    case Value::Kind::kMapping:
      if (Flow(v, depth)) e << YAML::Flow;
      e << YAML::BeginMap;
      for (const auto& [key, value] : v.members) {
        e << YAML::Key;
        if (LooksTyped(key)) e << YAML::DoubleQuoted;
        e << key << YAML::Value;
        Emit(e, value, depth + 1);
      }
      e << YAML::EndMap;
      return;
  }
}

}  // namespace

Value GpuModelValue(const GpuModel& g) {
  Value v = Value::Mapping();
  v.Set("name", Value::String(g.name));
  if (g.memory_mib != 0) v.Set("memory_mib", Int(g.memory_mib));
  if (g.price_milli_per_hour != 0) v.Set("price_per_hour", Milli(g.price_milli_per_hour));
  return v;
}

Value PriorityClassValue(const PriorityClass& p) {
  const PriorityClass defaults;
  Value v = Value::Mapping();
  v.Set("name", Value::String(p.name));
  v.Set("value", Int(p.value));
  v.Set("preemptible", Bool(p.preemptible));
  if (p.min_runtime_seconds != defaults.min_runtime_seconds) {
    v.Set("min_runtime_seconds", Int(p.min_runtime_seconds));
  }
  if (p.grace_period_seconds != defaults.grace_period_seconds) {
    v.Set("grace_period_seconds", Int(p.grace_period_seconds));
  }
  if (p.preempts_anywhere) v.Set("preempts_anywhere", Bool(true));
  for (const auto& [key, names] : {std::pair{"allowed_tenants", &p.allowed_tenants},
                                   std::pair{"allowed_queues", &p.allowed_queues}}) {
    if (names->empty()) continue;
    Value& list = v.Set(key, Value::Sequence());
    for (const std::string& n : *names) list.Add(Value::String(n));
  }
  return v;
}

Value QueueValue(const QueueSpec& q) {
  Value v = Value::Mapping();
  v.Set("name", Value::String(q.name));
  AddQueueFields(q, &v);
  return v;
}

Value RunAsValue(const RunAsConfig& r) {
  Value v = Value::Mapping();
  if (!r.user.empty()) v.Set("user", Value::String(r.user));
  if (r.uid) v.Set("uid", Int(*r.uid));
  if (r.gid) v.Set("gid", Int(*r.gid));
  return v;
}

Value TenantValue(const TenantConfig& t) {
  Value v = Value::Mapping();
  v.Set("name", Value::String(t.name));
  if (t.budget) {
    Value& b = v.Set("budget", Value::Mapping());
    b.Set("gpu_hours", Int(t.budget->gpu_hours));
    b.Set("period", Value::String(t.budget->period));
    b.Set("on_exhausted", Value::String(t.budget->on_exhausted));
  }
  if (t.allow_root) v.Set("allow_root", Bool(true));
  if (t.run_as) v.Set("run_as", RunAsValue(*t.run_as));
  if (!t.default_queue.empty()) v.Set("default_queue", Value::String(t.default_queue));
  if (t.images.registries || !t.images.insecure.empty()) {
    Value& im = v.Set("images", Value::Mapping());
    if (t.images.registries) {
      Value& regs = im.Set("registries", Value::Sequence());
      for (const std::string& r : *t.images.registries) regs.Add(Value::String(r));
    }
    if (!t.images.insecure.empty()) {
      Value& ins = im.Set("insecure", Value::Sequence());
      for (const std::string& r : t.images.insecure) ins.Add(Value::String(r));
    }
  }
  if (!t.mounts.empty()) {
    Value& mounts = v.Set("mounts", Value::Sequence());
    for (const MountRule& r : t.mounts) {
      Value& m = mounts.Add(Value::Mapping());
      m.Set("path", Value::String(r.path));
      m.Set("mode", Value::String(std::string(MountModeName(r.read_only))));
    }
  }
  if (!t.volumes.empty()) {
    Value& volumes = v.Set("volumes", Value::Sequence());
    for (const VolumeRule& r : t.volumes) {
      Value& m = volumes.Add(Value::Mapping());
      m.Set("name", Value::String(r.name));
      m.Set("mode", Value::String(std::string(MountModeName(r.read_only))));
      if (r.size_gib > 0) m.Set("size_gib", Int(r.size_gib));
    }
  }
  if (!t.queues.empty() && t.queues.front().is_tenant) AddQueueFields(t.queues.front(), &v);
  return v;
}

Value UserValue(const UserConfig& u) {
  Value v = Value::Mapping();
  v.Set("name", Value::String(u.name));
  if (!u.tenant.empty()) v.Set("tenant", Value::String(u.tenant));
  v.Set("role", Value::String(u.role));
  if (u.run_as) v.Set("run_as", RunAsValue(*u.run_as));
  return v;
}

Value ApprovalValue(const ApprovalRuleConfig& r) {
  Value v = Value::Mapping();
  v.Set("name", Value::String(r.name));
  Value& when = v.Set("when", Value::Mapping());
  if (r.when.gpus_at_least) when.Set("gpus_at_least", Int(*r.when.gpus_at_least));
  if (r.when.gpu_hours_at_least) when.Set("gpu_hours_at_least", Int(*r.when.gpu_hours_at_least));
  if (!r.when.priority_class.empty()) {
    when.Set("priority_class", Value::String(r.when.priority_class));
  }
  if (!r.when.queue.empty()) when.Set("queue", Value::String(r.when.queue));
  if (!r.when.type.empty()) when.Set("type", Value::String(r.when.type));
  Value& approvers = v.Set("approvers", Value::Mapping());
  if (!r.approver_role.empty()) {
    approvers.Set("role", Value::String(r.approver_role));
  } else {
    Value& users = approvers.Set("users", Value::Sequence());
    for (const std::string& u : r.approver_users) users.Add(Value::String(u));
  }
  if (r.expires_after_seconds != 0) {
    v.Set("expires_after_seconds", Int(r.expires_after_seconds));
  }
  return v;
}

Value IdentityValue(const IdentityConfig& c) {
  Value v = Value::Mapping();
  if (c.oidc) {
    const OidcConfig def;
    Value& o = v.Set("oidc", Value::Mapping());
    o.Set("issuer", Value::String(c.oidc->issuer));
    o.Set("audience", Value::String(c.oidc->audience));
    if (!c.oidc->client_id.empty()) o.Set("client_id", Value::String(c.oidc->client_id));
    if (c.oidc->username_claim != def.username_claim) {
      o.Set("username_claim", Value::String(c.oidc->username_claim));
    }
    if (c.oidc->groups_claim != def.groups_claim) {
      o.Set("groups_claim", Value::String(c.oidc->groups_claim));
    }
    if (c.oidc->clock_skew_seconds != def.clock_skew_seconds) {
      o.Set("clock_skew_seconds", Int(c.oidc->clock_skew_seconds));
    }
  }
  if (c.ldap) {
    const LdapConfig def;
    Value& l = v.Set("ldap", Value::Mapping());
    l.Set("url", Value::String(c.ldap->url));
    l.Set("user_dn", Value::String(c.ldap->user_dn));
    if (!c.ldap->group_base.empty()) l.Set("group_base", Value::String(c.ldap->group_base));
    if (c.ldap->group_filter != def.group_filter) {
      l.Set("group_filter", Value::String(c.ldap->group_filter));
    }
    if (c.ldap->group_attribute != def.group_attribute) {
      l.Set("group_attribute", Value::String(c.ldap->group_attribute));
    }
    if (c.ldap->start_tls) l.Set("start_tls", Bool(true));
    if (c.ldap->token_ttl_seconds != def.token_ttl_seconds) {
      l.Set("token_ttl_seconds", Int(c.ldap->token_ttl_seconds));
    }
  }
  if (!c.mappings.empty()) {
    Value& list = v.Set("mappings", Value::Sequence());
    for (const IdentityMapping& r : c.mappings) {
      Value m = Value::Mapping();
      if (!r.group.empty()) m.Set("group", Value::String(r.group));
      if (!r.user.empty()) m.Set("user", Value::String(r.user));
      if (!r.tenant.empty()) m.Set("tenant", Value::String(r.tenant));
      m.Set("role", Value::String(r.role));
      list.Add(std::move(m));
    }
  }
  return v;
}

Value NodeValue(const Node& n, const std::vector<GpuModel>& models) {
  Value v = Value::Mapping();
  v.Set("name", Value::String(n.name));
  if (n.cpu_milli != 0) v.Set("cpu_milli", Int(n.cpu_milli));
  if (n.memory_mib != 0) v.Set("memory_mib", Int(n.memory_mib));
  if (!n.rack.empty()) v.Set("rack", Value::String(n.rack));
  if (!n.block.empty()) v.Set("block", Value::String(n.block));
  if (!n.labels.empty()) {
    Value& labels = v.Set("labels", Value::Mapping());
    for (const auto& [key, value] : n.labels) labels.Set(key, Value::String(value));
  }
  if (!n.taints.empty()) {
    Value& taints = v.Set("taints", Value::Sequence());
    for (const Taint& t : n.taints) {
      Value& tv = taints.Add(Value::Mapping());
      tv.Set("key", Value::String(t.key));
      if (!t.value.empty()) tv.Set("value", Value::String(t.value));
    }
  }
  if (!n.gpus.empty()) v.Set("gpus", GpusValue(n, models));
  if (n.state != NodeState::kReady)
    v.Set("state", Value::String(std::string(NodeStateName(n.state))));
  return v;
}

Value SchedulerValue(const SchedulerConfig& s) {
  Value v = Value::Mapping();
  if (!s.policy.empty()) v.Set("policy", Value::String(s.policy));
  if (!s.filters.empty()) {
    Value& list = v.Set("filters", Value::Sequence());
    for (const std::string& f : s.filters) list.Add(Value::String(f));
  }
  if (!s.scores.empty()) {
    Value& list = v.Set("scores", Value::Sequence());
    for (const ScoreWeightConfig& w : s.scores) {
      Value& e = list.Add(Value::Mapping());
      e.Set("plugin", Value::String(w.plugin));
      e.Set("weight", Int(w.weight));
    }
  }
  if (!s.gpu_selector.empty()) v.Set("gpu_selector", Value::String(s.gpu_selector));
  if (s.nodes_to_score != 0) v.Set("nodes_to_score", Int(s.nodes_to_score));
  return v;
}

Value ConfigValue(const ClusterConfig& c) {
  Value root = Value::Mapping();
  if (!(c.scheduler == SchedulerConfig{})) root.Set("scheduler", SchedulerValue(c.scheduler));
  if (!c.gpu_models.empty()) {
    Value& list = root.Set("gpu_models", Value::Sequence());
    for (const GpuModel& g : c.gpu_models) list.Add(GpuModelValue(g));
  }
  if (!c.priority_classes.empty()) {
    Value& list = root.Set("priority_classes", Value::Sequence());
    for (const PriorityClass& p : c.priority_classes) list.Add(PriorityClassValue(p));
  }
  if (!c.tenants.empty()) {
    Value& list = root.Set("tenants", Value::Sequence());
    for (const TenantConfig& t : c.tenants) {
      std::multimap<std::string, const QueueSpec*> children;
      std::map<std::string, bool> known;
      known[t.name] = true;
      for (const QueueSpec& q : t.queues) {
        if (q.is_tenant) continue;
        ARBITER_CHECK(known.count(q.parent) == 1,
                      fmt::format("queue '{}' of tenant '{}' names parent '{}' before it", q.name,
                                  t.name, q.parent));
        known[q.name] = true;
        children.emplace(q.parent, &q);
      }
      QueueSpec self;
      self.name = t.name;
      list.Add(QueueTree(t.queues.empty() ? self : t.queues.front(), children, true, t));
    }
  }
  if (!c.users.empty()) {
    Value& list = root.Set("users", Value::Sequence());
    for (const UserConfig& u : c.users) list.Add(UserValue(u));
  }
  if (!c.nodes.empty()) {
    Value& list = root.Set("nodes", Value::Sequence());
    for (const Node& n : c.nodes) list.Add(NodeValue(n, c.gpu_models));
  }
  if (!c.approvals.empty()) {
    Value& list = root.Set("approvals", Value::Sequence());
    for (const ApprovalRuleConfig& r : c.approvals) list.Add(ApprovalValue(r));
  }
  if (c.identity != IdentityConfig{}) root.Set("identity", IdentityValue(c.identity));
  return root;
}

std::string EmitYaml(const Value& v) {
  if (v.kind == Value::Kind::kMapping && v.members.empty()) return "{}\n";
  YAML::Emitter e;
  Emit(e, v, 0);
  ARBITER_CHECK(e.good(), "YAML emitter: " + e.GetLastError());
  return std::string(e.c_str()) + "\n";
}

std::string DumpConfigYaml(const ClusterConfig& c) { return EmitYaml(ConfigValue(c)); }

}  // namespace arbiter::api
