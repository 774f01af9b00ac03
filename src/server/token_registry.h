// TokenRegistry: the API tokens (their hashes, never the secrets) and who each one speaks for.
//
// Owns: every token record by id, each configured user's current tenant and role (tokens follow
// their user: a user moved or deleted takes its tokens along), and the names of the tenants.
// Tokens of a directory sign-in (kind "ldap": POST /api/v1/login/ldap) belong to no configured
// user: they carry the tenant and role their identity mapping gave at sign-in, until they expire
// or are revoked, and stop working when their tenant is deleted. Lock: its own shared_mutex,
// a leaf (it calls nothing while holding it), so that authenticating a request, which every
// request does, never waits for the control plane's lock that scheduling cycles hold over the
// whole backlog. Writers (the control plane, under its own lock so that the store's commit order
// stays the order of changes) change records here before enqueuing their store write.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "common/result.h"
#include "model/time.h"
#include "server/auth.h"
#include "store/records.h"

namespace arbiter::server {

class TokenRegistry {
 public:
  // A token and its tenant now (its user's current tenant; a node token's own).
  struct Entry {
    store::TokenRecord record;
    std::string tenant;
  };
  struct User {
    std::string name, tenant;
    Role role = Role::kViewer;
  };

  // Adds or replaces records (loading from the store, creating a token).
  void Put(const store::TokenRecord& r);
  // The configured users, as they are now (whenever the configuration changes).
  void SetUsers(const std::vector<User>& users);
  // The configured tenants' names, as they are now (whenever the configuration changes).
  void SetTenants(const std::vector<std::string>& tenants);
  // Whether tokens of `kind` carry their own tenant and role rather than their user's.
  static bool CarriesIdentity(std::string_view kind) { return kind == "ldap"; }

  // The principal a bearer token stands for at `now`: Unauthenticated when malformed, unknown,
  // revoked, expired, or when its user (or, for a directory sign-in's token, its tenant) no
  // longer exists. A user's token has its user's tenant and role now (never above the role it was
  // made with); a directory sign-in's token the tenant and role it was made with.
  Result<Principal> Authenticate(std::string_view bearer, TimeMs now) const;

  std::optional<Entry> Find(const std::string& id) const;
  // Marks a token revoked; returns its record then (nullopt when unknown).
  std::optional<store::TokenRecord> Revoke(const std::string& id);
  // Every token with its tenant now, by id, for which `keep` holds.
  std::vector<Entry> List(const std::function<bool(const Entry&)>& keep) const;
  // Whether any token that is not revoked has role `role`.
  bool AnyActiveWithRole(std::string_view role) const;

 private:
  std::string TenantOfLocked(const store::TokenRecord& r) const;

  mutable std::shared_mutex mu_;
  std::map<std::string, store::TokenRecord> tokens_;
  std::unordered_map<std::string, std::pair<std::string, Role>> users_;  // name -> tenant, role
  std::unordered_set<std::string> tenants_;
};

}  // namespace arbiter::server
