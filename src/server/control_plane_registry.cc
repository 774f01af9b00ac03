// Registry credentials (docs/config.md, "Registry credentials"): per tenant and registry prefix,
// the user and the sealed password its nodes pull images with. Kept in the kv records
// ("registry_credential/TENANT/REGISTRY" -> {"tenant", "registry", "user", "password_sealed",
// "created_ms", "created_by"}); the password is sealed with the server's key, bound to its tenant
// and registry, and never leaves the server but to a node that pulls an image for a task.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "model/mounts.h"
#include "server/control_plane.h"
#include "server/control_plane_helpers.h"

namespace arbiter::server {

using nlohmann::json;

namespace {

constexpr size_t kMaxRegistryBytes = 255;
constexpr size_t kMaxCredentialBytes = 4096;
constexpr size_t kMaxCredentialsPerTenant = 64;

std::string Key(const std::string& tenant, const std::string& registry) {
  return fmt::format("{}{}/{}", kRegistryCredentialKeyPrefix, tenant, registry);
}

// What the sealed password is bound to: a value moved to another row does not open.
std::string SealContext(const std::string& tenant, const std::string& registry) {
  return fmt::format("registry-credential\n{}\n{}", tenant, registry);
}

Status CheckText(const std::string& v, const char* field, size_t max, bool colon_allowed) {
  if (v.empty()) return InvalidArgument(field, "is required");
  if (v.size() > max) return InvalidArgument(field, fmt::format("must be at most {} bytes", max));
  for (char c : v) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return InvalidArgument(field, "must not contain control characters");
    }
    if (!colon_allowed && c == ':') {
      return InvalidArgument(field, "must not contain ':' (the pull credential is user:password)");
    }
  }
  return Status::Ok();
}

// A registry prefix as tenants' `images.registries` are written: a host[:port], then optionally
// a path; no spaces.
Status CheckRegistry(const std::string& r) {
  ARBITER_RETURN_IF_ERROR(CheckText(r, "registry", kMaxRegistryBytes, true));
  for (char c : r) {
    if (c == ' ') return InvalidArgument("registry", "must not contain spaces");
  }
  if (r.front() == '/' || r.find("://") != std::string::npos) {
    return InvalidArgument("registry",
                           fmt::format("{} is not a registry prefix: write host[:port][/path], "
                                       "without a scheme",
                                       r));
  }
  return Status::Ok();
}

}  // namespace

void ControlPlane::SetSecretBox(std::unique_ptr<SecretBox> box) { secret_box_ = std::move(box); }

void ControlPlane::LoadRegistryCredentialLocked(const std::string& key, const std::string& value) {
  json j = json::parse(value, nullptr, false);
  if (!j.is_object() || !j.value("tenant", json()).is_string() ||
      !j.value("registry", json()).is_string()) {
    PushEventLocked("registry_credential", {{"key", key}, {"message", "unreadable record"}});
    return;
  }
  RegistryCredential c;
  c.user = j.value("user", "");
  c.sealed_password = j.value("password_sealed", "");
  c.created_ms = j.value("created_ms", int64_t{0});
  c.created_by = j.value("created_by", "");
  registry_credentials_[{j["tenant"].get<std::string>(), j["registry"].get<std::string>()}] =
      std::move(c);
}

Result<json> ControlPlane::SetRegistryCredential(const Principal& p, const std::string& tenant_in,
                                                 const std::string& registry,
                                                 const std::string& user,
                                                 const std::string& password) {
  if (p.role != Role::kAdmin && p.role != Role::kTenantAdmin) {
    return Forbidden("only admins and tenant admins may set registry credentials");
  }
  ARBITER_RETURN_IF_ERROR(CheckRegistry(registry));
  ARBITER_RETURN_IF_ERROR(CheckText(user, "user", kMaxCredentialBytes, false));
  ARBITER_RETURN_IF_ERROR(CheckText(password, "password", kMaxCredentialBytes, true));
  if (secret_box_ == nullptr) {
    return FailedPrecondition("the server has no secret key to seal credentials with");
  }
  std::shared_future<Status> done;
  json out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const std::string tenant = tenant_in.empty() ? p.tenant : tenant_in;
    if (tenant.empty()) {
      return InvalidArgument("tenant", "is required: an admin belongs to no tenant");
    }
    bool known = false;
    for (const api::TenantConfig& t : config_.tenants) known = known || t.name == tenant;
    if (!known || (p.role != Role::kAdmin && tenant != p.tenant)) {
      return InvalidArgument("tenant", fmt::format("tenant {} not found", tenant));
    }
    size_t count = 0;
    for (const auto& [k, c] : registry_credentials_) count += k.first == tenant ? 1 : 0;
    const bool replace = registry_credentials_.count({tenant, registry}) != 0;
    if (!replace && count >= kMaxCredentialsPerTenant) {
      return InvalidArgument("registry", fmt::format("tenant {} has {} registry credentials, the "
                                                     "most it may have",
                                                     tenant, kMaxCredentialsPerTenant));
    }
    auto sealed = secret_box_->Seal(password, SealContext(tenant, registry));
    if (!sealed.ok()) return sealed.status();
    RegistryCredential c{user, std::move(sealed).value(), now_(), p.user};
    store::WriteBatch b;
    b.PutKv({Key(tenant, registry), json{{"tenant", tenant},
                                         {"registry", registry},
                                         {"user", c.user},
                                         {"password_sealed", c.sealed_password},
                                         {"created_ms", c.created_ms},
                                         {"created_by", c.created_by}}
                                        .dump()});
    store::AuditRecord a{0,
                         c.created_ms,
                         p.user,
                         "registry_credential.set",
                         fmt::format("registry_credential/{}/{}", tenant, registry),
                         "ok",
                         json{{"user", user}, {"replaced", replace}}.dump(),
                         p.token_id};
    a.tenant = tenant;
    a.source = p.source;
    b.AppendAudit(std::move(a));
    out = {{"tenant", tenant},
           {"registry", registry},
           {"user", c.user},
           {"created_ms", c.created_ms},
           {"created_by", c.created_by}};
    registry_credentials_[{tenant, registry}] = std::move(c);
    done = store_->WriteAsync(std::move(b));
  }
  ARBITER_RETURN_IF_ERROR(done.get());
  return out;
}

