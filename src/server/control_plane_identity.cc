// Who tasks run as: the run_as of the job's user, else of its tenant, else the tenant's own uid,
// given once from --tenant-uid-base and kept in the store (docs/security.md).
#include <fmt/format.h>

#include "server/control_plane.h"

namespace arbiter::server {

using nlohmann::json;

namespace {

constexpr const char* kTenantUidsKey = "tenant_uids";

RunAs FromConfig(const api::RunAsConfig& c) {
  RunAs r;
  r.user = c.user;
  r.uid = c.uid.value_or(-1);
  r.gid = c.gid.value_or(-1);
  return r;
}

}  // namespace

void ControlPlane::LoadTenantUidsLocked(const std::string& text) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return;
  next_tenant_uid_ = j.value("next", int64_t{0});
  const json uids = j.value("uids", json::object());  // kept: items() of a temporary dangles
  for (const auto& [name, uid] : uids.items()) {
    if (uid.is_number_integer()) tenant_uids_[name] = uid.get<int64_t>();
  }
}

void ControlPlane::AllocateTenantUidsLocked(store::WriteBatch* b) {
  bool changed = false;
  for (const api::TenantConfig& t : config_.tenants) {
    if (tenant_uids_.count(t.name)) continue;
    if (next_tenant_uid_ <= tenant_uid_base_) next_tenant_uid_ = tenant_uid_base_ + 1;
    tenant_uids_[t.name] = next_tenant_uid_++;
    changed = true;
  }
  if (!changed) return;
  json uids = json::object();
  for (const auto& [name, uid] : tenant_uids_) uids[name] = uid;
  b->PutKv({kTenantUidsKey, json{{"next", next_tenant_uid_}, {"uids", uids}}.dump()});
}

RunAs ControlPlane::RunAsLocked(const std::string& tenant, const std::string& user) const {
  const api::TenantConfig* t = nullptr;
  for (const api::TenantConfig& c : config_.tenants) {
    if (c.name == tenant) t = &c;
  }
  RunAs r;
  const api::UserConfig* u = FindUserLocked(user);
  if (u != nullptr && u->tenant == tenant && u->run_as) {
    r = FromConfig(*u->run_as);
  } else if (t != nullptr && t->run_as) {
    r = FromConfig(*t->run_as);
  } else if (auto it = tenant_uids_.find(tenant); it != tenant_uids_.end()) {
    r.uid = it->second;
    r.gid = it->second;
  }
  r.root_allowed = t != nullptr && t->allow_root;
  return r;
}

RunAs ControlPlane::RunAsFor(const std::string& tenant, const std::string& user) const {
  std::lock_guard<std::mutex> lock(mu_);
  return RunAsLocked(tenant, user);
}

}  // namespace arbiter::server
