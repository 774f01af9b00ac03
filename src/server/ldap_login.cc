#include "server/ldap_login.h"

#include <fmt/format.h>
#include <ldap.h>
#include <sys/time.h>

#include <algorithm>
#include <memory>

namespace arbiter::server {

std::string EscapeDnValue(std::string_view v) {
  std::string out;
  out.reserve(v.size() + 8);
  for (size_t i = 0; i < v.size(); ++i) {
    const char c = v[i];
    if (c == '\0') {
      out += "\\00";
    } else if (c == '"' || c == '+' || c == ',' || c == ';' || c == '<' || c == '>' || c == '\\' ||
               c == '=' || (i == 0 && (c == '#' || c == ' ')) || (i + 1 == v.size() && c == ' ')) {
      out += '\\';
      out += c;
    } else {
      out += c;
    }
  }
  return out;
}

std::string EscapeFilterValue(std::string_view v) {
  std::string out;
  out.reserve(v.size() + 8);
  for (const char c : v) {
    switch (c) {
      case '*':
        out += "\\2a";
        break;
      case '(':
        out += "\\28";
        break;
      case ')':
        out += "\\29";
        break;
      case '\\':
        out += "\\5c";
        break;
      case '\0':
        out += "\\00";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string ExpandTemplate(std::string_view tmpl,
                           const std::vector<std::pair<std::string, std::string>>& values) {
  std::string out;
  out.reserve(tmpl.size());
  for (size_t i = 0; i < tmpl.size();) {
    bool replaced = false;
    if (tmpl[i] == '{') {
      for (const auto& [name, value] : values) {
        const std::string key = "{" + name + "}";
        if (tmpl.substr(i, key.size()) == key) {
          out += value;
          i += key.size();
          replaced = true;
          break;
        }
      }
    }
    if (!replaced) out += tmpl[i++];
  }
  return out;
}

namespace {

constexpr const char* kInvalidCredentials = "invalid user name or password";

struct Unbind {
  void operator()(LDAP* ld) const { ldap_unbind_ext_s(ld, nullptr, nullptr); }
};
struct MsgFree {
  void operator()(LDAPMessage* m) const { ldap_msgfree(m); }
};

// The connection could not be made, or was lost, or the directory says it cannot serve now.
bool IsUnreachable(int rc) {
  return rc == LDAP_SERVER_DOWN || rc == LDAP_CONNECT_ERROR || rc == LDAP_TIMEOUT ||
         rc == LDAP_TIMELIMIT_EXCEEDED || rc == LDAP_UNAVAILABLE || rc == LDAP_BUSY;
}

// What a directory answers a bind with a wrong name or password (or an account it will not let
// in): all the same answer, so that it never tells which part was wrong or whether a name exists.
bool IsRefusedBind(int rc) {
  return rc == LDAP_INVALID_CREDENTIALS || rc == LDAP_NO_SUCH_OBJECT ||
         rc == LDAP_INVALID_DN_SYNTAX || rc == LDAP_UNWILLING_TO_PERFORM ||
         rc == LDAP_CONSTRAINT_VIOLATION || rc == LDAP_INAPPROPRIATE_AUTH ||
         rc == LDAP_INSUFFICIENT_ACCESS;
}

Status Unreachable(const api::LdapConfig& c, int rc) {
  return Status(StatusCode::kUnavailable, fmt::format("the directory at {} cannot be reached ({}); "
                                                      "try again later",
                                                      c.url, ldap_err2string(rc)));
}

}  // namespace

Result<DirectoryUser> BindDirectoryUser(const api::LdapConfig& c, std::string_view user,
                                        std::string_view password, int64_t timeout_ms) {
  if (password.empty()) {
    return InvalidArgument("password", "must not be empty");
  }
  // 1. A connection (libldap connects lazily, at the first operation).
  LDAP* raw = nullptr;
  int rc = ldap_initialize(&raw, c.url.c_str());
  if (rc != LDAP_SUCCESS || raw == nullptr) {
    return Status(StatusCode::kInternal, fmt::format("the directory URL {} is not usable: {}",
                                                     c.url, ldap_err2string(rc)));
  }
  const std::unique_ptr<LDAP, Unbind> ld(raw);
  int version = LDAP_VERSION3;
  ldap_set_option(ld.get(), LDAP_OPT_PROTOCOL_VERSION, &version);
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout_ms / 1000);
  tv.tv_usec = static_cast<suseconds_t>((timeout_ms % 1000) * 1000);
  ldap_set_option(ld.get(), LDAP_OPT_NETWORK_TIMEOUT, &tv);  // connecting
  ldap_set_option(ld.get(), LDAP_OPT_TIMEOUT, &tv);          // each synchronous operation
  ldap_set_option(ld.get(), LDAP_OPT_REFERRALS, LDAP_OPT_OFF);

  // 2. StartTLS: the password travels only over TLS when asked for (ldaps:// is TLS throughout).
  if (c.start_tls) {
    rc = ldap_start_tls_s(ld.get(), nullptr, nullptr);
    if (IsUnreachable(rc)) return Unreachable(c, rc);
    if (rc != LDAP_SUCCESS) {
      return Status(
          StatusCode::kUnavailable,
          fmt::format("StartTLS with the directory at {} failed: {}", c.url, ldap_err2string(rc)));
    }
  }

  // 3. The bind, as the user: the directory checks the password.
  DirectoryUser out;
  out.dn = ExpandTemplate(c.user_dn, {{"user", EscapeDnValue(user)}});
  berval cred{};
  cred.bv_len = password.size();
  cred.bv_val = const_cast<char*>(password.data());  // libldap's API is not const; not written
  rc = ldap_sasl_bind_s(ld.get(), out.dn.c_str(), LDAP_SASL_SIMPLE, &cred, nullptr, nullptr,
                        nullptr);
  if (IsUnreachable(rc)) return Unreachable(c, rc);
  if (IsRefusedBind(rc)) return Status(StatusCode::kUnauthenticated, kInvalidCredentials);
  if (rc != LDAP_SUCCESS) {
    return Status(StatusCode::kInternal, fmt::format("the directory at {} refused the bind: {}",
                                                     c.url, ldap_err2string(rc)));
  }
  if (c.group_base.empty()) return out;

  // 4. The user's groups, searched as the user (who can usually read them).
  const std::string filter = ExpandTemplate(
      c.group_filter, {{"dn", EscapeFilterValue(out.dn)}, {"user", EscapeFilterValue(user)}});
  std::string attr = c.group_attribute;
  char* attrs[] = {attr.data(), nullptr};
  LDAPMessage* res_raw = nullptr;
  rc = ldap_search_ext_s(ld.get(), c.group_base.c_str(), LDAP_SCOPE_SUBTREE, filter.c_str(), attrs,
                         /*attrsonly=*/0, nullptr, nullptr, &tv, kMaxDirectoryGroups, &res_raw);
  const std::unique_ptr<LDAPMessage, MsgFree> res(res_raw);
  if (IsUnreachable(rc)) return Unreachable(c, rc);
  // A size limit reached still returns the entries found until then.
  if (rc != LDAP_SUCCESS && rc != LDAP_SIZELIMIT_EXCEEDED) {
    return Status(StatusCode::kInternal,
                  fmt::format("the directory at {} refused the search for groups under {} with "
                              "{}: {}",
                              c.url, c.group_base, filter, ldap_err2string(rc)));
  }
  for (LDAPMessage* e = ldap_first_entry(ld.get(), res.get()); e != nullptr;
       e = ldap_next_entry(ld.get(), e)) {
    berval** values = ldap_get_values_len(ld.get(), e, attr.c_str());
    if (values == nullptr) continue;
    for (berval** v = values; *v != nullptr; ++v) {
      if (out.groups.size() < static_cast<size_t>(kMaxDirectoryGroups)) {
        out.groups.emplace_back((*v)->bv_val, (*v)->bv_len);
      }
    }
    ldap_value_free_len(values);
  }
  std::sort(out.groups.begin(), out.groups.end());
  out.groups.erase(std::unique(out.groups.begin(), out.groups.end()), out.groups.end());
  return out;
}

}  // namespace arbiter::server