Result<json> ControlPlane::ListRegistryCredentials(const Principal& p, const std::string& tenant) {
  if (p.role == Role::kNode) return Forbidden("nodes may not read registry credentials");
  std::lock_guard<std::mutex> lock(mu_);
  json items = json::array();
  for (const auto& [k, c] : registry_credentials_) {
    if (!tenant.empty() && k.first != tenant) continue;
    if (!CanReadTenantLocked(p, k.first)) continue;
    if (p.role != Role::kAdmin && k.first != p.tenant) continue;
    items.push_back({{"tenant", k.first},
                     {"registry", k.second},
                     {"user", c.user},
                     {"created_ms", c.created_ms},
                     {"created_by", c.created_by}});
  }
  return json{{"items", std::move(items)}};
}

Result<json> ControlPlane::DeleteRegistryCredential(const Principal& p,
                                                    const std::string& tenant_in,
                                                    const std::string& registry) {
  if (p.role != Role::kAdmin && p.role != Role::kTenantAdmin) {
    return Forbidden("only admins and tenant admins may delete registry credentials");
  }
  if (registry.empty()) return InvalidArgument("registry", "is required");
  std::shared_future<Status> done;
  json out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const std::string tenant = tenant_in.empty() ? p.tenant : tenant_in;
    if (tenant.empty()) {
      return InvalidArgument("tenant", "is required: an admin belongs to no tenant");
    }
    auto it = registry_credentials_.find({tenant, registry});
    if (it == registry_credentials_.end() || (p.role != Role::kAdmin && tenant != p.tenant)) {
      return NotFound(fmt::format("tenant {} has no credential for registry {}", tenant, registry));
    }
    store::WriteBatch b;
    b.DeleteKv(Key(tenant, registry));
    store::AuditRecord a{0,
                         now_(),
                         p.user,
                         "registry_credential.delete",
                         fmt::format("registry_credential/{}/{}", tenant, registry),
                         "ok",
                         json{{"user", it->second.user}}.dump(),
                         p.token_id};
    a.tenant = tenant;
    a.source = p.source;
    b.AppendAudit(std::move(a));
    registry_credentials_.erase(it);
    out = {{"tenant", tenant}, {"registry", registry}, {"deleted", true}};
    done = store_->WriteAsync(std::move(b));
  }
  ARBITER_RETURN_IF_ERROR(done.get());
  return out;
}

std::optional<std::string> ControlPlane::ImagePullAuth(const std::string& tenant,
                                                       const std::string& image) const {
  std::lock_guard<std::mutex> lock(mu_);
  return ImagePullAuthLocked(tenant, image);
}

bool ControlPlane::ImageInsecureLocked(const std::string& tenant, const std::string& image) const {
  if (image.empty()) return false;
  const std::string registry = ImageRegistry(image);
  for (const api::TenantConfig& c : config_.tenants) {
    if (c.name != tenant) continue;
    return std::find(c.images.insecure.begin(), c.images.insecure.end(), registry) !=
           c.images.insecure.end();
  }
  return false;
}

std::optional<std::string> ControlPlane::ImagePullAuthLocked(const std::string& tenant,
                                                             const std::string& image) const {
  if (secret_box_ == nullptr || image.empty()) return std::nullopt;
  std::string registry;
  RegistryCredential found;
  // The longest prefix that matches, as a tenant's allowed registries match.
  for (auto it = registry_credentials_.lower_bound({tenant, ""});
       it != registry_credentials_.end() && it->first.first == tenant; ++it) {
    ImagePolicy one;
    one.registries = std::vector<std::string>{it->first.second};
    const bool match = ImageAllowed(image, one) || ImageRegistry(image) == it->first.second;
    if (match && it->first.second.size() >= registry.size()) {
      registry = it->first.second;
      found = it->second;
    }
  }
  if (registry.empty()) return std::nullopt;
  auto password = secret_box_->Open(found.sealed_password, SealContext(tenant, registry));
  if (!password.ok()) {
    spdlog::warn("registry credential of tenant {} for {}: {}", tenant, registry,
                 password.status().message());
    return std::nullopt;
  }
  return found.user + ":" + *password;
}

}  // namespace arbiter::server
