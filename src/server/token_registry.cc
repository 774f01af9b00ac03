#include "server/token_registry.h"

#include <fmt/format.h>

#include <algorithm>
#include <mutex>

namespace arbiter::server {

void TokenRegistry::Put(const store::TokenRecord& r) {
  std::unique_lock<std::shared_mutex> lock(mu_);
  tokens_[r.id] = r;
}

void TokenRegistry::SetUsers(const std::vector<User>& users) {
  std::unordered_map<std::string, std::pair<std::string, Role>> index;
  for (const User& u : users) index[u.name] = {u.tenant, u.role};
  std::unique_lock<std::shared_mutex> lock(mu_);
  users_ = std::move(index);
}

void TokenRegistry::SetTenants(const std::vector<std::string>& tenants) {
  std::unordered_set<std::string> index(tenants.begin(), tenants.end());
  std::unique_lock<std::shared_mutex> lock(mu_);
  tenants_ = std::move(index);
}

Result<Principal> TokenRegistry::Authenticate(std::string_view bearer, TimeMs now) const {
  std::string id;
  std::string secret;
  if (!ParseToken(bearer, &id, &secret)) {
    return Status(StatusCode::kUnauthenticated, "missing or malformed bearer token");
  }
  const std::string hash = HashSecret(secret);
  std::shared_lock<std::shared_mutex> lock(mu_);
  auto it = tokens_.find(id);
  if (it == tokens_.end() || it->second.revoked || !SecureEquals(it->second.hash_hex, hash) ||
      (it->second.expires_at_ms > 0 && it->second.expires_at_ms < now)) {
    return Status(StatusCode::kUnauthenticated, "invalid, revoked or expired token");
  }
  Principal p;
  p.user = it->second.user;
  p.tenant = it->second.tenant;
  p.role = ParseRole(it->second.role).value_or(Role::kViewer);
  p.token_id = id;
  p.node = it->second.node;
  p.read_only = it->second.scope == "read-only";
  if (CarriesIdentity(it->second.kind)) {
    // A directory sign-in's token: its mapping's tenant and role at sign-in (the directory is not
    // asked again), as long as that tenant exists.
    if (!p.tenant.empty() && !tenants_.count(p.tenant)) {
      return Status(StatusCode::kUnauthenticated,
                    fmt::format("the tenant {} of this token no longer exists", p.tenant));
    }
  } else if (it->second.kind != "node" && p.user != "admin") {
    // A user's token speaks for the user as the user is now: deleted, it stops working; moved to
    // another tenant or given another role, it follows (never above the role it was made with).
    auto u = users_.find(p.user);
    if (u == users_.end()) {
      return Status(StatusCode::kUnauthenticated,
                    fmt::format("the user {} of this token no longer exists", p.user));
    }
    p.tenant = u->second.first;
    p.role =
        static_cast<Role>(std::max(static_cast<int>(p.role), static_cast<int>(u->second.second)));
  }
  return p;
}

std::string TokenRegistry::TenantOfLocked(const store::TokenRecord& r) const {
  if (r.kind == "node" || CarriesIdentity(r.kind)) return r.tenant;
  auto u = users_.find(r.user);
  return u != users_.end() ? u->second.first : r.tenant;
}

std::optional<TokenRegistry::Entry> TokenRegistry::Find(const std::string& id) const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  auto it = tokens_.find(id);
  if (it == tokens_.end()) return std::nullopt;
  return Entry{it->second, TenantOfLocked(it->second)};
}

std::optional<store::TokenRecord> TokenRegistry::Revoke(const std::string& id) {
  std::unique_lock<std::shared_mutex> lock(mu_);
  auto it = tokens_.find(id);
  if (it == tokens_.end()) return std::nullopt;
  it->second.revoked = true;
  return it->second;
}

std::vector<TokenRegistry::Entry> TokenRegistry::List(
    const std::function<bool(const Entry&)>& keep) const {
  std::vector<Entry> out;
  std::shared_lock<std::shared_mutex> lock(mu_);
  for (const auto& [id, r] : tokens_) {
    Entry e{r, TenantOfLocked(r)};
    if (keep(e)) out.push_back(std::move(e));
  }
  return out;
}

bool TokenRegistry::AnyActiveWithRole(std::string_view role) const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  return std::any_of(tokens_.begin(), tokens_.end(),
                     [&](const auto& kv) { return kv.second.role == role && !kv.second.revoked; });
}

}  // namespace arbiter::server
