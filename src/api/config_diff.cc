// DiffConfig: objects matched by kind and name, compared field by field in canonical form.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <utility>

#include "api/config.h"
#include "api/config_canonical.h"

namespace arbiter::api {

namespace {

// Kinds in the order changes are listed.
enum Kind {
  kScheduler,
  kGpuModel,
  kPriorityClass,
  kTenant,
  kQueue,
  kUser,
  kNode,
  kApproval,
  kIdentity
};
constexpr const char* kKindNames[] = {"scheduler", "gpu_model", "priority_class",
                                      "tenant",    "queue",     "user",
                                      "node",      "approval",  "identity"};

using Fields = std::vector<std::pair<std::string, std::string>>;  // "guaranteed.gpu" -> "8"
using Objects = std::map<std::pair<int, std::string>, Fields>;

std::string Text(const Value& v) {
  if (v.kind == Value::Kind::kSequence) {
    std::vector<std::string> items;
    for (const Value& i : v.items) items.push_back(Text(i));
    return fmt::format("[{}]", fmt::join(items, ", "));
  }
  if (v.kind == Value::Kind::kMapping) {
    std::vector<std::string> members;
    for (const auto& [k, m] : v.members) members.push_back(fmt::format("{}: {}", k, Text(m)));
    return fmt::format("{{{}}}", fmt::join(members, ", "));
  }
  return v.is_null() ? "null" : v.text;
}

// Leaves of a canonical value by path; lists are compared whole ("[training, experiment]").
void Flatten(const Value& v, const std::string& path, Fields* out) {
  if (v.kind == Value::Kind::kMapping) {
    for (const auto& [key, member] : v.members) {
      if (path.empty() && key == "name") continue;
      Flatten(member, path.empty() ? key : fmt::format("{}.{}", path, key), out);
    }
    return;
  }
  out->emplace_back(path, Text(v));
}

void Add(Objects* objects, Kind kind, const std::string& name, const Value& v) {
  Fields fields;
  Flatten(v, "", &fields);
  (*objects)[{kind, name}] = std::move(fields);
}

Objects Collect(const ClusterConfig& c) {
  Objects objects;
  if (!(c.scheduler == SchedulerConfig{})) {
    Add(&objects, kScheduler, "scheduler", SchedulerValue(c.scheduler));
  }
  for (const GpuModel& g : c.gpu_models) Add(&objects, kGpuModel, g.name, GpuModelValue(g));
  for (const PriorityClass& p : c.priority_classes) {
    Add(&objects, kPriorityClass, p.name, PriorityClassValue(p));
  }
  for (const TenantConfig& t : c.tenants) {
    Add(&objects, kTenant, t.name, TenantValue(t));
    for (const QueueSpec& q : t.queues) {
      if (q.is_tenant) continue;
      Value v = QueueValue(q);
      // Where the queue sits is part of it: moving it is an update.
      v.members.insert(v.members.begin() + 1, Member{"parent", Value::String(q.parent)});
      Add(&objects, kQueue, q.name, v);
    }
  }
  for (const UserConfig& u : c.users) Add(&objects, kUser, u.name, UserValue(u));
  for (const Node& n : c.nodes) Add(&objects, kNode, n.name, NodeValue(n, c.gpu_models));
  for (const ApprovalRuleConfig& r : c.approvals) {
    Add(&objects, kApproval, r.name, ApprovalValue(r));
  }
  if (c.identity != IdentityConfig{}) {
    Add(&objects, kIdentity, "identity", IdentityValue(c.identity));
  }
  return objects;
}

const std::string* Lookup(const Fields& fields, const std::string& key) {
  for (const auto& [k, v] : fields) {
    if (k == key) return &v;
  }
  return nullptr;
}

std::string Describe(const Fields& fields) {
  std::vector<std::string> parts;
  for (const auto& [k, v] : fields) parts.push_back(fmt::format("{}: {}", k, v));
  return fmt::format("{}", fmt::join(parts, "; "));
}

// "k: old -> new" for every field that differs, in the order of `before` then the new fields.
std::string Changes(const Fields& before, const Fields& after) {
  std::vector<std::string> parts;
  for (const auto& [k, v] : before) {
    const std::string* now = Lookup(after, k);
    if (now == nullptr) {
      parts.push_back(fmt::format("{}: {} -> (none)", k, v));
    } else if (*now != v) {
      parts.push_back(fmt::format("{}: {} -> {}", k, v, *now));
    }
  }
  for (const auto& [k, v] : after) {
    if (Lookup(before, k) == nullptr) parts.push_back(fmt::format("{}: (none) -> {}", k, v));
  }
  return fmt::format("{}", fmt::join(parts, "; "));
}

}  // namespace

std::vector<ConfigChange> DiffConfig(const ClusterConfig& current, const ClusterConfig& desired) {
  const Objects before = Collect(current);
  const Objects after = Collect(desired);
  std::vector<ConfigChange> changes;
  auto b = before.begin();
  auto a = after.begin();
  // A merge of the two sorted maps: (kind, name) order.
  while (b != before.end() || a != after.end()) {
    if (a == after.end() || (b != before.end() && b->first < a->first)) {
      changes.push_back({kKindNames[b->first.first], b->first.second, "delete", ""});
      ++b;
    } else if (b == before.end() || a->first < b->first) {
      changes.push_back(
          {kKindNames[a->first.first], a->first.second, "create", Describe(a->second)});
      ++a;
    } else {
      if (a->second != b->second) {
        changes.push_back(
            {kKindNames[a->first.first], a->first.second, "update", Changes(b->second, a->second)});
      }
      ++a;
      ++b;
    }
  }
  return changes;
}

const IdentityMapping* MapIdentity(const IdentityConfig& c, const std::string& user,
                                   const std::vector<std::string>& groups) {
  for (const IdentityMapping& m : c.mappings) {
    if (!m.user.empty() && m.user == user) return &m;
    if (!m.group.empty() && std::find(groups.begin(), groups.end(), m.group) != groups.end()) {
      return &m;
    }
  }
  return nullptr;
}

}  // namespace arbiter::api
