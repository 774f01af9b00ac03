// ControlPlane: tokens for people a directory authenticated (docs/identity.md "LDAP"). The
// directory itself is asked by the HTTP layer (ldap_login.h), never under mu_: here only the
// identity mapping is applied and the token made.
#include <fmt/format.h>

#include "server/control_plane.h"
#include "server/control_plane_helpers.h"

namespace arbiter::server {

using nlohmann::json;

std::optional<api::LdapConfig> ControlPlane::LdapSettings() const {
  std::lock_guard<std::mutex> lock(mu_);
  return config_.identity.ldap;
}

Result<json> ControlPlane::IssueDirectoryToken(const std::string& user,
                                               const std::vector<std::string>& groups,
                                               const std::string& kind, int64_t ttl_seconds,
                                               const std::string& audit_action) {
  const Principal actor{user, "", Role::kViewer, ""};
  NewToken t = GenerateToken();
  store::TokenRecord rec;
  std::shared_future<Status> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // The mappings as they are now: a configuration applied while the directory was asked counts.
    const api::IdentityMapping* m = api::MapIdentity(config_.identity, user, groups);
    if (m == nullptr) {
      Audit(actor, audit_action, "user/" + user, "denied: no identity mapping matches");
      std::string list;
      for (const std::string& g : groups) list += (list.empty() ? "" : ", ") + g;
      return Forbidden(fmt::format(
          "the directory knows {} but no identity mapping matches the user or its groups ({}); "
          "ask an administrator to map one of them (identity.mappings)",
          user, list.empty() ? "none" : list));
    }
    rec.id = t.id;
    rec.hash_hex = t.hash_hex;
    rec.user = user;
    rec.tenant = m->role == "admin" ? "" : m->tenant;
    rec.role = m->role;
    rec.kind = kind;
    rec.created_at_ms = now_();
    rec.expires_at_ms = rec.created_at_ms + ttl_seconds * 1000;
    tokens_.Put(rec);
    store::WriteBatch b;
    b.PutToken(rec);
    b.AppendAudit({0, now_(), user, audit_action, "user/" + user, "ok",
                   json{{"tenant", rec.tenant}, {"role", rec.role}}.dump(), rec.id});
    done = store_->WriteAsync(std::move(b));
  }
  ARBITER_RETURN_IF_ERROR(done.get());
  return json{{"token", t.token}, {"id", rec.id},
              {"user", rec.user}, {"tenant", rec.tenant},
              {"role", rec.role}, {"expires_at", Iso8601(rec.expires_at_ms)}};
}

}  // namespace arbiter::server
